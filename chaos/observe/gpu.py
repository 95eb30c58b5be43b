"""GPU observer: every GPU of every target (a channel each: target, device, source), sampled into one
timeline with `target` and `gpu` labels, plus the per-GPU summaries the verdicts and reports read.

Sources live in chaos.observe.gpu_sources; which source reads which target's GPUs is chosen in
chaos.observe.gpu_plan (NVML where the harness runs on the target's host, else that host's exporter).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from chaos.observe.base import PollingObserver
from chaos.observe.gpu_sources import FIELDS, DcgmPage, DcgmSource, GpuSource, GpuUnavailable, NvmlSource, ReplaySource
from chaos.observe.timeline import Sample, Timeline

__all__ = ["FIELDS", "DcgmPage", "DcgmSource", "GpuChannel", "GpuObserver", "GpuSource", "GpuUnavailable",
           "NvmlSource", "ReplaySource", "auto_source", "by_gpu", "energy_joules", "gpu_summary",
           "memory_release_s", "tokens_per_joule"]


@dataclass
class GpuChannel:
    """One GPU to watch: the target it serves ("" when the file names none), its device (index or
    UUID) and the source that reads it."""

    target: str
    device: str
    source: GpuSource

    @property
    def key(self) -> str:
        return f"{self.target}/gpu {self.device}" if self.target else f"gpu {self.device}"


def auto_source(dcgm_url: str | None = None, index: int | str = 0) -> GpuSource | None:
    """NVML when nvmlInit() works, else the DCGM exporter when a URL is given, else None (no GPU)."""
    try:
        return NvmlSource(index)
    except (GpuUnavailable, ImportError):
        pass
    return DcgmSource(dcgm_url, gpu=str(index)) if dcgm_url else None


class GpuObserver(PollingObserver):
    """Samples `gpu/<field>` (labels target, gpu, src) for each channel every `interval_s` and an `xid`
    event per new Xid; idle, with a `gpu_unavailable` event saying why, when there is no channel."""

    source = "gpu"

    def __init__(self, timeline: Timeline | None = None, *, source: GpuSource | None | Literal["auto"] = "auto",
                 dcgm_url: str | None = None, gpu_index: int = 0, channels: list[GpuChannel] | None = None,
                 unavailable: str = "no NVML GPU and no DCGM exporter", interval_s: float = 0.25,
                 **kw: Any) -> None:
        super().__init__(timeline, interval_s=interval_s, **kw)
        if channels is None:  # one GPU, the pre-target form (gpu_index, dcgm_url)
            one = auto_source(dcgm_url, gpu_index) if source == "auto" else source
            channels = [GpuChannel("", str(gpu_index), one)] if one is not None else []
        self.channels = channels
        self.why_unavailable = unavailable
        self.gpu: GpuSource | None = channels[0].source if channels else None
        self.available = bool(channels)

    def start(self) -> GpuObserver:
        if not self.available:
            self.timeline.event("observer", "gpu_unavailable", reason=self.why_unavailable)
            return self
        super().start()
        return self

    def poll(self) -> None:
        t = self.timeline.clock()
        failed: list[str] = []
        for ch in self.channels:
            getattr(ch.source, "new_poll", lambda: None)()  # a shared exporter page: scraped once this poll
        for ch in self.channels:
            try:  # one host's exporter down must not hide the other GPUs
                reading = ch.source.read()
            except Exception as e:
                failed.append(f"{ch.key}: {type(e).__name__}: {e}")
                continue
            labels = {"src": ch.source.name, "gpu": ch.device, **({"target": ch.target} if ch.target else {})}
            for k, v in reading.items():
                self.timeline.sample(self.source, k, v, t=t, **labels)
            for code in ch.source.xids():
                self.timeline.event("xid", "gpu", t=t, code=code, **labels)
        if failed:
            raise RuntimeError("; ".join(failed))
        if all(isinstance(ch.source, ReplaySource) and ch.source.exhausted for ch in self.channels):
            self._stop.set()

    def close(self) -> None:
        for ch in self.channels:
            ch.source.close()


def by_gpu(samples: list[Sample], target: str | None = None) -> dict[str, list[Sample]]:
    """Samples grouped per GPU ("target/gpu N", or "gpu N" without a target), sorted by time;
    only `target`'s GPUs when given (unlabelled samples count for any target: the one-GPU form)."""
    out: dict[str, list[Sample]] = {}
    for s in samples:
        tgt = s.labels.get("target", "")
        if target is not None and tgt and tgt != target:
            continue
        dev = s.labels.get("gpu", "0")
        out.setdefault(f"{tgt}/gpu {dev}" if tgt else f"gpu {dev}", []).append(s)
    return {k: sorted(v, key=lambda s: s.t) for k, v in sorted(out.items())}


def _gpu_joules(pts: list[Sample], t0: float, t1: float) -> float | None:
    vals = [float(s.value) for s in pts if t0 <= s.t <= t1]
    return (vals[-1] - vals[0]) / 1000.0 if len(vals) >= 2 else None


def energy_joules(timeline: Timeline, t0: float, t1: float) -> float | None:
    """Energy used between t0 and t1, summed over every GPU's energy counter (None without two
    samples of any GPU)."""
    per = [_gpu_joules(pts, t0, t1) for pts in by_gpu(timeline.series("gpu", "energy_mj")).values()]
    known = [j for j in per if j is not None]
    return sum(known) if known else None


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


def _stat(xs: list[float]) -> dict[str, float] | None:
    return {"mean": round(sum(xs) / len(xs), 2), "max": round(max(xs), 2)} if xs else None


def gpu_summary(timeline: Timeline, t0: float, t1: float, tokens: int) -> dict[str, Any]:
    """What a run did to the GPUs between t0 and t1: per GPU temperature and power (mean, max), energy
    and peak memory; over all GPUs the hottest and the highest-drawing GPU, energy summed, tokens per
    joule and the new Xids; {"visible": False, "why": ...} when no GPU was seen (never omitted)."""
    def window(name: str) -> dict[str, list[Sample]]:
        return {k: [s for s in v if t0 <= s.t <= t1] for k, v in by_gpu(timeline.series("gpu", name)).items()}

    temps, power, mem, energy = window("temp_c"), window("power_mw"), window("mem_used"), window("energy_mj")
    keys = sorted({k for d in (temps, power, mem) for k, v in d.items() if v})
    if not keys:
        why = next((str(e.detail.get("reason")) for e in timeline.find_events("observer", "gpu_unavailable")),
                   "no GPU samples in the window")
        return {"visible": False, "why": f"no GPU visible: {why}"}
    rows: list[dict[str, Any]] = []
    temp_stats, power_stats = [], []
    for k in keys:
        m = [float(s.value) for s in mem.get(k, [])]
        j = _gpu_joules(energy.get(k, []), t0, t1)
        temp_stats.append(_stat([float(s.value) for s in temps.get(k, [])]))
        power_stats.append(_stat([float(s.value) / 1000.0 for s in power.get(k, [])]))
        rows.append({"gpu": k, "temperature_c": temp_stats[-1], "power_w": power_stats[-1],
                     "energy_j": None if j is None else round(j, 3), "memory_used_bytes_max": max(m) if m else None})
    joules = energy_joules(timeline, t0, t1)
    all_mem = [float(s.value) for v in mem.values() for s in v]

    def worst(stats: list[dict[str, float] | None]) -> dict[str, float] | None:
        known = [st for st in stats if st]  # the GPU with the highest max: a mean over GPUs would hide it
        return max(known, key=lambda st: st["max"]) if known else None

    xids = [{"gpu": (f"{e.detail['target']}/gpu {e.detail.get('gpu')}" if e.detail.get("target")
                     else f"gpu {e.detail.get('gpu', '0')}"), "code": e.detail.get("code"), "t": e.t}
            for e in timeline.find_events("xid") if t0 <= e.t <= t1]
    return {"visible": True, "gpus": len(rows), "temperature_c": worst(temp_stats), "power_w": worst(power_stats),
            "energy_j": None if joules is None else round(joules, 3),
            "tokens_per_joule": None if not joules else round(tokens / joules, 4),
            "memory_used_bytes_max": max(all_mem) if all_mem else None, "per_gpu": rows, "new_xids": xids}
