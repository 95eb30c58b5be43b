"""GPU reading sources: NVML (pynvml) on this host, a dcgm-exporter scrape for any host, or a replay of
a recorded trace (shared/data/h200/nvml_trace.json) so the path runs without a GPU.

Every source reads ONE device and yields the same fields and units: mem_used (bytes), util (%),
temp_c, power_mw, energy_mj (millijoules since driver load), sm_clock (MHz); Xid events apart, and
only those new since the source was opened (the scenario's start): an Xid already there is history.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from chaos.errors import ConfigError, TargetError
from chaos.observe._http import HttpGetter

FIELDS = ("mem_used", "util", "temp_c", "power_mw", "energy_mj", "sm_clock")


class GpuSource(Protocol):
    """Where readings come from; `read()` -> {field: value}, `xids()` -> new Xid codes."""

    name: str

    def read(self) -> dict[str, float]: ...
    def xids(self) -> list[int]: ...
    def close(self) -> None: ...


class NvmlSource:
    """One GPU through pynvml, by index or UUID; raises GpuUnavailable when NVML (or the GPU) is not there."""

    name = "nvml"

    def __init__(self, index: int | str = 0) -> None:
        import pynvml as nv

        self.nv = nv
        try:
            nv.nvmlInit()
        except nv.NVMLError as e:  # NVMLError_LibraryNotFound / DriverNotLoaded: no GPU here
            raise GpuUnavailable(f"NVML unavailable: {e}") from None
        try:
            dev = str(index)
            self.handle = (nv.nvmlDeviceGetHandleByIndex(int(dev)) if dev.isdigit()
                           else nv.nvmlDeviceGetHandleByUUID(dev))
        except nv.NVMLError as e:
            nv.nvmlShutdown()
            raise GpuUnavailable(f"NVML has no GPU {index}: {e}") from None
        self.events = None
        self._closed = False
        try:  # events registered now: only Xids from here on are reported (the scenario's start)
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
        # idempotent: PollingObserver.stop() closes, and so may its owner; a second nvmlEventSetFree of
        # the same set is a native double free (it aborted the process on an H200 with torch loaded), and
        # a second nvmlShutdown would drop another NvmlSource's reference to the library
        events, self.events = self.events, None
        if self._closed:
            return
        self._closed = True
        try:
            if events is not None:
                self.nv.nvmlEventSetFree(events)
            self.nv.nvmlShutdown()
        except self.nv.NVMLError:
            pass


_DCGM = {"DCGM_FI_DEV_FB_USED": ("mem_used", 1024 * 1024), "DCGM_FI_DEV_GPU_UTIL": ("util", 1),
         "DCGM_FI_DEV_GPU_TEMP": ("temp_c", 1), "DCGM_FI_DEV_POWER_USAGE": ("power_mw", 1000),
         "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": ("energy_mj", 1), "DCGM_FI_DEV_SM_CLOCK": ("sm_clock", 1)}
_DEVICE_LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "pci_bus_id")


class DcgmPage:
    """One dcgm-exporter's /metrics. Alone it is fetched on every read; `shared` (the GPUs of one host
    read from it) it is fetched once per poll: `new_poll()` marks it stale, the first read fetches."""

    def __init__(self, url: str, timeout_s: float = 2.0, shared: bool = False) -> None:
        self.url, self.shared = url, shared
        self.http = HttpGetter(url, timeout_s)
        self._lock = threading.Lock()
        self._fresh = False
        self._samples: list[Any] = []

    def new_poll(self) -> None:
        self._fresh = False

    def samples(self) -> list[Any]:
        from prometheus_client.parser import text_string_to_metric_families

        with self._lock:
            if not (self.shared and self._fresh):
                status, _, data = self.http.request("GET", "/metrics")
                if status != 200:
                    raise RuntimeError(f"dcgm-exporter {self.url}/metrics: status {status}")
                self._samples = [s for fam in text_string_to_metric_families(data.decode("utf-8", "replace"))
                                 for s in fam.samples]
                self._fresh = True
            return self._samples

    def close(self) -> None:
        self.http.close()


class DcgmSource:
    """One GPU (label `gpu` = index, or `UUID`) of a dcgm-exporter's /metrics; FB_USED is MiB, power W.

    DCGM_FI_DEV_XID_ERRORS is a gauge of the LAST Xid code: the first scrape is the baseline (an old
    Xid 79 there is history, not news) and a later change to another non-zero code is a new Xid. A
    repeat of the baseline's code cannot be told from the page (no counter): NVML events can."""

    name = "dcgm"

    def __init__(self, url: str | DcgmPage, gpu: str = "0", timeout_s: float = 2.0) -> None:
        self.page = url if isinstance(url, DcgmPage) else DcgmPage(url, timeout_s)
        self.gpu = str(gpu)
        self.labels: dict[str, str] = {}  # the device's own labels (UUID, modelName, Hostname), once seen
        self._baseline: float | None = None
        self._last_xid: float | None = None
        self._xid_now: float | None = None
        self._seen = False

    def _mine(self, labels: dict[str, str]) -> bool:
        return self.gpu in (labels.get("gpu"), labels.get("UUID")) or ("gpu" not in labels and "UUID" not in labels)

    def read(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for s in self.page.samples():
            if not self._mine(s.labels):
                continue
            # the parser names a `# TYPE ... counter` series' samples NAME_total (the energy counter on a
            # real exporter page): the exporter's own name is what the table knows
            name = s.name[:-6] if s.name.endswith("_total") and s.name[:-6] in _DCGM else s.name
            if name in _DCGM:
                field, scale = _DCGM[name]
                out[field] = s.value * scale
                self.labels = self.labels or {k: v for k, v in s.labels.items() if k in _DEVICE_LABELS}
            elif s.name == "DCGM_FI_DEV_XID_ERRORS":
                self._xid_now = s.value
        if not out and self._xid_now is None:
            raise RuntimeError(f"dcgm-exporter {self.page.url}: no series for GPU {self.gpu} (label gpu or UUID)")
        if not self._seen:  # the scenario's start: what the exporter shows now happened before it
            self._seen, self._baseline, self._last_xid = True, self._xid_now, self._xid_now
        return out

    def new_poll(self) -> None:
        self.page.new_poll()

    def xids(self) -> list[int]:
        now = self._xid_now
        new = [int(now)] if now and now != self._last_xid else []
        if now is not None:
            self._last_xid = now
        return new

    def close(self) -> None:
        self.page.close()


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
