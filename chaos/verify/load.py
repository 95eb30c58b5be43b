"""Load verdicts that can fail on what a serving team watches, per prompt class:

- TTFT, TPOT and E2E P99 over ALL attempts against the SLA, a failed attempt counting as a miss:
  a run whose retries hid 2 % of failed attempts from its users still breaks a P99 (a P99 taken
  over successful attempts only would pass it);
- the error rate of what users got (final requests; a rejected request is an error) against the
  error budget, and the goodput share (requests meeting every SLO at once) against its floor;
- against a stored baseline (chaos/load/baseline.py): every P50/P99 within `value <= base x (1 +
  rel) + abs_s`, and throughput not below `base x (1 - rel)`. A quantile is judged only where both runs hold enough of the
  class's attempts to estimate it (`MIN_ATTEMPTS_FOR`); otherwise the row is shown, not judged;
- the 32k class's own failure rate over attempts (the team's separate alert), and, for the burst of
  consecutive 32k requests, whether the last ones take longer than the first (latency drift).

A class with fewer than `min_requests` requests is shown, not judged (n/a), and says why.
"""
from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from chaos.env.model import SLAs
from chaos.load.baseline import METRICS, QUANTILES, figures, with_misses
from chaos.load.records import RequestRecord
from chaos.load.stats import nearest_rank
from chaos.verify.verdict import Verdict

MIN_REQUESTS = 10
BURST_DRIFT_MAX = 1.5   # the last 10 of a burst may take at most 1.5x the first 10 (medians of E2E)
BURST_EDGE = 10
# the fewest attempts of a class a quantile is compared from. Below 100 a nearest-rank P99 is the
# sample's maximum: one request's latency, so two healthy runs differ by whatever that one request
# met (local-vllm's mix: about 25 requests a class, P99 2.2x apart between healthy runs, P50 up to 1.8x)
MIN_ATTEMPTS_FOR = {50: MIN_REQUESTS, 99: 100}


def _shown(v: float | None, failed: int, n: int) -> Any:
    if v is None:
        return None
    return f"miss ({failed} of {n} attempts failed)" if math.isinf(v) else round(v, 6)


def load_verdict(records: Sequence[RequestRecord], slas: SLAs, *, baseline: Mapping[str, Any] | None = None,
                 min_requests: int = MIN_REQUESTS) -> Verdict:
    """See the module docstring. `data` keeps the run's figures (the same shape as a baseline's)."""
    f = figures(records, slas.latency)
    v = Verdict("load")
    by: dict[str, list[RequestRecord]] = {}
    for r in records:
        by.setdefault(r.prompt_class or "unknown", []).append(r)
    for cls, sla in sorted(slas.latency.items()):
        recs, c = by.get(cls, []), f["classes"].get(cls)
        n = c["requests"] if c else 0
        judged = n >= min_requests
        why = "" if judged else f"; {n} requests, fewer than {min_requests}: not judged"
        failed = sum(1 for r in recs if not r.ok)
        for metric, limit in (("ttft", sla.ttft_p99_s), ("tpot", sla.tpot_p99_s), ("e2e", sla.e2e_p99_s)):
            if limit is None:
                continue
            p99 = nearest_rank(with_misses(recs, metric), 0.99)
            v.add(f"{cls}.{metric}_p99", limit, _shown(p99, failed, len(recs)),
                  None if p99 is None or not judged else p99 <= limit,
                  f"{len(recs)} attempts, {failed} failed counted as misses{why}")
        err = c["error_rate"] if c else None
        v.add(f"{cls}.error_rate", slas.error_budget, None if err is None else round(err, 4),
              None if err is None or not judged else err <= slas.error_budget,
              f"{sum(1 for r in recs if r.final and r.ok)} of {n} requests answered (a rejection is an error){why}")
        share = c["goodput_share"] if c else None
        v.add(f"{cls}.goodput_share", slas.min_goodput_share, None if share is None else round(share, 4),
              None if share is None or not judged else share >= slas.min_goodput_share,
              f"requests meeting every SLO of the class at once{why}")
    if baseline is not None:
        _baseline_rows(v, f, by, baseline)
    v.data = {"figures": f, "goodput_per_s": f["goodput_per_s"] or 0.0}
    return v


def baseline_row(v: Verdict, cls: str, metric: str, q: int, *, was: float, now: Any,
                 attempts: tuple[int | None, int | None], tolerance: Mapping[str, Any]) -> None:
    """One `<cls>.<metric>_p<q>_vs_baseline` row: `now` (seconds, or how it missed) against the
    baseline's `was` with its tolerance. `attempts` = (the baseline's, the run's) for the class; a
    count not recorded (version 1 files) is taken as enough."""
    rel, abs_s = float(tolerance.get("rel", 0.2)), float(tolerance.get("abs_s", 0.005))
    limit = was * (1 + rel) + abs_s
    need = MIN_ATTEMPTS_FOR[q]
    fewest = min((n for n in attempts if n is not None), default=need)
    note = f"baseline {was:.4f} s, tolerance +{rel:.0%} +{abs_s * 1000:g} ms"
    if fewest < need:
        v.add(f"{cls}.{metric}_p{q}_vs_baseline", round(limit, 6), now, None,
              f"{note}; {fewest} attempts, fewer than the {need} a P{q} is estimated from: not judged")
        return
    ok = None if now is None else (not isinstance(now, str) and now <= limit)
    v.add(f"{cls}.{metric}_p{q}_vs_baseline", round(limit, 6), now, ok, note)


def _baseline_rows(v: Verdict, f: Mapping[str, Any], by: Mapping[str, list[RequestRecord]],
                   baseline: Mapping[str, Any]) -> None:
    tol = baseline.get("tolerance", {})
    rel = float(tol.get("rel", 0.2))
    for cls, base in sorted(baseline.get("classes", {}).items()):
        recs = by.get(cls, [])
        failed = sum(1 for r in recs if not r.ok)
        counted = (base.get("attempts"), len(recs))
        for metric in METRICS:
            values = with_misses(recs, metric)  # sorted once for both quantiles
            for q in QUANTILES:
                was = (base.get(metric) or {}).get(str(q))
                if was is not None:
                    now = nearest_rank(values, q / 100)
                    baseline_row(v, cls, metric, q, was=was, now=_shown(now, failed, len(recs)),
                                 attempts=counted, tolerance=tol)
        was_tps, now_tps = base.get("tokens_per_s"), (f["classes"].get(cls) or {}).get("tokens_per_s")
        if was_tps:
            floor = was_tps * max(0.0, 1 - rel)
            v.add(f"{cls}.tokens_per_s_vs_baseline", round(floor, 2), None if now_tps is None else round(now_tps, 2),
                  None if now_tps is None else now_tps >= floor, f"baseline {was_tps:.1f} output tokens/s, -{rel:.0%}")


def regressed_classes(v: Verdict) -> list[str]:
    """The prompt classes with a failing `_vs_baseline` row, in order."""
    return list(dict.fromkeys(r.check.split(".", 1)[0] for r in v.failures if r.check.endswith("_vs_baseline")))


def long_prompt_failures(records: Sequence[RequestRecord], cls: str, limit: float) -> Verdict:
    """The team's separate alert: the share of the 32k class's attempts that failed, retried or not."""
    recs = [r for r in records if r.prompt_class == cls]
    failed = sum(1 for r in recs if not r.ok)
    rate = failed / len(recs) if recs else None
    v = Verdict(f"{cls} failure rate")
    v.add(f"{cls}.attempt_failure_rate", limit, None if rate is None else round(rate, 4),
          None if rate is None else rate <= limit, f"{failed} of {len(recs)} attempts failed (retries included)")
    return v


def burst_drift(records: Sequence[RequestRecord], cls: str, max_ratio: float = BURST_DRIFT_MAX) -> Verdict:
    """Does the 100th request of a burst take longer than the first? The median E2E of the last 10
    answered requests over that of the first 10, in the order they were sent."""
    done = sorted((r for r in records if r.prompt_class == cls and r.ok and r.final and r.e2e is not None),
                  key=lambda r: r.t_send)
    v = Verdict("burst latency drift")
    if len(done) < 2 * BURST_EDGE:
        v.add("e2e_last10_over_first10", max_ratio, None, None, f"{len(done)} answered requests: too few to compare")
        return v
    first = statistics.median(r.e2e for r in done[:BURST_EDGE] if r.e2e is not None)
    last = statistics.median(r.e2e for r in done[-BURST_EDGE:] if r.e2e is not None)
    ratio = last / first if first > 0 else math.inf
    v.add("e2e_last10_over_first10", max_ratio, round(ratio, 3), ratio <= max_ratio,
          f"median E2E first 10 {first:.3f} s, last 10 {last:.3f} s, over {len(done)} requests")
    v.data = {"e2e_by_order": [round(r.e2e or 0.0, 4) for r in done]}
    return v


def degraded_floor_verdict(records: Sequence[RequestRecord], floor: Any) -> Verdict:
    """A replica in its degraded configuration against the environment's floor: output tokens per
    second over the run, and the E2E P99 over every attempt (a failed attempt is a miss)."""
    recs = list(records)
    window = (max(r.t_end for r in recs) - min(r.t_send for r in recs)) if recs else 0.0
    tokens = sum(r.output_tokens or 0 for r in recs if r.ok)
    tps = tokens / window if window > 0 else None
    failed = sum(1 for r in recs if not r.ok)
    p99 = nearest_rank(with_misses(recs, "e2e"), 0.99)
    v = Verdict("degraded-mode floor")
    v.add("tokens_per_s", floor.min_tokens_per_s, None if tps is None else round(tps, 1),
          None if tps is None else tps >= floor.min_tokens_per_s, f"{tokens} output tokens in {window:.1f} s")
    v.add("e2e_p99_s", floor.max_e2e_p99_s, _shown(p99, failed, len(recs)),
          None if p99 is None else p99 <= floor.max_e2e_p99_s, f"{len(recs)} attempts, {failed} failed as misses")
    return v
