"""GatewayPolicy: routing shares, the two tiers on step faults, OOM burst and leak trend rules."""
import random

import pytest

from chaos.env.model import BreakerPolicy
from chaos.stack.gateway.breaker import State
from chaos.stack.gateway.normalize import normalize_body
from chaos.stack.gateway.policy import CANARY, STABLE, GatewayPolicy, LeakTrend, is_oom
from chaos.verify.breaker_sizes import sizes


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def make(clock, **kw):
    p = BreakerPolicy(**{"window_s": 10, "min_calls": 50, "open_wait_s": 3, "half_open_calls": 5,
                         "canary_weight": 0.2, **kw})
    return GatewayPolicy(p, clock=clock, wall=clock, rng=random.Random(7))


def drive(g, clock, fraction, *, rps=100, fault=(20, 60), until=90):
    """Evenly spaced canary errors at `fraction` during the fault; returns canary sends per second."""
    acc, n, sends = 0.0, 0, {}
    while clock.t < until:
        clock.t += 1 / rps
        pool, permit = g.route()
        ok = True
        if pool == CANARY:
            sends[int(clock.t)] = sends.get(int(clock.t), 0) + 1
            if fault[0] <= clock.t < fault[1]:
                acc += fraction
                if acc >= 1:
                    acc, ok = acc - 1, False
        g.record(pool, ok, 0.01, permit)
        n += 1
        if n % 50 == 0:
            g.tick()
    return sends


def test_weights_route_the_canary_share():
    c = Clock()
    g = make(c)
    picks = [g.route()[0] for _ in range(5000)]
    assert 0.17 < picks.count(CANARY) / len(picks) < 0.23


def test_below_thresholds_nothing_trips():
    c = Clock()
    g = make(c)
    drive(g, c, 0.005)
    assert list(g.transitions) == [] and g.state(CANARY) is State.CLOSED


def test_primary_tier_degrades_then_heals_without_rollback():
    c = Clock()
    g = make(c)
    sends = drive(g, c, 0.015)
    kinds = [(t.src, t.dst) for t in g.transitions]
    assert kinds[0] == (State.CLOSED, State.OPEN)
    assert State.FORCED_OPEN not in [t.dst for t in g.transitions]
    assert 20 < g.transitions[0].t <= 32         # within window + allowance of the fault start
    assert g.state(CANARY) is State.CLOSED and sends.get(89, 0) > 5   # healed after the fault
    assert len(g.transitions) <= 16              # bounded: open waits grow on repeated trips


def test_advanced_tier_rolls_back_and_holds_until_reset():
    c = Clock()
    g = make(c)
    sends = drive(g, c, 0.04)
    assert g.state(CANARY) is State.FORCED_OPEN
    rb = [t for t in g.transitions if t.dst is State.FORCED_OPEN][0]
    assert rb.t < 35 and "rollback" in rb.reason
    assert sum(v for s, v in sends.items() if s > rb.t + 1) == 0
    assert g.effective_canary_share() == 0.0
    g.reset(CANARY)
    assert g.state(CANARY) is State.CLOSED and g.effective_canary_share() == 0.2


def test_latency_tier_degrades_on_window_p99():
    c = Clock()
    g = make(c)
    for _ in range(300):
        c.t += 0.01
        g.record(CANARY, True, 2.5 if c.t > 2 else 0.05, "normal")
    assert g.state(CANARY) is State.OPEN and "p99" in g.transitions[0].reason


def test_oom_burst_trips_only_within_its_window():
    c = Clock()
    g = make(c)
    for _ in range(3):
        c.t += 6
        g.record(STABLE, False, 0.1, "normal", oom=True)
    assert g.state(STABLE) is State.CLOSED
    for _ in range(3):
        c.t += 3
        g.record(CANARY, False, 0.1, None, oom=True)
    assert g.state(CANARY) is State.OPEN and "oom burst" in g.transitions[-1].reason


@pytest.mark.parametrize("growth_per_hour,trips", [(0.10, True), (0.01, False)])
def test_leak_trend_time_compressed(growth_per_hour, trips):
    c = Clock()
    p = BreakerPolicy(leak_window_s=30, leak_rate_per_hour=0.05)
    g = GatewayPolicy(p, leak_hour_s=60, clock=c, wall=c)   # one "hour" lasts 60 s
    rss = 1e8
    for _ in range(40):
        c.t += 1
        rss *= 1 + growth_per_hour / 60
        g.observe_rss(CANARY, "replica-c", rss)
    assert (g.state(CANARY) is State.OPEN) is trips
    rate = g.snapshot()["pools"][CANARY]["rss_growth_per_hour"]["replica-c"]
    assert rate == pytest.approx(growth_per_hour, rel=0.05)


def test_leak_trend_needs_most_of_a_window():
    t = LeakTrend(window_s=30, hour_s=3600)
    for i in range(10):
        t.add(float(i), 1e8 * (1 + i))
    assert t.rate_per_hour() is None


def test_oom_text_and_normalization():
    assert is_oom(b'{"error": {"message": "CUDA out of memory. Tried to allocate"}}')
    assert not is_oom("The server had an error while processing your request.")
    body = '{"messages": [{"role": "user", "content": "\uff21\uff22\u2460 \U0001f600"}], "prompt": ["\ufb01"]}'
    out = normalize_body(body.encode())
    assert "AB1" in out.decode() and "fi" in out.decode() and "\U0001f600" in out.decode()
    assert normalize_body(b"not json") == b"not json"


@pytest.mark.parametrize("defect", [None, "rollback-forgotten-on-restart"])
def test_a_rollback_just_after_a_restart_is_kept_unless_the_defect_is_planted(defect):
    clock = Clock()
    p = BreakerPolicy(window_s=10, min_calls=50, open_wait_s=3, half_open_calls=5, canary_weight=0.2)
    g = GatewayPolicy(p, clock=clock, wall=clock, rng=random.Random(7), planted_defect=defect)
    g.replica_restarted(CANARY, "replica-c")
    for i in range(60):  # 10 % errors on the canary, a second after its restart
        clock.t = 1 + i * 0.01
        g.record(CANARY, i % 10 != 0, 0.01)
    left = [(t.src.value, t.dst.value, t.reason) for t in g.transitions if t.src is State.FORCED_OPEN]
    if defect:
        assert g.state(CANARY) is State.CLOSED
        assert left == [("forced_open", "closed", "replica replica-c restarted: pools rebuilt")]
    else:
        assert g.state(CANARY) is State.FORCED_OPEN and not left
    clock.t = 30  # a window later a rollback stands, even with the defect
    g.reset()
    for i in range(60):
        clock.t = 30 + i * 0.01
        g.record(CANARY, i % 10 != 0, 0.01)
    assert g.state(CANARY) is State.FORCED_OPEN


SLOW_CANARY = {"window_s": 15, "min_calls": 200, "open_wait_s": 3, "half_open_calls": 5, "canary_weight": 0.2}


@pytest.mark.parametrize("seed", [5, 10])
def test_a_canary_with_barely_min_calls_per_window_still_rolls_back(seed):
    """About 200 canary calls per 15 s window at 4 % errors (local.yaml's policy on a slow host): each degrade
    holds the canary out for an open wait, doubled after a failed half-open probe, and a window of wall time then
    never again holds min_calls. The rollback window keeps the canary's last min_calls outcomes at least."""
    c = Clock()
    p = BreakerPolicy(**SLOW_CANARY)
    g = GatewayPolicy(p, clock=c, wall=c, rng=random.Random(seed))
    sends = drive(g, c, 0.04, rps=67.5, fault=(40, 73), until=110)  # 13.5 canary calls/s
    rb = [t for t in g.transitions if t.dst is State.FORCED_OPEN]
    assert rb, [(round(t.t, 1), t.dst.value, t.reason) for t in g.transitions]
    assert rb[0].t < 40 + sizes(p)["errors-rollback"].hold_s  # within the breaker suite's hold of this fault
    assert sum(v for s, v in sends.items() if s > rb[0].t + 1) == 0


@pytest.mark.parametrize("seed", range(6))
def test_the_same_slow_canary_at_2_percent_degrades_and_never_rolls_back(seed):
    """A rollback window of min_calls calls at least: a 2 % fault spread evenly puts at most 5 errors in 200
    calls, under the 3 % rollback rate, so the canary is degraded, never rolled back, and back after the fault."""
    c = Clock()
    g = GatewayPolicy(BreakerPolicy(**SLOW_CANARY), clock=c, wall=c, rng=random.Random(seed))
    drive(g, c, 0.02, rps=67.5, fault=(40, 73), until=130)
    dsts = [t.dst for t in g.transitions]
    assert State.OPEN in dsts and State.FORCED_OPEN not in dsts, [(round(t.t, 1), t.dst.value, t.reason)
                                                                  for t in g.transitions]
    assert g.state(CANARY) is State.CLOSED
