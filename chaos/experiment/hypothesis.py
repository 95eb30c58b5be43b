"""The steady-state hypothesis: probes with tolerances over a window of the load's own records.

    hypothesis = error_rate_below(0.01) & p99_below(2.0, metric="ttft", cls="short") & goodput_above(0.9)

Each probe reads the requests that ended inside the window and returns a Reading; a failed one
reads "error rate: expected <= 1.00%, got 4.20% over window 10.0 s (213 requests)". Failures count
against latency (a failed request missed every latency objective), so a fault that turns slow
answers into errors cannot make P99 look better. A window with too few requests fails too: no
traffic is no evidence of health.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from chaos.load.records import RequestRecord

MIN_REQUESTS = 5  # fewer finished requests in a window than this: nothing can be said of it


@dataclass(frozen=True)
class Reading:
    """What one probe saw over one window."""

    probe: str
    expected: str
    got: float | None
    ok: bool
    window: tuple[float, float]
    requests: int
    shown: str = ""  # `got` as the line shows it

    def line(self) -> str:
        span = self.window[1] - self.window[0]
        return (f"{self.probe}: expected {self.expected}, got {self.shown or self.got} over window "
                f"{span:.1f} s ({self.requests} requests)")


class Probe:
    """One measurable property of the steady state with its tolerance."""

    name = "probe"

    def measure(self, records: Sequence[RequestRecord], window: tuple[float, float]) -> Reading:
        raise NotImplementedError

    def __and__(self, other: Probe | Hypothesis) -> Hypothesis:
        return Hypothesis([self]) & other


class Hypothesis:
    """All of its probes must hold."""

    def __init__(self, probes: Iterable[Probe]) -> None:
        self.probes = list(probes)

    def __and__(self, other: Probe | Hypothesis) -> Hypothesis:
        return Hypothesis([*self.probes, *(other.probes if isinstance(other, Hypothesis) else [other])])

    def check(self, records: Sequence[RequestRecord], window: tuple[float, float]) -> list[Reading]:
        return [p.measure(records, window) for p in self.probes]

    def describe(self) -> str:
        return " & ".join(p.name for p in self.probes) or "(none)"


def ended_in(records: Iterable[RequestRecord], window: tuple[float, float], cls: str | None = None) -> list[RequestRecord]:
    """The final records (one per logical request) that ended inside the window."""
    lo, hi = window
    return [r for r in records if r.final and lo <= r.t_end <= hi and (cls is None or r.prompt_class == cls)]


def _too_few(name: str, expected: str, n: int, window: tuple[float, float], least: int) -> Reading:
    return Reading(name, f"{expected} on >= {least} requests", None, False, window, n, f"{n} requests")


@dataclass
class _ErrorRate(Probe):
    limit: float
    min_requests: int = MIN_REQUESTS

    @property
    def name(self) -> str:  # type: ignore[override]
        return "error rate"

    def measure(self, records: Sequence[RequestRecord], window: tuple[float, float]) -> Reading:
        done = ended_in(records, window)
        expected = f"<= {self.limit:.2%}"
        if len(done) < self.min_requests:
            return _too_few(self.name, expected, len(done), window, self.min_requests)
        rate = sum(1 for r in done if r.outcome == "failed" or (r.outcome is None and not r.ok)) / len(done)
        return Reading(self.name, expected, rate, rate <= self.limit, window, len(done), f"{rate:.2%}")


@dataclass
class _P99(Probe):
    limit_s: float
    metric: str = "e2e"
    cls: str | None = None
    min_requests: int = MIN_REQUESTS

    @property
    def name(self) -> str:  # type: ignore[override]
        return f"{self.metric} P99" + (f" ({self.cls})" if self.cls else "")

    def measure(self, records: Sequence[RequestRecord], window: tuple[float, float]) -> Reading:
        done = ended_in(records, window, self.cls)
        expected = f"<= {self.limit_s:g} s"
        if len(done) < self.min_requests:
            return _too_few(self.name, expected, len(done), window, self.min_requests)
        vals = sorted(math.inf if not r.ok or getattr(r, self.metric) is None else getattr(r, self.metric) for r in done)
        p99 = vals[max(0, math.ceil(0.99 * len(vals)) - 1)]  # nearest rank
        shown = "a failure (counted as a miss)" if math.isinf(p99) else f"{p99:.3f} s"
        return Reading(self.name, expected, None if math.isinf(p99) else p99, p99 <= self.limit_s, window, len(done),
                       shown)


@dataclass
class _Goodput(Probe):
    fraction: float
    e2e_s: float | None = None
    ttft_s: float | None = None
    min_requests: int = MIN_REQUESTS

    @property
    def name(self) -> str:  # type: ignore[override]
        return "goodput"

    def measure(self, records: Sequence[RequestRecord], window: tuple[float, float]) -> Reading:
        done = ended_in(records, window)
        expected = f">= {self.fraction:.0%} of requests within every objective"
        if len(done) < self.min_requests:
            return _too_few(self.name, expected, len(done), window, self.min_requests)
        good = sum(1 for r in done if r.ok and (self.e2e_s is None or (r.e2e or math.inf) <= self.e2e_s)
                   and (self.ttft_s is None or (r.ttft or math.inf) <= self.ttft_s))
        share = good / len(done)
        return Reading(self.name, expected, share, share >= self.fraction, window, len(done), f"{share:.1%}")


@dataclass
class _Check(Probe):
    """A live check (health endpoint, GPU memory): a callable returning (ok, value, shown)."""

    label: str
    expected: str
    fn: Callable[[], tuple[bool, float | None, str]]

    @property
    def name(self) -> str:  # type: ignore[override]
        return self.label

    def measure(self, records: Sequence[RequestRecord], window: tuple[float, float]) -> Reading:
        ok, value, shown = self.fn()
        return Reading(self.label, self.expected, value, ok, window, len(ended_in(records, window)), shown)


def error_rate_below(limit: float, *, min_requests: int = MIN_REQUESTS) -> Probe:
    """Failed logical requests (after the client's retries) over those that ended in the window."""
    return _ErrorRate(limit, min_requests)


def p99_below(limit_s: float, *, metric: str = "e2e", cls: str | None = None, min_requests: int = MIN_REQUESTS) -> Probe:
    """P99 of `metric` (e2e or ttft) over the window's requests, a failure counting as a miss."""
    if metric not in ("e2e", "ttft"):
        raise ValueError(f"p99_below: metric must be e2e or ttft, got {metric!r}")
    return _P99(limit_s, metric, cls, min_requests)


def goodput_above(fraction: float, *, e2e_s: float | None = None, ttft_s: float | None = None,
                  min_requests: int = MIN_REQUESTS) -> Probe:
    """Share of the window's requests that succeeded within every given objective."""
    return _Goodput(fraction, e2e_s, ttft_s, min_requests)


def check(label: str, expected: str, fn: Callable[[], tuple[bool, float | None, str]]) -> Probe:
    """A live probe: `fn()` -> (ok, value, how to show it), e.g. the API's /health answering 200."""
    return _Check(label, expected, fn)
