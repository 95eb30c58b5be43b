"""Real vLLM on an image with no `ps`, `pgrep`, `pkill` or `kill` (as the official vllm/vllm-openai): the
recovery suite's restart, crash, engine-death and rank-freeze scenarios against a copy of
environments/local-vllm-docker.yaml (free ports; the canary left out to spare 2 cores and 5 GB) whose
replicas run the llm-chaos-vllm image (`make vllm-image`) with procps purged, built here.

The harness finds VLLM::EngineCore and VLLM::Worker_TP1 of the TP 2 replica with the engine's
`docker top` and signals their host pids from the host's side (chaos/targets/docker_procs.py); Docker's
own events show nothing was run inside a replica (no `docker exec`), so the shell's builtin `kill`,
which the image keeps, is not what did it.

Three runs of the suite, each a stack of its own, so none holds the machine 10 minutes: the rank freeze
(VLLM::Worker_TP1 found and SIGSTOPped; meant for the vLLM lane once green), the engine death (VLLM::EngineCore
SIGKILLed) and the container faults (the GPU-driver-reset stand-in, the crash of the container's init).
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import yaml

from chaos.pytest_plugin import require_component
from tests._support import REPO, _image_reason, stop_process
from tests._vllm import require_vllm
from tests.integration.targets.test_docker_noprocps import GONE, build_stripped
from tests.standins.stack.stack_env import free_ports

pytestmark = pytest.mark.docker
VLLM_IMAGE = "llm-chaos-vllm:latest"
STRIPPED = "llm-chaos-vllm-noprocps:test"
# a stack of its own each (its start: two vLLM cold starts at once)
GROUPS = {"rank-freeze": ("nccl-rank-freeze",), "engine-death": ("engine-death-exit0",),
          "restart-and-crash": ("gpu-driver-reset", "crash-sigkill")}


@pytest.fixture(scope="module")
def stripped() -> str:
    require_vllm()
    reason = _image_reason(VLLM_IMAGE)
    require_component("vllm-image", reason and reason.replace("scripts/build-image.sh", "make vllm-image"))
    return build_stripped(VLLM_IMAGE, STRIPPED)


def _env_copy(tmp_path: Path, image: str) -> Path:
    """environments/local-vllm-docker.yaml on free ports, its replicas on `image`, without the canary."""
    text = (REPO / "environments" / "local-vllm-docker.yaml").read_text()
    used = sorted({int(p) for p in re.findall(r"(?:127\.0\.0\.1:|port: )(\d{5})\b", text)})
    ports = dict(zip(used, free_ports(len(used)), strict=True))
    text = re.sub(r"\b(\d{5})\b", lambda m: str(ports.get(int(m[1]), m[1])), text)
    doc = yaml.safe_load(text)
    drop = {t["name"] for t in doc["targets"] if t.get("pool") == "canary"}
    doc["targets"] = [dict(t, image=image) for t in doc["targets"] if t["name"] not in drop]
    doc["toxiproxy"]["proxies"] = [p for p in doc["toxiproxy"]["proxies"] if p["name"] not in drop]
    doc["fault_proxies"] = [p for p in doc["fault_proxies"] if p["name"] not in drop]
    doc["name"] = f"vllm-noprocps-{uuid.uuid4().hex[:6]}"
    doc["state_dir"] = str(tmp_path / "state")
    doc.pop("baseline_file", None)
    path = tmp_path / f"{doc['name']}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _run_suite(env_file: Path, args: list[str], env: dict[str, str], log: Path, timeout_s: float) -> tuple[int, str]:
    """Run a suite against `env_file` with its output in `log`. Past `timeout_s` it gets SIGTERM, which the
    harness answers as a cancelled CI job's: the fault reverted, the stack taken down (a SIGKILL would leave
    two vLLM containers, the gateway and Toxiproxy running); `chaos cleanup` is the backstop either way."""
    with open(log, "wb") as f:
        # its scenarios' evidence (summary, timeline, records) kept beside the log, to read after a failure
        proc = subprocess.Popen([sys.executable, "-m", "pytest", *args, "--env", str(env_file), "--allow-destructive",
                                 "-p", "no:cacheprovider", "-v", "-rs", "--basetemp", str(log.parent / "suite-tmp")],
                                cwd=REPO, stdout=f, stderr=subprocess.STDOUT,
                                env=env)
        try:
            rc = proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_process(proc, grace_s=90)
            rc = -1
        finally:
            subprocess.run([sys.executable, "-m", "chaos.cli", "cleanup", "--env", str(env_file)], cwd=REPO,
                           capture_output=True, timeout=180, env=env)
    out = log.read_text(errors="replace")
    return rc, out + (f"\n[still running after {timeout_s:.0f} s: stopped with SIGTERM]" if rc == -1 else "")


def _outcomes(out: str) -> dict[str, str]:
    """test id -> PASSED/FAILED/SKIPPED/ERROR from a `pytest -v` run's lines."""
    return {m[1]: m[2] for m in re.finditer(r"^\S*::(\S+) (PASSED|FAILED|SKIPPED|ERROR)", out, re.M)}


def _replica_events(since: float, image: str) -> list[str]:
    """Docker's container events since `since` for containers of `image`: 'action name' each."""
    import docker

    client = docker.from_env()
    try:
        events = client.events(since=int(since), until=int(time.time()) + 1, decode=True,
                               filters={"type": "container"})
        attrs = [(e.get("Action") or e.get("status") or "", e.get("Actor", {}).get("Attributes", {})) for e in events]
    finally:
        client.close()
    return [f"{action} {a.get('name')}" for action, a in attrs if a.get("image") == image]


def test_the_vllm_image_really_lacks_the_binaries(stripped):
    import docker

    client = docker.from_env()
    try:
        for b in (*GONE, "busybox"):
            c = client.containers.create(stripped, [b, "--version"], entrypoint=[], network_mode="none")
            try:
                with pytest.raises(docker.errors.APIError, match="not found"):  # the runtime finds nothing to start
                    c.start()
            finally:
                c.remove(force=True)
        out = client.containers.run(stripped, ["sh", "-c", "dpkg -s procps || echo purged"], entrypoint=[],
                                    remove=True, network_mode="none").decode()
        assert out.strip().endswith("purged"), out
    finally:
        client.close()


@pytest.mark.parametrize("group", list(GROUPS))
def test_recovery_suite_on_real_vllm_without_ps_or_kill(stripped, tmp_path, group):
    path = _env_copy(tmp_path, stripped)
    kinds = GROUPS[group]
    env = {k: v for k, v in os.environ.items() if k != "CHAOS_REQUIRE"}  # a skip inside is an outcome here
    t0 = time.time()
    rc, out = _run_suite(path, ["suites/recovery", "-k", f"steady-users and ({' or '.join(kinds)})"], env,
                         tmp_path / "suite.log", timeout_s=570)
    got = _outcomes(out)
    print(f"{group}: suite {time.time() - t0:.0f} s: {got}")
    want = {f"test_replica_recovers[{k}-steady-users-replica-a]": "PASSED" for k in kinds}
    assert rc == 0 and got == want, f"{out[-5000:]}\n[evidence: {tmp_path / 'suite-tmp'}]"
    if "nccl-rank-freeze" in kinds:  # the plan names the TP 2 target the rank freeze hurt
        plan = [line.split() for line in out.splitlines() if line.startswith("recovery ")]
        assert ["recovery", "NCCL", "rank", "freeze", "on", "replica-a", "(TP", "2)", "run"] in \
            [row[:9] for row in plan], plan
    events = _replica_events(t0, stripped)
    assert any(e.startswith("die ") for e in events), events  # the query sees the replicas' faults
    assert not [e for e in events if e.startswith("exec_")], events  # and nothing run inside them
