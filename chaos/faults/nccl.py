"""NCCL-style faults: freeze one tensor-parallel rank (SIGSTOP), kill it (SIGKILL) or cut its link (Toxiproxy timeout)."""
from __future__ import annotations

import signal
import time
from typing import Any

from chaos.errors import FaultError, FaultNotEffective, TargetError
from chaos.faults import _undo
from chaos.faults.base import Fault
from chaos.faults.network import ToxicFault
from chaos.shared.toxiproxy import Toxiproxy
from chaos.targets.base import Target


class RankFreeze(Fault):
    """SIGSTOP one rank: its collective never completes, as a hung NCCL all-reduce. SIGCONT on revert.

    `rank` is the TP rank (`tp_rank` its other name); `pp_rank`/`dp_rank` pick the pipeline stage and
    data-parallel replica of a PP/DP layout, and one left open must be unambiguous (chaos.targets.titles)."""

    kind, destructive = "rank-freeze", True

    def __init__(self, target: Target, rank: int = 1, *, tp_rank: int | None = None, pp_rank: int | None = None,
                 dp_rank: int | None = None, pid: int | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.rank = rank if tp_rank is None else tp_rank
        self.target, self.pp_rank, self.dp_rank, self.pid = target, pp_rank, dp_rank, pid
        self._start: int | None = None
        self._engine: tuple[int, int | None] | None = None  # the engine driving the rank: (pid, start)

    def params(self) -> dict[str, Any]:
        return {"target": self.target.name, "rank": self.rank, "tp_rank": self.rank, "pp_rank": self.pp_rank,
                "dp_rank": self.dp_rank, "pid": self.pid}

    def _which(self) -> str:
        return " ".join([f"TP rank {self.rank}"] + [f"{k} {v}" for k, v in (("PP rank", self.pp_rank),
                                                                             ("DP rank", self.dp_rank)) if v is not None])

    def _preflight(self) -> None:
        if self.pid is None:
            pick = getattr(self.target, "rank_pid", None)  # the targets that read process titles
            try:
                if pick is not None:
                    self.pid = pick(self.rank, self.pp_rank, self.dp_rank)
                else:
                    pids = self.target.rank_pids()
                    if len(pids) <= self.rank or self.pp_rank or self.dp_rank:
                        raise TargetError(f"ranks {pids}; no {self._which()}")
                    self.pid = pids[self.rank]
            except TargetError as e:
                raise FaultError(f"target {self.target.name}: {e}", fault=self.kind) from None
        # the pid with its start time is the process: after a restart the pid may belong to another
        self._start = self.target.proc_start(self.pid)
        # and the engine that drives it (vLLM's VLLM::EngineCore): its death of the freeze is what ends the fault
        try:
            engine = self.target.engine_pid(self.dp_rank)
        except (TargetError, AttributeError):
            engine = None
        if engine is not None and engine != self.pid:
            self._engine = (engine, self.target.proc_start(engine))

    def _plan(self) -> list[str]:
        return [f"SIGSTOP {self._which()} of {self.target.name} (pid {self.pid or '<found at inject>'})"]

    def _undo(self) -> list[dict[str, Any]]:
        if self.pid is None:
            return []
        in_container = getattr(self.target, "undo_signal", None)  # a container's host pid, by its engine
        if in_container is not None:
            step: dict[str, Any] = in_container(self.pid, self._start, signal.SIGCONT)
            return [step]
        return [_undo.send_signal(self.pid, signal.SIGCONT, target=self.target.name)]

    def _apply(self) -> None:
        assert self.pid is not None
        self.target.signal(self.pid, signal.SIGSTOP)

    def _check(self) -> None:
        assert self.pid is not None
        state = self.target.proc_state(self.pid)
        if state != "T":
            raise FaultNotEffective(f"{self._which()} pid {self.pid} of {self.target.name} is in state {state!r}, "
                                    "not T (stopped)", fault=self.kind)
        self.evidence["proc_state"] = state

    def _gone(self, pid: int, start: int | None) -> bool:
        return self.target.proc_state(pid) in (None, "Z", "X") or (start is not None and self.target.proc_start(pid) != start)

    def engine_died(self) -> bool:
        """Whether the engine died of the freeze: the engine seen at inject (pid and start) is gone, or the frozen
        rank itself is (gone, a zombie, its pid another process's).

        The rank's state alone does not say it: vLLM SIGKILLs its workers when the engine dies, and a SIGKILLed
        stopped rank shows R or D until the kernel has torn it down (0.3-0.7 s measured on the stripped vLLM image,
        18 s while its core was held by a busy-polling worker, docs/vllm-fidelity.md); a process target's rank
        orphaned by its engine's death is resumed by the kernel (SIGCONT to an orphaned process group with a
        stopped member). Either way the fault is over: its victim, the engine, is dead."""
        if self.pid is None or self._start is None:
            return False
        try:
            return self._gone(self.pid, self._start) or (self._engine is not None and self._gone(*self._engine))
        except TargetError:
            return False  # the engine could not be asked: not proof of a death

    def _unapply(self) -> None:
        assert self.pid is not None
        if self._start is not None and self.target.proc_start(self.pid) != self._start:
            return  # the rank died meanwhile (the engine tore it down, or the replica restarted)
        try:
            self.target.signal(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass  # the rank died meanwhile: nothing is left stopped


class RankKill(RankFreeze):
    """SIGKILL one rank by index (a GPU fallen off the bus under one worker): the engine's worker monitor
    sees it die and the engine dies with it. Proven by that rank's process being gone. Nothing can be
    undone (the ledger's undo is empty); revert waits for the replica's supervisor (restart_policy) to
    bring the engine back and for /health, and says in `evidence["engine_restarted"]` whether it did."""

    kind, destructive = "rank-kill", True

    def _plan(self) -> list[str]:
        return [f"SIGKILL {self._which()} of {self.target.name} (pid {self.pid or '<found at inject>'})"]

    def _undo(self) -> list[dict[str, Any]]:
        return []  # a dead process cannot be continued; the supervisor restarts the engine

    def _apply(self) -> None:
        assert self.pid is not None
        self._restarts = self.target.restart_count()
        self.target.signal(self.pid, signal.SIGKILL)

    def _check(self) -> None:
        assert self.pid is not None
        state = self.target.proc_state(self.pid)
        if state not in (None, "Z", "X") and self.target.proc_start(self.pid) == self._start:
            raise FaultNotEffective(f"{self._which()} pid {self.pid} of {self.target.name} is still alive "
                                    f"(state {state!r}) after SIGKILL", fault=self.kind)
        self.evidence["killed_rank_pid"] = self.pid

    def _unapply(self) -> None:
        deadline = time.monotonic() + self.policy.recover_timeout_s
        while self.target.restart_count() == self._restarts and time.monotonic() < deadline:
            self.policy.sleep(0.05)
        self.evidence["engine_restarted"] = restarted = self.target.restart_count() != self._restarts
        # a supervisor that counted the restart is still bringing the replica up (Docker's "restarting"): wait
        # for it. Starting it here instead replaced the lab's container, whose new RestartCount 0 erased the
        # restart the recovery suite's stage 1 looks for ("restarts_seen: measured 0", measured in the lab)
        while restarted and not self.target.is_running() and time.monotonic() < deadline:
            self.policy.sleep(0.05)
        if not self.target.is_running():
            self.target.start()
        self.target.wait_healthy(max(1.0, deadline - time.monotonic()))


def rank_kill(target: Target, rank: int = 1, **kw: Any) -> RankKill:
    """Kill TP rank `rank` of one replica (pp_rank=, dp_rank= for a PP/DP layout), on any backend whose
    ranks are processes: the simulator, vLLM as a process or in a container."""
    return RankKill(target, rank, **kw)


def rank_freeze(target: Target, rank: int = 1, **kw: Any) -> RankFreeze:
    """Freeze TP rank `rank` of one replica (pp_rank=, dp_rank= for a PP/DP layout), on any backend whose
    ranks are processes."""
    return RankFreeze(target, rank, **kw)


def rank_link_cut(toxi: Toxiproxy | str, proxy_name: str, *, stream: str = "both", **kw: Any) -> ToxicFault:
    """A `timeout` toxic (timeout=0: hold the link open, drop all data) on one rank link."""
    # never open extra connections to a rank worker (its protocol is not ours, and a stray peer could be
    # taken for the engine): proof is the API listing here and the engine's collective timeout downstream
    kw.setdefault("probe_enabled", False)
    return ToxicFault(toxi, proxy_name, "timeout", {"timeout": 0}, stream=stream, kind="rank-link-cut",
                      destructive=True, **kw)
