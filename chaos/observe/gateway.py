"""Gateway observer: polls a gateway's admin state and records each pool's breaker state."""
from __future__ import annotations

import json

from chaos.observe._http import HttpGetter
from chaos.observe.base import PollingObserver
from chaos.observe.timeline import Timeline


class GatewayStateObserver(PollingObserver):
    """Samples `gateway/pool_state` (label pool) from GET /admin/state; events on each change."""

    source = "gateway"

    def __init__(self, base_url: str, timeline: Timeline | None = None, *, token: str | None = None,
                 interval_s: float = 0.25, timeout_s: float = 1.0, **kw) -> None:
        super().__init__(timeline, interval_s=interval_s, **kw)
        self.http = HttpGetter(base_url, timeout_s)
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        self.states: dict[str, str] = {}

    def poll(self) -> None:
        t = self.timeline.clock()
        status, _, data = self.http.request("GET", "/admin/state", None, self.headers)
        if status != 200:
            return
        for pool, entry in json.loads(data).get("pools", {}).items():
            state = entry.get("state")
            self.timeline.sample(self.source, "pool_state", state, t=t, pool=pool)
            if state != self.states.get(pool):
                self.timeline.event("state", f"gateway:{pool}", t=t, **{"from": self.states.get(pool), "to": state})
                self.states[pool] = state

    def close(self) -> None:
        self.http.close()
