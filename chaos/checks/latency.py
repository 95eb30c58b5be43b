"""Latency percentiles over a window's requests; a failed request missed every latency objective, so it
counts as +inf (never dropped): a fault that turns slow answers into errors cannot make P99 look better."""
from __future__ import annotations

import math

from chaos.checks.base import MIN_REQUESTS, Bound, Window, require
from chaos.load.records import RequestRecord
from chaos.load.stats import nearest_rank

METRICS = ("e2e", "ttft", "tpot")


class _Percentile(Bound):
    def __init__(self, q: float, limit_s: float, metric: str, prompt_class: str | None, min_requests: int) -> None:
        require(metric in METRICS, "metric", f"one of {', '.join(METRICS)}", metric)
        require(0 < q <= 100, "q", "a percentile in (0, 100]", q)
        require(limit_s > 0, "limit_s", "seconds > 0", limit_s)
        require(min_requests >= 1, "min_requests", "at least 1", min_requests)
        self.q, self.limit, self.metric, self.prompt_class, self.min_requests = q, limit_s, metric, prompt_class, min_requests
        self.name = f"{metric} P{q:g}" + (f" ({prompt_class})" if prompt_class else "")

    def value(self, done: list[RequestRecord], window: Window) -> float:
        vals = sorted(math.inf if not r.ok or getattr(r, self.metric) is None else getattr(r, self.metric) for r in done)
        p = nearest_rank(vals, self.q / 100.0)
        return math.inf if p is None else p

    def expected(self) -> str:
        return f"<= {self.limit:g} s"

    def show(self, value: float) -> str:
        return "a failure (counted as a miss)" if math.isinf(value) else f"{value:.3f} s"


def percentile_below_s(q: float, limit_s: float, *, metric: str = "e2e", prompt_class: str | None = None,
                       min_requests: int = MIN_REQUESTS) -> Bound:
    """The q-th percentile (nearest rank) of `metric` (e2e, ttft, tpot) is <= limit_s, a failure a miss."""
    return _Percentile(q, limit_s, metric, prompt_class, min_requests)


def p99_below_s(limit_s: float, *, metric: str = "e2e", prompt_class: str | None = None,
                min_requests: int = MIN_REQUESTS) -> Bound:
    """P99 of `metric` <= limit_s seconds, a failure counting as a miss."""
    return _Percentile(99, limit_s, metric, prompt_class, min_requests)


def p50_below_s(limit_s: float, *, metric: str = "e2e", prompt_class: str | None = None,
                min_requests: int = MIN_REQUESTS) -> Bound:
    """P50 of `metric` <= limit_s seconds, a failure counting as a miss."""
    return _Percentile(50, limit_s, metric, prompt_class, min_requests)
