"""Records chaos's NVML path on a real GPU: device facts, the error path, and ~12 s of GpuObserver +
NvmlSource samples while a bf16 matmul loads the GPU (from ~6 s: torch's start-up comes first).

    OUT=dir python3 scripts/nvml_devcheck.py     # needs torch and nvidia-ml-py; runs without a GPU too

Writes $OUT/h200_nvml_<date>.json (a ReplaySource trace: one row per poll) and $OUT/nvml_report.json.
tests/integration/observe/data/h200_nvml_2026-12-04*.json were made by it on the H200 device machine.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos.observe.gpu import GpuObserver, GpuUnavailable, NvmlSource, auto_source, gpu_summary
from chaos.observe.timeline import Timeline


def safe(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except Exception as e:  # an NVML error is a reading of its own (NotSupported, LibraryNotFound)
        return f"ERROR {type(e).__name__}: {e}"


def call(fn: Callable[..., Any], *args: Any) -> Any:
    return safe(lambda: fn(*args))


def device_facts() -> dict[str, Any]:
    import pynvml as nv

    dbe = nv.NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR
    nv.nvmlInit()
    try:
        out: dict[str, Any] = {"driver": safe(nv.nvmlSystemGetDriverVersion), "nvml": safe(nv.nvmlSystemGetNVMLVersion),
                               "count": nv.nvmlDeviceGetCount(), "gpus": []}
        for i in range(out["count"]):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            m = call(nv.nvmlDeviceGetMemoryInfo, h)
            out["gpus"].append({
                "index": i, "name": call(nv.nvmlDeviceGetName, h),
                "uuid": call(nv.nvmlDeviceGetUUID, h),
                "mem_total_mib": m if isinstance(m, str) else m.total // 2**20,
                "mem_used_mib": m if isinstance(m, str) else m.used // 2**20,
                "temp_c": call(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU),
                "power_mw": call(nv.nvmlDeviceGetPowerUsage, h),
                "power_limit_mw": call(nv.nvmlDeviceGetEnforcedPowerLimit, h),
                "energy_mj": call(nv.nvmlDeviceGetTotalEnergyConsumption, h),
                "util_gpu": getattr(call(nv.nvmlDeviceGetUtilizationRates, h), "gpu", None),
                "sm_clock": call(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM),
                "mig_mode": call(nv.nvmlDeviceGetMigMode, h),
                "retired_pages_dbe": call(nv.nvmlDeviceGetRetiredPages, h, dbe),
                "remapped_rows": call(nv.nvmlDeviceGetRemappedRows, h),
                "ecc_mode": call(nv.nvmlDeviceGetEccMode, h),
                "xid_event_types_supported": call(nv.nvmlDeviceGetSupportedEventTypes, h),
            })
        return out
    finally:
        nv.nvmlShutdown()


def load(seconds: float) -> None:
    import torch  # type: ignore[import-not-found]

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn_like(a)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(20):
            a @ b
        torch.cuda.synchronize()


def error_path() -> dict[str, Any]:
    """No NVML / a missing index / an unknown UUID -> GpuUnavailable; auto_source -> None; an observer idles."""
    errs: dict[str, Any] = {}
    for what, idx in (("index0", 0), ("index7", 7), ("bad_uuid", "GPU-00000000-0000-0000-0000-000000000000")):
        try:
            s = NvmlSource(idx)
            errs[what] = {"ok": True, "read": s.read(), "xids": s.xids()}
            s.close()
        except GpuUnavailable as e:
            errs[what] = {"GpuUnavailable": str(e)}
    errs["auto_source_7"] = repr(auto_source(None, 7))
    tl = Timeline()
    o = GpuObserver(tl, gpu_index=7).start()
    o.stop()
    errs["observer_index7"] = {"available": o.available, "events": [e.name for e in tl.find_events("observer")]}
    return errs


def main() -> int:
    out = Path(os.environ.get("OUT") or "out")
    out.mkdir(parents=True, exist_ok=True)
    date = time.strftime("%Y-%m-%d", time.gmtime())
    rep: dict[str, Any] = {"date_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                           "python": sys.version.split()[0], "facts": safe(device_facts), "error_path": error_path()}
    try:
        src = NvmlSource(0)
    except GpuUnavailable as e:
        rep["sampler"] = f"no GPU: {e}"
    else:
        tl = Timeline(clock=time.monotonic)
        obs = GpuObserver(tl, source=src, interval_s=0.25).start()
        t0 = tl.clock()
        time.sleep(2.0)
        th = threading.Thread(target=lambda: rep.__setitem__("load", safe(lambda: load(6.0))))
        th.start()
        th.join()
        time.sleep(max(0.0, 10.0 - (tl.clock() - t0)))
        obs.stop()  # stop() closes the source: closing it again is what aborted a first run
        rows: dict[float, dict[str, Any]] = {}
        for s in tl.samples:
            rows.setdefault(round(s.t - t0, 3), {})[s.name] = s.value
        (out / f"h200_nvml_{date}.json").write_text(json.dumps([{"t": t, **v} for t, v in sorted(rows.items())]))
        rep["sampler"] = {"rows": len(rows), "xid_events": [e.detail for e in tl.find_events("xid")],
                          "errors": [e.detail for e in tl.find_events("observer")],
                          "summary": gpu_summary(tl, t0, tl.clock(), tokens=0)}
    (out / "nvml_report.json").write_text(json.dumps(rep, indent=1, default=str))
    print(json.dumps(rep, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
