"""A rate-based circuit breaker over a sliding window (Resilience4j semantics, kept small).

States: CLOSED -> (failure rate or window P99 at/over threshold, with >= min_calls) -> OPEN
-> (open wait elapsed) -> HALF_OPEN -> (the permitted probe calls succeed) -> CLOSED, or back to
OPEN. FORCED_OPEN holds until reset(). Differences from Resilience4j, on purpose:
- the slow-call rule is "P99 of the window >= slow_p99_s" (the seed's latency tier);
- open wait grows like Envoy's ejection time: failed probes, or a trip within 3 windows of
  closing, double it (max 8x),
  which bounds flapping under a fault that persists just above the threshold.
Clocks are injectable: `clock` (monotonic) times the window and waits, `wall` stamps transitions.
"""
from __future__ import annotations

import bisect
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum


class State(str, Enum):
    """Breaker state; the value is what the admin API prints."""

    CLOSED = "closed"
    HALF_OPEN = "half_open"
    OPEN = "open"
    FORCED_OPEN = "forced_open"


# numeric encoding of chaos_gateway_pool_state: 0 closed, 1 half-open, 2 open (degraded), 3 forced open
STATE_CODES: dict[State, int] = {State.CLOSED: 0, State.HALF_OPEN: 1, State.OPEN: 2, State.FORCED_OPEN: 3}

NORMAL = "normal"
PROBE = "probe"


def nearest_rank(sorted_values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) by nearest rank; None for no values."""
    if not sorted_values:
        return None
    idx = max(0, math.ceil(q * len(sorted_values)) - 1)
    return sorted_values[min(idx, len(sorted_values) - 1)]


@dataclass(frozen=True)
class WindowStats:
    """What the window holds right now."""

    calls: int
    failures: int
    p99_s: float | None

    @property
    def error_rate(self) -> float:
        return self.failures / self.calls if self.calls else 0.0


class SlidingWindow:
    """Outcomes of the last `window_s` seconds, or of the last `size` calls when size is set.

    `at_least`: a call older than window_s stays while the window holds no more than that many, unless it is
    older than `max_age_s` too: never fewer calls than the last `at_least` once that many came, however sparse."""

    def __init__(self, window_s: float = 10.0, size: int | None = None, *, at_least: int | None = None,
                 max_age_s: float | None = None) -> None:
        self.window_s = window_s
        self.size = size
        self.at_least, self.max_age_s = at_least, max_age_s
        self._calls: deque[tuple[float, bool, float]] = deque()
        self._latencies: list[float] = []
        self._failures = 0

    def add(self, t: float, ok: bool, latency_s: float) -> None:
        self._calls.append((t, ok, latency_s))
        bisect.insort(self._latencies, latency_s)
        self._failures += 0 if ok else 1
        self.prune(t)

    def prune(self, now: float) -> None:
        while self._calls and (
            (self.size is not None and len(self._calls) > self.size)
            or (self.size is None and self._calls[0][0] <= now - self.window_s and self._may_age_out(now))
        ):
            _, ok, lat = self._calls.popleft()
            del self._latencies[bisect.bisect_left(self._latencies, lat)]
            self._failures -= 0 if ok else 1

    def _may_age_out(self, now: float) -> bool:
        if self.at_least is None or len(self._calls) > self.at_least:
            return True
        return self.max_age_s is not None and self._calls[0][0] <= now - self.max_age_s

    def clear(self) -> None:
        self._calls.clear()
        self._latencies.clear()
        self._failures = 0

    def stats(self, now: float | None = None) -> WindowStats:
        if now is not None:
            self.prune(now)
        return WindowStats(len(self._calls), self._failures, nearest_rank(self._latencies, 0.99))


@dataclass(frozen=True)
class Transition:
    """One state change, with the window figures that caused it."""

    t: float
    name: str
    src: State
    dst: State
    reason: str
    error_rate: float
    p99_s: float | None
    calls: int


class RateBreaker:
    """Failure-rate and P99 breaker over a time- or count-based sliding window."""

    MAX_WAIT_FACTOR = 8

    def __init__(self, name: str, *, failure_rate: float = 0.01, slow_p99_s: float | None = None,
                 window_s: float = 10.0, window_calls: int | None = None, min_calls: int = 50,
                 open_wait_s: float = 5.0, half_open_calls: int = 5,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 on_transition: Callable[[Transition], None] | None = None) -> None:
        self.name = name
        self.failure_rate, self.slow_p99_s = failure_rate, slow_p99_s
        self.window_s, self.min_calls = window_s, min_calls
        self.open_wait_s, self.half_open_calls = open_wait_s, half_open_calls
        self.clock, self.wall, self.on_transition = clock, wall, on_transition
        self.window = SlidingWindow(window_s, window_calls)
        self.transitions: deque[Transition] = deque(maxlen=1000)
        self._state = State.CLOSED
        self._opened_at = 0.0
        self._wait_factor = 1
        self._closed_at: float | None = None
        self._permits = 0
        self._probes = SlidingWindow(float("inf"))
        self._lock = threading.RLock()

    # -- state ------------------------------------------------------------------------------
    @property
    def state(self) -> State:
        with self._lock:
            if self._state is State.OPEN and self.clock() - self._opened_at >= self.current_wait_s:
                self._move(State.HALF_OPEN, "open wait elapsed")
            return self._state

    @property
    def current_wait_s(self) -> float:
        return self.open_wait_s * self._wait_factor

    def stats(self) -> WindowStats:
        with self._lock:
            return self.window.stats(self.clock())

    def acquire(self) -> str | None:
        """Ask to send one call: NORMAL, PROBE (a half-open permit) or None (not permitted)."""
        with self._lock:
            state = self.state
            if state is State.CLOSED:
                return NORMAL
            if state is State.HALF_OPEN and self._permits > 0:
                self._permits -= 1
                return PROBE
            return None

    def record(self, ok: bool, latency_s: float, permit: str | None = NORMAL) -> Transition | None:
        """Count one finished call; returns the transition it caused, if any."""
        with self._lock:
            now = self.clock()
            state = self.state
            if state is State.CLOSED and permit == NORMAL:
                self.window.add(now, ok, latency_s)
                reason = self._verdict(self.window.stats(), self.min_calls)
                return self._trip(reason) if reason else None
            if state is State.HALF_OPEN and permit == PROBE:
                self._probes.add(now, ok, latency_s)
                st = self._probes.stats()
                if st.calls < self.half_open_calls:
                    return None
                reason = self._verdict(st, 1)
                return self._trip(f"half-open probes: {reason}") if reason else self._move(State.CLOSED, "probes succeeded")
            return None  # late results of calls let through before the trip

    def _verdict(self, st: WindowStats, min_calls: int) -> str | None:
        if st.calls < min_calls:
            return None
        if st.error_rate >= self.failure_rate:
            return f"error rate {st.error_rate:.4f} >= {self.failure_rate}"
        if self.slow_p99_s is not None and st.p99_s is not None and st.p99_s >= self.slow_p99_s:
            return f"p99 {st.p99_s:.3f}s >= {self.slow_p99_s}s"
        return None

    # -- actions -----------------------------------------------------------------------------
    def trip(self, reason: str) -> Transition | None:
        """Open now (anomaly rules); when already open, restart the open wait."""
        with self._lock:
            return self._trip(reason)

    def force_open(self, reason: str = "forced") -> Transition | None:
        """Hold open until reset() (Resilience4j's forced-open; the gateway's rollback)."""
        with self._lock:
            return None if self._state is State.FORCED_OPEN else self._move(State.FORCED_OPEN, reason)

    def reset(self, reason: str = "reset") -> Transition | None:
        """Back to CLOSED with empty windows and the open wait back to its base."""
        with self._lock:
            self._wait_factor = 1
            self.window.clear()
            return None if self._state is State.CLOSED else self._move(State.CLOSED, reason)

    def _trip(self, reason: str) -> Transition | None:
        state = self._state
        if state is State.FORCED_OPEN:
            return None
        self._opened_at = self.clock()
        if state is State.OPEN:
            return None
        recent = self._closed_at is not None and self._opened_at - self._closed_at < 3 * self.window_s
        if state is State.HALF_OPEN or recent:
            self._wait_factor = min(self._wait_factor * 2, self.MAX_WAIT_FACTOR)
        else:
            self._wait_factor = 1
        return self._move(State.OPEN, reason)

    def _move(self, dst: State, reason: str) -> Transition:
        st = self.window.stats(self.clock())
        tr = Transition(self.wall(), self.name, self._state, dst, reason, st.error_rate, st.p99_s, st.calls)
        self._state = dst
        if dst is State.HALF_OPEN:
            self._permits = self.half_open_calls
            self._probes.clear()
        elif dst is State.CLOSED:
            self._closed_at = self.clock()
            self.window.clear()
        self.transitions.append(tr)
        if self.on_transition is not None:
            self.on_transition(tr)
        return tr
