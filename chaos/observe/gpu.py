"""GPU observer: NVML (pynvml) when a GPU is present, a DCGM-exporter scrape for remote hosts,
or a replay of a recorded trace (shared/data/h200/nvml_trace.json) so the path runs without a GPU.

Every source yields readings with the same fields and units: mem_used (bytes), util (%),
temp_c, power_mw, energy_mj (millijoules since driver load), sm_clock (MHz); Xid events apart.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable, Literal, Protocol

from chaos.errors import ConfigError, TargetError
from chaos.observe._http import HttpGetter
from chaos.observe.base import PollingObserver
from chaos.observe.timeline import Timeline

FIELDS = ("mem_used", "util", "temp_c", "power_mw", "energy_mj", "sm_clock")


class GpuSource(Protocol):
    """Where readings come from; `read()` -> {field: value}, `xids()` -> new Xid codes."""

    name: str

    def read(self) -> dict[str, float]: ...
    def xids(self) -> list[int]: ...
    def close(self) -> None: ...


class NvmlSource:
    """One GPU through pynvml; raises GpuUnavailable when NVML (or the GPU) is not there."""

    name = "nvml"

    def __init__(self, index: int = 0) -> None:
        import pynvml as nv

        self.nv = nv
        try:
            nv.nvmlInit()
        except nv.NVMLError as e:  # NVMLError_LibraryNotFound / DriverNotLoaded: no GPU here
            raise GpuUnavailable(f"NVML unavailable: {e}") from None
        try:
            self.handle = nv.nvmlDeviceGetHandleByIndex(index)
        except nv.NVMLError as e:
            nv.nvmlShutdown()
            raise GpuUnavailable(f"NVML has no GPU {index}: {e}") from None
        self.events = None
        try:
            self.events = nv.nvmlEventSetCreate()
            nv.nvmlDeviceRegisterEvents(self.handle, nv.nvmlEventTypeXidCriticalError, self.events)
        except nv.NVMLError:
            self.events = None  # not supported (e.g. some MIG or vGPU setups): no Xid events

    def _get(self, fn: Callable[[], float]) -> float | None:
        try:
            return fn()
        except self.nv.NVMLError:
            return None

    def read(self) -> dict[str, float]:
        nv, h = self.nv, self.handle
        vals = {
            "mem_used": self._get(lambda: nv.nvmlDeviceGetMemoryInfo(h).used),
            "util": self._get(lambda: nv.nvmlDeviceGetUtilizationRates(h).gpu),
            "temp_c": self._get(lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
            "power_mw": self._get(lambda: nv.nvmlDeviceGetPowerUsage(h)),
            "energy_mj": self._get(lambda: nv.nvmlDeviceGetTotalEnergyConsumption(h)),
            "sm_clock": self._get(lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
        }
        return {k: v for k, v in vals.items() if v is not None}

    def xids(self) -> list[int]:
        out: list[int] = []
        while self.events is not None and len(out) < 64:
            try:
                data = self.nv.nvmlEventSetWait(self.events, 0)
            except self.nv.NVMLError:  # NVMLError_Timeout: nothing pending
                break
            out.append(int(data.eventData))
        return out

    def close(self) -> None:
        try:
            if self.events is not None:
                self.nv.nvmlEventSetFree(self.events)
            self.nv.nvmlShutdown()
        except self.nv.NVMLError:
            pass


_DCGM = {"DCGM_FI_DEV_FB_USED": ("mem_used", 1024 * 1024), "DCGM_FI_DEV_GPU_UTIL": ("util", 1),
         "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1), "DCGM_FI_DEV_POWER_USAGE": ("power_mw", 1000),
         "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_mj", 1), "DCGM_FI_DEV_SM_CLOCK": ("sm_clock", 1)}


class DcgmSource:
    """Scrapes a dcgm-exporter /metrics for one GPU (label `gpu`); FB_USED is MiB, power W."""

    name = "dcgm"

    def __init__(self, url: str, gpu: str = "0", timeout_s: float = 2.0) -> None:
        self.http = HttpGetter(url, timeout_s)
        self.gpu = gpu
        self._last_xid: float | None = None

    def read(self) -> dict[str, float]:
        from prometheus_client.parser import text_string_to_metric_families

        status, _, data = self.http.request("GET", "/metrics")
        if status != 200:
            raise RuntimeError(f"dcgm-exporter /metrics: status {status}")
        out: dict[str, float] = {}
        self._xid_now: float | None = None
        for fam in text_string_to_metric_families(data.decode("utf-8", "replace")):
            for s in fam.samples:
                if s.labels.get("gpu", self.gpu) != self.gpu:
                    continue
                if s.name in _DCGM:
                    field, scale = _DCGM[s.name]
                    out[field] = s.value * scale
                elif s.name == "DCGM_FI_DEV_XID_ERRORS":
                    self._xid_now = s.value
        return out

    def xids(self) -> list[int]:
        # the exporter shows the last Xid code seen; a change is a new event
        now = getattr(self, "_xid_now", None)
        new = [int(now)] if now and now != self._last_xid else []
        self._last_xid = now
        return new

    def close(self) -> None:
        self.http.close()


class ReplaySource:
    """Feeds a recorded trace ([{t, power_mw, temp_c, util, mem_used, sm_clock, energy_mj, xid?}]).

    Step mode (default) returns the next entry on each read; `realtime=True` returns the latest
    entry whose `t` has passed on `clock` (scaled by `speed`). `exhausted` once the end is reached.
    """

    name = "replay"

    def __init__(self, path: str | Path, *, realtime: bool = False, speed: float = 1.0, loop: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        try:
            rows = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise ConfigError(f"{path}: cannot read GPU trace: {e}") from None
        if not isinstance(rows, list) or not all(isinstance(r, dict) and "t" in r for r in rows):
            raise ConfigError(f"{path}: expected a JSON list of objects with a 't' field")
        self.rows, self.realtime, self.speed, self.loop, self.clock = rows, realtime, speed, loop, clock
        self.i = -1
        self._t0: float | None = None
        self._pending_xid: list[int] = []

    @property
    def exhausted(self) -> bool:
        return not self.loop and self.i >= len(self.rows) - 1

    def read(self) -> dict[str, float]:
        if self.realtime:
            if self._t0 is None:
                self._t0 = self.clock()
            el = (self.clock() - self._t0) * self.speed
            i = max(0, sum(1 for r in self.rows if r["t"] <= el) - 1)
        else:
            i = self.i + 1 if self.i + 1 < len(self.rows) else (0 if self.loop else self.i)
        if i != self.i and "xid" in self.rows[i]:
            self._pending_xid.append(int(self.rows[i]["xid"]))
        self.i = i
        return {k: self.rows[i][k] for k in FIELDS if k in self.rows[i]}

    def xids(self) -> list[int]:
        out, self._pending_xid = self._pending_xid, []
        return out

    def close(self) -> None:
        pass


class GpuUnavailable(TargetError):
    """No NVML/GPU here; GpuObserver turns it into 'no GPU' (an idle observer and one event)."""


def auto_source(dcgm_url: str | None = None, index: int = 0) -> GpuSource | None:
    """NVML when nvmlInit() works, else the DCGM exporter when a URL is given, else None (no GPU)."""
    try:
        return NvmlSource(index)
    except (GpuUnavailable, ImportError):
        pass
    return DcgmSource(dcgm_url, gpu=str(index)) if dcgm_url else None


class GpuObserver(PollingObserver):
    """Samples `gpu/<field>` every `interval_s` and an `xid` event per Xid; idle when no GPU."""

    source = "gpu"

    def __init__(self, timeline: Timeline | None = None, *, source: GpuSource | None | Literal["auto"] = "auto",
                 dcgm_url: str | None = None, gpu_index: int = 0, interval_s: float = 0.25, **kw: Any) -> None:
        super().__init__(timeline, interval_s=interval_s, **kw)
        self.gpu: GpuSource | None = auto_source(dcgm_url, gpu_index) if source == "auto" else source
        self.available = self.gpu is not None

    def start(self) -> "GpuObserver":
        if not self.available:
            self.timeline.event("observer", "gpu_unavailable", reason="no NVML GPU and no DCGM exporter")
            return self
        super().start()
        return self

    def poll(self) -> None:
        assert self.gpu is not None
        t = self.timeline.clock()
        reading = self.gpu.read()
        for k, v in reading.items():
            self.timeline.sample(self.source, k, v, t=t, src=self.gpu.name)
        for code in self.gpu.xids():
            self.timeline.event("xid", "gpu", t=t, code=code, src=self.gpu.name)
        if isinstance(self.gpu, ReplaySource) and self.gpu.exhausted:
            self._stop.set()

    def close(self) -> None:
        if self.gpu is not None:
            self.gpu.close()


def energy_joules(timeline: Timeline, t0: float, t1: float) -> float | None:
    """Energy used between t0 and t1 from the energy counter samples (None without two samples)."""
    pts = sorted((s.t, s.value) for s in timeline.series("gpu", "energy_mj") if t0 <= s.t <= t1)
    if len(pts) < 2:
        return None
    joules: float = (pts[-1][1] - pts[0][1]) / 1000.0
    return joules


def tokens_per_joule(tokens: int, timeline: Timeline, t0: float, t1: float) -> float | None:
    """Output tokens per joule over [t0, t1] (None when energy is unknown or zero)."""
    j = energy_joules(timeline, t0, t1)
    return tokens / j if j else None


def memory_release_s(timeline: Timeline, t_event: float, baseline_bytes: float,
                     tolerance_bytes: float = 256 * 1024 * 1024) -> float | None:
    """Seconds from `t_event` (e.g. a kill) to the first sample with memory back near the baseline."""
    for s in sorted(timeline.series("gpu", "mem_used"), key=lambda s: s.t):
        if s.t >= t_event and s.value <= baseline_bytes + tolerance_bytes:
            return s.t - t_event
    return None


def gpu_summary(timeline: Timeline, t0: float, t1: float, tokens: int) -> dict[str, Any]:
    """What a run did to the GPU between t0 and t1: temperature and power (mean, max), energy, tokens
    per joule and peak memory; {"visible": False, "why": ...} when no GPU was seen (never omitted)."""
    def series(name: str) -> list[float]:
        return [float(s.value) for s in timeline.series("gpu", name) if t0 <= s.t <= t1]

    temps, power = series("temp_c"), [w / 1000.0 for w in series("power_mw")]
    if not temps and not power and not series("mem_used"):
        why = next((str(e.detail.get("reason")) for e in timeline.find_events("observer", "gpu_unavailable")),
                   "no GPU samples in the window")
        return {"visible": False, "why": f"no GPU visible: {why}"}

    def stat(xs: list[float]) -> dict[str, float] | None:
        return {"mean": round(sum(xs) / len(xs), 2), "max": round(max(xs), 2)} if xs else None

    joules = energy_joules(timeline, t0, t1)
    mem = series("mem_used")
    return {"visible": True, "temperature_c": stat(temps), "power_w": stat(power),
            "energy_j": None if joules is None else round(joules, 3),
            "tokens_per_joule": None if not joules else round(tokens / joules, 4),
            "memory_used_bytes_max": max(mem) if mem else None}
