"""Simulator fault modes through its admin API (POST /admin/faults, token required).

The API answers only on its host's loopback. A simulator in a container on another host gets the same
calls, and their undo, made from inside its container (`via`: chaos.faults.sim_exec says how)."""
from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlparse

from chaos.errors import FaultError, FaultNotEffective, TargetError
from chaos.faults import _undo, sim_exec
from chaos.faults.base import Fault
from chaos.faults.tokens import TokenRef, as_ref

if TYPE_CHECKING:
    from chaos.targets.base import Target
    from chaos.targets.docker import DockerTarget

DESTRUCTIVE_MODES = {"crash", "engine-death", "oom", "tokenizer-crash"}


class SimFault(Fault):
    """One simulator mode (crash, engine-death, oom, hang, error-rate, slow, stall, truncate, ...)."""

    kind = "sim"

    def __init__(self, admin_url: str, token: str | TokenRef, mode: str, *, via: DockerTarget | None = None,
                 **params: Any) -> None:
        seed = params.pop("seed", None)
        super().__init__(seed=seed)
        self.admin_url, self.token, self.mode, self.mode_params = admin_url.rstrip("/"), as_ref(token), mode, params
        self.via = via  # the replica's container the calls are made from, when its host is another
        self.kind = f"sim-{mode}"
        self.destructive = mode in DESTRUCTIVE_MODES

    def params(self) -> dict[str, Any]:
        via = {"via": f"exec in container {self.via.container_name}"} if self.via is not None else {}
        return {"admin_url": self.admin_url, "mode": self.mode, "token": self.token.describe(), **via, **self.mode_params}

    def _headers(self) -> dict[str, str]:
        return {**self.token.header(), "Content-Type": "application/json"}

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        if self.via is not None:
            return self._call_in_container(method, path, body)
        req = urllib.request.Request(self.admin_url + path, method=method, headers=self._headers(),
                                     data=json.dumps(body).encode() if body is not None else None)
        try:
            with urllib.request.urlopen(req, timeout=5) as r:
                raw = r.read()
        except urllib.error.HTTPError as e:
            raise FaultError(f"{method} {self.admin_url}{path} -> {e.code} {e.read()[:200]!r}", fault=self.kind) from None
        except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
            raise FaultError(f"simulator admin {self.admin_url} not answering: {getattr(e, 'reason', e)}",
                             fault=self.kind) from None
        return json.loads(raw) if raw else None

    def _call_in_container(self, method: str, path: str, body: Any) -> Any:
        assert self.via is not None
        try:
            status, raw = sim_exec.call(self.via.client, self.via.container_name, method, self.admin_url + path,
                                        self.token, body, target=self.via.name)
        except sim_exec.NotAnswering as e:
            raise FaultError(f"simulator admin {self.admin_url} not answering: {e}", fault=self.kind) from None
        except TargetError as e:
            raise FaultError(str(e), fault=self.kind) from None
        if status >= 400:
            raise FaultError(f"{method} {self.admin_url}{path} (from inside container {self.via.container_name}) -> "
                             f"{status} {raw[:200]!r}", fault=self.kind)
        try:
            return json.loads(raw) if raw else None
        except ValueError:
            raise FaultError(f"{method} {self.admin_url}{path}: not JSON: {raw[:200]!r}", fault=self.kind) from None

    def _preflight(self) -> None:
        self._call("GET", "/admin/faults")

    def _plan(self) -> list[str]:
        where = f" from inside container {self.via.container_name} (loopback source)" if self.via is not None else ""
        return [f"POST {self.admin_url}/admin/faults{where} {{mode: {self.mode}, {self.mode_params}}}"]

    def _undo(self) -> list[dict[str, Any]]:
        if self.via is not None:  # undone the way it was done
            return [sim_exec.undo_step(self.via, "DELETE", f"{self.admin_url}/admin/faults/{self.mode}", self.token)]
        return [_undo.http("DELETE", f"{self.admin_url}/admin/faults/{self.mode}", auth=self.token.describe())]

    def _apply(self) -> None:
        self._call("POST", "/admin/faults", {"mode": self.mode, **self.mode_params})

    def _active_modes(self) -> set[str]:
        got = self._call("GET", "/admin/faults")
        items = got.get("faults", got.get("active", got)) if isinstance(got, dict) else got
        if isinstance(items, dict):
            return set(items)
        # each entry names its mode as a string
        return cast("set[str]", {i.get("mode") if isinstance(i, dict) else str(i) for i in items or []})

    def _check(self) -> None:
        if self.destructive:
            try:
                active = self._active_modes()
            except FaultError:
                self.evidence["admin"] = "not answering (process died, as the mode intends)"
                return
        else:
            active = self._active_modes()
        if self.mode not in active:
            raise FaultNotEffective(f"mode {self.mode} not listed as active by {self.admin_url} ({sorted(active)})",
                                    fault=self.kind)
        self.evidence["active_modes"] = sorted(active)

    def _unapply(self) -> None:
        try:
            self._call("DELETE", f"/admin/faults/{self.mode}")
        except FaultError:
            if not self.destructive:
                raise


def admin_via(target: Target, sim_url: str, mode: str) -> DockerTarget | None:
    """The container `mode`'s admin calls to the simulator at `sim_url` are made from (None: straight from
    here). Its admin API answers only on its host's loopback; one on another address is reached from
    inside its container, and a process there not at all (FaultError, one line)."""
    from chaos.targets.docker import DockerTarget

    host = urlparse(sim_url).hostname or ""
    if host.startswith("127.") or host in ("localhost", "::1"):
        return None
    if isinstance(target, DockerTarget):
        return target
    raise FaultError(f"target {target.name}: the simulator's admin API answers only on its own host's loopback and "
                     f"{host} is another host; only a Docker target's container can make the call there",
                     fault=f"sim-{mode}")


def sim_fault(admin_url: str, token: str | TokenRef, mode: str, *, via: DockerTarget | None = None,
              **params: Any) -> SimFault:
    """A defect planted in the simulator through its admin API (`mode`: leak, tokenizer crash, ...); `via`:
    the simulator's container on another host, the calls made from inside it."""
    return SimFault(admin_url, token, mode, via=via, **params)
