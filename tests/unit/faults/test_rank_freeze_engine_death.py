"""A frozen rank's fault is over once its engine died of it (chaos.faults.nccl.RankFreeze.engine_died, issue 30):
vLLM SIGKILLs its workers when the engine dies, and the SIGKILLed stopped rank showed R for 18 s while the kernel
tore it down, before its container could exit (docs/vllm-fidelity.md). The engine seen at inject, gone, says the
engine died; the rank's state does not. A rank running again under a live engine is a fault that lapsed."""
from __future__ import annotations

import signal
from typing import Any

import pytest

from chaos.errors import FaultNotEffective, TargetError
from chaos.faults.base import Policy
from chaos.faults.nccl import RankFreeze

RANK, ENGINE = 34, 21


class Procs:
    """A replica's processes: pid -> (state, start); signals change them as the kernel would."""

    name = "replica-a"

    def __init__(self) -> None:
        self.procs: dict[int, tuple[str, int]] = {ENGINE: ("S", 100), RANK: ("S", 101), 33: ("S", 101)}
        self.sent: list[tuple[int, int]] = []
        self.broken = False

    def rank_pid(self, tp: int | None = None, pp: int | None = None, dp: int | None = None) -> int:
        return RANK

    def engine_pid(self, dp_rank: int | None = None) -> int | None:
        return ENGINE

    def proc_state(self, pid: int) -> str | None:
        if self.broken:
            raise TargetError("docker top: engine not reachable")
        return self.procs[pid][0] if pid in self.procs else None

    def proc_start(self, pid: int) -> int | None:
        return self.procs[pid][1] if pid in self.procs else None

    def signal(self, pid: int, sig: int) -> None:
        self.sent.append((pid, sig))
        if pid not in self.procs:
            raise ProcessLookupError(pid)
        state, start = self.procs[pid]
        self.procs[pid] = ("T" if sig == signal.SIGSTOP else "R" if sig in (signal.SIGKILL, signal.SIGCONT) else state, start)

    def set(self, pid: int, state: str | None, start: int | None = None) -> None:
        if state is None:
            self.procs.pop(pid, None)
        else:
            self.procs[pid] = (state, start if start is not None else self.procs[pid][1])


def _frozen(t: Procs, tmp_path: Any) -> RankFreeze:
    from chaos.faults.ledger import Ledger

    f = RankFreeze(t, rank=1).using(Policy(ledger=Ledger(tmp_path), allow_destructive=True,  # type: ignore[arg-type]
                                           sleep=lambda s: None, verify_timeout_s=0.0))
    f.inject()
    assert t.procs[RANK][0] == "T" and not f.engine_died()
    return f


def test_the_engine_gone_and_its_rank_being_killed_is_a_death_whatever_the_ranks_state(tmp_path: Any) -> None:
    t = Procs()
    f = _frozen(t, tmp_path)
    t.set(RANK, "R")  # vLLM's kill_process_tree SIGKILLed it: R while the kernel tears it down
    assert not f.engine_died()  # the engine still there: not yet (nor proof of anything)
    t.set(ENGINE, None)
    assert f.engine_died()
    f.revert(check=False)  # what the recovery suite does then: no lapse, no error
    assert not f.injected


def test_the_rank_gone_a_zombie_or_its_pid_reused_is_a_death(tmp_path: Any) -> None:
    for change in (("Z", None), (None, None), ("S", 999)):
        t = Procs()
        f = _frozen(t, tmp_path)
        t.set(RANK, *change)
        assert f.engine_died(), change


def test_a_rank_running_again_under_a_live_engine_lapsed(tmp_path: Any) -> None:
    t = Procs()
    f = _frozen(t, tmp_path)
    t.set(RANK, "R")  # resumed by someone else: the engine never died of it
    assert not f.engine_died()
    with pytest.raises(FaultNotEffective, match="not T"):
        f.revert(check=True)


def test_an_engine_that_cannot_be_asked_is_no_proof_of_death(tmp_path: Any) -> None:
    t = Procs()
    f = _frozen(t, tmp_path)
    t.broken = True
    assert not f.engine_died()


def test_without_an_engine_process_only_the_rank_tells(tmp_path: Any) -> None:
    t = Procs()
    t.engine_pid = lambda dp_rank=None: None  # type: ignore[method-assign]  # e.g. vLLM without an engine core
    f = _frozen(t, tmp_path)
    t.set(ENGINE, None)
    assert not f.engine_died()
    t.set(RANK, None)
    assert f.engine_died()
