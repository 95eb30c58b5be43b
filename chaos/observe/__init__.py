"""Observers: each a thread with start()/stop(), sampling into one Timeline on the wall clock."""
from chaos.observe.base import PollingObserver
from chaos.observe.completion import CompletionProber, first_ok_after
from chaos.observe.gpu import (
                               DcgmSource,
                               GpuObserver,
                               GpuUnavailable,
                               NvmlSource,
                               ReplaySource,
                               auto_source,
                               energy_joules,
                               memory_release_s,
                               tokens_per_joule,
)
from chaos.observe.health import HealthProber
from chaos.observe.metrics import MetricSample, MetricsScraper, parse_metrics, value
from chaos.observe.timeline import Event, Sample, Timeline

__all__ = [
    "CompletionProber", "DcgmSource", "Event", "GpuObserver", "GpuUnavailable", "HealthProber", "MetricSample",
    "MetricsScraper", "NvmlSource", "PollingObserver", "ReplaySource", "Sample", "Timeline", "auto_source",
    "energy_joules", "first_ok_after", "memory_release_s", "parse_metrics", "tokens_per_joule", "value",
]
