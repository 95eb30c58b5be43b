"""Container/process and NCCL faults against real local processes, each proven and reverted."""
from __future__ import annotations

import signal
import sys
import time

import pytest

from chaos.errors import FaultError, FaultNotEffective, SafetyError
from chaos.faults import kill, pause, rank_freeze, restart, stop
from chaos.targets import _proc
from chaos.targets.process import ProcessTarget
from tests._support import free_port
from tests.targets.conftest import TINY


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


def test_rank_freeze_of_a_missing_rank_is_a_clear_error(target, policy):
    t = target()
    with pytest.raises(FaultError, match="no rank 3"):
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
