"""ProcessTarget against real local processes: policies, restarts, logs, pause, ranks, pidfile."""
from __future__ import annotations

import json
import os
import re
import signal
import time

import pytest

from chaos.env import Target as TargetConfig
from chaos.errors import TargetError
from chaos.shared import proc as _proc
from chaos.targets import make_target, sim_args
from chaos.targets.base import Target
from chaos.targets.process import ProcessTarget


def _wait(cond, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.05)


def test_start_health_logs_pidfile_and_stop_kills_the_group(make_proc):
    t = make_proc("--ranks", "2")
    assert isinstance(t, Target)
    t.start()
    t.wait_healthy(10)
    assert "listening" in t.logs(5)
    info = json.loads(t.pidfile.read_text())
    assert info["pid"] == t.pid() and info["owner"]["pid"] == os.getpid()
    _wait(lambda: len(t.rank_pids()) == 2)
    ranks = t.rank_pids()
    t.stop(5)
    assert not t.is_running() and not t.pidfile.exists()
    assert not any(_proc.alive(p) for p in ranks)


def _autogroup_nice(pid: int) -> int | None:
    """The nice of pid's autogroup; None when it has none (no kernel support, or the process sits
    in a CPU cgroup, a container's or CI's: the kernel then prints an empty file)."""
    try:  # "/autogroup-123 nice 5"
        text = open(f"/proc/{pid}/autogroup").read()
    except OSError:
        return None
    match = re.fullmatch(r"/autogroup-\d+ nice (-?\d+)\s*", text)
    return int(match.group(1)) if match else None


def test_nice_lowers_the_process_and_its_autogroup_and_survives_a_restart(make_proc):
    # with autogroups on, setsid() starts a new scheduling group: a plain nice would weigh nothing
    # against the other replicas' groups, only the group's own nice does
    t = make_proc(nice=7)
    t.start()
    t.wait_healthy(10)
    for _ in range(2):
        pid = t.pid()
        assert os.getpriority(os.PRIO_PROCESS, pid) == 7
        if _autogroup_nice(os.getpid()) is not None:
            assert _autogroup_nice(pid) == 7 and _autogroup_nice(os.getpid()) != 7
        t.kill(signal.SIGKILL)
        _wait(lambda pid=pid: t.pid() not in (None, pid) and t.is_running())
    assert os.getpriority(os.PRIO_PROCESS, os.getpid()) == 0


@pytest.mark.parametrize("policy,code,restarts", [("always", 0, True), ("on-failure", 0, False),
                                                   ("on-failure", 3, True), ("no", 3, False),
                                                   ("unless-stopped", 0, True)])
def test_restart_policies(make_proc, policy, code, restarts):
    t = make_proc("--exit-after", "0.3", str(code), policy=policy)
    t.start()
    if restarts:
        _wait(lambda: t.restart_count() >= 1)
        assert [e[1] for e in t.events][:3] == ["start", "exit", "start"]
    else:
        _wait(lambda: not t.is_running())
        time.sleep(0.3)
        assert t.restart_count() == 0
    assert ("exit", code) in [(e[1], e[2]) for e in t.events]


def test_unless_stopped_restarts_a_crash_but_not_a_stop(make_proc):
    """Docker's unless-stopped: a crash comes back, what the harness stopped stays stopped."""
    t = make_proc(policy="unless-stopped")
    t.start()
    t.wait_healthy(10)
    old = t.pid()
    t.kill(signal.SIGKILL)
    _wait(lambda: t.restart_count() == 1 and t.pid() not in (None, old))
    t.stop()
    time.sleep(0.5)  # five restart delays
    assert not t.is_running() and t.restart_count() == 1


def test_kill_is_restarted_by_supervisor_and_restart_counts(make_proc):
    t = make_proc()
    t.start()
    t.wait_healthy(10)
    old = t.pid()
    t.kill(signal.SIGKILL)
    _wait(lambda: t.restart_count() == 1 and t.pid() not in (None, old))
    t.wait_healthy(10)
    t.restart()
    assert t.restart_count() == 2
    t.wait_healthy(10)


def test_pause_resume_freezes_the_whole_group(make_proc):
    t = make_proc("--ranks", "2")
    t.start()
    t.wait_healthy(10)
    t.pause()
    try:
        _wait(t.paused, 3)
        assert not t.health()
    finally:
        t.resume()
    _wait(lambda: not t.paused(), 3)
    assert t.health()


def test_wait_healthy_names_the_target_and_shows_logs(make_proc):
    t = make_proc("--exit-after", "0.0", "1", policy="no")
    t.start()
    with pytest.raises(TargetError, match="target tiny: /health 200 not reached"):
        t.wait_healthy(0.5)


def test_make_target_builds_the_simulator_command(tmp_path):
    import chaos.env

    env = chaos.env.load("local")
    cfg = env.target("replica-a")
    t = make_target(cfg, run_id="r1", state_dir=tmp_path, env=env)
    assert isinstance(t, ProcessTarget)
    cmd = " ".join(t.command)
    assert "-m chaos.stack.sim" in cmd and "--tensor-parallel-size 2" in cmd
    assert "--tp-ports 18301" in cmd and "--tp-connect 127.0.0.1:18310" in cmd
    assert "--served-model-name sim-model" in cmd and "--collective-timeout 3" in cmd
    assert f"--request-log {tmp_path.resolve()}/replica-a.requests.jsonl" in cmd
    plain = TargetConfig(name="x", kind="process", port=1234, command=["echo", "hi"])
    assert make_target(plain, run_id="r", state_dir=tmp_path).command == ["echo", "hi"]
    assert "--port" in sim_args(cfg, run_id="r", state_dir=tmp_path)
