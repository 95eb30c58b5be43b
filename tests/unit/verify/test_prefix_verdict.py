"""The shared-prefix verdict: the hit rate against the environment's floor (shown, not judged, where it
sets none), KV-cache memory against the unshared run, TTFT against it, and vLLM's and the simulator's
counter names both read."""
from __future__ import annotations

from chaos.load.records import RequestRecord
from chaos.observe.metrics import parse_metrics
from chaos.verify.prefix import PrefixRun, prefix_counters, prefix_verdict


def recs(n: int, ttft: float) -> list[RequestRecord]:
    return [RequestRecord(f"r{i}", 1, 100.0 + i, ttft=ttft, e2e=ttft + 0.1, outcome="succeeded") for i in range(n)]


def test_a_cache_that_hits_passes_and_one_that_misses_fails():
    control = PrefixRun(recs(100, 0.05), 100_000, 0, 0.40)
    good = PrefixRun(recs(100, 0.02), 100_000, 93_000, 0.12)
    v = prefix_verdict(good, control, 0.85)
    assert v.ok and v.row("prefix_cache_hit_rate").measured == 0.93 and v.row("kv_cache_saved").measured == 0.28
    cold = PrefixRun(recs(100, 0.02), 100_000, 40_000, 0.12)
    assert prefix_verdict(cold, control, 0.85).row("prefix_cache_hit_rate").ok is False
    assert prefix_verdict(cold, control, None).row("prefix_cache_hit_rate").ok is None  # shown, not judged


def test_more_memory_or_a_slower_ttft_than_the_unshared_run_fails():
    control = PrefixRun(recs(100, 0.05), 100_000, 0, 0.20)
    worse = PrefixRun(recs(100, 0.08), 100_000, 95_000, 0.30)
    v = prefix_verdict(worse, control, 0.85)
    assert v.row("kv_cache_saved").ok is False and v.row("ttft_p50_vs_unshared_s").ok is False


def test_counters_read_vllm_and_simulator_names():
    vllm = parse_metrics("# TYPE vllm:prefix_cache_queries counter\nvllm:prefix_cache_queries_total 300\n"
                         "# TYPE vllm:prefix_cache_hits counter\nvllm:prefix_cache_hits_total 270\n")
    assert prefix_counters(vllm) == (300.0, 270.0)
    sim = parse_metrics("# TYPE vllm:prefix_cache_queries gauge\nvllm:prefix_cache_queries 50\n"
                        "# TYPE vllm:prefix_cache_hits gauge\nvllm:prefix_cache_hits 10\n")
    assert prefix_counters(sim) == (50.0, 10.0)
