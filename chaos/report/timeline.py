"""Timeline PNGs: what the load saw (rate, errors, P99, health) and what the breaker did, over one run.

Everything is drawn on an Agg Figure (no pyplot global state, safe in threads); the x axis is
seconds since the start of the run; fault windows are shaded and phases marked on every panel.
"""
from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from chaos.load.records import RequestRecord  # noqa: E402
from chaos.observe.timeline import Timeline  # noqa: E402
from chaos.report.series import (  # noqa: E402
    Marker,
    Window,
    as_markers,
    default_pool_of,
    fault_windows,
    health_intervals,
    phase_markers,
    request_series,
    state_steps,
    time_origin,
    traffic_share,
)

STATE_LEVELS = ["closed", "half_open", "degraded", "open", "forced_open"]
STATE_ALIASES = {"half-open": "half_open", "rolled_back": "forced_open", "rollback": "forced_open", "forced-open": "forced_open"}
_FAULT_COLOR = "#d62728"
_CROSS_COLOR = "#9467bd"
_ALERT_COLOR = "#ff7f0e"  # an alert firing (the team's monitoring), beside the fault window


def _nice_bucket(span: float) -> float:
    """About 120 buckets over the run, rounded to 0.25, 0.5, 1, 2, 5, 10, 30 or 60 s."""
    for b in (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0):
        if span / b <= 150:
            return b
    return 60.0


def _instants(windows: Sequence[Window], marks: Sequence[Marker]) -> list[float]:
    return [w.start for w in windows] + [w.end for w in windows if w.end is not None] + [m.t for m in marks]


def figure_png(fig: Figure, path: str | Path | None) -> bytes:
    buf = io.BytesIO()
    FigureCanvasAgg(fig)
    fig.savefig(buf, format="png", dpi=100)
    data = buf.getvalue()
    if path is not None:
        Path(path).write_bytes(data)
    return data


def _decorate(axes: Sequence[Axes], t0: float, t1: float, windows: Sequence[Window], marks: Sequence[Marker],
              crossings: Sequence[Marker] = ()) -> None:
    """Shade fault windows, draw phase and crossing lines on every panel, label them on the top one."""
    for ax in axes:
        for j, w in enumerate(windows):
            end = (w.end if w.end is not None else t1) - t0
            ax.axvspan(w.start - t0, end, color=_FAULT_COLOR, alpha=0.12, lw=0,
                       label="fault window" if j == 0 else None)
        for m in marks:
            ax.axvline(m.t - t0, color="0.45", ls="--", lw=0.8)
        for j, c in enumerate(crossings):
            ax.axvline(c.t - t0, color=_CROSS_COLOR, ls="-.", lw=1.2, label="threshold crossing" if j == 0 else None)
        ax.grid(True, alpha=0.3)
        ax.set_xlim(0, max(t1 - t0, 1e-3))
    top = axes[0]
    for w in windows:
        top.annotate(f"fault: {w.label}", xy=(w.start - t0, 1.0), xycoords=("data", "axes fraction"),
                     xytext=(2, -10), textcoords="offset points", fontsize=7, color=_FAULT_COLOR)
    for m in marks:
        top.annotate(m.label, xy=(m.t - t0, 1.0), xycoords=("data", "axes fraction"), xytext=(2, 2),
                     textcoords="offset points", fontsize=7, rotation=30, color="0.3")
    for c in crossings:
        axes[-1].annotate(c.label, xy=(c.t - t0, 0.5), xycoords=("data", "axes fraction"), xytext=(3, 0),
                          textcoords="offset points", fontsize=8, rotation=90, va="center", color=_CROSS_COLOR,
                          bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "none", "alpha": 0.8})


def _health_panel(ax: Axes, timeline: Timeline | None, t0: float, t1: float) -> None:
    samples = timeline.series("health", "status") if timeline is not None else []
    runs = health_intervals(samples, t1)
    if not runs:
        ax.text(0.5, 0.5, "no health samples", ha="center", va="center", transform=ax.transAxes, color="0.5")
        ax.set_yticks([])
    for row, (_name, spans) in enumerate(sorted(runs.items())):
        for ok in (True, False):
            bars = [(a - t0, b - a) for a, b, h in spans if h == ok]
            ax.broken_barh(bars, (row - 0.35, 0.7), color="#2ca02c" if ok else _FAULT_COLOR,
                           label=("healthy" if ok else "unhealthy") if row == 0 else None)
    if runs:
        ax.set_yticks(range(len(runs)), sorted(runs))
        ax.set_ylim(-0.6, len(runs) - 0.4)
    ax.set_ylabel("health")


def plot_timeline(
    records: Sequence[RequestRecord],
    timeline: Timeline | None = None,
    *,
    path: str | Path | None = None,
    title: str = "Run timeline",
    windows: Iterable[Window] = (),
    bucket_s: float | None = None,
    p99_window_s: float = 5.0,
    t0: float | None = None,
) -> bytes:
    """Request rate, error rate, rolling P99 and health over time; returns PNG bytes (and writes `path`)."""
    wins = fault_windows(timeline, windows)
    marks = phase_markers(timeline)
    lo, hi = time_origin(records, timeline, _instants(wins, marks))
    t0 = lo if t0 is None else t0
    t1 = max(hi, t0 + 1e-3)
    bucket = bucket_s or _nice_bucket(t1 - t0)
    rs = request_series(records, t0, t1, bucket, p99_window_s)

    gpu = timeline is not None and bool(timeline.series("gpu", "power_mw") or timeline.series("gpu", "temp_c"))
    fig = Figure(figsize=(12, 11 if gpu else 9), layout="constrained")
    axes = list(fig.subplots(5 if gpu else 4, 1, sharex=True,
                             gridspec_kw={"height_ratios": [3, 2, 3, 1.4] + ([2.4] if gpu else [])}))
    fig.suptitle(f"{title}  ({len(records)} requests, {sum(not r.ok for r in records)} failed)")
    axes[0].step(rs.t, rs.rate, where="post", color="#1f77b4", label=f"requests/s ({bucket:g} s buckets)")
    axes[0].set_ylabel("requests / s")
    axes[0].set_ylim(bottom=0)
    axes[1].step(rs.t, [100 * e if not math.isnan(e) else math.nan for e in rs.error_rate], where="post",
                 color=_FAULT_COLOR, label="error rate")
    axes[1].set_ylabel("errors (%)")
    axes[1].set_ylim(bottom=0)
    axes[2].plot(rs.t, rs.p99, color="#ff7f0e", label=f"P99 e2e latency (rolling {p99_window_s:g} s)")
    axes[2].set_ylabel("P99 latency (s)")
    axes[2].set_ylim(bottom=0)
    _health_panel(axes[3], timeline, t0, t1)
    if gpu:
        assert timeline is not None
        _gpu_panel(axes[4], timeline, t0)
    axes[-1].set_xlabel("seconds since run start")
    _decorate(axes, t0, t1, wins, marks)
    if timeline is not None:
        _alert_bands(axes[0], timeline, t0, t1)
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", fontsize=8)
    return figure_png(fig, path)


def _alert_bands(ax: Axes, timeline: Timeline, t0: float, t1: float) -> None:
    """Each alert's firing stretch (chaos.verify.alert_watch) as a band along the top panel's foot."""
    for j, e in enumerate(timeline.find_events("alert")):
        end = e.detail.get("end") or t1
        ax.axvspan(e.t - t0, float(end) - t0, ymin=0, ymax=0.06, color=_ALERT_COLOR, alpha=0.6, lw=0,
                   label="alert firing" if j == 0 else None)
        ax.annotate(e.name, xy=(e.t - t0, 0.07), xycoords=("data", "axes fraction"), fontsize=6, color=_ALERT_COLOR)


def _gpu_panel(ax: Axes, timeline: Timeline, t0: float) -> None:
    """GPU power (W) and temperature (degrees C, right axis), one line per GPU, an Xid event as a red line."""
    from chaos.observe.gpu import by_gpu

    power = by_gpu(timeline.series("gpu", "power_mw"))
    temp = by_gpu(timeline.series("gpu", "temp_c"))
    for name, pts in power.items():
        label = "GPU power (W)" + (f" {name}" if len(power) > 1 else "")
        ax.plot([s.t - t0 for s in pts], [float(s.value) / 1000.0 for s in pts], label=label,
                color="#8c564b" if len(power) == 1 else None)
    ax.set_ylabel("GPU power (W)")
    ax.set_ylim(bottom=0)
    if temp:
        twin = ax.twinx()
        for name, pts in temp.items():
            label = "GPU temperature (C)" + (f" {name}" if len(temp) > 1 else "")
            one = len(temp) == 1  # one GPU keeps its colour; several get matplotlib's cycle, dotted
            twin.plot([s.t - t0 for s in pts], [float(s.value) for s in pts], label=label,
                      color="#e377c2" if one else None, linestyle="-" if one else ":")
        twin.set_ylabel("temperature (C)")
        twin.legend(loc="upper left", fontsize=8)
    for j, e in enumerate(timeline.find_events("xid")):
        ax.axvline(e.t - t0, color=_FAULT_COLOR, lw=1.5, label="Xid" if j == 0 else None)


def _state_level(value: Any, levels: list[str]) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    name = STATE_ALIASES.get(str(value).lower(), str(value).lower())
    if name not in levels:
        levels.append(name)
    return float(levels.index(name))


def plot_breaker(
    timeline: Timeline,
    crossings: Iterable[Any] = (),
    records: Sequence[RequestRecord] = (),
    *,
    path: str | Path | None = None,
    title: str = "Breaker timeline",
    windows: Iterable[Window] = (),
    bucket_s: float | None = None,
    pool_of: Callable[[RequestRecord], str | None] = default_pool_of,
    canary: str = "canary",
    t0: float | None = None,
) -> bytes:
    """Breaker state per pool, the canary's traffic share and threshold crossings; returns PNG bytes.

    States come from samples source="gateway" name="pool_state" (label pool=...); the share from
    `records` (serving pool via `pool_of`) or, without records, samples name="traffic_share".
    """
    marks = as_markers(crossings)
    wins = fault_windows(timeline, windows)
    lo, hi = time_origin(records, timeline, _instants(wins, marks))
    t0 = lo if t0 is None else t0
    t1 = max(hi, t0 + 1e-3)
    bucket = bucket_s or _nice_bucket(t1 - t0)
    fig = Figure(figsize=(12, 7), layout="constrained")
    ax_state, ax_share = fig.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    fig.suptitle(title)

    levels = list(STATE_LEVELS)
    steps = state_steps(timeline.series("gateway", "pool_state"))
    for k, (pool, pts) in enumerate(sorted(steps.items())):
        xs = [t - t0 for t, _ in pts] + [t1 - t0]
        ys = [_state_level(v, levels) + 0.06 * k for _, v in pts]  # offset so equal states stay visible
        ax_state.step(xs, ys + ys[-1:], where="post", lw=2, label=f"pool {pool}")
    if not steps:
        ax_state.text(0.5, 0.5, "no pool_state samples", ha="center", va="center", transform=ax_state.transAxes)
    ax_state.set_yticks(range(len(levels)), levels)
    ax_state.set_ylim(-0.5, len(levels) - 0.5)
    ax_state.set_ylabel("breaker state")

    if records:
        xs, share = traffic_share(records, t0, t1, canary, bucket, pool_of)
        ax_share.step(xs, [100 * s for s in share], where="post", color="#17becf", label=f"{canary} share of answers")
    else:
        shares = sorted(timeline.series("gateway", "traffic_share"), key=lambda s: s.t)
        shares = [s for s in shares if s.labels.get("pool", canary) == canary]
        ax_share.step([s.t - t0 for s in shares], [100 * float(s.value) for s in shares], where="post",
                      color="#17becf", label=f"{canary} share (gateway)")
    ax_share.set_ylabel(f"{canary} traffic (%)")
    ax_share.set_ylim(-2, 102)
    ax_share.set_xlabel("seconds since run start")
    _decorate([ax_state, ax_share], t0, t1, wins, phase_markers(timeline), marks)
    for ax in (ax_state, ax_share):
        if ax.get_legend_handles_labels()[0]:
            ax.legend(loc="upper right", fontsize=8)
    return figure_png(fig, path)
