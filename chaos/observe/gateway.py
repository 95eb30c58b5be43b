"""The reference gateway's admin API as the harness reads and sets it: one call for the faults, the
release gates and the suites (`admin_call`), and an observer that polls each pool's breaker state."""
from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import Any

from chaos.errors import ChaosError
from chaos.observe._http import HttpGetter
from chaos.observe.base import PollingObserver
from chaos.observe.timeline import Timeline


class GatewayAdminError(ChaosError):
    """The gateway's admin API refused a call or did not answer (the message is one line)."""


def admin_call(admin_url: str, method: str, path: str, body: Any = None, *, token: str | None = None,
               timeout_s: float = 5.0) -> dict[str, Any]:
    """`method path` on the gateway's admin API with its Bearer token; the answer's JSON object."""
    url = admin_url.rstrip("/") + path
    headers = {"Content-Type": "application/json", **({"Authorization": f"Bearer {token}"} if token else {})}
    req = urllib.request.Request(url, method=method, headers=headers,
                                 data=json.dumps(body).encode() if body is not None else None)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            data = json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        raise GatewayAdminError(f"{method} {url} -> {e.code} {e.read()[:200]!r}") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        raise GatewayAdminError(f"gateway admin {admin_url} not answering: {getattr(e, 'reason', e)}") from None
    except ValueError as e:
        raise GatewayAdminError(f"{method} {url}: the answer is not JSON ({e})") from None
    if not isinstance(data, dict):
        raise GatewayAdminError(f"{method} {url}: expected a JSON object, got {type(data).__name__}")
    return data


def env_admin_call(env: Any, method: str, path: str, body: Any = None, *, timeout_s: float = 5.0) -> dict[str, Any]:
    """admin_call on the environment's gateway (endpoints.gateway_admin, gateway.admin_token)."""
    token = env.gateway.admin_token if env.gateway else None
    return admin_call(env.endpoints.gateway_admin, method, path, body, token=token, timeout_s=timeout_s)


class GatewayStateObserver(PollingObserver):
    """Samples `gateway/pool_state` (label pool) from GET /admin/state; events on each change."""

    source = "gateway"

    def __init__(self, base_url: str, timeline: Timeline | None = None, *, token: str | None = None,
                 interval_s: float = 0.25, timeout_s: float = 1.0, **kw: Any) -> None:
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


def gateway_failures(base_url: str, *, metric: str = "chaos_gateway_requests_total", timeout_s: float = 2.0) -> float | None:
    """The gateway's count of failed requests (`metric{outcome="error"}` summed), None when it has none."""
    import urllib.error
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    try:
        with urllib.request.urlopen(f"{base_url.rstrip('/')}/metrics", timeout=timeout_s) as r:
            text = r.read().decode("utf-8", "replace")
    except (urllib.error.URLError, http.client.HTTPException, OSError):
        return None
    total, found = 0.0, False
    for fam in text_string_to_metric_families(text):
        for smp in fam.samples:
            if smp.name == metric:
                found = True
                total += smp.value if smp.labels.get("outcome") == "error" else 0.0
    return total if found else None
