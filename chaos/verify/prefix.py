"""The shared-prefix workload's verdicts (the seed's roadmap: prefix reuse of at least 85 % over 1000
requests that share prefixes, memory saved and the latency change), read from the replicas' own
`/metrics` (vLLM's prefix_cache_queries/hits counters, in tokens, and kv_cache_usage_perc) and from
the records of the same number of requests of the same size with no shared prefix."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chaos.load.records import RequestRecord
from chaos.load.stats import percentile
from chaos.observe.metrics import MetricSample, value
from chaos.verify.verdict import Verdict

KV_SLACK = 0.02          # the shared run may peak at most 2 points of KV-cache usage above the control
TTFT_SLACK = (1.2, 0.01)  # its TTFT P50 at most 1.2 x the control's + 10 ms (prefill skipped can only help)


def prefix_counters(samples: list[MetricSample]) -> tuple[float, float]:
    """(queries, hits) in tokens; vLLM names them ..._total, the simulator without the suffix."""
    q = value(samples, "vllm:prefix_cache_queries_total")
    h = value(samples, "vllm:prefix_cache_hits_total")
    if q is None:
        q, h = value(samples, "vllm:prefix_cache_queries"), value(samples, "vllm:prefix_cache_hits")
    return q or 0.0, h or 0.0


@dataclass
class PrefixRun:
    """One run's side of the comparison: its records, the counters' growth, the peak KV-cache usage."""

    records: Sequence[RequestRecord]
    queries: float
    hits: float
    kv_peak: float | None

    def ttft_p50(self) -> float | None:
        return percentile([r.ttft for r in self.records if r.ok and r.ttft is not None], 50)


def prefix_verdict(shared: PrefixRun, control: PrefixRun, min_hit_rate: float | None) -> Verdict:
    """Prefix reuse judged against a control run: hit rate, memory saved and the latency change."""
    v = Verdict("shared-prefix workload")
    rate = shared.hits / shared.queries if shared.queries else None
    v.add("prefix_cache_hit_rate", min_hit_rate, None if rate is None else round(rate, 4),
          None if rate is None or min_hit_rate is None else rate >= min_hit_rate,
          f"{shared.hits:.0f} of {shared.queries:.0f} prompt tokens found in the cache"
          + ("" if min_hit_rate is not None else "; the environment sets no slas.prefix_cache_hit_rate"))
    if shared.kv_peak is not None and control.kv_peak is not None:
        saved = control.kv_peak - shared.kv_peak
        v.add("kv_cache_saved", f">= -{KV_SLACK:g}", round(saved, 4), saved >= -KV_SLACK,
              f"peak KV-cache usage {shared.kv_peak:.1%} shared vs {control.kv_peak:.1%} unshared")
    else:
        v.add("kv_cache_saved", f">= -{KV_SLACK:g}", None, None, "the replicas report no vllm:kv_cache_usage_perc")
    a, b = shared.ttft_p50(), control.ttft_p50()
    if a is not None and b is not None:
        limit = b * TTFT_SLACK[0] + TTFT_SLACK[1]
        v.add("ttft_p50_vs_unshared_s", round(limit, 4), round(a, 4), a <= limit,
              f"TTFT P50 {a * 1000:.1f} ms shared vs {b * 1000:.1f} ms unshared ({(a - b) * 1000:+.1f} ms)")
    fails = sum(1 for r in shared.records if not r.ok)
    v.add("failed_requests", 0, fails, fails == 0, f"of {len(shared.records)} attempts")
    return v
