"""DockerTarget and faults on a real local Docker engine (the base image runs a tiny server with fake ranks)."""
from __future__ import annotations

import signal
import time
import uuid
from pathlib import Path

import pytest

from chaos.faults import kill, pause, rank_freeze, restart
from chaos.faults.base import Policy
from chaos.faults.ledger import Ledger, cleanup
from chaos.shared import proc as _proc
from chaos.targets.docker import DockerTarget
from chaos.targets.docker_client import LABEL_RUN, LABEL_TARGET
from tests._support import free_port, require

pytestmark = pytest.mark.docker
IMAGE = "llm-chaos-base:bookworm"
TINY = Path(__file__).with_name("tinyserver.py").read_text()


@pytest.fixture
def target(tmp_path):
    require(f"image:{IMAGE}")
    port = free_port()
    run_id = uuid.uuid4().hex[:8]
    t = DockerTarget("dock", IMAGE, args=["python3", "-c", TINY, str(port), "--ranks", "2"], port=port,
                     run_id=run_id, state_dir=tmp_path, restart_policy="always", shm_size="64m", cpus=1.5,
                     env={"X": "1"})
    try:
        t.start()
        t.wait_healthy(30)
        yield t
    finally:
        t.remove()


@pytest.fixture
def policy(tmp_path) -> Policy:
    return Policy(ledger=Ledger(tmp_path / "ledger"), verify_timeout_s=5.0)


def _ranks(t: DockerTarget) -> list[int]:
    deadline = time.monotonic() + 10
    while len(t.rank_pids()) < 2:
        assert time.monotonic() < deadline, t.rank_pids()
        time.sleep(0.1)
    return t.rank_pids()


def test_labels_policy_host_network_env_and_exec(target):
    c = target.container
    assert c.labels[LABEL_RUN] == target.run_id and c.labels[LABEL_TARGET] == "dock"
    hc = c.attrs["HostConfig"]
    assert hc["RestartPolicy"]["Name"] == "always" and hc["NetworkMode"] == "host" and hc["ShmSize"] == 64 * 2**20
    assert hc["NanoCpus"] == 1_500_000_000  # `cpus: 1.5`, a CFS quota of 150 ms in every 100 ms
    rc, out = target.exec(["python3", "-c", "import os; print(os.environ['X'])"])
    assert (rc, out.strip()) == (0, "1")
    assert "listening" in target.logs(5)


def test_exec_into_a_rank_and_freeze_it(target, policy):
    main, rank1 = _ranks(target)
    assert "chaos-sim-rank1" in _proc.cmdline(rank1)
    rc, out = target.exec(["sh", "-c", "cat /proc/[0-9]*/cmdline | tr '\\0' ' '"])
    assert rc == 0 and "chaos-sim-rank1" in out
    with rank_freeze(target, rank=1).using(policy):
        assert target.proc_state(rank1) == "T"
    assert target.proc_state(rank1) != "T"


def test_pause_fault_and_cleanup_unpauses_a_container(target, policy):
    f = pause(target).using(policy)
    f.inject()
    assert target.container.status == "paused" and not target.health()
    assert any("unpause" in line for line in cleanup(policy.ledger.state_dir))
    assert target.container.status == "running"
    f.revert(check=False)
    target.wait_healthy(10)


def test_restart_and_kill_faults_bring_a_new_process_that_answers(target, policy):
    with restart(target, recover_timeout_s=30).using(policy) as f:
        assert f.evidence["restart_count"] == 1
    old = target.pid()
    k = kill(target, signal.SIGKILL, recover_timeout_s=30).using(policy)
    k.inject()
    k.revert()
    assert target.pid() != old and target.health()
    assert target.container.attrs["RestartCount"] >= 1
    # Docker zeroes RestartCount on a manual restart; a second restart fault must still see a rise
    n = target.restart_count()
    with restart(target, recover_timeout_s=30).using(policy) as f2:
        assert f2.evidence["restart_count"] == n + 1


def test_simulator_image_ranks_and_freeze(tmp_path, policy):
    """The image built offline from docker/: `chaos sim` with TP 2, rank 1 found via docker top and frozen."""
    require("image:llm-chaos-sim:latest")
    from chaos.env import SimulatorOptions
    from chaos.env import Target as TargetConfig
    from chaos.targets import make_target

    cfg = TargetConfig(name="simd", kind="docker", image="llm-chaos-sim:latest", port=free_port(), tp_size=2,
                       rank_ports=[free_port()], simulator=SimulatorOptions(collective_timeout_s=30))
    t = make_target(cfg, run_id=uuid.uuid4().hex[:8], state_dir=tmp_path)
    try:
        t.start()
        t.wait_healthy(60)
        main, rank1 = _ranks(t)
        assert "chaos-sim-rank" in _proc.cmdline(rank1) and "chaos sim" in _proc.cmdline(main)
        rc, out = t.exec(["cat", "/proc/1/cmdline"])
        assert rc == 0
        with rank_freeze(t, rank=1).using(policy):
            assert t.proc_state(rank1) == "T"
        assert t.proc_state(rank1) != "T" and t.health()
    finally:
        t.remove()
