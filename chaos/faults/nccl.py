"""NCCL-style faults: freeze one tensor-parallel rank (SIGSTOP) or cut its link (Toxiproxy timeout)."""
from __future__ import annotations

import signal
from typing import Any

from chaos.errors import FaultError, FaultNotEffective, TargetError
from chaos.faults import _undo
from chaos.faults.base import Fault
from chaos.faults.network import ToxicFault
from chaos.toxiproxy import Toxiproxy
from chaos.targets.base import Target


class RankFreeze(Fault):
    """SIGSTOP one TP rank: its collective never completes, as a hung NCCL all-reduce. SIGCONT on revert."""

    kind, destructive = "rank-freeze", True

    def __init__(self, target: Target, rank: int = 1, *, pid: int | None = None, **kw: Any) -> None:
        super().__init__(**kw)
        self.target, self.rank, self.pid = target, rank, pid
        self._start: int | None = None

    def params(self) -> dict[str, Any]:
        return {"target": self.target.name, "rank": self.rank, "pid": self.pid}

    def _preflight(self) -> None:
        if self.pid is None:
            try:
                pids = self.target.rank_pids()
            except TargetError as e:
                raise FaultError(str(e), fault=self.kind) from None
            if len(pids) <= self.rank:
                raise FaultError(f"target {self.target.name} has ranks {pids}; no rank {self.rank}", fault=self.kind)
            self.pid = pids[self.rank]
        # the pid with its start time is the process: after a restart the pid may belong to another
        self._start = self.target.proc_start(self.pid)

    def _plan(self) -> list[str]:
        return [f"SIGSTOP rank {self.rank} of {self.target.name} (pid {self.pid or '<found at inject>'})"]

    def _undo(self) -> list[dict[str, Any]]:
        if self.pid is None:
            return []
        if getattr(self.target, "remote", False):  # a pid inside the container: SIGCONT through exec
            t: Any = self.target
            return [_undo.container_signal(t.docker_host, t.container_name, self.pid, self._start,
                                           signal.SIGCONT, target=t.name)]
        return [_undo.send_signal(self.pid, signal.SIGCONT, target=self.target.name)]

    def _apply(self) -> None:
        assert self.pid is not None
        self.target.signal(self.pid, signal.SIGSTOP)

    def _check(self) -> None:
        assert self.pid is not None
        state = self.target.proc_state(self.pid)
        if state != "T":
            raise FaultNotEffective(f"rank {self.rank} pid {self.pid} of {self.target.name} is in state {state!r}, "
                                    "not T (stopped)", fault=self.kind)
        self.evidence["proc_state"] = state

    def _unapply(self) -> None:
        assert self.pid is not None
        if self._start is not None and self.target.proc_start(self.pid) != self._start:
            return  # the rank died meanwhile (the engine tore it down, or the replica restarted)
        try:
            self.target.signal(self.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass  # the rank died meanwhile: nothing is left stopped


def rank_freeze(target: Target, rank: int = 1, **kw: Any) -> RankFreeze:
    return RankFreeze(target, rank, **kw)


def rank_link_cut(toxi: Toxiproxy | str, proxy_name: str, *, stream: str = "both", **kw: Any) -> ToxicFault:
    """A `timeout` toxic (timeout=0: hold the link open, drop all data) on one rank link."""
    # never open extra connections to a rank worker (its protocol is not ours, and a stray peer could be
    # taken for the engine): proof is the API listing here and the engine's collective timeout downstream
    kw.setdefault("probe_enabled", False)
    return ToxicFault(toxi, proxy_name, "timeout", {"timeout": 0}, stream=stream, kind="rank-link-cut",
                      destructive=True, **kw)
