"""`gpus:` as a count stays Docker's count; as a list it names the devices (indices or UUIDs), the
way `docker run --gpus '"device=0,GPU-..."'` does, so the replica runs on the GPUs telemetry watches."""
from __future__ import annotations

from chaos.targets.docker import DockerTarget


def _request(gpus: object) -> dict[str, object]:
    t = DockerTarget("tp2", "vllm/vllm-openai", port=8000, gpus=gpus, client=object())  # type: ignore[arg-type]
    return dict(t._run_kwargs()["device_requests"][0])


def test_a_list_names_the_devices_and_a_count_stays_a_count() -> None:
    got = _request([0, "GPU-3b1d0e8a-5c27-4f49-9e0b-8d6a2f71c4e2"])
    assert got["DeviceIDs"] == ["0", "GPU-3b1d0e8a-5c27-4f49-9e0b-8d6a2f71c4e2"] and got["Count"] == 0
    assert _request(2)["Count"] == 2 and not _request(2)["DeviceIDs"]
    assert _request("all")["Count"] == -1


def test_cpus_is_dockers_cpu_limit_and_absent_means_none() -> None:
    """`cpus: 1.5` is `docker run --cpus 1.5` (nano_cpus); a target without it gets no limit at all."""
    limited = DockerTarget("tp2", "vllm/vllm-openai", port=8000, cpus=1.5, client=object())
    assert limited._run_kwargs()["nano_cpus"] == 1_500_000_000
    assert "nano_cpus" not in DockerTarget("tp1", "vllm/vllm-openai", port=8001, client=object())._run_kwargs()
