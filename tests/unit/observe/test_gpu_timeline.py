"""The recorded H200 trace (shared/data/h200, read with real NVML under a matmul load) through the GPU
observer: the timeline carries power and temperature, the run's summary computes energy and tokens
per joule from the energy counter, and the timeline PNG grows a GPU panel. Without a GPU the summary
says so, never nothing."""
from __future__ import annotations

import json
import struct
import time
from pathlib import Path

import pytest

from chaos.load.records import RequestRecord
from chaos.observe.gpu import GpuObserver, gpu_summary
from chaos.observe.timeline import Timeline
from chaos.report.timeline import plot_timeline
from tests._support import replayed

TRACE = Path("/work/shared/data/h200/nvml_trace.json")


def _png_height(png: bytes) -> int:
    return int(struct.unpack(">I", png[20:24])[0])  # the IHDR chunk: width, then height


@pytest.mark.skipif(not TRACE.exists(), reason=f"the recorded H200 trace is not here ({TRACE})")
def test_h200_trace_gives_power_temperature_and_tokens_per_joule():
    rows = json.loads(TRACE.read_text())
    tl = replayed(TRACE, interval_s=0.002)
    power = tl.series("gpu", "power_mw")
    assert len(power) == len(rows) and max(s.value for s in power) == max(r["power_mw"] for r in rows)
    t0, t1 = power[0].t, power[-1].t
    tokens = 250_000
    got = gpu_summary(tl, t0, t1, tokens)
    joules = (rows[-1]["energy_mj"] - rows[0]["energy_mj"]) / 1000.0
    assert got["visible"] is True and got["energy_j"] == pytest.approx(joules, abs=1e-3)
    assert got["tokens_per_joule"] == pytest.approx(tokens / joules, rel=1e-3)
    assert got["temperature_c"]["max"] == max(r["temp_c"] for r in rows)
    assert got["power_w"]["max"] == pytest.approx(max(r["power_mw"] for r in rows) / 1000.0, abs=0.01)
    records = [RequestRecord(f"r{i}", 1, t0 + i * (t1 - t0) / 50, ttft=0.05, e2e=0.2, prompt_class="short",
                             outcome="succeeded") for i in range(50)]
    with_gpu = plot_timeline(records, tl, title="h200 replay")
    without = plot_timeline(records, Timeline(), title="no gpu")
    assert _png_height(with_gpu) > _png_height(without)  # the GPU panel (power, temperature, Xid)


def test_no_gpu_is_said_not_omitted(monkeypatch):
    import chaos.observe.gpu as gpu

    monkeypatch.setattr(gpu, "auto_source", lambda *a, **k: None)
    tl = Timeline()
    GpuObserver(tl).start()
    got = gpu_summary(tl, 0.0, time.time() + 1, 100)
    assert got == {"visible": False, "why": "no GPU visible: no NVML GPU and no DCGM exporter"}
