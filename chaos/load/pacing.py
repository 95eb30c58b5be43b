"""Arrival pacing without Locust: a seeded Poisson schedule, precomputed so it never drifts."""
from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable


def poisson_offsets(rate_per_s: float, duration_s: float, seed: int = 0) -> list[float]:
    """Cumulative arrival offsets (seconds from start) of a Poisson process over `duration_s`."""
    rng = random.Random(seed)
    out: list[float] = []
    t = rng.expovariate(rate_per_s)
    while t < duration_s:
        out.append(t)
        t += rng.expovariate(rate_per_s)
    return out


class ArrivalSchedule:
    """Hands out absolute arrival times; users sleep until theirs, so lateness never accumulates."""

    def __init__(self, offsets: list[float], clock: Callable[[], float] = time.perf_counter) -> None:
        self.offsets = offsets
        self.clock = clock
        self._i = 0
        self._start: float | None = None
        self._lock = threading.Lock()

    def next_slot(self) -> float | None:
        """Absolute time (clock units) of the next arrival, or None when the schedule is spent."""
        with self._lock:
            if self._start is None:
                self._start = self.clock()
            if self._i >= len(self.offsets):
                return None
            slot = self._start + self.offsets[self._i]
            self._i += 1
            return slot

    def delay(self) -> float | None:
        """Seconds to wait before the next arrival (0 when late), None when spent."""
        slot = self.next_slot()
        return None if slot is None else max(0.0, slot - self.clock())
