"""What a container says about itself (`docker inspect`): parsed from recorded inspect output of real
containers (tests/integration/targets/data, Docker 20.10), chosen against the file (the file overrides), and read
from a real container by `chaos env check`."""
from __future__ import annotations

import json
import uuid
from pathlib import Path

from chaos.env import hurt
from chaos.env import parse as parse_env
from chaos.experiment import suite_budgets as budgets
from chaos.targets.container_facts import apply, parse, settings
from tests._support import require
from tests.integration.cli.test_cli import chaos

DATA = Path(__file__).parent / "data"
SIM_IMAGE = "llm-chaos-sim:latest"


def _recorded(name: str) -> dict:
    return json.loads((DATA / name).read_text())[0]


def test_a_vllm_container_s_timeout_policy_gpus_and_tp_are_read_and_secrets_are_not() -> None:
    # docker create --restart unless-stopped --gpus '"device=2,3"' -e VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS=45
    #   -e VLLM_API_KEY=... -e HF_TOKEN=... -e CUDA_VISIBLE_DEVICES=0,1 ... --tensor-parallel-size 2
    f = parse(_recorded("inspect-vllm-tp2.json"), "ssh://deploy@gpu-1")
    assert f.container.startswith("i30t-inspect-") and f.engine == "ssh://deploy@gpu-1" and f.status == "created"
    assert (f.restart_policy, f.max_retries) == ("unless-stopped", 0)
    assert f.gpus == "device=2,3" and f.tp_size == 2 and f.execute_model_timeout_s == 45.0
    assert f.variables == {"CUDA_VISIBLE_DEVICES": "0,1", "VLLM_API_KEY": "(set)",
                           "VLLM_ENGINE_ITERATION_TIMEOUT_S": "120", "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "45"}
    assert "secret" not in repr(f)  # neither the API key's nor HF_TOKEN's value is kept


def test_all_gpus_a_retry_limit_and_the_short_tp_flag() -> None:
    f = parse(_recorded("inspect-gpus-all.json"))  # --restart on-failure:3 --gpus all ... serve m -tp=4
    assert (f.restart_policy, f.max_retries, f.gpus, f.tp_size) == ("on-failure", 3, "all", 4)
    assert f.variables == {"NVIDIA_VISIBLE_DEVICES": "all"} and f.execute_model_timeout_s is None
    bare = parse(_recorded("inspect-sim-default.json"))  # docker create IMAGE: Docker's default policy
    assert (bare.restart_policy, bare.gpus, bare.tp_size, bare.variables) == ("no", None, None, {})
    assert (bare.cpus, bare.cpuset) == (None, None)
    quota = parse({**bare_attrs(), "HostConfig": {"CpuQuota": 150000, "CpuPeriod": 100000, "CpusetCpus": "0,1"}})
    assert (quota.cpus, quota.cpuset) == (1.5, "0,1")  # `--cpu-quota 150000 --cpuset-cpus 0,1`
    assert parse({**bare_attrs(), "HostConfig": {"NanoCpus": 2_500_000_000}}).cpus == 2.5  # `--cpus 2.5`


def bare_attrs() -> dict:
    return _recorded("inspect-sim-default.json")


def _env(tmp_path: Path, target: str):
    p = tmp_path / "e.yaml"
    p.write_text("name: e\nendpoints: {api: 'http://127.0.0.1:9'}\ntargets:\n"
                 "  - {name: gpu-1, kind: docker, image: vllm/vllm-openai, port: 8000, container_name: vllm-gpu-1}\n"
                 f"  - {target}\n")
    return parse_env(p.read_text(), p, {})


def test_the_container_s_values_are_used_where_the_file_sets_none_and_the_file_overrides(tmp_path) -> None:
    env = _env(tmp_path, "{name: gpu-2, kind: docker, image: vllm/vllm-openai, port: 8000, container_name: c, "
                         "restart_policy: always, vllm: {execute_model_timeout_s: 90}}")
    one, two = env.target("gpu-1"), env.target("gpu-2")
    facts = parse(_recorded("inspect-vllm-tp2.json"))
    assert budgets.engine_timeout(one) == (300.0, "vLLM's default execute-model timeout 300")  # before it is read
    assert hurt.chosen(env, "nccl-rank-freeze")[0] == []  # TP 1 in the file, nothing read yet
    apply(one, facts)
    apply(two, facts)
    assert budgets.engine_timeout(one) == (45.0, f"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS 45 read from container "
                                                 f"{facts.container}")
    assert budgets.engine_timeout(two) == (90.0, "gpu-2's vllm.execute_model_timeout_s 90")
    assert one.restart_policy == "unless-stopped" and two.restart_policy == "always"
    # the container's --tensor-parallel-size 2 makes both rank-freeze targets
    assert [t.name for t in hurt.chosen(env, "nccl-rank-freeze")[0]] == ["gpu-1", "gpu-2"]
    lines = {s.name.split(" (")[0]: s for s in settings(two, facts)}
    assert lines["engine timeout"].used == "90" and lines["engine timeout"].source == "file"
    assert "the file overrides the container's" in lines["engine timeout"].line()
    assert lines["restart policy"].line() == ("restart policy: always from the file (the file overrides the "
                                              "container's) [file always, container unless-stopped]")
    assert (lines["tensor-parallel size"].used, lines["tensor-parallel size"].source) == ("2", "container")
    assert (lines["GPUs"].used, lines["GPUs"].source) == ("device=2,3", "container")


def test_env_check_prints_what_it_read_from_each_container(tmp_path) -> None:
    """A real container on the local engine, and one the file names that does not exist."""
    require(f"image:{SIM_IMAGE}")
    import docker

    client = docker.from_env()
    name = f"chaos-facts-test-{uuid.uuid4().hex[:8]}"
    c = client.containers.run(SIM_IMAGE, entrypoint=["sh", "-c", "sleep 120", "vllm"],
                              command=["serve", "m", "--tensor-parallel-size", "2"],  # sh -c ignores them
                              name=name, detach=True, restart_policy={"Name": "unless-stopped"}, nano_cpus=500_000_000,
                              environment={"VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS": "37", "HF_TOKEN": "hf_not_shown"},
                              labels={"llm-chaos.test": "container-facts"})
    try:
        path = tmp_path / "dk.yaml"
        path.write_text(
            "name: dk\nendpoints: {api: 'http://127.0.0.1:9'}\ntargets:\n"
            f"  - {{name: gpu-1, kind: docker, image: {SIM_IMAGE}, port: 9, container_name: {name}, "
            "vllm: {model: m}, env: {HF_TOKEN: '${HF_TOKEN}'}}\n"
            f"  - {{name: gpu-2, kind: docker, image: {SIM_IMAGE}, port: 9, container_name: {name}-gone}}\n")
        out = chaos("env", "check", "--env", str(path))
        assert out.returncode == 0, out.stderr
        text = out.stdout
        assert f"gpu-1: container {name} on local (running, image {SIM_IMAGE})" in text, text
        assert "VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS=37" in text and "hf_not_shown" not in text
        assert "engine timeout (VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS): 37 from the container" in text
        assert "restart policy: unless-stopped from the container [file: not set, container unless-stopped]" in text
        assert "tensor-parallel size: 2 from the container" in text
        assert "  CPU: limit 0.5 cores, any core" in text  # `--cpus 0.5`
        assert f"gpu-2: not read: no container '{name}-gone' on local (not up yet?)" in text
        # the plan uses what was read: the TP 2 container is the rank freeze's, waiting for its 37 s
        assert "NCCL rank freeze on gpu-1 (TP 2)" in text and f"37 read from container {name}" in text
        # the file names ${HF_TOKEN}, unset here and never passed (embedded: none): a note, not an error
        assert "note: targets[gpu-1].env.HF_TOKEN: environment variable ${HF_TOKEN} is not set" in text
    finally:
        c.remove(force=True)
