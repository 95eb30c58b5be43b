"""Faults on a replica whose image has no `ps`, `pgrep`, `pkill` or `kill` (as the official vLLM image):
processes found with the engine's `docker top` and signalled from the host's side (docker_procs).

The image is built here from the simulator image with those binaries removed. Each test runs once with
the local engine's path (os.kill of the host pid) and once with the remote engine's (the helper
container in the host's PID namespace, the lab's path over SSH), forced by `remote`.
"""
from __future__ import annotations

import io
import signal
import uuid
from collections.abc import Iterator

import pytest

from chaos.errors import FaultError, TargetError
from chaos.faults import engine_death, kill, rank_freeze, restart
from chaos.faults.base import Policy
from chaos.faults.ledger import Ledger, cleanup
from chaos.targets import docker_procs
from chaos.targets.docker import DockerTarget
from tests._support import free_port, require

pytestmark = pytest.mark.docker
SIM = "llm-chaos-sim:latest"
STRIPPED = "llm-chaos-sim-noprocps:test"
GONE = ("ps", "pgrep", "pkill", "kill")


def build_stripped(base: str, tag: str) -> str:
    """`base` without procps (its package purged where dpkg has it: ps, pgrep, pkill, /bin/kill, top...),
    busybox or any ps, pgrep, pkill or kill binary left on PATH (offline: FROM a local image). The shell's
    builtin `kill` stays: it reaches only the container's own PID namespace, and the harness never execs
    into a replica (it signals from the host's side, docker_procs)."""
    import docker

    names = (*GONE, "busybox")
    rm = " ".join(f"{d}/{b}" for b in names for d in ("/usr/bin", "/bin", "/usr/sbin", "/sbin", "/usr/local/bin"))
    # the check walks every PATH directory for every name: `command -v a b` in dash looks at `a` only
    check = (f"for b in {' '.join(names)}; do for d in $(echo \"$PATH\" | tr : ' ') /bin /sbin; do "
             f"test ! -e \"$d/$b\" || {{ echo \"$d/$b is still there\" >&2; exit 1; }}; done; done")
    dockerfile = (f"FROM {base}\nUSER 0\n"
                  f"RUN if dpkg -s procps >/dev/null 2>&1; then dpkg --purge --force-depends procps; fi "
                  f"&& rm -f {rm} && {check}\n")
    client = docker.from_env()
    user = client.images.get(base).attrs["Config"].get("User")
    dockerfile += f"USER {user}\n" if user else ""  # the base's own user again
    client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, rm=True, pull=False)
    return tag


@pytest.fixture(scope="module")
def stripped() -> str:
    require(f"image:{SIM}")
    return build_stripped(SIM, STRIPPED)


@pytest.fixture(params=["local-engine", "remote-engine"])
def target(request, stripped, tmp_path) -> Iterator[DockerTarget]:
    from chaos.env import SimulatorOptions
    from chaos.env import Target as TargetConfig
    from chaos.targets import make_target

    cfg = TargetConfig(name="bare", kind="docker", image=stripped, port=free_port(), tp_size=2,
                       rank_ports=[free_port()], simulator=SimulatorOptions(collective_timeout_s=30))
    t = make_target(cfg, run_id=uuid.uuid4().hex[:8], state_dir=tmp_path)
    assert isinstance(t, DockerTarget)
    t.remote = request.param == "remote-engine"
    try:
        t.start()
        t.wait_healthy(60)
        yield t
    finally:
        t.remove()


@pytest.fixture
def policy(tmp_path) -> Policy:
    return Policy(ledger=Ledger(tmp_path / "ledger"), verify_timeout_s=10.0)


def _ranks(t: DockerTarget) -> list[int]:
    import time

    deadline = time.monotonic() + 20
    while len(t.rank_pids()) < 2:
        assert time.monotonic() < deadline, t.processes()
        time.sleep(0.2)
    return t.rank_pids()


def test_the_image_really_lacks_the_binaries(target):
    for b in GONE:
        rc, out = target.exec([b, "--version"])
        assert rc != 0, (b, out)
    with pytest.raises(TargetError, match=rf"`ps -eo pid=,args=` in container {target.container_name} exited"):
        target.exec_checked(["ps", "-eo", "pid=,args="])


def test_rank_freeze_stops_rank_1_and_its_ledger_step_continues_it(target, policy):
    main, rank1 = _ranks(target)
    assert target.engine_pid() == main
    with rank_freeze(target, tp_rank=1).using(policy) as f:
        assert target.proc_state(rank1) == "T" and f.evidence["proc_state"] == "T"
        (rec,) = policy.ledger.outstanding()
        (step,) = rec["undo"]
        assert step["kind"] == "docker_signal" and step["pid"] == rank1 and step["start"] == target.proc_start(rank1)
    assert target.proc_state(rank1) in ("S", "R")
    # a harness that died mid-fault: `chaos cleanup` replays the ledger's step alone
    f2 = rank_freeze(target, tp_rank=1).using(policy)
    f2.inject()
    assert target.proc_state(rank1) == "T"
    done = cleanup(policy.ledger.state_dir, force=True)
    assert any(f"SIGCONT to host pid {rank1}" in line for line in done), done
    assert target.proc_state(rank1) in ("S", "R")
    # a step whose process is not the one recorded (same pid, other start) is left alone
    target.signal(rank1, signal.SIGSTOP)
    try:
        stale = dict(step, start=step["start"] - 100)
        assert "gone; no SIGCONT needed" in docker_procs.replay(stale) and target.proc_state(rank1) == "T"
    finally:
        target.signal(rank1, signal.SIGCONT)


def test_an_unknown_rank_is_refused_with_what_was_seen(target, policy):
    _ranks(target)
    with pytest.raises(FaultError, match="no TP rank 5"):
        rank_freeze(target, rank=5).using(policy).inject()


def test_kill_and_restart_bring_the_replica_back(target, policy):
    with kill(target, recover_timeout_s=60).using(policy) as f:
        assert f.evidence["killed_pid"]
    assert target.health()
    n = target.restart_count()
    with restart(target, recover_timeout_s=60).using(policy) as f:
        assert f.evidence["restart_count"] > n
    target.wait_healthy(60)


def test_engine_death_kills_the_engine_found_by_docker_top(target, policy):
    """EngineKill (the vLLM fault) aimed at the simulator's engine: the main process, SIGKILLed from the host."""
    main, _ = _ranks(target)
    with engine_death(target, "vllm", recover_timeout_s=60).using(policy) as f:
        assert f.evidence["killed_engine_pid"] == main
    target.wait_healthy(60)
    assert policy.ledger.outstanding() == []


def test_the_simulator_s_admin_faults_can_be_planted_and_undone_from_inside_its_container(target, policy, tmp_path):
    """The path a simulator on another host takes (its admin API answers only its host's loopback): the
    call made in the replica's container, token in the exec's environment, ledgered and undone the same
    way; `chaos cleanup` replays that step alone. The stripped image keeps python, as the simulator needs it."""
    from chaos.faults import sim_fault
    from chaos.targets import admin_token

    url, token = f"http://{target.host}:{target.port}", admin_token(tmp_path)
    with sim_fault(url, token, "slow", factor=3.0, via=target).using(policy) as f:
        assert f.evidence["active_modes"] == ["slow"]
        (rec,) = policy.ledger.outstanding()
        assert rec["undo"] == [{"kind": "container_http", "container": target.container_name, "docker_host": None,
                                "method": "DELETE", "url": f"{url}/admin/faults/slow", "auth": {"file": token.file}}]
        assert token.value() not in str(rec)
    assert f._active_modes() == set() and policy.ledger.outstanding() == []
    sim_fault(url, token, "slow", factor=3.0, via=target).using(policy).inject()  # a harness that died mid-fault
    done = cleanup(policy.ledger.state_dir, force=True)
    assert any(f"DELETE {url}/admin/faults/slow from inside container {target.container_name} -> 200" in line
               for line in done), done
    assert f._active_modes() == set()
    with pytest.raises(FaultError, match=r"-> 401"):  # the token really is checked on that path
        sim_fault(url, "wrong", "slow", via=target).using(policy).inject()


def test_the_simulator_s_engine_death_from_inside_its_container(target, policy, tmp_path):
    """engine_death on a simulator target on another host (forced here: the target serves on this host's
    loopback): the engine dies, the container brings the replica back, the ledger is clean."""
    from chaos.faults.sim_admin import SimFault
    from chaos.targets import admin_token

    main, _ = _ranks(target)
    url = f"http://{target.host}:{target.port}"
    f = engine_death(target, "simulator", sim_url=url, token=admin_token(tmp_path))
    assert isinstance(f, SimFault) and f.via is None  # this host's loopback: straight from here
    f.via, n = target, target.restart_count()
    with f.using(policy):
        assert f.evidence  # proven: listed active, or the admin API went with the process
    import time

    deadline = time.monotonic() + 60
    while target.restart_count() == n:  # the API server exits after its engine, `always` starts it again
        assert time.monotonic() < deadline, target.logs(20)
        time.sleep(0.2)
    target.wait_healthy(60)
    assert target.engine_pid() not in (None, main) and policy.ledger.outstanding() == []


SCENARIOS = "steady-users and (gpu-driver-reset or crash-sigkill or engine-death or rank-freeze)"


def test_recovery_suite_passes_on_replicas_without_ps_or_kill(stripped, tmp_path):
    """The recovery suite's restart, crash, engine-death and rank-freeze scenarios against a copy of
    environments/local-docker.yaml (free ports) whose replicas run the stripped image."""
    import os
    import subprocess
    import sys

    import yaml

    from tests._support import REPO
    from tests.standins.stack.stack_env import write_env

    path = write_env(tmp_path, docker=True)
    doc = yaml.safe_load(path.read_text())
    for t in doc["targets"]:
        t["image"] = stripped
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    env = {k: v for k, v in os.environ.items() if k != "CHAOS_REQUIRE"}  # a skip inside is an outcome here
    r = subprocess.run([sys.executable, "-m", "pytest", "suites/recovery", "--env", str(path), "-k", SCENARIOS,
                        "-p", "no:cacheprovider", "-rs", "-q"], cwd=REPO, capture_output=True, text=True,
                       timeout=540, env=env)
    assert r.returncode == 0 and "4 passed" in r.stdout, r.stdout[-4000:] + r.stderr[-2000:]
