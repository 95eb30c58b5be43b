"""GPU observer: the replay source drives the same code path NVML does; no-GPU is handled cleanly."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from chaos.errors import ConfigError
from chaos.observe.gpu import (
    FIELDS,
    GpuObserver,
    GpuUnavailable,
    NvmlSource,
    ReplaySource,
    auto_source,
    energy_joules,
    tokens_per_joule,
)
from chaos.observe.timeline import Timeline
from tests._support import replayed

TRACE = "/work/shared/data/h200/nvml_trace.json"


def _real_trace() -> Path:
    if not Path(TRACE).exists():
        pytest.skip(f"{TRACE} not present")
    return Path(TRACE)


def test_replay_steps_through_the_recorded_trace():
    rows = json.loads(_real_trace().read_text())
    src = ReplaySource(TRACE)
    first = src.read()
    assert set(first) == set(FIELDS) and first["power_mw"] == rows[0]["power_mw"]
    for _ in range(len(rows) - 1):
        last = src.read()
    assert src.exhausted and last["energy_mj"] == rows[-1]["energy_mj"]


def test_observer_samples_replay_and_stops_at_end(tmp_path):
    rows = [{"t": i * 0.1, "power_mw": 300000, "temp_c": 50 + i, "util": 90, "mem_used": 2 << 30,
             "sm_clock": 1980, "energy_mj": 5000 + 30000 * i} for i in range(10)]
    rows[4]["xid"] = 79
    p = tmp_path / "trace.json"
    p.write_text(json.dumps(rows))
    tl = replayed(p)
    temps = [s.value for s in tl.series("gpu", "temp_c")]
    assert temps == [50 + i for i in range(10)]
    assert all(s.labels["src"] == "replay" for s in tl.series("gpu", "power_mw"))
    xids = tl.find_events("xid")
    assert [e.detail["code"] for e in xids] == [79]
    t0, t1 = tl.series("gpu", "energy_mj")[0].t, tl.series("gpu", "energy_mj")[-1].t
    assert energy_joules(tl, t0, t1) == pytest.approx(270.0)
    assert tokens_per_joule(540, tl, t0, t1) == pytest.approx(2.0)


def test_memory_release_time():
    from chaos.observe.gpu import memory_release_s

    tl = Timeline()
    for t, mem in [(0.0, 22e9), (1.0, 22e9), (1.1, 21e9), (1.25, 0.7e9), (1.5, 0.65e9)]:
        tl.sample("gpu", "mem_used", mem, t=t)
    assert memory_release_s(tl, 1.0, baseline_bytes=0.645e9) == pytest.approx(0.25)
    assert memory_release_s(tl, 1.0, baseline_bytes=0.1e9, tolerance_bytes=0) is None


def test_real_trace_energy_counter_is_monotonic():
    src = ReplaySource(_real_trace())
    vals = [src.read()["energy_mj"] for _ in range(len(src.rows))]
    assert vals == sorted(vals) and vals[-1] > vals[0]


def test_replay_realtime_follows_the_clock(tmp_path):
    now = [0.0]
    p = tmp_path / "t.json"
    p.write_text(json.dumps([{"t": 0.0, "util": 1}, {"t": 1.0, "util": 2}, {"t": 2.0, "util": 3}]))
    src = ReplaySource(p, realtime=True, speed=2.0, clock=lambda: now[0])
    assert src.read()["util"] == 1
    now[0] = 0.6  # 1.2 s of trace time
    assert src.read()["util"] == 2
    now[0] = 5.0
    assert src.read()["util"] == 3 and src.exhausted


def test_bad_trace_is_one_clear_error(tmp_path):
    p = tmp_path / "bad.json"
    p.write_text('{"not": "a list"}')
    with pytest.raises(ConfigError, match="bad.json"):
        ReplaySource(p)


def test_no_gpu_is_clean(monkeypatch):
    import pynvml

    def boom():
        raise pynvml.NVMLError_LibraryNotFound()

    monkeypatch.setattr(pynvml, "nvmlInit", boom)
    with pytest.raises(GpuUnavailable):
        NvmlSource()
    assert auto_source() is None
    tl = Timeline()
    obs = GpuObserver(tl)
    obs.start()
    assert not obs.available and not obs.running
    obs.stop()
    assert tl.find_events("observer", "gpu_unavailable")


def test_dcgm_source_converts_units(fake_vllm):
    from chaos.observe.gpu import DcgmSource

    fake_vllm.metrics = (
        'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-1"} 2048\n'
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-1"} 312.5\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-1"} 51\n'
        'DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu="0",UUID="GPU-1"} 123456\n'
        'DCGM_FI_DEV_XID_ERRORS{gpu="0",UUID="GPU-1"} 0\n'
        'DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-2"} 99\n')
    src = DcgmSource(fake_vllm.url)
    r = src.read()
    assert r == {"mem_used": 2048 * 1024 * 1024, "power_mw": 312500.0, "temp_c": 51.0, "energy_mj": 123456.0}
    assert src.xids() == []
    xid = 'XID_ERRORS{gpu="0",UUID="GPU-1"}'
    fake_vllm.metrics = fake_vllm.metrics.replace(f"{xid} 0", f"{xid} 79")
    src.read()
    assert src.xids() == [79] and (src.read(), src.xids())[1] == []
    src.close()


@pytest.mark.gpu
def test_nvml_on_a_real_gpu():
    tl = Timeline()
    obs = GpuObserver(tl, source=NvmlSource(), interval_s=0.05, max_polls=4)
    with obs:
        end = time.monotonic() + 5
        while obs.running and time.monotonic() < end:
            time.sleep(0.05)
    for f in ("mem_used", "power_mw", "energy_mj", "temp_c"):
        assert tl.series("gpu", f), f
