"""The recovery suite over SSH against lab replicas whose image has no `ps`, `pgrep`, `pkill` or `kill`
(as the official vLLM image): environments/lab.yaml deployed with the simulator image minus those
binaries (built here, copied onto the GPU host's engine as the lab copies every image), then the
suite's restart, crash, engine-death and rank-freeze scenarios run as `make gameday-lab` runs them.

Over SSH the harness has no os.kill: it finds the replica's processes with the GPU host engine's
`docker top` and signals them from a helper container in that host's PID namespace
(chaos/targets/docker_procs.py); nothing inside the replica's container is needed for those. The
simulator's engine death is an admin fault, and its admin API answers only its own host's loopback:
it is planted (and undone) from inside the replica's container, with the image's python, from a
loopback source (chaos/faults/sim_exec.py); from here the same API stays refused.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest

from chaos.pytest_plugin import require_component
from tests._support import REPO, _image_reason
from tests.integration.targets.test_docker_noprocps import GONE, SCENARIOS, build_stripped
from tests.standins.lab.test_lab_staging import LAB_ENV, SIM_IMAGE, _lab_env

STRIPPED = "llm-chaos-sim-noprocps:lab"


def _outcomes(out: str) -> dict[str, str]:
    """test id -> PASSED/FAILED/SKIPPED/ERROR from a `pytest -v` run's lines."""
    return {m[1]: m[2] for m in re.finditer(r"^\S*::(\S+) (PASSED|FAILED|SKIPPED|ERROR)", out, re.M)}


def test_recovery_suite_over_ssh_on_replicas_without_ps_or_kill(lab_ssh, tmp_path) -> None:
    from chaos.bridge.lab import deploy, undeploy
    from chaos.faults import engine_death
    from chaos.faults.base import Policy
    from chaos.faults.ledger import Ledger
    from chaos.targets import admin_token, make_target

    require_component("docker", _image_reason(SIM_IMAGE))
    image = build_stripped(SIM_IMAGE, STRIPPED)
    env, path = _lab_env(tmp_path, LAB_ENV.read_text().replace(f"image: {SIM_IMAGE}", f"image: {image}"))
    assert {t.image for t in env.targets} == {image}
    t0 = time.monotonic()
    try:
        deploy(lab_ssh, env)  # copies the stripped image onto the GPU host's engine, starts the replicas over SSH
        deployed_s = time.monotonic() - t0
        for cfg in env.targets:  # the containers on the GPU host really lack them (asked over SSH)
            t = make_target(cfg, run_id="lab-noprocps", state_dir=env.state_dir, env=env)
            assert t.remote and t.container.image.tags == [image], t.container.image.tags
            for b in GONE:
                rc, out = t.exec([b, "--version"])
                assert rc != 0, (cfg.name, b, out)
        run_env = {k: v for k, v in os.environ.items() if k != "CHAOS_REQUIRE"}  # a skip inside is an outcome here
        run_env["CHAOS_SSH_CONFIG"] = str(lab_ssh.ssh_config)
        t1 = time.monotonic()
        r = subprocess.run([sys.executable, "-m", "pytest", "suites/recovery", "--env", str(path), "-k", SCENARIOS,
                            "--allow-destructive", "-p", "no:cacheprovider", "-v", "-rs"], cwd=REPO,
                           capture_output=True, text=True, timeout=420, env=run_env)
        out = r.stdout + r.stderr
        got = _outcomes(r.stdout)
        print(f"deploy {deployed_s:.0f} s, suite {time.monotonic() - t1:.0f} s: {got}")
        want = {f"test_replica_recovers[{k}-steady-users-replica-a]": "PASSED"
                for k in ("gpu-driver-reset", "crash-sigkill", "engine-death-exit0", "nccl-rank-freeze")}
        assert r.returncode == 0 and {k: got.get(k) for k in want} == want, out[-5000:]
        assert len(got) == 4, got  # nothing else selected: the canary replica-c is not marked for these faults
        plan = [line.split() for line in r.stdout.splitlines() if line.startswith("recovery ")]
        assert ["recovery", "NCCL", "rank", "freeze", "on", "replica-a", "(TP", "2)", "run"] in \
            [row[:9] for row in plan], plan  # the plan names the target the run hurt
        assert any(row[1:8] == ["engine", "death", "(exit", "0)", "on", "replica-a", "run"] for row in plan), plan
        # the engine death went in through replica-a's container, and its undo step goes the same way
        deaths = [rec for rec in Ledger(env.state_dir).records()
                  if rec.get("op") == "inject" and rec["fault"]["kind"] == "sim-engine-death"]
        assert [d["undo"][0]["kind"] for d in deaths] == ["container_http"] and \
            deaths[0]["undo"][0]["container"] == "lab-replica-a", deaths
        assert Ledger(env.state_dir).outstanding() == []
        # while from here, the simulator's admin API stays what it was: loopback-only
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(urllib.request.Request(
                f"http://{env.target('replica-a').host}:{env.target('replica-a').port}/admin/faults",
                headers=admin_token(env.state_dir).header()), timeout=5)
        assert refused.value.code == 403, refused.value
        # the engine kill real vLLM gets (SIGKILL of the engine process, found by docker top over SSH and
        # signalled from the helper container), on the simulator's engine: its main process
        t = make_target(env.target("replica-a"), run_id="lab-noprocps", state_dir=env.state_dir, env=env)
        main = t.engine_pid()
        policy = Policy(ledger=Ledger(tmp_path / f"ledger-{uuid.uuid4().hex[:6]}"), verify_timeout_s=10.0)
        with engine_death(t, "vllm", recover_timeout_s=60).using(policy) as f:
            assert main is not None and f.evidence["killed_engine_pid"] == main
        t.wait_healthy(60)
        assert t.engine_pid() not in (None, main) and policy.ledger.outstanding() == []
    finally:
        undeploy(lab_ssh, env)
