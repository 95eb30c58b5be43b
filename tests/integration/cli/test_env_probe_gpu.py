"""`env check --probe` on GPU telemetry: the host's exporter (the recorded two-H200 page over real HTTP)
must list every GPU its targets name, by index or UUID; a GPU it does not list fails, naming it."""
from __future__ import annotations

from chaos.env import parse
from chaos.env_check.gpu import check_gpu_telemetry
from tests.integration.observe._dcgm import UUID1, exporter  # noqa: F401  (the fixture)


def _env(url: str, gpus: str):
    return parse(f"""name: staging
endpoints: {{api: 'http://127.0.0.1:9'}}
telemetry: {{dcgm: {{gpu-host-a: '{url}'}}}}
targets:
  - {{name: tp2, kind: docker, image: vllm/vllm-openai, host: gpu-host-a, port: 8000, gpus: {gpus}}}
""", "env.yaml", environ={})


def test_every_named_gpu_is_on_its_hosts_exporter(exporter) -> None:  # noqa: F811
    [line] = check_gpu_telemetry(_env(exporter.url, f"[0, {UUID1}]"), 2.0)
    assert line.ok and line.what == "dcgm exporter gpu-host-a", line
    assert line.detail == f"serves DCGM_FI_* series for tp2/gpu 0, tp2/gpu {UUID1}"


def test_a_gpu_the_page_does_not_list_fails_naming_it(exporter) -> None:  # noqa: F811
    [line] = check_gpu_telemetry(_env(exporter.url, "[0, 3]"), 2.0)
    assert not line.ok and line.detail.startswith("expected tp2/gpu 3 on its page (label gpu or UUID); it lists 0, 1, GPU-")
