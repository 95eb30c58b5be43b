"""Engine death: the engine core dies while the API server lives on (briefly), on any backend.

Real vLLM: SIGKILL to the `VLLM::EngineCore` process (found by its title). Its API server fails the
in-flight requests, answers /health 503, and exits with code 0 about 0.5 s later (vllm-behaviour.md),
so only `restart: always` brings it back. The simulator has the same death as an admin fault; on another
host it is planted from inside the replica's container (chaos.faults.sim_exec).
"""
from __future__ import annotations

import signal
from typing import Any

from chaos.errors import ConfigError, FaultError, TargetError
from chaos.faults.base import Fault
from chaos.faults.container import _TargetFault
from chaos.faults.sim_admin import admin_via, sim_fault
from chaos.targets.base import Target


class EngineKill(_TargetFault):
    """SIGKILL the replica's engine process (not the API server); proven by that pid dying."""

    kind, destructive = "engine-death", True

    def __init__(self, target: Target, *, dp_rank: int | None = None, **kw: Any) -> None:
        super().__init__(target, **kw)
        self.dp_rank = dp_rank

    def params(self) -> dict[str, Any]:
        out = {"target": self.target.name, "signal": "SIGKILL", "process": "VLLM::EngineCore"}
        return out | ({"dp_rank": self.dp_rank} if self.dp_rank is not None else {})

    def _preflight(self) -> None:
        super()._preflight()
        try:
            self._engine = self.target.engine_pid(self.dp_rank)
        except TargetError as e:
            raise FaultError(f"target {self.target.name}: {e}", fault=self.kind) from None
        if self._engine is None:
            raise FaultError(f"target {self.target.name} has no VLLM::EngineCore process", fault=self.kind)
        self._start = self.target.proc_start(self._engine)  # with the pid, the process's identity

    def _plan(self) -> list[str]:
        return [f"SIGKILL the engine core of {self.target.name} (pid found at inject)"]

    def _apply(self) -> None:
        assert self._engine is not None  # _preflight found it or raised
        self.target.signal(self._engine, signal.SIGKILL)

    def _check(self) -> None:
        assert self._engine is not None  # _preflight found it or raised
        alive = self.target.proc_state(self._engine) not in (None, "Z", "X") \
            and self.target.proc_start(self._engine) == self._start
        if alive:
            raise self._not(f"engine pid {self._engine} is still alive after SIGKILL")
        self.evidence["killed_engine_pid"] = self._engine

    def _undo(self) -> list[dict[str, Any]]:
        return self._docker_undo("start")

    def _unapply(self) -> None:
        self._recover()


def engine_death(target: Target, backend: str, *, sim_url: str | None = None, token: Any = None,
                 **kw: Any) -> Fault:
    """The engine-death fault for a target's backend ("simulator" or "vllm")."""
    if backend == "vllm":
        return EngineKill(target, **kw)
    if backend == "simulator":
        if sim_url is None:
            raise ConfigError("engine_death on a simulator target needs sim_url (its direct URL)")
        return sim_fault(sim_url, token, "engine-death", via=admin_via(target, sim_url, "engine-death"))
    raise FaultError(f"target {target.name}: engine death needs a simulator or vLLM replica (the harness cannot "
                     f"tell which process is the engine of a plain `command`)", fault="engine-death")


__all__ = ["EngineKill", "engine_death"]
