"""local-docker: the embedded stack with simulator replicas as containers (host network) on the local engine."""
from __future__ import annotations

import json
import signal
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from chaos.bridge import EmbeddedStack
from chaos.env import load
from chaos.faults import restart
from chaos.faults.base import Policy
from chaos.faults.ledger import Ledger, cleanup
from chaos.observe.completion import completion_ok
from chaos.targets.docker_client import LABEL_RUN, LABEL_STATE, LABEL_TARGET
from tests._support import require
from tests.standins.stack.stack_env import (
    cleanup_cli,
    env_ports,
    kill_stack_processes,
    listening_inodes,
    proc_state,
    stack_processes,
    start_harness,
    write_env,
)

IMAGE = "llm-chaos-sim:latest"
pytestmark = pytest.mark.docker


def _containers(client: Any, **labels: str) -> list[Any]:
    return client.containers.list(all=True, filters={"label": [f"{k}={v}" for k, v in labels.items()]})


@pytest.fixture
def docker_env(tmp_path: Path) -> Iterator[tuple[Any, Any]]:
    """(Environment, docker client); afterwards every container labelled with this state dir is removed."""
    require("toxiproxy")
    require("docker")
    require(f"image:{IMAGE}")
    import docker

    env = load(str(write_env(tmp_path, docker=True)))
    client = docker.from_env(timeout=60)
    try:
        yield env, client
    finally:
        for c in _containers(client, **{LABEL_STATE: str(Path(env.state_dir).resolve())}):
            c.remove(force=True)
        client.close()


def _complete(api: str, model: str) -> dict[str, Any]:
    body = json.dumps({"model": model, "prompt": "through the gateway", "max_tokens": 4}).encode()
    req = urllib.request.Request(f"{api}/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def test_docker_replicas_serve_survive_a_restart_and_down_removes_them(docker_env: tuple[Any, Any]) -> None:
    env, client = docker_env
    names = {t.name: t.container_name for t in env.targets}
    stack = EmbeddedStack(env)
    try:
        stack.up(90)
        mine = _containers(client, **{LABEL_RUN: stack.run_id})
        assert {c.name for c in mine} == set(names.values())
        assert all(c.status == "running" for c in mine)
        assert {c.labels[LABEL_TARGET] for c in mine} == set(names)

        answer = _complete(env.endpoints.gateway_admin, env.endpoints.model)  # the gateway itself, no proxy
        assert answer["choices"][0]["text"], answer
        assert completion_ok(env.endpoints.api, env.endpoints.model)  # and through the client proxy
        replica = stack.target("replica-a")
        assert len(replica.rank_pids()) == 2  # TP 2: engine + one rank worker, as host pids

        policy = Policy.for_env(env, verify_timeout_s=30.0)
        before = replica.restart_count()
        old_pid = replica.pid()
        fault = restart(replica, recover_timeout_s=60.0).using(policy)
        fault.inject()
        fault.revert()
        assert fault.evidence["restart_count"] > before
        assert replica.pid() != old_pid
        assert Ledger(env.state_dir).outstanding() == []
        replica.wait_healthy(60)  # the restart's proof is its count; coming back is the replica's own business
        stack.wait_serving(60)
        assert _complete(env.endpoints.gateway_admin, env.endpoints.model)["choices"]
    finally:
        stack.down()
    assert _containers(client, **{LABEL_RUN: stack.run_id}) == []
    assert _containers(client, **{LABEL_STATE: str(Path(env.state_dir).resolve())}) == []
    assert stack_processes(str(Path(env.state_dir).parent), env_ports(env)) == {}
    assert listening_inodes(env_ports(env)) == set()


@pytest.mark.slow
def test_sigkilled_docker_run_is_put_right_by_chaos_cleanup(docker_env: tuple[Any, Any], tmp_path: Path) -> None:
    """The harness (stack up, rank freeze, latency toxic) SIGKILLed: cleanup unfreezes and removes the containers."""
    env, client = docker_env
    env_file = next(tmp_path.glob("stacktest-*.yaml"))
    proc, info = start_harness(env_file, tmp_path)
    try:
        assert proc_state(info["frozen_pid"]) == "T"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert {c.name for c in _containers(client, **{LABEL_RUN: info["run_id"]})}, "containers died with the harness"

        out = cleanup_cli(env_file).stdout
        assert _containers(client, **{LABEL_RUN: info["run_id"]}) == [], out
        assert "removed orphan container" in out and "SIGCONT" in out, out
        assert proc_state(info["frozen_pid"]) in (None, "Z")
        assert stack_processes(str(tmp_path), env_ports(env)) == {}
        again = cleanup_cli(env_file)
        assert again.stdout.strip().splitlines() == ["chaos: cleanup: 0 action(s)"], again.stdout
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        cleanup(env, force=True)
        kill_stack_processes(str(tmp_path), env_ports(env))
