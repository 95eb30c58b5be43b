"""Prometheus scraper for vLLM's `vllm:*` metrics, parsed with prometheus_client's parser."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from prometheus_client.parser import text_string_to_metric_families

from chaos.observe._http import HttpGetter, error_class
from chaos.observe.base import PollingObserver
from chaos.observe.timeline import Timeline

if TYPE_CHECKING:
    from chaos.observe.timeline import Sample


@dataclass(frozen=True)
class MetricSample:
    """One parsed sample: full sample name (with _total/_bucket suffix), labels, value."""

    name: str
    value: float
    labels: dict[str, str] = field(default_factory=dict)


def parse_metrics(text: str, prefixes: tuple[str, ...] = ("vllm:",), buckets: bool = False) -> list[MetricSample]:
    """Samples whose name starts with one of `prefixes`; histogram buckets only when asked."""
    out: list[MetricSample] = []
    for fam in text_string_to_metric_families(text):
        if not fam.name.startswith(prefixes):
            continue
        for s in fam.samples:
            if not buckets and s.name.endswith("_bucket"):
                continue
            if s.name.endswith("_created"):
                continue
            out.append(MetricSample(s.name, float(s.value), dict(s.labels)))
    return out


def value(samples: list[MetricSample], name: str, **labels: str) -> float | None:
    """Sum of the samples named `name` whose labels include `labels` (None when absent)."""
    hits = [s.value for s in samples if s.name == name and all(s.labels.get(k) == v for k, v in labels.items())]
    return sum(hits) if hits else None


class MetricsScraper(PollingObserver):
    """Scrapes /metrics every `interval_s` into samples `metrics/<sample name>` with labels."""

    source = "metrics"

    def __init__(self, base_url: str, timeline: Timeline | None = None, *, interval_s: float = 1.0,
                 timeout_s: float = 2.0, path: str = "/metrics", prefixes: tuple[str, ...] = ("vllm:",),
                 buckets: bool = False, **kw: Any) -> None:
        super().__init__(timeline, interval_s=interval_s, **kw)
        self.http = HttpGetter(base_url, timeout_s)
        self.path = path
        self.prefixes = prefixes
        self.buckets = buckets
        self.last: list[MetricSample] = []
        self.scrape_ok: bool | None = None

    def scrape(self) -> list[MetricSample]:
        status, _, data = self.http.request("GET", self.path)
        if status != 200:
            raise RuntimeError(f"GET {self.path}: status {status}")
        return parse_metrics(data.decode("utf-8", "replace"), self.prefixes, self.buckets)

    def poll(self) -> None:
        t = self.timeline.clock()
        try:
            samples = self.scrape()
        except Exception as e:
            self._scrape_state(False, t, f"{error_class(e)}: {e}")
            return
        self._scrape_state(True, t, None)
        self.last = samples
        self.timeline.extend([_to_sample(t, s, self.source) for s in samples])

    def _scrape_state(self, ok: bool, t: float, error: str | None) -> None:
        self.timeline.sample(self.source, "scrape_ok", ok, t=t)
        if ok != self.scrape_ok:
            self.timeline.event("state", "metrics_scrape", t=t, ok=ok, error=error)
            self.scrape_ok = ok

    def close(self) -> None:
        self.http.close()


def _to_sample(t: float, s: MetricSample, source: str) -> Sample:
    from chaos.observe.timeline import Sample

    return Sample(t, source, s.name, s.value, s.labels)


# the engine's own progress counters (family names: a counter's family has no _total): generated tokens, running
# requests and first tokens (the TTFT histogram's count), all that progress truth and the heartbeat read
ENGINE_COUNTERS = ("vllm:generation_tokens", "vllm:num_requests_running", "vllm:time_to_first_token_seconds")


def engine_counter_scraper(url: str, timeline: Timeline, replica: str, interval_s: float = 0.5) -> MetricsScraper:
    """The replica's ENGINE_COUNTERS at `url` every `interval_s`, as source `metrics:<replica>` (started by the
    caller): progress truth's and the heartbeat's one source."""
    s = MetricsScraper(url, timeline, interval_s=interval_s, timeout_s=1.0, prefixes=ENGINE_COUNTERS)
    s.source = f"metrics:{replica}"
    return s
