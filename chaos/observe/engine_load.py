"""What the engines are doing, from their own counters: each replica's running requests
(`vllm:num_requests_running`), generated tokens so far (`vllm:generation_tokens_total`) and requests ended
by abort so far (`vllm:request_success_total{finished_reason="abort"}`), scraped from its /metrics in one
sweep over the replicas per poll. Real vLLM and the simulator export all three."""
from __future__ import annotations

from dataclasses import dataclass, field

from chaos.observe._http import HttpGetter
from chaos.observe.base import PollingObserver
from chaos.observe.metrics import parse_metrics, value

RUNNING = "vllm:num_requests_running"
GENERATED = "vllm:generation_tokens_total"
FINISHED = "vllm:request_success_total"


@dataclass(frozen=True)
class EngineSample:
    """One sweep: when, and per replica answering (running requests, generated tokens, aborted requests so far;
    aborted None where the replica does not count them)."""

    t: float
    replicas: dict[str, tuple[float, float, float | None]]


@dataclass
class EngineLoad:
    """The sweeps of one run and the replicas' scrape failures (replica -> last error)."""

    replicas: tuple[str, ...]
    samples: list[EngineSample] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    def totals(self) -> list[tuple[float, float, float]]:
        """(t, running, generated) summed over the replicas, from sweeps in which every replica answered."""
        want = set(self.replicas)
        return [(s.t, sum(v[0] for v in s.replicas.values()), sum(v[1] for v in s.replicas.values()))
                for s in self.samples if set(s.replicas) == want]

    def aborted(self) -> list[tuple[float, float]]:
        """(t, aborted requests so far) summed over the replicas, from full sweeps in which each counts them."""
        want = set(self.replicas)
        return [(s.t, sum(v[2] for v in s.replicas.values() if v[2] is not None)) for s in self.samples
                if set(s.replicas) == want and all(v[2] is not None for v in s.replicas.values())]


class EngineLoadSampler(PollingObserver):
    """Scrapes every replica's /metrics each `interval_s` into an EngineLoad (bounded by max_duration_s)."""

    source = "engine_load"

    def __init__(self, urls: dict[str, str], *, interval_s: float = 0.1, timeout_s: float = 1.0,
                 max_duration_s: float = 600.0) -> None:
        super().__init__(None, interval_s=interval_s, max_duration_s=max_duration_s)
        self.load = EngineLoad(tuple(urls))
        self._http = {name: HttpGetter(url, timeout_s) for name, url in urls.items()}

    def poll(self) -> None:
        t = self.timeline.clock()
        got: dict[str, tuple[float, float, float | None]] = {}
        for name, http in self._http.items():
            try:
                status, _, body = http.request("GET", "/metrics")
                if status != 200:
                    raise OSError(f"GET /metrics -> {status}")
                samples = parse_metrics(body.decode("utf-8", "replace"))
            except Exception as e:  # a replica not answering is recorded, not fatal: its sweep is partial
                self.load.errors[name] = f"{type(e).__name__}: {e}"
                continue
            running, generated = value(samples, RUNNING), value(samples, GENERATED)
            if running is None or generated is None:
                self.load.errors[name] = f"its /metrics has no {RUNNING} or {GENERATED}"
                continue
            got[name] = (running, generated, value(samples, FINISHED, finished_reason="abort"))
        self.load.samples.append(EngineSample(t, got))

    def close(self) -> None:
        for http in self._http.values():
            http.close()
