"""A polling observer: one daemon thread that samples at a fixed period into a Timeline, bounded."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable

from chaos.observe.timeline import Timeline


class PollingObserver:
    """Calls `poll()` every `interval_s` on a thread until stop(), `max_duration_s` or `max_polls`."""

    source = "observer"

    def __init__(self, timeline: Timeline | None = None, *, interval_s: float = 0.1,
                 max_duration_s: float = 3600.0, max_polls: int | None = None,
                 sleep: Callable[[float], None] | None = None) -> None:
        self.timeline = timeline or Timeline()
        self.interval_s = interval_s
        self.max_duration_s = max_duration_s
        self.max_polls = max_polls
        self.polls = 0
        self.errors = 0
        self._stop = threading.Event()
        self._sleep = sleep or self._stop.wait
        self._thread: threading.Thread | None = None

    def poll(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    def start(self) -> PollingObserver:
        if self._thread is not None:
            return self
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"chaos-{self.source}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None
        self.close()

    def close(self) -> None:
        """Release resources (sessions, handles); called by stop()."""

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        start = time.monotonic()
        next_t = start
        while not self._stop.is_set():
            if self.max_polls is not None and self.polls >= self.max_polls:
                break
            if time.monotonic() - start > self.max_duration_s:
                self.timeline.event("observer", f"{self.source}_bounded", reason="max_duration_s")
                break
            try:
                self.poll()
            except Exception as e:  # an observer must never die silently mid-run: record and go on
                self.errors += 1
                self.timeline.event("observer_error", self.source, error=f"{type(e).__name__}: {e}")
            self.polls += 1
            next_t += self.interval_s
            delay = next_t - time.monotonic()
            if delay < 0:
                next_t = time.monotonic()  # fell behind: do not burst to catch up
                delay = 0
            self._sleep(delay)

    def __enter__(self) -> PollingObserver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
