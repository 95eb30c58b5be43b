"""Results from raw records only: per-class percentiles, error counts, goodput."""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaos.load.records import RequestRecord

PCTS = (50, 90, 99)
METRICS = ("ttft", "tpot", "e2e")


def percentile(values: Sequence[float], q: float, *, method: str = "linear") -> float | None:
    """The q-th percentile (q in 0..100) of raw values; None when empty. The harness's one percentile:
    `method="linear"` interpolates (numpy's default, the load tables' P50/P99), `"nearest"` takes the
    nearest rank (how a breaker's window P99 and the report's tables are defined)."""
    if not values:
        return None
    xs = sorted(values)
    if method == "nearest":
        return nearest_rank(xs, q / 100.0)
    if method != "linear":
        raise ValueError(f"percentile method {method!r}: expected 'linear' or 'nearest'")
    pos = (len(xs) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def nearest_rank(sorted_values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) by nearest rank, the way a breaker's window P99 is defined; None for none.
    (The reference gateway has its own copy: the stand-in imports nothing of the harness.)"""
    if not sorted_values:
        return None
    return sorted_values[min(max(0, math.ceil(q * len(sorted_values)) - 1), len(sorted_values) - 1)]


@dataclass
class ClassStats:
    """Latency percentiles (seconds) and counts for one prompt class (or 'all')."""

    name: str
    attempts: int = 0
    ok: int = 0
    errors: dict[str, int] = field(default_factory=dict)
    pct: dict[str, dict[int, float | None]] = field(default_factory=dict)  # metric -> {50: s, ...}
    goodput_n: int = 0

    def get(self, metric: str, q: int) -> float | None:
        return self.pct.get(metric, {}).get(q)


@dataclass
class LoadStats:
    """Everything a verdict or report needs from a load run."""

    classes: dict[str, ClassStats]
    window_s: float
    logical: int
    outcomes: dict[str, int]
    goodput_per_s: float
    throughput_per_s: float

    @property
    def all(self) -> ClassStats:
        return self.classes["all"]

    def table(self) -> list[list[Any]]:
        def ms(c: ClassStats, m: str, q: int) -> float | None:
            v = c.get(m, q)
            return None if v is None else round(v * 1000, 2)

        rows = []
        for c in self.classes.values():
            rows.append([c.name, c.attempts, c.ok, sum(c.errors.values()),
                         *[ms(c, m, q) for m in METRICS for q in PCTS]])
        return rows


def slo_limits(slos: Mapping[str, Any] | None, cls: str | None) -> dict[str, float]:
    if not slos or cls is None or cls not in slos:
        return {}
    s = slos[cls]

    def get(k: str) -> Any:
        return getattr(s, k, None) if not isinstance(s, Mapping) else s.get(k)
    limits = {"ttft": get("ttft_p99_s"), "e2e": get("e2e_p99_s"), "tpot": get("tpot_p99_s")}
    return {k: v for k, v in limits.items() if v is not None}


def meets_slos(r: RequestRecord, limits: Mapping[str, float]) -> bool:
    """True when a successful record is within every limit it has a value for."""
    if not r.ok:
        return False
    return all(getattr(r, m) is None or getattr(r, m) <= lim for m, lim in limits.items())


def _fill(cs: ClassStats, recs: list[RequestRecord], slos: Mapping[str, Any] | None) -> None:
    cs.attempts = len(recs)
    good = [r for r in recs if r.ok]
    cs.ok = len(good)
    cs.errors = dict(Counter(r.error for r in recs if r.error))
    for m in METRICS:
        vals = [getattr(r, m) for r in good if getattr(r, m) is not None]
        cs.pct[m] = {q: percentile(vals, q) for q in PCTS}
    cs.goodput_n = sum(1 for r in good if r.final and meets_slos(r, slo_limits(slos, r.prompt_class)))


def summarize(records: Iterable[RequestRecord], slos: Mapping[str, Any] | None = None,
              window_s: float | None = None) -> LoadStats:
    """Per-class stats from raw records; `slos` maps prompt class -> LatencySLA (or dict).

    Goodput = final, successful requests meeting every SLO of their class, per second of window
    (first send to last end unless given).
    """
    recs = list(records)
    by: dict[str, list[RequestRecord]] = {}
    for r in recs:
        by.setdefault(r.prompt_class or "unknown", []).append(r)
    classes = {}
    for name in sorted(by):
        classes[name] = ClassStats(name)
        _fill(classes[name], by[name], slos)
    classes["all"] = ClassStats("all")
    _fill(classes["all"], recs, slos)
    if window_s is None:
        window_s = (max(r.t_end for r in recs) - min(r.t_send for r in recs)) if recs else 0.0
    finals = [r for r in recs if r.final]
    window = window_s

    def per_s(n: int) -> float:
        return n / window if window > 0 else 0.0
    return LoadStats(classes=classes, window_s=window_s, logical=len(finals),
                     outcomes=dict(Counter(r.outcome or "unknown" for r in finals)),
                     goodput_per_s=per_s(classes["all"].goodput_n),
                     throughput_per_s=per_s(sum(1 for r in finals if r.ok)))
