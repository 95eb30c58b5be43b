"""NVML readings recorded on a real H200 (scripts/nvml_devcheck.py, 2026-12-04) replayed through the GPU
observer: the rows the sampler's data becomes are there and plausible; NvmlSource.close() is idempotent."""
from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from chaos.observe.gpu import FIELDS, GpuObserver, NvmlSource, by_gpu, energy_joules, gpu_summary
from chaos.observe.timeline import Timeline
from tests._support import replayed

DATA = Path(__file__).parent / "data"
TRACE = DATA / "h200_nvml_2026-12-04.json"
DEVICE = json.loads((DATA / "h200_nvml_2026-12-04_device.json").read_text())
GPU = DEVICE["facts"]["gpus"][0]
MiB = 2**20


def test_recorded_device_is_one_h200_with_its_memory():
    assert DEVICE["facts"]["count"] == 1 and GPU["name"] == "NVIDIA H200"
    assert GPU["mem_total_mib"] == 143771


def test_replayed_h200_trace_gives_one_gpu_row_per_field_and_plausible_values():
    rows = json.loads(TRACE.read_text())
    tl = replayed(TRACE)
    for f in FIELDS:
        groups = by_gpu(tl.series("gpu", f))
        assert list(groups) == ["gpu 0"], f
        assert [s.value for s in groups["gpu 0"]] == [r[f] for r in rows], f
    t0, t1 = tl.samples[0].t, tl.samples[-1].t
    summary = gpu_summary(tl, t0, t1, tokens=0)
    assert summary["visible"] and summary["gpus"] == 1 and summary["new_xids"] == []
    (row,) = summary["per_gpu"]
    # idle ~81 W, a bf16 matmul up to the board's 700 W limit: never above it
    assert 70 <= row["power_w"]["mean"] < row["power_w"]["max"] <= GPU["power_limit_mw"] / 1000
    assert 30 <= row["temperature_c"]["max"] <= 90
    # the CUDA context and two 8192^2 bf16 operands: over 1 GiB taken, far below the card's total
    assert gib_used(row) > 1.0 and row["memory_used_bytes_max"] < GPU["mem_total_mib"] * MiB
    joules = energy_joules(tl, t0, t1)
    assert joules == pytest.approx((rows[-1]["energy_mj"] - rows[0]["energy_mj"]) / 1000)
    util = [s.value for s in tl.series("gpu", "util")]
    assert util[0] == 0 and max(util) >= 99


def gib_used(row: dict[str, Any]) -> float:
    return float(row["memory_used_bytes_max"]) / 2**30


def _fake_pynvml(calls: list[str]) -> types.ModuleType:
    """pynvml's surface NvmlSource uses, answering with the recorded H200's idle readings."""
    nv = types.ModuleType("pynvml")

    class NVMLError(Exception):
        pass

    def rec(name: str, value: Any = None) -> Any:
        def fn(*_a: Any) -> Any:
            calls.append(name)
            return value
        return fn

    nv.NVMLError = NVMLError  # type: ignore[attr-defined]
    nv.nvmlEventTypeXidCriticalError = 8  # type: ignore[attr-defined]
    nv.NVML_TEMPERATURE_GPU, nv.NVML_CLOCK_SM = 0, 1  # type: ignore[attr-defined]
    for name, value in (("nvmlInit", None), ("nvmlShutdown", None), ("nvmlDeviceGetHandleByIndex", "h0"),
                        ("nvmlEventSetCreate", "set0"), ("nvmlDeviceRegisterEvents", None),
                        ("nvmlEventSetFree", None), ("nvmlDeviceGetTemperature", GPU["temp_c"]),
                        ("nvmlDeviceGetPowerUsage", GPU["power_mw"])):
        setattr(nv, name, rec(name, value))
    return nv


def test_nvml_source_closes_once_even_when_closed_again(monkeypatch):
    # the observer's stop() closes its source; a caller closing it again freed the NVML event set twice,
    # which aborted the process on the H200 (glibc: double free or corruption)
    calls: list[str] = []
    monkeypatch.setitem(sys.modules, "pynvml", _fake_pynvml(calls))
    src = NvmlSource(0)
    obs = GpuObserver(Timeline(), source=src, max_polls=1)
    obs.stop()
    obs.close()
    src.close()
    assert calls.count("nvmlEventSetFree") == 1 and calls.count("nvmlShutdown") == 1
