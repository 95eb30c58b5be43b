"""Reading, Check and the one judge: a check measures a value over the request records that ended in a
window, and `within_tolerance` alone compares it with the check's limit (limits inclusive).

A reading with `ok` None had too few requests to judge; what that means is the caller's policy:
`Check.check` (a steady-state hypothesis) fails it, `evaluate` makes it an n/a row.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from chaos.load.records import RequestRecord

MIN_REQUESTS = 5  # fewer finished requests in a window than this: nothing can be said of it

Window = tuple[float, float] | None  # None: every record


@dataclass(frozen=True)
class Reading:
    """What one check saw over one window; `ok` None: too few requests to judge."""

    probe: str
    expected: str
    got: float | None
    ok: bool | None
    window: Window
    requests: int
    shown: str = ""  # `got` as the line shows it
    limit: float | None = None

    def line(self) -> str:
        over = "the whole run" if self.window is None else f"window {self.window[1] - self.window[0]:.1f} s"
        return f"{self.probe}: expected {self.expected}, got {self.shown or self.got} over {over} ({self.requests} requests)"


def ended_in(records: Iterable[RequestRecord], window: Window, prompt_class: str | None = None, *,
             attempts: bool = False) -> list[RequestRecord]:
    """The final records (one per logical request; every attempt with `attempts`) that ended in the window."""
    return [r for r in records if (attempts or r.final) and (window is None or window[0] <= r.t_end <= window[1])
            and (prompt_class is None or r.prompt_class == prompt_class)]


def failed(r: RequestRecord) -> bool:
    """A failed request or attempt; a final one the client rejected (4xx, its own fault) is not an error."""
    return r.outcome == "failed" or (r.outcome is None and not r.ok)


class Check:
    """Any check: `readings(records, window)`; `a & b` (both must hold), `a | b` (one must hold)."""

    def readings(self, records: Sequence[RequestRecord], window: Window = None) -> list[Reading]:
        """One reading per check over the requests that ended in `window` (None: every request)."""
        raise NotImplementedError

    def describe(self) -> str:
        """The check's name, as the experiment's plan line shows it."""
        raise NotImplementedError

    def check(self, records: Sequence[RequestRecord], window: Window) -> list[Reading]:
        """The readings as a steady-state hypothesis judges them: too few requests fails (no traffic is
        no evidence of health)."""
        return [r if r.ok is not None else replace(r, ok=False) for r in self.readings(records, window)]

    def __and__(self, other: Check) -> Hypothesis:
        return Hypothesis([self, other])

    def __or__(self, other: Check) -> AnyOf:
        return AnyOf([self, other])


class Bound(Check):
    """A value measured over a window's requests, held to `op` ("<=" or ">=") `limit`."""

    name = "check"
    op = "<="
    limit = 0.0
    min_requests = MIN_REQUESTS
    prompt_class: str | None = None
    attempts = False

    def value(self, done: list[RequestRecord], window: Window) -> float:
        raise NotImplementedError

    def expected(self) -> str:
        return f"{self.op} {self.limit:g}"

    def show(self, value: float) -> str:
        return f"{value:g}"

    def describe(self) -> str:
        return self.name

    def measure(self, records: Sequence[RequestRecord], window: Window = None) -> Reading:
        """The value over the window's requests, judged; `ok` None with fewer than `min_requests`."""
        done = ended_in(records, window, self.prompt_class, attempts=self.attempts)
        if len(done) < self.min_requests:
            return Reading(self.name, f"{self.expected()} on >= {self.min_requests} requests", None, None, window,
                           len(done), f"{len(done)} requests", self.limit)
        return within_tolerance(self, self.value(done, window), window, len(done))

    def readings(self, records: Sequence[RequestRecord], window: Window = None) -> list[Reading]:
        return [self.measure(records, window)]


def require(ok: bool, field: str, expected: str, got: object) -> None:
    """Bad input to a check: one line naming the field."""
    if not ok:
        raise ValueError(f"{field}: expected {expected}, got {got!r}")


def within_tolerance(check: Bound, value: float, window: Window, requests: int) -> Reading:
    """The one judge: the measured value against the check's limit, inclusive (an error budget of 1 %
    allows exactly 1 %); an infinite value (a failure counted as a latency miss) never holds a `<=`."""
    ok = value <= check.limit if check.op == "<=" else value >= check.limit
    got = None if math.isinf(value) else value
    return Reading(check.name, check.expected(), got, ok, window, requests, check.show(value), check.limit)


class Hypothesis(Check):
    """Every check must hold: the steady-state hypothesis of an experiment, or a suite's checks."""

    def __init__(self, checks: Iterable[Check]) -> None:
        self.checks: list[Check] = [c for ch in checks for c in (ch.checks if isinstance(ch, Hypothesis) else [ch])]

    def readings(self, records: Sequence[RequestRecord], window: Window = None) -> list[Reading]:
        return [r for c in self.checks for r in c.readings(records, window)]

    def describe(self) -> str:
        return " & ".join(c.describe() for c in self.checks) or "(none)"


def _all_hold(readings: list[Reading]) -> bool | None:
    """False if any reading failed, else None if any had too few requests, else True."""
    oks = [r.ok for r in readings]
    return False if False in oks else None if None in oks else True


class AnyOf(Check):
    """At least one check must hold; one reading that shows them all."""

    def __init__(self, checks: Iterable[Check]) -> None:
        self.checks: list[Check] = [c for ch in checks for c in (ch.checks if isinstance(ch, AnyOf) else [ch])]

    def readings(self, records: Sequence[RequestRecord], window: Window = None) -> list[Reading]:
        alternatives = [c.readings(records, window) for c in self.checks]
        held = [_all_hold(rs) for rs in alternatives]  # each alternative as a whole: (a & b) | c
        ok = True if any(held) else None if any(h is None for h in held) else False
        rs = [r for rs in alternatives for r in rs]
        return [Reading(self.describe(), " or ".join(r.expected for r in rs), None, ok, window,
                        max((r.requests for r in rs), default=0), "; ".join(f"{r.probe} {r.shown}" for r in rs))]

    def describe(self) -> str:
        return "(" + " | ".join(c.describe() for c in self.checks) + ")"
