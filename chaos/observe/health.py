"""Health prober: GET /health at >= 10 Hz; every state change becomes a timeline event.

/health is a local flag in vLLM: a hung engine keeps answering 200. Judge recovery with the
CompletionProber; this one tells when the server *claims* to be up or down.
"""
from __future__ import annotations

import time
from typing import Any

from chaos.observe._http import HttpGetter, error_class
from chaos.observe.base import PollingObserver
from chaos.observe.timeline import Timeline


def health_state(status: int | None, error: str | None) -> str:
    """up (2xx) | down (an HTTP error status) | unreachable | timeout."""
    if status is not None:
        return "up" if 200 <= status < 300 else "down"
    return "timeout" if error == "timeout" else "unreachable"


class HealthProber(PollingObserver):
    """Samples `health/status` (HTTP status or None) and `health/latency`; events on state changes.

    Any GET path is a health claim: the scenarios also probe /v1/models (source `models`)."""

    source = "health"

    def __init__(self, base_url: str, timeline: Timeline | None = None, *, interval_s: float = 0.1,
                 timeout_s: float = 0.5, path: str = "/health",
                 headers: dict[str, str] | None = None, **kw: Any) -> None:
        super().__init__(timeline, interval_s=interval_s, **kw)
        self.http = HttpGetter(base_url, timeout_s)
        self.path = path
        self.headers = headers or {}
        self.state: str | None = None

    def poll(self) -> None:
        t = self.timeline.clock()
        t0 = time.perf_counter()
        status, err = None, None
        try:
            status, _, _ = self.http.request("GET", self.path, None, self.headers)
        except Exception as e:
            err = error_class(e)
        latency = time.perf_counter() - t0
        self.timeline.sample(self.source, "status", status, t=t)
        self.timeline.sample(self.source, "latency", latency, t=t)
        state = health_state(status, err)
        if state != self.state:
            self.timeline.event("state", self.source, t=t, **{"from": self.state, "to": state, "status": status})
            self.state = state

    def close(self) -> None:
        self.http.close()
