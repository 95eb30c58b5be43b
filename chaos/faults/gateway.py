"""Faults set through the reference gateway's admin API (`POST /admin/config`), ledgered like every fault."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from chaos.errors import FaultError, FaultNotEffective
from chaos.faults import _undo
from chaos.faults.base import Fault
from chaos.faults.tokens import TokenRef


class GatewayConfigFault(Fault):
    """Change gateway settings (canary_weight, misroute_fraction) and put the old values back on revert."""

    def __init__(self, admin_url: str, token: TokenRef | None, changes: dict[str, float], restore: dict[str, float],
                 **kw: Any) -> None:
        super().__init__(**kw)
        if set(changes) != set(restore):
            raise ValueError("restore must name the same settings as changes")
        self.admin_url, self.token = admin_url.rstrip("/"), token
        self.changes, self.restore = dict(changes), dict(restore)
        self.kind = "gateway-" + "-".join(sorted(k.replace("_", "-") for k in changes))

    def params(self) -> dict[str, Any]:
        return {"admin_url": self.admin_url, "changes": self.changes, "restore": self.restore,
                "token": self.token.describe() if self.token else None}

    def _call(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        headers = {"Content-Type": "application/json", **(self.token.header() if self.token else {})}
        req = urllib.request.Request(self.admin_url + path, method=method, headers=headers,
                                     data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                return json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            raise FaultError(f"{method} {self.admin_url}{path} -> {e.code} {e.read()[:200]!r}", fault=self.kind) from None
        except (urllib.error.URLError, OSError) as e:
            raise FaultError(f"gateway admin {self.admin_url} not answering: {getattr(e, 'reason', e)}",
                             fault=self.kind) from None

    def _preflight(self) -> None:
        self._call("GET", "/admin/state")

    def _plan(self) -> list[str]:
        return [f"POST {self.admin_url}/admin/config {self.changes}"]

    def _undo(self) -> list[dict[str, Any]]:
        return [_undo.http("POST", f"{self.admin_url}/admin/config", body=self.restore,
                           auth=self.token.describe() if self.token else None)]

    def _apply(self) -> None:
        self._call("POST", "/admin/config", self.changes)

    def _check(self) -> None:
        state = self._call("GET", "/admin/state")
        off = {k: state.get(k) for k, want in self.changes.items() if state.get(k) != want}
        if off:
            raise FaultNotEffective(f"gateway reports {off}, not {self.changes}", fault=self.kind)
        self.evidence.update({k: state.get(k) for k in self.changes})

    def _unapply(self) -> None:
        self._call("POST", "/admin/config", self.restore)


def misroute(env: Any, fraction: float, *, canary_weight: float = 0.0) -> GatewayConfigFault:
    """Send `fraction` of requests to the wrong pool (with the canary's weight set to `canary_weight`)."""
    gw = env.gateway
    token = TokenRef(config=(env.source, "gateway.admin_token")) if gw is not None and gw.admin_token else None
    return GatewayConfigFault(env.endpoints.gateway_admin, token,
                              {"canary_weight": canary_weight, "misroute_fraction": fraction},
                              {"canary_weight": env.breaker.canary_weight, "misroute_fraction": 0.0})
