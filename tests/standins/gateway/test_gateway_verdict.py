"""Black-box breaker verdict on crafted records: right gateways pass, wrong ones fail with evidence."""
import random

import pytest

from chaos.env.model import BreakerPolicy
from chaos.errors import SLOViolation
from chaos.load.records import RequestRecord
from chaos.observe.timeline import Timeline
from chaos.stack.gateway.policy import CANARY, GatewayPolicy
from chaos.verify.breaker import analyze, check_no_flapping, verify_breaker

POLICY = BreakerPolicy(window_s=10, min_calls=50, open_wait_s=3, half_open_calls=5, canary_weight=0.2,
                       reaction_allowance_s=2)
T0 = 1_700_000_000.0
FAULT = (T0 + 20, T0 + 60)


def traffic(fraction, route=None, *, slow_s=None, rps=100, until=90, reset_at=None):
    """Records of a run; `route(t)` overrides the reference policy's routing (a broken gateway)."""
    clock = [T0]
    g = GatewayPolicy(POLICY, clock=lambda: clock[0], wall=lambda: clock[0], rng=random.Random(3))
    rng, acc, out = random.Random(5), 0.0, []
    while clock[0] < T0 + until:
        clock[0] += 1 / rps
        if reset_at and abs(clock[0] - (T0 + reset_at)) < 0.5 / rps:
            g.reset(CANARY)
        pool, permit = g.route() if route is None else (route(clock[0] - T0, rng), None)
        ok, lat = True, 0.02
        if pool == CANARY and FAULT[0] <= clock[0] < FAULT[1]:
            acc += fraction
            if acc >= 1:
                acc, ok = acc - 1, False
            lat = slow_s or lat
        g.record(pool, ok, lat, permit)
        g.tick()
        out.append(RequestRecord(f"r{len(out)}", 1, clock[0], e2e=lat, status=200 if ok else 500,
                                 error=None if ok else "http", served_by=f"{pool}/{pool}-1"))
    return out


def fixed_share(t, rng):
    return CANARY if rng.random() < 0.2 else "stable"


def test_reference_gateway_passes_each_tier():
    verify_breaker(traffic(0.005), POLICY, expect="none", fault=FAULT)
    a = verify_breaker(traffic(0.015), POLICY, expect="degrade", fault=FAULT)
    assert a.first_crossing(["degrade_error_rate"]).t < a.moves[0].t + 1
    verify_breaker(traffic(0.04, reset_at=75), POLICY, expect="rollback", fault=FAULT, until=T0 + 75)


def test_latency_fault_degrades_and_crossing_is_found():
    a = verify_breaker(traffic(0.0, slow_s=2.5), POLICY, expect="degrade", fault=FAULT)
    lat = a.first_crossing(["degrade_latency"])
    assert lat is not None and FAULT[0] + 2.5 <= lat.t <= FAULT[0] + 4  # seen when slow calls complete


def test_gateway_that_never_moves_fails_degrade():
    with pytest.raises(SLOViolation) as e:
        verify_breaker(traffic(0.015, fixed_share), POLICY, expect="degrade", fault=FAULT)
    assert "did not move" in str(e.value) and e.value.evidence["crossings"]


def test_gateway_that_trips_below_threshold_fails():
    def eager(t, rng):
        return "stable" if 25 <= t < 40 else fixed_share(t, rng)
    with pytest.raises(SLOViolation) as e:
        verify_breaker(traffic(0.005, eager), POLICY, expect="none", fault=FAULT)
    assert "below the thresholds" in str(e.value)


def test_rollback_not_held_fails():
    def leaky(t, rng):
        return "stable" if 22 <= t < 30 else fixed_share(t, rng)
    with pytest.raises(SLOViolation, match="not held"):
        verify_breaker(traffic(0.04, leaky), POLICY, expect="rollback", fault=FAULT, until=T0 + 75)


def test_flapping_after_recovery_fails():
    def flappy(t, rng):
        drained = 22 <= t < 62 or 66 <= t < 70 or 74 <= t < 78
        return "stable" if drained else fixed_share(t, rng)
    with pytest.raises(SLOViolation, match="flapping"):
        verify_breaker(traffic(0.015, flappy), POLICY, expect="degrade", fault=FAULT)
    a = analyze(traffic(0.015, flappy), POLICY, baseline_until=FAULT[0])
    with pytest.raises(SLOViolation):
        check_no_flapping(a, 3)


def test_a_trip_on_the_faults_last_errors_is_not_flapping():
    """Right after the fault the window still holds its errors: one more drain then is the
    fault's doing, as long as the canary comes back once the window is clean."""
    def late(t, rng):
        drained = 22 <= t < 40 or 61 <= t < 66
        return "stable" if drained else fixed_share(t, rng)
    verify_breaker(traffic(0.015, late), POLICY, expect="degrade", fault=FAULT)


def test_header_from_another_gateway_and_timeline_output():
    recs = traffic(0.015)
    for r in recs:
        r.served_by = "green" if r.served_by.startswith("canary") else "blue"
    a = analyze(recs, POLICY, canary="green", baseline_until=FAULT[0])
    assert a.moves and a.moves[0].kind == "drained"
    assert a.baseline_share == pytest.approx(0.2, abs=0.05)
    tl = Timeline()
    a.to_timeline(tl)
    assert tl.series("breaker", "canary_share") and tl.find_events("threshold", "degrade_error_rate")
    assert tl.find_events("breaker", "drained")


def test_metric_samples_reveal_a_trip():
    recs = traffic(0.005)
    tl = Timeline()
    for i in range(90):
        tl.sample("metrics", POLICY.state_metric, 2 if 30 <= i < 35 else 0, t=T0 + i, pool=CANARY)
    with pytest.raises(SLOViolation):
        verify_breaker(recs, POLICY, expect="none", fault=FAULT, metric_samples=tl.samples)
