"""`gpus:` a count (back-compat), 'all', or the devices (indices or UUIDs); `telemetry.dcgm` maps a
target's host to its exporter. Bad values are one line naming the field and what was expected."""
from __future__ import annotations

import pytest

from chaos.env import parse
from chaos.errors import ConfigError

HEAD = "name: t\nendpoints: {api: 'http://127.0.0.1:1'}\n"
TARGET = "targets:\n  - name: gpu-1\n    kind: docker\n    image: vllm/vllm-openai\n    port: 8000\n"


@pytest.mark.parametrize("value, gpus, devices", [
    ("2", 2, None), ("all", "all", None), ("[0, 1]", [0, 1], ["0", "1"]),
    ("['1', GPU-67f4ffc5-692c-6d85-1bae-4b93e6d39640]", [1, "GPU-67f4ffc5-692c-6d85-1bae-4b93e6d39640"],
     ["1", "GPU-67f4ffc5-692c-6d85-1bae-4b93e6d39640"]),
])
def test_gpus_count_or_devices(value: str, gpus: object, devices: list[str] | None) -> None:
    t = parse(HEAD + TARGET + f"    gpus: {value}\n", "env.yaml", environ={}).targets[0]
    assert t.gpus == gpus and t.gpu_devices == devices


def test_cuda_visible_devices_names_the_devices_when_gpus_does_not() -> None:
    t = parse(HEAD + TARGET + "    env: {CUDA_VISIBLE_DEVICES: '2,3'}\n", "env.yaml", environ={}).targets[0]
    assert t.gpu_devices == ["2", "3"]


@pytest.mark.parametrize("extra, message", [
    ("    gpus: [0, foo]\n", "env.yaml:8: targets[gpu-1].gpus: expected a GPU index (0, 1, ...) or UUID "
                           "(GPU-..., MIG-...), found 'foo'"),
    ("    gpus: two\n", "env.yaml:8: targets[gpu-1].gpus: expected a count (0, 1, ...), 'all', or a list of GPU "
                      "indices or UUIDs (GPU-..., MIG-...), found 'two'"),
])
def test_bad_gpus_is_one_line(extra: str, message: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse(HEAD + TARGET + extra, "env.yaml", environ={})
    assert str(e.value) == message


def test_dcgm_per_host() -> None:
    env = parse(HEAD + "telemetry: {dcgm: {gpu-host-a: 'http://gpu-host-a:9400'}}\n", "env.yaml", environ={})
    assert env.telemetry.dcgm == {"gpu-host-a": "http://gpu-host-a:9400"}
    with pytest.raises(ConfigError, match=r"^env.yaml:3: telemetry.dcgm.gpu-host-a: expected an http:// URL"):
        parse(HEAD + "telemetry: {dcgm: {gpu-host-a: 'gpu-host-a:9400'}}\n", "env.yaml", environ={})
