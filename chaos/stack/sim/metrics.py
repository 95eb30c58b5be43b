"""vLLM's `vllm:*` Prometheus metrics, kept as plain numbers and rendered on scrape.

Observations are on the hot path (one ITL sample per token), so histograms are a bisect into a
counts list; rendering follows prometheus_client's text format 0.0.4 (counters as `*_total`),
and the standard `process_*` metrics come from prometheus_client's ProcessCollector.
"""
from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable

from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
               10.0, 20.0, 40.0, 80.0)
REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0,
                   60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
FINISHED_REASONS = ("stop", "length", "abort", "error")


def tokens_buckets(max_model_len: int) -> tuple[float, ...]:
    """vLLM's 1-2-5 buckets up to max_model_len."""
    out: list[float] = []
    mant, exp = (1, 2, 5), 0
    while True:
        for m in mant:
            v = m * 10 ** exp
            if v > max_model_len:
                return tuple(out)
            out.append(float(v))
        exp += 1


class Histogram:
    """Cumulative-on-render histogram."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, v: float) -> None:
        self.counts[bisect_left(self.bounds, v)] += 1
        self.sum += v


def _fmt(v: float) -> str:
    return repr(float(v))


class Metrics:
    """All engine metrics of one simulator replica."""

    def __init__(self, model_name: str, max_model_len: int, cache_info: dict[str, str]) -> None:
        self.labels = f'engine="0",model_name="{model_name}"'
        self.cache_info = cache_info
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished = dict.fromkeys(FINISHED_REASONS, 0)
        tb = tokens_buckets(max_model_len)
        self.hist: dict[str, tuple[Histogram, str]] = {
            "vllm:time_to_first_token_seconds": (Histogram(TTFT_BUCKETS), "Histogram of time to first token in seconds."),
            "vllm:inter_token_latency_seconds": (Histogram(ITL_BUCKETS), "Histogram of inter-token latency in seconds."),
            "vllm:e2e_request_latency_seconds": (Histogram(REQUEST_BUCKETS), "Histogram of e2e request latency in seconds."),
            "vllm:request_queue_time_seconds": (Histogram(REQUEST_BUCKETS), "Histogram of time spent in WAITING phase for request."),
            "vllm:request_prefill_time_seconds": (Histogram(REQUEST_BUCKETS), "Histogram of time spent in PREFILL phase for request."),
            "vllm:request_decode_time_seconds": (Histogram(REQUEST_BUCKETS), "Histogram of time spent in DECODE phase for request."),
            "vllm:request_prompt_tokens": (Histogram(tb), "Number of prefill tokens processed."),
            "vllm:request_generation_tokens": (Histogram(tb), "Number of generation tokens processed."),
        }
        self.ttft = self.hist["vllm:time_to_first_token_seconds"][0]
        self.itl = self.hist["vllm:inter_token_latency_seconds"][0]
        self._process = CollectorRegistry()
        ProcessCollector(registry=self._process)

    def observe_finished(self, reason: str, e2e: float, queue: float, prefill: float,
                         decode: float, prompt_tokens: int, gen_tokens: int) -> None:
        self.finished[reason] = self.finished.get(reason, 0) + 1
        h = self.hist
        h["vllm:e2e_request_latency_seconds"][0].observe(e2e)
        h["vllm:request_queue_time_seconds"][0].observe(queue)
        h["vllm:request_prefill_time_seconds"][0].observe(prefill)
        h["vllm:request_decode_time_seconds"][0].observe(decode)
        h["vllm:request_prompt_tokens"][0].observe(prompt_tokens)
        h["vllm:request_generation_tokens"][0].observe(gen_tokens)

    def render(self, gauges: dict[str, float], counters: dict[str, float]) -> bytes:
        """Prometheus text: engine gauges/counters passed in, plus our own series."""
        lab = self.labels
        out: list[str] = []
        add = out.append
        gauge_help = {"vllm:num_requests_running": "Number of requests in model execution batches.",
                      "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
                      "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage."}
        for name, val in gauges.items():
            add(f"# HELP {name} {gauge_help.get(name, name)}\n# TYPE {name} gauge\n{name}{{{lab}}} {_fmt(val)}\n")
        info = ",".join(f'{k}="{v}"' for k, v in sorted(self.cache_info.items()))
        add("# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
            f"# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{{info},engine=\"0\"}} 1.0\n")
        all_counters = {"vllm:prompt_tokens": self.prompt_tokens,
                        "vllm:generation_tokens": self.generation_tokens, **counters}
        for name, val in all_counters.items():
            add(f"# HELP {name}_total {name}\n# TYPE {name}_total counter\n{name}_total{{{lab}}} {_fmt(val)}\n")
        add("# HELP vllm:request_success_total Count of successfully processed requests.\n"
            "# TYPE vllm:request_success_total counter\n")
        for reason, val in self.finished.items():
            add(f'vllm:request_success_total{{{lab},finished_reason="{reason}"}} {_fmt(val)}\n')
        for name, (h, help_) in self.hist.items():
            add(self._render_hist(name, h, help_))
        return "".join(out).encode() + generate_latest(self._process)

    def _render_hist(self, name: str, h: Histogram, help_: str) -> str:
        lab, cum = self.labels, 0
        lines = [f"# HELP {name} {help_}\n# TYPE {name} histogram\n"]
        for bound, c in zip(h.bounds, h.counts, strict=False):
            cum += c
            lines.append(f'{name}_bucket{{{lab},le="{bound}"}} {_fmt(cum)}\n')
        cum += h.counts[-1]
        lines.append(f'{name}_bucket{{{lab},le="+Inf"}} {_fmt(cum)}\n')
        lines.append(f"{name}_count{{{lab}}} {_fmt(cum)}\n{name}_sum{{{lab}}} {_fmt(h.sum)}\n")
        return "".join(lines)


GaugeSource = Callable[[], dict[str, float]]
