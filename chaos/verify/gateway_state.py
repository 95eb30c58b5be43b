"""The gateway's own view of its breaker, beside the black-box verdict.

`breaker.state_metric` (label `pool`; 0 closed, 1 half-open, 2 open, 3 forced open: the reference
gateway's encoding, any other value above 0 counts as tripped) is scraped from the gateway's
Prometheus page (`endpoints.gateway_metrics`, else the reference gateway's `gateway_admin`/metrics)
while a breaker scenario runs. The canary pool's highest state over the fault, read as a tier, is
one row of the scenario's verdict: "agrees" or "DISAGREES with the black-box verdict: ...".

The row never passes or fails the verdict: the black-box verdict judges what users got, from the
traffic itself, and a gateway's metric can be wrong (or the gateway's routing can ignore its own
state). A disagreement says which of the two is wrong is for a person to find out. Where the row
cannot be read (no metric named, no metrics page, the page never answered, the metric absent) it is
"not proven" with why, for that row only: it names GATEWAY_STATE_ITEM, no item of the release
checklist, so the breaker items stay judged by the traffic.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from chaos.verify.verdict import Row, Verdict

if TYPE_CHECKING:
    from chaos.observe.timeline import Sample

ROW = "gateway's own state"
SOURCE = "gateway-metrics"  # the timeline source of the scraped samples
GATEWAY_STATE_ITEM = "gateway-state-metric"  # no checklist item: see the module docstring
STATE_NAMES = {0: "closed", 1: "half-open", 2: "open", 3: "forced open"}
FORCED_OPEN = 3
# black-box tiers that say only "it tripped" (late, an anomaly trip): compared on tripped or not
TRIPPED_ONLY = ("late", "anomaly", "trip")


def metrics_url(env: Any) -> str | None:
    """Where the gateway's own metrics are: endpoints.gateway_metrics, else the reference gateway's."""
    ep = env.endpoints
    if ep.gateway_metrics:
        return str(ep.gateway_metrics)
    return str(ep.gateway_admin).rstrip("/") + "/metrics" if ep.gateway_admin else None


def watch(sc: Any, env: Any, interval_s: float = 0.5) -> None:
    """Scrape the gateway's state metric into the scenario's timeline until the scenario closes
    (nothing where the environment names no metric or no metrics page: the row says why)."""
    from urllib.parse import urlsplit

    from chaos.observe.metrics import MetricsScraper

    url, metric = metrics_url(env), env.breaker.state_metric
    if not url or not metric:
        return
    parts = urlsplit(url)
    scraper = MetricsScraper(f"{parts.scheme}://{parts.netloc}", sc.timeline, interval_s=interval_s,
                             path=parts.path or "/metrics", prefixes=(metric,))
    scraper.source = SOURCE
    sc.add_observer(scraper.start())


@dataclass(frozen=True)
class GatewayTier:
    """The canary pool's state over the fault, as the gateway tells it."""

    tier: str                 # none | degrade | rollback
    peak: float               # the highest state value seen
    first_trip: float | None  # when it first left 0
    samples: int

    def said(self, t0: float) -> str:
        name = STATE_NAMES.get(int(self.peak), "tripped") if self.peak == int(self.peak) else "tripped"
        if self.tier == "none":
            return f"closed throughout ({self.samples} scrapes)"
        when = f" from +{self.first_trip - t0:.1f} s" if self.first_trip is not None else ""
        return f"{name} ({self.peak:g}){when}"


def gateway_tier(samples: Iterable[Sample], metric: str, canary: str, start: float, end: float) -> GatewayTier | None:
    """The canary's tier by the metric's samples in [start, end]; None where it has none."""
    mine = sorted((s for s in samples if s.name == metric and s.labels.get("pool") == canary
                   and start <= s.t <= end), key=lambda s: s.t)
    if not mine:
        return None
    peak = max(float(s.value) for s in mine)
    first = next((s.t for s in mine if float(s.value) > 0), None)
    tier = "none" if peak <= 0 else "rollback" if peak == FORCED_OPEN else "degrade"
    return GatewayTier(tier, peak, first, len(mine))


def _disagreement(observed: str, gw: GatewayTier) -> str:
    """'' where the gateway's tier agrees with the black-box one, else what differs."""
    if observed.startswith(TRIPPED_ONLY):
        return "" if gw.tier != "none" else f"the traffic shows a trip ({observed}), the gateway says closed throughout"
    if observed == gw.tier:
        return ""
    if observed == "none":
        return "the canary kept its share of traffic, yet the gateway says its breaker tripped"
    if gw.tier == "none":
        return f"traffic left the canary ({observed}), yet the gateway says closed throughout"
    return f"the traffic shows {observed}, the gateway's state reads as {gw.tier}"


def state_row(v: Verdict, observed: str, *, env: Any, samples: Iterable[Sample], scrapes: Iterable[Sample],
              window: tuple[float, float], canary: str = "canary") -> Row:
    """Add the gateway's own state to `v` beside its black-box tier `observed` (none, degrade,
    rollback, late, anomaly, trip (...)); `scrapes` are the scraper's scrape_ok samples."""
    metric, url = env.breaker.state_metric, metrics_url(env)
    limit = f"agrees with the black-box verdict ({observed})"
    why = ""
    if not metric:
        why = "no state metric named (breaker.state_metric)"
    elif not url:
        why = "no gateway metrics page (endpoints.gateway_metrics)"
    elif not any(s.value for s in scrapes):
        why = f"{url} never answered a scrape"
    gw = gateway_tier(samples, metric, canary, *window) if metric and not why else None
    if not why and gw is None:
        why = f"gateway exports no {metric}" + (f'{{pool="{canary}"}}' if any(s.name == metric for s in samples) else "")
    if why:
        return v.not_proven(ROW, limit, f"not proven: {why}", why, items=(GATEWAY_STATE_ITEM,))
    assert gw is not None  # `why` is set wherever it is None
    differs = _disagreement(observed, gw)
    said = gw.said(window[0])
    measured = f"{said}: agrees" if not differs else f"{said}: DISAGREES with the black-box verdict: {differs}"
    return v.add(ROW, limit, measured, None, f"{metric} from {url}; informational: the black-box rows judge")


def beside(v: Verdict, observed: str, sc: Any, env: Any, fault: tuple[float, float], until: float) -> Row:
    """The suite's hook: the row for a breaker scenario whose scraper `watch` started; the window is
    the fault to the later of `until` and one breaker window after the revert (as check_no_trip)."""
    end = max(until, fault[1] + env.breaker.window_s)
    metric = env.breaker.state_metric or ""
    return state_row(v, observed, env=env, samples=sc.timeline.series(SOURCE, metric),
                     scrapes=sc.timeline.series(SOURCE, "scrape_ok"), window=(fault[0], end))
