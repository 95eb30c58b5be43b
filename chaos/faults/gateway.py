"""Faults set through the reference gateway's admin API (`POST /admin/config`), ledgered like every fault."""
from __future__ import annotations

from typing import Any

from chaos.errors import FaultError, FaultNotEffective
from chaos.faults import _undo
from chaos.faults.base import Fault
from chaos.faults.tokens import TokenRef
from chaos.observe.gateway import GatewayAdminError, admin_call


class GatewayConfigFault(Fault):
    """Change gateway settings (canary_weight, misroute_fraction) and put the old values back on revert."""

    path, state_path = "/admin/config", "/admin/state"

    def __init__(self, admin_url: str, token: TokenRef | None, changes: dict[str, Any], restore: dict[str, Any],
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
        try:
            return admin_call(self.admin_url, method, path, body, token=self.token.value() if self.token else None)
        except GatewayAdminError as e:
            raise FaultError(str(e), fault=self.kind) from None

    def _preflight(self) -> None:
        self._call("GET", self.state_path)

    def _plan(self) -> list[str]:
        return [f"POST {self.admin_url}{self.path} {self.changes}"]

    def _undo(self) -> list[dict[str, Any]]:
        return [_undo.http("POST", f"{self.admin_url}{self.path}", body=self.restore,
                           auth=self.token.describe() if self.token else None)]

    def _apply(self) -> None:
        self._call("POST", self.path, self.changes)

    def _check(self) -> None:
        state = self._call("GET", self.state_path)
        off = {k: state.get(k) for k, want in self.changes.items() if state.get(k) != want}
        if off:
            raise FaultNotEffective(f"gateway reports {off}, not {self.changes}", fault=self.kind)
        self.evidence.update({k: state.get(k) for k in self.changes})

    def _unapply(self) -> None:
        self._call("POST", self.path, self.restore)


class ReleaseStage(GatewayConfigFault):
    """A gray-release stage on the reference gateway (`POST /admin/release`): the canary's weight,
    the shadow share and the request attributes it may serve; the release before it comes back on
    revert (the rollback when a stage fails its gate)."""

    path, state_path = "/admin/release", "/admin/release"

    def __init__(self, admin_url: str, token: TokenRef | None, *, canary_weight: float, mirror: float = 0.0,
                 admit: dict[str, list[str]] | None = None, restore_weight: float, **kw: Any) -> None:
        admit = None if admit is None else {h.lower(): sorted(v) for h, v in admit.items()}
        super().__init__(admin_url, token, {"canary_weight": canary_weight, "mirror": mirror, "admit": admit},
                         {"canary_weight": restore_weight, "mirror": 0.0, "admit": None}, **kw)
        self.kind = "release-stage"


def _token(env: Any) -> TokenRef | None:
    gw = env.gateway
    return TokenRef(config=(env.source, "gateway.admin_token")) if gw is not None and gw.admin_token else None


def release_stage(env: Any, *, canary_weight: float, mirror: float = 0.0,
                  admit: dict[str, list[str]] | None = None) -> ReleaseStage:
    """One stage of a gray release on the environment's reference gateway."""
    if not env.endpoints.gateway_admin:
        raise FaultError("a release stage needs the reference gateway's admin API (endpoints.gateway_admin)",
                         fault="release-stage")
    return ReleaseStage(env.endpoints.gateway_admin, _token(env), canary_weight=canary_weight, mirror=mirror,
                        admit=admit, restore_weight=env.breaker.canary_weight)


def misroute(env: Any, fraction: float, *, canary_weight: float = 0.0) -> GatewayConfigFault:
    """Send `fraction` of requests to the wrong pool (with the canary's weight set to `canary_weight`)."""
    return GatewayConfigFault(env.endpoints.gateway_admin, _token(env),
                              {"canary_weight": canary_weight, "misroute_fraction": fraction},
                              {"canary_weight": env.breaker.canary_weight, "misroute_fraction": 0.0})


def health_only(env: Any) -> GatewayConfigFault:
    """The reference gateway told to watch health only: its progress ejection off until the revert (the
    decode-stall scenario's negative control; gateway.reference.progress_eject_s comes back)."""
    if not env.endpoints.gateway_admin or env.gateway is None or env.gateway.kind != "reference":
        raise FaultError("health-only needs the reference gateway's admin API (endpoints.gateway_admin)",
                         fault="gateway-progress-eject-s")
    return GatewayConfigFault(env.endpoints.gateway_admin, _token(env), {"progress_eject_s": 0.0},
                              {"progress_eject_s": env.gateway.reference.progress_eject_s})
