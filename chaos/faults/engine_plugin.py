"""Faults inside real vLLM through llm-chaos's engine plugin (chaos_engine_plugin): armed by a file.

The replica runs with LLM_CHAOS_ENGINE_FAULTS=<control dir> (VllmOptions.engine_faults sets it); the
harness arms a fault by writing `<id>.json` there with the target's own exec (a local `sh` for a
process, `docker exec` for a container, local or over SSH), and disarms it with `rm -f`: that removal
is the ledgered undo step, replayable with no harness memory. Stage 1 (armed) is the file read back
where the replica runs; what it did is in the replica's log (`llm-chaos engine fault <id> (<kind>)
fired`, beside vLLM's own lines) and in `<id>.fired.<pid>` files, which `fired_pids()` lists.

On a vLLM the plugin does not support (chaos_engine_plugin.versions) its processes patch nothing and
write `unsupported.<pid>.<version>`: a fault aimed there is refused before anything is armed, and the
suites report that scenario "not proven: the engine plugin does not support vLLM X.Y".
"""
from __future__ import annotations

import time
from typing import Any

from chaos.errors import ConfigError, FaultError, TargetError
from chaos.faults.container import _TargetFault
from chaos.targets.base import Target
from chaos_engine_plugin.control import (
    ENV_VAR,
    KINDS,
    REFRESH_S,
    UNSUPPORTED,
    SpecError,
    list_command,
    registered,
    remove_command,
    validate,
    write_command,
)
from chaos_engine_plugin.versions import SUPPORTED_VLLM, shown

# each process re-reads the control directory at most every REFRESH_S: an arming or disarming is in
# effect everywhere that long after the file changed (measured: a request sent at once after the
# rm still leaked once), so inject and revert return only then
SETTLE_S = 2 * REFRESH_S


def control_dir(target: Target) -> str | None:
    """The replica's control directory (its LLM_CHAOS_ENGINE_FAULTS), or None when the plugin is off."""
    env = getattr(target, "env", None) or {}
    value = env.get(ENV_VAR)
    return str(value) if value else None


def not_supported(version: str | None) -> str:
    """The reason an engine fault is not proven on a vLLM the plugin does not support."""
    return f"the engine plugin does not support vLLM {shown(version)} (supports {', '.join(SUPPORTED_VLLM)})"


def plugin_unsupported(target: Target) -> str | None:
    """Why the engine plugin cannot act in target's vLLM (its newest registration, read where the replica
    runs, says unsupported), else None (supported, off, or not registered yet: the fault's preflight says)."""
    directory = control_dir(target)
    if directory is None:
        return None
    rc, out = target.exec(list_command(directory))
    said = registered(out.split()) if rc == 0 else None
    return not_supported(said[1]) if said is not None and said[0] == UNSUPPORTED else None


def undo_step(target: Target, directory: str, fault_id: str) -> dict[str, Any]:
    """The ledger's undo: remove the arming file, where the replica runs."""
    return {"kind": "engine_plugin", "target": target.name, "dir": directory, "id": fault_id,
            "container": getattr(target, "container_name", None), "docker_host": getattr(target, "docker_host", None)}


class EngineFault(_TargetFault):
    """One fault of the engine plugin (`kind`: chaos_engine_plugin.control.KINDS), armed on one replica."""

    destructive = True

    def __init__(self, target: Target, kind: str, *, fault_id: str | None = None, fired_within_s: float = 0.0,
                 **spec: Any) -> None:
        super().__init__(target, **{k: spec.pop(k) for k in ("seed", "policy") if k in spec})
        # > 0: inject returns once the fault has acted somewhere (its `fired` file), and its proof requires
        # that; for a fault the load reaches at once (a hang, a step error), not one a request must trigger
        self.fired_within_s = fired_within_s
        if kind not in KINDS:
            raise ConfigError(f"engine fault kind {kind!r}: expected one of {', '.join(KINDS)}")
        self.kind = f"engine-{kind}"
        self.fault_id = fault_id or f"{kind}-{self.seed:08x}"
        try:
            self.spec = validate(self.fault_id, {"kind": kind, **spec})
        except SpecError as e:
            raise ConfigError(str(e)) from None
        self.directory: str | None = None

    def params(self) -> dict[str, Any]:
        return {"target": self.target.name, "id": self.fault_id, **self.spec}

    def _listing(self) -> list[str]:
        assert self.directory is not None
        rc, out = self.target.exec(list_command(self.directory))
        return out.split() if rc == 0 else []

    def _preflight(self) -> None:
        super()._preflight()
        self.directory = control_dir(self.target)
        if self.directory is None:
            raise FaultError(f"target {self.target.name}: the engine plugin is off ({ENV_VAR} is not in its environment; "
                             "set vllm.engine_faults: true)", fault=self.kind)
        said = registered(self._listing())
        if said is not None and said[0] == UNSUPPORTED:
            raise FaultError(f"target {self.target.name}: not proven: {not_supported(said[1])}", fault=self.kind)
        if said is None:
            raise FaultError(f"target {self.target.name}: no process of its vLLM loaded the engine plugin (nothing "
                             f"in {self.directory}; is chaos_engine_plugin installed? docs/engine-plugin.md)", fault=self.kind)

    def _plan(self) -> list[str]:
        return [f"arm {self.spec} as {self.fault_id} in {self.directory or '<control dir>'} of {self.target.name}"]

    def _undo(self) -> list[dict[str, Any]]:
        return [undo_step(self.target, self.directory, self.fault_id)] if self.directory else []

    def _apply(self) -> None:
        assert self.directory is not None
        rc, out = self.target.exec(write_command(self.directory, self.fault_id, self.spec))
        if rc != 0:
            raise FaultError(f"target {self.target.name}: arming {self.fault_id} exited {rc}: {out.strip()[:200]}",
                             fault=self.kind)
        self.policy.sleep(SETTLE_S)
        t0 = time.monotonic()
        while self.fired_within_s > 0 and not self.fired_pids() and time.monotonic() - t0 < self.fired_within_s:
            self.policy.sleep(0.1)

    def _check(self) -> None:
        names = self._listing()
        if f"{self.fault_id}.json" not in names:
            raise self._not(f"{self.fault_id}.json is not in {self.directory}")
        self.evidence["armed"] = f"{self.directory}/{self.fault_id}.json"
        if self.fired_within_s > 0:
            fired = self.fired_pids()
            if not fired:
                raise self._not(f"{self.fault_id} armed but it acted nowhere within {self.fired_within_s:g} s")
            self.evidence["fired_pids"] = fired

    def fired_pids(self) -> list[int]:
        """The pids (as the replica sees them) in which this fault has acted so far."""
        prefix = f"{self.fault_id}.fired."
        return sorted(int(n[len(prefix):]) for n in self._listing() if n.startswith(prefix) and n[len(prefix):].isdigit())

    def _unapply(self) -> None:
        assert self.directory is not None
        rc, out = self.target.exec(remove_command(self.directory, self.fault_id))
        if rc != 0:
            raise FaultError(f"target {self.target.name}: disarming {self.fault_id} exited {rc}: {out.strip()[:200]}",
                             fault=self.kind)
        self.policy.sleep(SETTLE_S)
        self.evidence["fired_pids"] = self.fired_pids()


class EngineStepDeath(EngineFault):
    """Engine death through the plugin's step exception (a CUDA error in one rank's model runner): proven
    by the plugin firing and the replica's `VLLM::EngineCore` process dying of it (its API server exits 0)."""

    def __init__(self, target: Target, *, rank: int | None = None, death_wait_s: float = 60.0, **kw: Any) -> None:
        super().__init__(target, "step-error", rank=rank, **kw)
        self.death_wait_s = death_wait_s  # the fault acts on the next model step: a request must reach the engine
        self._engine: int | None = None
        self._engine_start: Any = None

    def _preflight(self) -> None:
        super()._preflight()
        try:
            self._engine = self.target.engine_pid(None)
        except TargetError as e:
            raise FaultError(f"target {self.target.name}: {e}", fault=self.kind) from None
        if self._engine is None:
            raise FaultError(f"target {self.target.name} has no VLLM::EngineCore process", fault=self.kind)
        self._engine_start = self.target.proc_start(self._engine)

    def _engine_dead(self) -> bool:
        assert self._engine is not None
        return self.target.proc_state(self._engine) in (None, "Z", "X") \
            or self.target.proc_start(self._engine) != self._engine_start

    def _apply(self) -> None:
        super()._apply()
        t0 = time.monotonic()  # bounded: a replica nobody sends to never steps, and _check says so
        while not (self.fired_pids() and self._engine_dead()) and time.monotonic() - t0 < self.death_wait_s:
            self.policy.sleep(0.1)
        self.times["armed_to_engine_death_s"] = round(time.monotonic() - t0, 3)

    def _check(self) -> None:
        super()._check()
        fired = self.fired_pids()
        if not fired:
            raise self._not(f"{self.fault_id} armed but no model step raised within {self.death_wait_s:g} s "
                            "(no request reached the engine?)")
        if not self._engine_dead():
            raise self._not(f"the step exception fired in pid(s) {fired} but engine pid {self._engine} is still alive")
        self.evidence.update(fired_pids=fired, killed_engine_pid=self._engine)


def engine_step_death(target: Target, *, rank: int | None = None, **kw: Any) -> EngineStepDeath:
    """Engine death inside real vLLM: the plugin's step exception on `rank` (None: every rank)."""
    return EngineStepDeath(target, rank=rank, **kw)


def engine_fault(target: Target, kind: str, **spec: Any) -> EngineFault:
    """A fault inside the replica's real vLLM through the engine plugin: step-error, allreduce-hang, slow-step,
    corrupt, tokenizer-crash, leak, kv-alloc-fail or decode-stall (parameters: chaos_engine_plugin.control.KINDS)."""
    return EngineFault(target, kind, **spec)


__all__ = ["EngineFault", "EngineStepDeath", "control_dir", "engine_fault", "engine_step_death", "not_supported",
           "plugin_unsupported", "undo_step"]
