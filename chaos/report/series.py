"""Turn request records and timeline samples into plottable series (pure data, no drawing)."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.load.records import RequestRecord
from chaos.load.stats import percentile
from chaos.observe.timeline import Event, Sample, Timeline

_HEALTHY_WORDS = {"up", "ok", "healthy", "serving", "ready", "true", "pass", "passing"}


@dataclass(frozen=True)
class Window:
    """A shaded interval on a plot, epoch seconds; `end` None = still open at the end of the run."""

    start: float
    end: float | None
    label: str


@dataclass(frozen=True)
class Marker:
    """A labelled instant on a plot: a phase start, a threshold crossing."""

    t: float
    label: str


@dataclass
class RequestSeries:
    """Per-bucket request figures; `t` is the bucket start relative to t0 (seconds)."""

    t: list[float]
    rate: list[float]          # attempts sent per second
    error_rate: list[float]    # fraction of attempts in the bucket that failed (nan when none)
    p99: list[float]           # rolling P99 of e2e latency over the trailing window (nan when none)


def fault_windows(timeline: Timeline | None, extra: Iterable[Window] = ()) -> list[Window]:
    """Pair fault_inject/fault_revert events by name (first in, first out) into windows."""
    out = list(extra)
    if timeline is None:
        return out
    open_: dict[str, list[Event]] = {}
    events = sorted(timeline.find_events(), key=lambda e: e.t)
    for e in events:
        if e.kind == "fault_inject":
            open_.setdefault(e.name, []).append(e)
        elif e.kind == "fault_revert" and open_.get(e.name):
            start = open_[e.name].pop(0)
            out.append(Window(start.t, e.t, e.name))
    out.extend(Window(e.t, None, e.name) for pending in open_.values() for e in pending)
    return sorted(out, key=lambda w: w.start)


def phase_markers(timeline: Timeline | None) -> list[Marker]:
    """Phase starts from `phase` events, in time order."""
    if timeline is None:
        return []
    return sorted((Marker(e.t, e.name) for e in timeline.find_events(kind="phase")), key=lambda m: m.t)


def as_markers(items: Iterable[Any]) -> list[Marker]:
    """Accept Marker, (t, label) pairs, Events, or objects with `t` and `label`/`name`."""
    out: list[Marker] = []
    for it in items:
        if isinstance(it, Marker):
            out.append(it)
        elif isinstance(it, (tuple, list)) and len(it) == 2:
            out.append(Marker(float(it[0]), str(it[1])))
        else:
            label = getattr(it, "label", None) or getattr(it, "name", None) or "crossing"
            out.append(Marker(float(it.t), str(label)))
    return sorted(out, key=lambda m: m.t)


def time_origin(
    records: Sequence[RequestRecord], timeline: Timeline | None, extra: Iterable[float] = ()
) -> tuple[float, float]:
    """Earliest and latest instant seen in records, samples, events and `extra` (epoch seconds)."""
    ts: list[float] = [r.t_send for r in records] + [r.t_end for r in records] + list(extra)
    if timeline is not None:
        ts += [s.t for s in timeline.samples] + [e.t for e in timeline.events]
        ts += [float(e.detail["end"]) for e in timeline.events if isinstance(e.detail.get("end"), (int, float))]
    if not ts:
        return 0.0, 1.0
    return min(ts), max(ts)


def request_series(
    records: Sequence[RequestRecord], t0: float, t1: float, bucket_s: float = 1.0, p99_window_s: float = 5.0
) -> RequestSeries:
    """Request rate and error rate per bucket by send time; rolling P99 of e2e by completion time."""
    n = max(1, math.ceil((t1 - t0) / bucket_s))
    sent = [0] * n
    failed = [0] * n
    for r in records:
        i = min(n - 1, max(0, int((r.t_send - t0) // bucket_s)))
        sent[i] += 1
        failed[i] += 0 if r.ok else 1
    done = sorted((r.t_end, r.e2e) for r in records if r.ok and r.e2e is not None)
    p99: list[float] = []
    lo = 0
    for i in range(n):
        edge = t0 + (i + 1) * bucket_s
        while lo < len(done) and done[lo][0] < edge - p99_window_s:
            lo += 1
        window = [lat for t, lat in done[lo:] if t < edge]
        p = percentile(window, 99, method="nearest")
        p99.append(math.nan if p is None else p)
    return RequestSeries(
        t=[i * bucket_s for i in range(n)],
        rate=[c / bucket_s for c in sent],
        error_rate=[f / c if c else math.nan for f, c in zip(failed, sent, strict=True)],
        p99=p99,
    )


def is_healthy(value: Any) -> bool:
    """Health sample value -> healthy? (bool, HTTP status, 1/0, or words like up/ok)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return 200 <= value < 300 if value >= 100 else value > 0
    return str(value).strip().lower() in _HEALTHY_WORDS


def health_intervals(
    samples: Sequence[Sample], t_end: float, key: str = "target"
) -> dict[str, list[tuple[float, float, bool]]]:
    """Per label value (e.g. target): (start, end, healthy) runs, each sample holding until the next."""
    by: dict[str, list[Sample]] = {}
    for s in sorted(samples, key=lambda s: s.t):
        by.setdefault(s.labels.get(key, "service"), []).append(s)
    out: dict[str, list[tuple[float, float, bool]]] = {}
    for name, ss in by.items():
        runs: list[tuple[float, float, bool]] = []
        for a, b in zip(ss, ss[1:] + [None], strict=True):
            end = b.t if b is not None else max(t_end, a.t)
            ok = is_healthy(a.value)
            if runs and runs[-1][2] == ok and runs[-1][1] == a.t:
                runs[-1] = (runs[-1][0], end, ok)
            else:
                runs.append((a.t, end, ok))
        out[name] = runs
    return out


def state_steps(samples: Sequence[Sample], key: str = "pool") -> dict[str, list[tuple[float, Any]]]:
    """Per pool: (t, state) change points, consecutive repeats dropped."""
    out: dict[str, list[tuple[float, Any]]] = {}
    for s in sorted(samples, key=lambda s: s.t):
        steps = out.setdefault(s.labels.get(key, "pool"), [])
        if not steps or steps[-1][1] != s.value:
            steps.append((s.t, s.value))
    return out


def default_pool_of(record: RequestRecord) -> str | None:
    """Pool from the serving header: 'canary' or 'stable' anywhere in it, else None."""
    sb = (record.served_by or "").lower()
    for pool in ("canary", "stable"):
        if pool in sb:
            return pool
    return None


def traffic_share(
    records: Sequence[RequestRecord],
    t0: float,
    t1: float,
    pool: str = "canary",
    bucket_s: float = 1.0,
    pool_of: Callable[[RequestRecord], str | None] = default_pool_of,
) -> tuple[list[float], list[float]]:
    """Fraction of answered requests served by `pool` per bucket (nan where none was answered)."""
    n = max(1, math.ceil((t1 - t0) / bucket_s))
    hit = [0] * n
    seen = [0] * n
    for r in records:
        p = pool_of(r)
        if p is None:
            continue
        i = min(n - 1, max(0, int((r.t_send - t0) // bucket_s)))
        seen[i] += 1
        hit[i] += p == pool
    return [i * bucket_s for i in range(n)], [h / s if s else math.nan for h, s in zip(hit, seen, strict=True)]
