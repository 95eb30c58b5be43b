"""Recovery verdict from a fault window: how fast, and how completely, the stack came back.

Inputs are the timeline's samples (health/status: HTTP status or None; completion/ok: bool;
gpu/mem_used: bytes) and the request records, all on the wall clock. Every time is measured
from the fault's end (t_revert), the moment the SLAs count from.
"""
from __future__ import annotations

import bisect
from collections.abc import Collection, Sequence

from chaos.env.model import SLAs
from chaos.load.records import RequestRecord
from chaos.load.stats import percentile
from chaos.observe.timeline import Sample, Timeline
from chaos.verify.gpu_rows import memory_rows, xid_row
from chaos.verify.health_truth import health_truth_rows
from chaos.verify.verdict import Verdict


def _healthy(s: Sample) -> bool:
    return isinstance(s.value, int) and not isinstance(s.value, bool) and 200 <= s.value < 300


def time_to_health(samples: Sequence[Sample], t_from: float, confirm: int = 3) -> float | None:
    """Seconds from t_from to the first 2xx /health sample followed by confirm-1 more 2xx ones."""
    xs = sorted((s for s in samples if s.t >= t_from), key=lambda s: s.t)
    for i, s in enumerate(xs):
        run = xs[i:i + confirm]
        if run and all(_healthy(x) for x in run) and (len(run) == confirm or i + len(run) == len(xs)):
            return s.t - t_from
    return None


def time_to_completion(samples: Sequence[Sample], records: Sequence[RequestRecord], t_from: float) -> float | None:
    """Seconds from t_from to the first real successful completion (prober or load traffic)."""
    times = [s.t for s in samples if s.t >= t_from and s.value is True]
    times += [r.t_end for r in records if r.ok and r.t_send >= t_from]
    return min(times) - t_from if times else None


def time_to_steady(records: Sequence[RequestRecord], t_from: float, *, window_s: float, error_budget: float,
                   p99_limit_s: float | None, min_requests: int = 5, step_s: float | None = None) -> float | None:
    """Start (seconds after t_from) of the first fully observed rolling window whose error rate and
    P99 end-to-end latency are both within limits; None when no such window exists."""
    recs = sorted((r for r in records if r.t_send >= t_from), key=lambda r: r.t_send)
    if not recs:
        return None
    last = max(r.t_end for r in recs)
    step = step_s or max(window_s / 20.0, 0.01)
    sends = [r.t_send for r in recs]
    start = t_from
    while start + window_s <= last + 1e-9:
        win = recs[bisect.bisect_left(sends, start):bisect.bisect_left(sends, start + window_s)]
        if len(win) >= min_requests and _steady(win, error_budget, p99_limit_s):
            return start - t_from
        start += step
    return None


def served_by(records: Sequence[RequestRecord], name: str) -> list[RequestRecord]:
    """The traffic replica `name` served (others may cover for it meanwhile); all of it when no
    record says which replica served it."""
    return [r for r in records if (r.served_by or "").endswith(name)] or list(records)


def steady_seen(records: Sequence[RequestRecord], t_from: float, window_s: float, slas: SLAs) -> bool:
    """Whether a steady window after t_from is already in `records` (the steady_state_s row's rule)."""
    return time_to_steady(records, t_from, window_s=window_s, error_budget=slas.error_budget,
                          p99_limit_s=_p99_limit(slas)) is not None


def _p99_limit(slas: SLAs) -> float | None:
    return max(l.e2e_p99_s for l in slas.latency.values()) if slas.latency else None


def _steady(win: Sequence[RequestRecord], budget: float, p99_limit_s: float | None) -> bool:
    finals = [r for r in win if r.final] or list(win)
    rate = sum(1 for r in finals if not r.ok) / len(finals)
    if rate > budget:
        return False
    if p99_limit_s is None:
        return True
    p99 = percentile([r.e2e for r in win if r.ok and r.e2e is not None], 99)
    return p99 is not None and p99 <= p99_limit_s


def _fault_errors(records: Sequence[RequestRecord], t0: float, t1: float) -> tuple[int, int, int, int]:
    """(failed, logical requests started in [t0, t1], failed attempts, attempts sent in it)."""
    first: dict[str, float] = {}
    final_ok: dict[str, bool] = {}
    abandoned = {r.request_id for r in records if r.final and r.outcome == "abandoned"}
    for r in records:
        first[r.request_id] = min(first.get(r.request_id, r.t_send), r.t_send)
        if r.final:
            final_ok[r.request_id] = r.ok
    started = [rid for rid, t in first.items() if t0 <= t <= t1 and rid not in abandoned]
    attempts = [r for r in records if t0 <= r.t_send <= t1]
    return (sum(1 for rid in started if not final_ok.get(rid, False)), len(started),
            sum(1 for r in attempts if not r.ok), len(attempts))


def recovery_verdict(window: tuple[float, float], timeline: Timeline, records: Sequence[RequestRecord], slas: SLAs,
                     *, restarts: int | None = None, max_restarts: int | None = None, crash: bool = False,
                     steady_window_s: float = 10.0, p99_limit_s: float | None = None,
                     fault_error_rate_max: float | None = None, health_confirm: int = 3,
                     gpu_release_fraction: float = 0.5, gpu_retake_fraction: float = 0.8,
                     target: str | None = None, expected_xids: Collection[int] | None = None,
                     fault: str | None = None, engine_timeout: tuple[float, str] | None = None) -> Verdict:
    """Rows: health back, first completion, steady state, errors during the fault, restarts, GPU memory
    on each of `target`'s GPUs after a crash, the Xids new during the scenario (chaos.verify.gpu_rows:
    `expected_xids` None for a non-GPU fault, where any Xid fails), and whether each health claim told
    the truth about fault `fault` (chaos.verify.health_truth, against slas.health_truth_s; `engine_timeout`, the
    target's execute-model timeout and the setting it comes from, is named beside a lie that timeout bounds)."""
    t_inject, t_revert = window
    if t_revert < t_inject:
        from chaos.errors import ConfigError

        raise ConfigError(f"recovery window: revert {t_revert} is before inject {t_inject}")
    v = Verdict("recovery", window=window)
    health = timeline.series("health", "status")
    # /health is "back" only after it went down: real vLLM answers 200 with a frozen engine, and the
    # first healthy sample after the revert would then "pass" in one poll interval
    down = [s.t for s in health if s.t >= t_inject and not _healthy(s)]
    t_h = None
    if down:
        back = time_to_health(health, min(down), health_confirm)
        t_h = None if back is None else max(0.0, min(down) + back - t_revert)
    if not health:
        ok, note = None, "no /health samples"
    elif not down:
        ok, note = None, "/health answered 200 throughout: it does not see this fault (first_completion_s judges)"
    else:
        ok, note = t_h is not None and t_h <= slas.recovery_s, \
            f"first of {health_confirm} healthy /health samples in a row after it went down"
    v.add("health_back_s", slas.recovery_s, None if t_h is None else round(t_h, 3), ok, note)
    t_c = time_to_completion(timeline.series("completion", "ok"), records, t_revert)
    v.add("first_completion_s", slas.recovery_s, None if t_c is None else round(t_c, 3),
          t_c is not None and t_c <= slas.recovery_s,
          "first successful real completion after the fault" if t_c is not None else "no successful completion after the fault")
    if p99_limit_s is None:
        p99_limit_s = _p99_limit(slas)
    t_s = time_to_steady(records, t_revert, window_s=steady_window_s, error_budget=slas.error_budget,
                         p99_limit_s=p99_limit_s)
    v.add("steady_state_s", slas.steady_state_s, None if t_s is None else round(t_s, 3),
          t_s is not None and t_s <= slas.steady_state_s,
          f"rolling {steady_window_s:g} s window: error rate <= {slas.error_budget:.2%}"
          + (f", e2e P99 <= {p99_limit_s:g} s" if p99_limit_s else ""))
    bad, n, att_bad, att_n = _fault_errors(records, t_inject, t_revert)
    rate = bad / n if n else None
    v.add("fault_error_rate", fault_error_rate_max, None if rate is None else round(rate, 6),
          None if fault_error_rate_max is None or rate is None else rate <= fault_error_rate_max,
          f"{bad}/{n} logical requests started during the fault failed in the end; "
          f"{att_bad}/{att_n} attempts failed")
    if restarts is not None:
        v.add("restarts", max_restarts, restarts, None if max_restarts is None else restarts <= max_restarts)
    if crash:  # without GPU samples the row says so, never silently left out
        memory_rows(v, timeline, t_inject, slas, target=target, release=gpu_release_fraction,
                    retake=gpu_retake_fraction)
    if timeline.series("gpu", "mem_used") or timeline.series("gpu", "temp_c"):
        xid_row(v, timeline, expected_xids)
    # /health is "answered 200 throughout" above, unjudged; here the lie itself is measured and judged
    health_truth_rows(v, timeline, t_inject, slas.health_truth_s, records=records, fault=fault,
                      judged=slas.health_truth_checks, engine_timeout=engine_timeout)
    v.data = {"t_inject": t_inject, "t_revert": t_revert, "health_back_s": t_h, "first_completion_s": t_c,
              "steady_state_s": t_s, "fault_errors": bad, "fault_requests": n, "fault_attempt_errors": att_bad}
    return v
