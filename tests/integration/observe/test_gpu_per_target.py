"""Every GPU of every target: a recorded dcgm-exporter page (two H200s of one TP 2 replica on another
host, GPU 1 holding an old Xid 79) served by a real local HTTP server and scraped through the plan the
scenario uses; the recorded H200 NVML trace played as two GPUs. Per-GPU rows, energy summed, the old
Xid is history (never reported as new), a new Xid during the scenario is a finding in the verdict."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos.env import parse
from chaos.env.model import SLAs
from chaos.observe.gpu import GpuChannel, GpuObserver, ReplaySource, gpu_summary
from chaos.observe.gpu_plan import observer_for, plan_channels
from chaos.observe.timeline import Timeline
from chaos.verify.recovery import recovery_verdict
from tests.integration.observe._dcgm import UUID1, Exporter, exporter  # noqa: F401  (the fixture)

TRACE = Path("/work/shared/data/h200/nvml_trace.json")


def _env(url: str, gpus: str = f"[0, {UUID1}]"):
    return parse(f"""name: staging
endpoints: {{api: 'http://127.0.0.1:9'}}
telemetry: {{dcgm: {{gpu-host-a: '{url}'}}}}
targets:
  - {{name: solo, kind: docker, image: vllm/vllm-openai, host: gpu-host-b, port: 8000}}
  - {{name: tp2, kind: docker, image: vllm/vllm-openai, host: gpu-host-a, port: 8000, tp_size: 2, gpus: {gpus}}}
""", "env.yaml", environ={})


def _run(obs: GpuObserver, tl: Timeline, clock: list[float], polls: int, step: float = 0.25) -> None:
    for _ in range(polls):
        obs.poll()
        clock[0] += step


def test_two_gpus_from_the_exporter_page_each_get_rows_and_the_old_xid_is_not_new(exporter: Exporter) -> None:  # noqa: F811
    clock = [1000.0]
    tl = Timeline(clock=lambda: clock[0])
    obs = observer_for(_env(exporter.url), tl)
    assert [(c.target, c.device, c.source.name) for c in obs.channels] == [("tp2", "0", "dcgm"), ("tp2", UUID1, "dcgm")]
    assert [e.detail["reason"] for e in tl.find_events("observer", "gpu_not_watched")] == [
        "solo: its GPUs are not named (gpus: a list, CUDA_VISIBLE_DEVICES in env, or its container's device request)"]
    _run(obs, tl, clock, 8)
    assert exporter.scrapes == 8  # one scrape per poll serves both GPUs
    assert tl.find_events("xid") == []  # GPU 1's Xid 79 was there before the scenario: history
    got = gpu_summary(tl, 0, clock[0], tokens=1000)
    rows = {r["gpu"]: r for r in got["per_gpu"]}
    assert sorted(rows) == ["tp2/gpu 0", f"tp2/gpu {UUID1}"] and got["gpus"] == 2
    assert rows["tp2/gpu 0"]["temperature_c"]["max"] == 43 and rows[f"tp2/gpu {UUID1}"]["temperature_c"]["max"] == 46
    assert rows["tp2/gpu 0"]["power_w"]["max"] == pytest.approx(447.148, abs=0.01)
    assert got["temperature_c"]["max"] == 46 and got["new_xids"] == []
    obs.close()


def test_energy_is_summed_over_the_gpus(exporter: Exporter) -> None:  # noqa: F811
    clock = [0.0]
    tl = Timeline(clock=lambda: clock[0])
    obs = observer_for(_env(exporter.url), tl)
    _run(obs, tl, clock, 1)
    exporter.set("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "0", "16795849")  # +100 J
    exporter.set("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "1", "16123215")  # +250 J
    _run(obs, tl, clock, 1)
    got = gpu_summary(tl, 0, clock[0], tokens=700)
    assert [r["energy_j"] for r in got["per_gpu"]] == [100.0, 250.0]
    assert got["energy_j"] == 350.0 and got["tokens_per_joule"] == 2.0


def test_a_new_xid_during_the_scenario_is_a_finding_per_gpu(exporter: Exporter) -> None:  # noqa: F811
    clock = [0.0]
    tl = Timeline(clock=lambda: clock[0])
    obs = observer_for(_env(exporter.url), tl)
    _run(obs, tl, clock, 3)
    exporter.set("DCGM_FI_DEV_XID_ERRORS", "0", "43")  # GPU 0: a new Xid 43 during the scenario
    _run(obs, tl, clock, 3)
    xids = tl.find_events("xid")
    assert [(e.detail["target"], e.detail["gpu"], e.detail["code"]) for e in xids] == [("tp2", "0", 43)]
    window = (clock[0] - 1, clock[0])
    slas = SLAs(recovery_s=5.0)
    row = recovery_verdict(window, tl, [], slas).row("new_xids")  # a non-GPU fault: any Xid fails
    assert row.ok is False and row.measured == 1 and "Xid 43 on tp2/gpu 0" in row.detail
    row = recovery_verdict(window, tl, [], slas, expected_xids={43}).row("new_xids")  # a GPU fault's own Xid
    assert row.ok is True and "Xid 43 on tp2/gpu 0 (expected of this GPU fault)" in row.detail
    assert recovery_verdict(window, tl, [], slas, expected_xids={79}).row("new_xids").ok is False


def test_no_new_xid_is_a_pass_that_says_how_many_gpus(exporter: Exporter) -> None:  # noqa: F811
    clock = [0.0]
    tl = Timeline(clock=lambda: clock[0])
    _run(observer_for(_env(exporter.url), tl), tl, clock, 3)
    row = recovery_verdict((0.0, 0.5), tl, [], SLAs(recovery_s=5.0)).row("new_xids")
    assert row.ok is True and row.measured == 0 and row.detail == "none new on 2 GPU(s) since the scenario's start"


def test_memory_released_is_judged_on_each_gpu_of_the_tp_group(exporter: Exporter) -> None:  # noqa: F811
    clock = [0.0]
    tl = Timeline(clock=lambda: clock[0])
    obs = observer_for(_env(exporter.url), tl)
    _run(obs, tl, clock, 4)  # serving: ~127 GiB on each
    t_kill = clock[0]
    exporter.set("DCGM_FI_DEV_FB_USED", "0", "615")  # rank 0's process gone, its memory freed
    _run(obs, tl, clock, 4)  # rank 1's memory stays held (an orphaned worker)
    v = recovery_verdict((t_kill, t_kill), tl, [], SLAs(recovery_s=5.0, gpu_memory_release_s=5.0),
                         crash=True, target="tp2")
    assert v.row("gpu_mem_released_s[tp2/gpu 0]").ok is True
    held = v.row(f"gpu_mem_released_s[tp2/gpu {UUID1}]")
    assert held.ok is False and held.measured is None
    assert not v.ok


def test_the_recorded_h200_trace_as_two_gpus_gives_per_gpu_rows() -> None:
    if not TRACE.exists():
        pytest.skip(f"{TRACE} not present")
    clock = [0.0]
    tl = Timeline(clock=lambda: clock[0])
    obs = GpuObserver(tl, channels=[GpuChannel("tp2", "0", ReplaySource(TRACE)),
                                    GpuChannel("tp2", "1", ReplaySource(TRACE))])
    one = ReplaySource(TRACE)
    _run(obs, tl, clock, len(one.rows))
    got = gpu_summary(tl, 0, clock[0], tokens=10_000)
    joules = (one.rows[-1]["energy_mj"] - one.rows[0]["energy_mj"]) / 1000.0
    assert [r["gpu"] for r in got["per_gpu"]] == ["tp2/gpu 0", "tp2/gpu 1"]
    assert all(r["energy_j"] == pytest.approx(joules, abs=1e-3) for r in got["per_gpu"])
    assert got["energy_j"] == pytest.approx(2 * joules, abs=1e-3)
    assert got["power_w"]["max"] == pytest.approx(max(r["power_mw"] for r in one.rows) / 1000.0, abs=0.01)


def test_a_local_target_reads_nvml_and_a_remote_one_its_hosts_exporter(exporter: Exporter) -> None:  # noqa: F811
    env = parse(f"""name: mixed
endpoints: {{api: 'http://127.0.0.1:9'}}
telemetry: {{dcgm: {{gpu-host-a: '{exporter.url}'}}}}
targets:
  - {{name: here, kind: docker, image: vllm/vllm-openai, port: 8000, gpus: [2, 3]}}
  - {{name: there, kind: docker, image: vllm/vllm-openai, host: gpu-host-a, port: 8000, gpus: [1]}}
""", "env.yaml", environ={})
    opened: list[str] = []

    def nvml(dev: str) -> ReplaySource | None:  # recorded NVML data stands in for the GPU
        opened.append(dev)
        return ReplaySource(TRACE) if TRACE.exists() else None

    if not TRACE.exists():
        pytest.skip(f"{TRACE} not present")
    channels, notes = plan_channels(env, nvml=nvml)
    assert [(c.target, c.device, c.source.name) for c in channels] == [
        ("here", "2", "replay"), ("here", "3", "replay"), ("there", "1", "dcgm")]
    assert opened == ["2", "3"] and notes == []  # NVML never asked for the other host's GPU


def test_without_nvml_here_and_no_exporter_each_gpu_says_why_never_a_reading() -> None:
    # the real NVML path on a machine without a GPU: nvmlInit() raises NVMLError_LibraryNotFound
    env = parse("""name: nogpu
endpoints: {api: 'http://127.0.0.1:9'}
targets:
  - {name: here, kind: docker, image: vllm/vllm-openai, port: 8000, env: {CUDA_VISIBLE_DEVICES: "0,1"}}
""", "env.yaml", environ={})
    try:
        import pynvml

        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("this machine has a GPU: the no-GPU path is not what it would run")
    except pynvml.NVMLError:
        pass
    tl = Timeline()
    obs = observer_for(env, tl).start()
    assert not obs.available
    reason = tl.find_events("observer", "gpu_unavailable")[0].detail["reason"]
    assert reason == ("here/gpu 0: NVML failed here and no dcgm-exporter for it (telemetry.dcgm); "
                      "here/gpu 1: NVML failed here and no dcgm-exporter for it (telemetry.dcgm)")
    assert gpu_summary(tl, 0, 1e12, 10) == {"visible": False, "why": f"no GPU visible: {reason}"}


@pytest.mark.gpu
def test_nvml_reads_every_listed_gpu_by_index_and_uuid() -> None:
    import pynvml

    pynvml.nvmlInit()
    uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(0))
    pynvml.nvmlShutdown()
    uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
    env = parse(f"""name: here
endpoints: {{api: 'http://127.0.0.1:9'}}
targets:
  - {{name: tp, kind: docker, image: vllm/vllm-openai, port: 8000, gpus: [0, {uuid}]}}
""", "env.yaml", environ={})
    clock = [0.0]
    tl = Timeline(clock=lambda: clock[0])
    obs = observer_for(env, tl)
    assert [c.source.name for c in obs.channels] == ["nvml", "nvml"]
    _run(obs, tl, clock, 3)
    obs.close()
    got = gpu_summary(tl, 0, clock[0], 0)
    assert [r["gpu"] for r in got["per_gpu"]] == ["tp/gpu 0", f"tp/gpu {uuid}"]
    assert all(r["memory_used_bytes_max"] for r in got["per_gpu"])


def test_the_timeline_panel_draws_one_power_line_per_gpu(exporter: Exporter) -> None:  # noqa: F811
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from chaos.report.timeline import _gpu_panel

    clock = [0.0]
    tl = Timeline(clock=lambda: clock[0])
    _run(observer_for(_env(exporter.url), tl), tl, clock, 3)
    fig, ax = plt.subplots()
    _gpu_panel(ax, tl, 0.0)
    assert [line.get_label() for line in ax.get_lines()] == ["GPU power (W) tp2/gpu 0", f"GPU power (W) tp2/gpu {UUID1}"]
    plt.close(fig)


def test_devices_read_from_the_container_fill_in_what_the_file_does_not_name(exporter: Exporter) -> None:  # noqa: F811
    from types import SimpleNamespace

    from chaos.observe.gpu_plan import devices_from_container

    # the shape chaos.targets.container_facts gives: `gpus` from the device request, GPU variables
    assert devices_from_container(SimpleNamespace(gpus="device=0,1", variables={})) == ["0", "1"]
    assert devices_from_container(SimpleNamespace(gpus="all", variables={"NVIDIA_VISIBLE_DEVICES": UUID1})) == [UUID1]
    assert devices_from_container(SimpleNamespace(gpus="2", variables={"NVIDIA_VISIBLE_DEVICES": "all"})) is None
    env = _env(exporter.url, gpus="all")
    channels, notes = plan_channels(env, {"tp2": ["1"]})
    assert [(c.target, c.device) for c in channels] == [("tp2", "1")] and len(notes) == 1  # solo still unnamed


def test_remote_targets_without_an_exporter_are_not_read_from_this_hosts_nvml() -> None:
    env = parse("""name: remote
endpoints: {api: 'http://127.0.0.1:9'}
targets:
  - {name: far, kind: docker, image: vllm/vllm-openai, host: gpu-host-a, port: 8000, gpus: 2}
""", "env.yaml", environ={})
    asked: list[str] = []
    channels, notes = plan_channels(env, nvml=lambda d: asked.append(d) or None)
    assert channels == [] and asked == []
    assert notes == ["the targets run on other hosts and telemetry names no dcgm-exporter (dcgm_url)"]
