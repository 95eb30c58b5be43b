"""The gateway's own state beside the black-box breaker verdict, on recorded samples: agree,
disagree, absent, and the row never passing or failing the verdict on its own."""
from types import SimpleNamespace

import pytest

from chaos.env.model import BreakerPolicy, Endpoints
from chaos.observe.timeline import Sample
from chaos.report.checklist import PROVEN, ScenarioResult
from chaos.verify import gateway_state as gs
from chaos.verify.verdict import Verdict

METRIC = "chaos_gateway_pool_state"
T0 = 1_000.0


def env(**ep):
    endpoints = Endpoints(api="http://127.0.0.1:1", **({"gateway_admin": "http://127.0.0.1:2"} | ep))
    return SimpleNamespace(endpoints=endpoints, breaker=BreakerPolicy())


def states(values, pool="canary", metric=METRIC):
    """One scrape every 0.5 s from T0 - 2 s: the values in order."""
    return [Sample(T0 - 2 + 0.5 * i, gs.SOURCE, metric, float(v), {"pool": pool}) for i, v in enumerate(values)]


OK = [Sample(T0, gs.SOURCE, "scrape_ok", True, {})]


def row(observed, samples, *, scrapes=OK, e=None):
    v = Verdict("breaker spec vs observed")
    v.add("tier", "degrade", "degrade", True)
    r = gs.state_row(v, observed, env=e or env(), samples=samples, scrapes=scrapes, window=(T0, T0 + 30))
    return v, r


@pytest.mark.parametrize("observed, values, said", [
    ("none", [0] * 40, "closed throughout"),
    ("degrade", [0] * 6 + [2] * 10 + [1] + [0] * 10, "open (2) from +1.0 s"),
    ("rollback", [0] * 4 + [2, 2, 3, 3, 3] + [0] * 10, "forced open (3) from +0.0 s"),
    ("late", [0] * 30 + [2] * 4, "open (2)"),
    ("anomaly", [0] * 8 + [2] * 4, "open (2)"),
])
def test_agrees(observed, values, said):
    v, r = row(observed, states(values))
    assert said in r.measured and r.measured.endswith(": agrees"), r.measured
    assert r.ok is None and not r.unproven and v.ok


@pytest.mark.parametrize("observed, values, why", [
    ("none", [0] * 6 + [2] * 4 + [0] * 10, "the canary kept its share of traffic, yet the gateway says its breaker tripped"),
    ("degrade", [0] * 40, "traffic left the canary (degrade), yet the gateway says closed throughout"),
    ("rollback", [0] * 6 + [2] * 10, "the traffic shows rollback, the gateway's state reads as degrade"),
    ("degrade", [0] * 6 + [3] * 10, "the traffic shows degrade, the gateway's state reads as rollback"),
    ("anomaly", [0] * 40, "the traffic shows a trip (anomaly), the gateway says closed throughout"),
])
def test_disagrees_says_so_without_judging(observed, values, why):
    v, r = row(observed, states(values))
    assert "DISAGREES with the black-box verdict: " + why in r.measured, r.measured
    assert r.ok is None and v.ok  # the black-box rows judge; the row is shown beside them


def test_a_trip_before_the_fault_is_not_the_faults():
    _, r = row("none", states([3] * 4 + [0] * 30))  # forced open from the last scenario, reset at T0
    assert r.measured.startswith("closed throughout"), r.measured


def test_other_pools_do_not_count():
    _, r = row("none", states([0] * 30) + states([2] * 30, pool="stable"))
    assert r.measured.endswith(": agrees")


@pytest.mark.parametrize("e, samples, scrapes, why", [
    (None, [], OK, f"gateway exports no {METRIC}"),
    (None, states([0] * 10, pool="stable"), OK, f'gateway exports no {METRIC}{{pool="canary"}}'),
    (None, [], [Sample(T0, gs.SOURCE, "scrape_ok", False, {})], "http://127.0.0.1:2/metrics never answered a scrape"),
    (SimpleNamespace(endpoints=Endpoints(api="http://127.0.0.1:1"), breaker=BreakerPolicy()), [], [],
     "no gateway metrics page (endpoints.gateway_metrics)"),
    (SimpleNamespace(endpoints=Endpoints(api="http://127.0.0.1:1", gateway_admin="http://127.0.0.1:2"),
                     breaker=BreakerPolicy(state_metric=None)), [], [], "no state metric named (breaker.state_metric)"),
])
def test_absent_is_not_proven_for_that_row_only(e, samples, scrapes, why):
    v, r = row("degrade", samples, scrapes=scrapes, e=e)
    assert r.mark == "not proven" and r.unproven == why and r.measured == f"not proven: {why}"
    assert v.ok  # the black-box verdict still passes on its own rows
    # ... and the breaker's checklist items stay proven by the traffic
    res = ScenarioResult("test_breaker_tier[errors-1.5pct]", {"breaker-degrade": ""}, status=PROVEN, verdicts=[v])
    assert res.status_for("breaker-degrade") == (PROVEN, "")


def test_the_metrics_page_is_the_explicit_one_else_the_reference_gateways():
    assert gs.metrics_url(env()) == "http://127.0.0.1:2/metrics"
    assert gs.metrics_url(env(gateway_metrics="http://10.0.0.9:9100/prom")) == "http://10.0.0.9:9100/prom"
    assert gs.metrics_url(SimpleNamespace(endpoints=Endpoints(api="http://127.0.0.1:1"))) is None
