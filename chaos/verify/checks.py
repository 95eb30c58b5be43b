"""Small combinable checks over request records, in tenacity's style.

    verdict = evaluate(p99_below(2.0) & error_rate_below(0.01), records)
    verdict.assert_ok()

A check is any callable `records -> Row | list[Row]`; `&` joins checks (every row must hold).
Limits are inclusive: an error budget of 1 % allows exactly 1 %.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

from chaos.load.records import RequestRecord
from chaos.load.stats import percentile
from chaos.verify.verdict import Row, Verdict

CheckFn = Callable[[Sequence[RequestRecord]], Row | list[Row]]


def _rows(out: Row | list[Row]) -> list[Row]:
    return [out] if isinstance(out, Row) else list(out)


class Check:
    """Base class: subclasses implement rows(records); `a & b` runs both."""

    def rows(self, records: Sequence[RequestRecord]) -> list[Row]:
        raise NotImplementedError

    def __call__(self, records: Sequence[RequestRecord]) -> list[Row]:
        return self.rows(records)

    def __and__(self, other: Check | CheckFn) -> all_of:
        return all_of(self, other)

    def __rand__(self, other: CheckFn) -> all_of:
        return all_of(other, self)


class all_of(Check):
    """Every check must hold."""

    def __init__(self, *checks: Check | CheckFn) -> None:
        self.checks: list[Check | CheckFn] = [c for ch in checks for c in (ch.checks if isinstance(ch, all_of) else [ch])]

    def rows(self, records: Sequence[RequestRecord]) -> list[Row]:
        return [r for c in self.checks for r in _rows(c(records))]


def _select(records: Sequence[RequestRecord], prompt_class: str | None) -> list[RequestRecord]:
    return [r for r in records if prompt_class is None or r.prompt_class == prompt_class]


class percentile_below(Check):
    """The q-th percentile of a latency metric (ttft|tpot|e2e) of successful attempts is <= seconds."""

    def __init__(self, q: float, seconds: float, metric: str = "e2e", prompt_class: str | None = None) -> None:
        if metric not in ("ttft", "tpot", "e2e"):
            raise ValueError(f"metric: expected ttft, tpot or e2e, got {metric!r}")
        self.q, self.seconds, self.metric, self.prompt_class = q, seconds, metric, prompt_class

    def rows(self, records: Sequence[RequestRecord]) -> list[Row]:
        vals = [getattr(r, self.metric) for r in _select(records, self.prompt_class) if r.ok]
        vals = [v for v in vals if v is not None]
        name = f"{self.prompt_class + '.' if self.prompt_class else ''}{self.metric}_p{self.q:g}"
        p = percentile(vals, self.q)
        if p is None:
            return [Row(name, self.seconds, None, None, "no successful samples")]
        return [Row(name, self.seconds, round(p, 6), p <= self.seconds, f"{len(vals)} samples")]


def p99_below(seconds: float, metric: str = "e2e", prompt_class: str | None = None) -> percentile_below:
    """P99 of `metric` <= seconds."""
    return percentile_below(99, seconds, metric, prompt_class)


def p50_below(seconds: float, metric: str = "e2e", prompt_class: str | None = None) -> percentile_below:
    """P50 of `metric` <= seconds."""
    return percentile_below(50, seconds, metric, prompt_class)


class error_rate_below(Check):
    """Share of failed logical requests (final records; or every attempt) is <= rate."""

    def __init__(self, rate: float, *, attempts: bool = False, prompt_class: str | None = None) -> None:
        self.rate, self.attempts, self.prompt_class = rate, attempts, prompt_class

    def rows(self, records: Sequence[RequestRecord]) -> list[Row]:
        recs = [r for r in _select(records, self.prompt_class) if self.attempts or r.final]
        name = "attempt_error_rate" if self.attempts else "error_rate"
        if not recs:
            return [Row(name, self.rate, None, None, "no requests")]
        bad = sum(1 for r in recs if not r.ok)
        rate = bad / len(recs)
        return [Row(name, self.rate, round(rate, 6), rate <= self.rate, f"{bad}/{len(recs)} failed")]


class goodput_above(Check):
    """Requests per second meeting every given limit (ttft/tpot/e2e) at once is >= per_s."""

    def __init__(self, per_s: float, *, window_s: float | None = None, **limits: float) -> None:
        self.per_s, self.window_s, self.limits = per_s, window_s, limits

    def rows(self, records: Sequence[RequestRecord]) -> list[Row]:
        from chaos.load.stats import meets_slos

        finals = [r for r in records if r.final]
        if not finals:
            return [Row("goodput_per_s", self.per_s, None, None, "no requests")]
        span = self.window_s or max(1e-9, max(r.t_end for r in records) - min(r.t_send for r in records))
        good = sum(1 for r in finals if meets_slos(r, self.limits))
        gp = good / span
        return [Row("goodput_per_s", self.per_s, round(gp, 4), gp >= self.per_s,
                    f"{good}/{len(finals)} requests met {self.limits or 'success'} over {span:.1f} s")]


def evaluate(check: Check | CheckFn, records: Sequence[RequestRecord], *, name: str = "checks",
             window: tuple[float, float] | None = None) -> Verdict:
    """Run a check over the records inside `window` (by send time) and return the verdict.

    Where every row is n/a (no requests, no successful samples) the verdict gets a "not proven" row: it
    breaks no limit, so its assert passes, but the release checklist never counts it as a proof."""
    if window is not None:
        records = [r for r in records if window[0] <= r.t_send <= window[1]]
    v = Verdict(name, _rows(check(records)), window=window, data={"records": len(records)})
    if v.rows and all(r.ok is None for r in v.rows):
        # every check n/a (no requests, no successful samples): checks over traffic that never flowed
        # break no limit, and prove nothing either: the verdict's items are "not proven", never a pass
        why = f"{len(records)} requests" + (f" in {v.window_text()}" if window else "") + ": every check n/a (" \
            + "; ".join(f"{r.check}: {r.detail}" for r in v.rows[:3]) + ")"
        v.not_proven("requests judged", "at least one check judged", "none", why)
    return v
