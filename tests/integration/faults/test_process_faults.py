"""Container/process and NCCL faults against real local processes, each proven and reverted."""
from __future__ import annotations

import os
import signal
import sys
import time

import pytest

from chaos.errors import FaultError, FaultNotEffective, SafetyError
from chaos.faults import kill, pause, rank_freeze, rank_kill, restart, stop
from chaos.shared import proc as _proc
from chaos.targets.process import ProcessTarget
from tests._support import free_port
from tests.integration.targets.conftest import TINY


@pytest.fixture
def target(tmp_path):
    made = []

    def make(*extra: str) -> ProcessTarget:
        port = free_port()
        t = ProcessTarget("tiny", [sys.executable, TINY, str(port), *extra], port=port, restart_delay_s=0.1,
                          state_dir=tmp_path / "state")
        made.append(t)
        t.start()
        t.wait_healthy(10)
        return t

    try:
        yield make
    finally:
        for t in made:
            t.stop(2)
            t.remove()


def _ranks(t: ProcessTarget, n: int) -> list[int]:
    deadline = time.monotonic() + 10
    while len(t.rank_pids()) < n:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    return t.rank_pids()


def test_rank_freeze_stops_exactly_one_rank_and_continues_it(target, policy):
    t = target("--ranks", "2")
    main, rank1 = _ranks(t, 2)
    with rank_freeze(t, rank=1).using(policy) as f:
        assert _proc.state(rank1) == "T"
        assert _proc.state(main) != "T"
        assert f.evidence["proc_state"] == "T"
        (rec,) = policy.ledger.outstanding()
        assert rec["undo"][0]["pid"] == rank1 and rec["undo"][0]["signal"] == "SIGCONT"
    assert _proc.state(rank1) != "T"
    assert policy.ledger.outstanding() == []


def test_rank_kill_kills_exactly_one_rank_and_revert_waits_for_the_restart(target, policy):
    t = target("--ranks", "3")
    main, rank1, rank2 = _ranks(t, 3)
    f = rank_kill(t, rank=1).using(policy)
    f.inject()
    assert f.evidence["killed_rank_pid"] == rank1
    assert _proc.state(rank1) in (None, "Z", "X")
    assert _proc.state(main) not in (None, "Z", "X") and _proc.state(rank2) not in (None, "Z", "X")
    (rec,) = policy.ledger.outstanding()
    assert rec["undo"] == []  # a dead rank is not continued: the replica's supervisor restarts the engine
    os.kill(main, signal.SIGKILL)  # the engine dies of its rank (the tiny server does not watch its ranks)
    f.revert()
    assert f.evidence["engine_restarted"] is True and t.restart_count() == 1 and t.health()
    assert policy.ledger.outstanding() == []


def test_rank_kill_says_when_the_engine_did_not_restart(target, tmp_path):
    from chaos.faults import Ledger, Policy

    t = target("--ranks", "2")
    _ranks(t, 2)
    f = rank_kill(t, rank=1).using(Policy(ledger=Ledger(tmp_path / "s"), verify_timeout_s=3.0, recover_timeout_s=0.5))
    f.inject()
    f.revert()
    assert f.evidence["engine_restarted"] is False and t.restart_count() == 0


def test_rank_kill_of_a_missing_rank_is_a_clear_error(target, policy):
    t = target()
    with pytest.raises(FaultError, match=r"no TP rank 2: ranks \[\d+\]"):
        rank_kill(t, rank=2).using(policy).inject()


def test_rank_freeze_of_a_missing_rank_is_a_clear_error(target, policy):
    t = target()
    with pytest.raises(FaultError, match=r"no TP rank 3: ranks \[\d+\] \(processes seen: \d+ "):
        rank_freeze(t, rank=3).using(policy).inject()


def test_pause_freezes_and_resumes(target, policy):
    t = target("--ranks", "2")
    _ranks(t, 2)
    with pause(t).using(policy):
        assert t.paused() and not t.health()
    assert not t.paused() and t.health()


def test_kill_proves_the_old_pid_died_and_revert_waits_for_health(target, policy):
    t = target()
    old = t.pid()
    f = kill(t).using(policy)
    f.inject()
    assert not _proc.alive(old)
    f.revert()
    assert t.health() and t.pid() != old
    assert f.describe()["times"]["revert_to_healthy_s"] >= 0


def test_restart_and_stop(target, policy):
    t = target()
    with restart(t).using(policy) as f:
        assert t.restart_count() == 1
        assert f.evidence["restart_count"] == 1
    with stop(t).using(policy):
        assert not t.is_running()
    assert t.is_running() and t.health()


def test_control_kill_aimed_at_a_process_that_ignores_the_signal_fails_loudly(target, policy):
    """SIGTERM at a server that ignores it: a silent no-op must raise FaultNotEffective."""
    t = target("--ignore-term")
    old = t.pid()
    with pytest.raises(FaultNotEffective, match="still alive after SIGTERM"):
        kill(t, signal.SIGTERM, recover_timeout_s=5).using(policy, verify_timeout_s=0.5).inject()
    assert t.pid() == old and t.health()


def test_destructive_refused_on_protected_unless_allowed(target, policy):
    t = target()
    with pytest.raises(SafetyError, match="protected"):
        kill(t).using(policy, protected=True).inject()
    assert t.restart_count() == 0
    plan = kill(t).using(policy, protected=True, allow_destructive=True, dry_run=True).inject()
    assert plan["dry_run"] and t.restart_count() == 0
    assert not policy.ledger.path.exists()


@pytest.fixture
def vllm_like(tmp_path):
    """A process tree titled like real vLLM's: the main serves /health; EngineCore and two TP workers."""
    port = free_port()
    tree = ("(exec -a VLLM::EngineCore sleep 120) & (exec -a VLLM::Worker_TP1 sleep 120) & "
            f"(exec -a VLLM::Worker_TP0 sleep 120) & exec {sys.executable} {TINY} {port}")
    t = ProcessTarget("vllm-like", ["bash", "-c", tree], port=port, restart_delay_s=0.1, state_dir=tmp_path / "state")
    t.start()
    t.wait_healthy(10)
    try:
        yield t
    finally:
        t.remove()


def _titled(t: ProcessTarget, title: str) -> int:
    deadline = time.monotonic() + 10
    while True:
        found = [pid for pid, cmd in t.processes() if cmd.split()[0] == title]
        if found:
            return found[0]
        assert time.monotonic() < deadline, t.processes()
        time.sleep(0.05)


def test_vllm_rank_1_is_worker_tp1_and_the_engine_is_enginecore(vllm_like, policy):
    tp0, tp1, engine = (_titled(vllm_like, n) for n in ("VLLM::Worker_TP0", "VLLM::Worker_TP1", "VLLM::EngineCore"))
    assert vllm_like.rank_pids() == [tp0, tp1] and vllm_like.engine_pid() == engine
    with rank_freeze(vllm_like, rank=1).using(policy):
        assert _proc.state(tp1) == "T" and _proc.state(tp0) != "T" and _proc.state(vllm_like.pid()) != "T"
    assert _proc.state(tp1) != "T"


def test_engine_death_kills_enginecore_only(vllm_like, policy):
    from chaos.faults import engine_death

    engine, main = _titled(vllm_like, "VLLM::EngineCore"), vllm_like.pid()
    f = engine_death(vllm_like, "vllm").using(policy)
    f.inject()
    assert f.evidence["killed_engine_pid"] == engine and not _proc.alive(engine)
    assert vllm_like.pid() == main  # the API server lives on (real vLLM exits 0 by itself at its next 5 s watchdog tick)
    f.revert()


def test_engine_death_needs_a_known_backend(vllm_like):
    from chaos.faults import engine_death

    with pytest.raises(FaultError, match="simulator or vLLM"):
        engine_death(vllm_like, "other")


def test_supervisor_reaps_what_the_dead_main_left_behind(vllm_like):
    """A killed vLLM API server leaves its workers behind: the supervisor kills them before it restarts."""
    left = [_titled(vllm_like, n) for n in ("VLLM::EngineCore", "VLLM::Worker_TP0", "VLLM::Worker_TP1")]
    os.kill(vllm_like.pid(), signal.SIGKILL)  # the main only, not its group
    deadline = time.monotonic() + 15
    while any(_proc.alive(p) for p in left) or vllm_like.restart_count() < 1:
        assert time.monotonic() < deadline, [(p, _proc.state(p)) for p in left]
        time.sleep(0.05)
    vllm_like.wait_healthy(10)
