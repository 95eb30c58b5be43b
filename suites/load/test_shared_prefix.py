"""Prefix reuse (the seed's roadmap): 1000 requests over a few shared 4 x 512-token prefixes, against
the same number of requests of the same size with no shared prefix. From the replicas' own /metrics:
the prefix-cache hit rate (at least `slas.prefix_cache_hit_rate` where the environment sets it), the
KV-cache memory saved (peak usage against the unshared run), and the TTFT change."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chaos import Experiment, ExperimentRun, Run, StackHandle, SummaryCollector, latency_table
from chaos import evidence as rep
from chaos.load.workloads import DEFAULT_CLASSES
from chaos.observe.metrics import MetricsScraper
from chaos.observe.timeline import Timeline
from chaos.verify.prefix import PrefixRun, prefix_counters, prefix_verdict

N = 1000
SUFFIX_TOKENS = 64  # chaos.load.workloads.shared_prefix_set's unique tail


def _counters(urls: list[str]) -> tuple[float, float]:
    """The replicas' prefix-cache counters (queries, hits), summed."""
    q = h = 0.0
    for u in urls:
        scraper = MetricsScraper(u)
        dq, dh = prefix_counters(scraper.scrape())
        scraper.close()
        q, h = q + dq, h + dh
    return q, h


@pytest.mark.proves("prefix-reuse")
def test_shared_prefix_reuse_memory_and_latency(stack: StackHandle, run_experiment: Callable[..., ExperimentRun],
        summary: SummaryCollector) -> None:
    env = stack.env
    rep.labels(epic="Performance", feature="Load", story="shared-prefix workload", suite="load")
    rep.title(f"{N} requests sharing prefixes against {N} that share none")

    def steps(run: Run) -> None:
        urls = [stack.direct_url(name) for name in stack.targets]
        prefix_tokens = env.load.classes.get("short", DEFAULT_CLASSES["short"]) * 4
        runs = {}
        loads: list[tuple[str, dict[str, Any]]] = [
            ("unshared", {"workload": "mix", "mix": {"same-size": 1}, "special_share": 0.0,
                          "classes": {"same-size": prefix_tokens + SUFFIX_TOKENS}}),
            ("shared", {"workload": "shared_prefix", "workload_n": N})]
        for label, load in loads:
            q0, h0 = _counters(urls)
            scrapers = [MetricsScraper(u, Timeline(), interval_s=0.2).start() for u in urls]  # the KV-cache peak
            with run.phase(f"{N} requests, {label} prefixes"):
                # the unshared run is stopped once it has sent as many requests as the shared one
                run.start_load(duration_s=run.scaled(600), **load)
                if label == "unshared":
                    run.poll(lambda: len(run.load.records()) >= N, timeout=run.scaled(600), every=0.5)
                    records = run.stop_load()
                else:
                    records = run.finish_load()
            for s in scrapers:
                s.stop()
            q1, h1 = _counters(urls)
            peaks = [max((x.value for x in s.timeline.series("metrics", "vllm:kv_cache_usage_perc")), default=None)
                     for s in scrapers]
            kv = max((p for p in peaks if p is not None), default=None)
            runs[label] = PrefixRun(records, q1 - q0, h1 - h0, kv)
            rep.attach_table(latency_table(records, None), name=f"latency, {label}")
        v = prefix_verdict(runs["shared"], runs["unshared"], env.slas.prefix_cache_hit_rate)
        summary.set("load", prefix_cache_hit_rate=v.row("prefix_cache_hit_rate").measured)
        run.judge("prefix reuse, memory and latency", [v])

    run_experiment(Experiment("shared-prefix", steps=steps))
