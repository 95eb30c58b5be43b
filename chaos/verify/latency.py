"""Latency verdicts per prompt class: P99 against the SLAs, P50/P99 against a stored baseline
(regression check with tolerances), and goodput. Percentiles come from raw records through
chaos.load.stats (one implementation for the whole harness).

Baseline file (JSON):
    {"version": 1, "created": <epoch>, "tolerance": {"rel": 0.2, "abs_s": 0.005},
     "classes": {"short": {"ttft": {"50": s, "99": s}, "tpot": {...}, "e2e": {...}}, ...},
     "goodput_per_s": x}
A measured value passes when value <= baseline * (1 + rel) + abs_s.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

from chaos.env.model import SLAs
from chaos.errors import ConfigError
from chaos.load.records import RequestRecord
from chaos.load.stats import METRICS, LoadStats, summarize
from chaos.verify.verdict import Verdict

BASELINE_PCTS = (50, 99)


def baseline_from(stats: LoadStats, *, rel: float = 0.2, abs_s: float = 0.005) -> dict[str, Any]:
    """A baseline document from a load run's stats."""
    classes = {name: {m: {str(q): c.get(m, q) for q in BASELINE_PCTS} for m in METRICS}
               for name, c in stats.classes.items()}
    return {"version": 1, "created": time.time(), "tolerance": {"rel": rel, "abs_s": abs_s},
            "classes": classes, "goodput_per_s": stats.goodput_per_s}


def write_baseline(path: str | Path, records: Sequence[RequestRecord], slas: SLAs | None = None, *,
                   rel: float = 0.2, abs_s: float = 0.005) -> dict[str, Any]:
    """Compute and store a baseline from raw records; returns the document."""
    doc = baseline_from(summarize(records, slas.latency if slas else None), rel=rel, abs_s=abs_s)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(doc, indent=1), encoding="utf-8")
    return doc


def read_baseline(path: str | Path) -> dict[str, Any]:
    """Load and check a baseline file; problems are one ConfigError line naming the file and field."""
    p = Path(path)
    if not p.exists():
        raise ConfigError(f"{p}: baseline file not found (write one with write_baseline)")
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except ValueError as e:
        raise ConfigError(f"{p}: baseline is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("classes"), dict):
        raise ConfigError(f"{p}: baseline needs a 'classes' mapping")
    tol = doc.setdefault("tolerance", {"rel": 0.2, "abs_s": 0.005})
    for k in ("rel", "abs_s"):
        if not isinstance(tol.get(k, 0), (int, float)) or tol.get(k, 0) < 0:
            raise ConfigError(f"{p}: tolerance.{k} must be a number >= 0")
    return doc


def latency_verdict(records: Sequence[RequestRecord], slas: SLAs, *, baseline: Mapping[str, Any] | None = None,
                    factor: float = 1.0, min_goodput_share: float | None = None,
                    window: tuple[float, float] | None = None, min_samples: int = 1) -> Verdict:
    """Per class: P99 TTFT/TPOT/E2E vs the SLA (x factor, e.g. degraded_latency_factor under
    network faults), P50/P99 vs the baseline, and the goodput share of finished requests."""
    if window is not None:
        records = [r for r in records if window[0] <= r.t_send <= window[1]]
    stats = summarize(records, slas.latency)
    v = Verdict("latency", window=window)
    for cls, sla in sorted(slas.latency.items()):
        c = stats.classes.get(cls)
        for metric, limit in (("ttft", sla.ttft_p99_s), ("tpot", sla.tpot_p99_s), ("e2e", sla.e2e_p99_s)):
            if limit is None:
                continue
            p99 = c.get(metric, 99) if c else None
            n = c.ok if c else 0
            ok = None if p99 is None or n < min_samples else p99 <= limit * factor
            v.add(f"{cls}.{metric}_p99", round(limit * factor, 6), None if p99 is None else round(p99, 6), ok,
                  f"{n} successful attempts" + (f"; SLA {limit:g} s x{factor:g}" if factor != 1 else ""))
    if baseline is not None:
        _baseline_rows(v, stats, baseline)
    finals = stats.logical
    share = stats.all.goodput_n / finals if finals else None
    v.add("goodput_share", min_goodput_share, None if share is None else round(share, 6),
          None if min_goodput_share is None or share is None else share >= min_goodput_share,
          f"{stats.all.goodput_n}/{finals} requests met every SLO; {stats.goodput_per_s:.2f}/s over {stats.window_s:.1f} s")
    v.data = {"table": stats.table(), "goodput_per_s": stats.goodput_per_s, "outcomes": stats.outcomes}
    return v


def _baseline_rows(v: Verdict, stats: LoadStats, baseline: Mapping[str, Any]) -> None:
    tol = baseline.get("tolerance", {})
    rel, abs_s = float(tol.get("rel", 0.2)), float(tol.get("abs_s", 0.005))
    for cls, metrics in sorted(baseline.get("classes", {}).items()):
        c = stats.classes.get(cls)
        for metric, by_q in sorted(metrics.items()):
            for q, base in sorted(by_q.items()):
                if base is None:
                    continue
                now = c.get(metric, int(q)) if c else None
                limit = base * (1 + rel) + abs_s
                v.add(f"{cls}.{metric}_p{q}_vs_baseline", round(limit, 6), None if now is None else round(now, 6),
                      None if now is None else now <= limit,
                      f"baseline {base:.4f} s, tolerance +{rel:.0%} +{abs_s * 1000:g} ms")
