"""The anomaly tier's verdict (moved out of the breaker suite): a trip on an OOM burst, from the
canary's drain or the gateway's own state, and never from the error-rate tier."""
from __future__ import annotations

from types import SimpleNamespace

from chaos.env.model import BreakerPolicy
from chaos.load.records import RequestRecord
from chaos.verify.anomaly import anomaly_verdict, first_state_change, is_oom
from chaos.verify.upstream import CLIENT_SIDE, UpstreamAttempts


def _traffic(drain_at: float | None, ooms: list[float]) -> list[RequestRecord]:
    """20 req/s for 60 s, every 5th to the canary until `drain_at`; OOM answers from the canary at `ooms`."""
    out, i, t = [], 0, 0.0
    while t < 60.0:
        canary = i % 5 == 0 and (drain_at is None or t < drain_at)
        oom = canary and any(abs(t - x) < 0.025 for x in ooms)
        out.append(RequestRecord(f"r{i}", 1, 1000 + t, e2e=0.1, status=500 if oom else 200,
                                 error="http" if oom else None, error_detail="CUDA out of memory" if oom else None,
                                 served_by="canary/replica-c" if canary else "stable/replica-a"))
        i, t = i + 1, round(t + 0.05, 2)
    return out


def test_a_drain_right_after_the_third_oom_is_the_anomaly_trip():
    policy = BreakerPolicy()
    recs = _traffic(drain_at=26.0, ooms=[21.0, 23.0, 25.0])
    assert sum(is_oom(r) for r in recs) == 3
    v = anomaly_verdict(recs, policy, 1020.0, 1040.0, "oom-burst")
    assert v.ok, [r.line() for r in v.rows]
    # the drain is declared once the share has fallen beyond its noise: about 3 s at 4 canary calls a second
    assert v.row("oom_burst_seen").measured == 3 and 0 < v.row("tripped_after_s").measured <= 3.0


def test_no_drain_fails_and_so_does_a_burst_spread_too_thin():
    policy = BreakerPolicy()
    v = anomaly_verdict(_traffic(None, [21.0, 23.0, 25.0]), policy, 1020.0, 1040.0, "oom-burst")
    assert not v.ok and v.row("tripped_after_s").ok is False and v.row("traffic_moved").ok is False
    spread = anomaly_verdict(_traffic(40.0, [21.0, 29.0, 37.0]), policy, 1020.0, 1040.0, "oom-burst")
    assert spread.row("oom_burst_seen").ok is False, "3 OOMs over 16 s are no burst within 10 s"


def test_the_gateways_own_state_decides_where_it_has_one():
    policy = BreakerPolicy()
    states = [SimpleNamespace(t=1024.0, value="closed", labels={"pool": "canary"}),
              SimpleNamespace(t=1025.5, value="open", labels={"pool": "canary"}),
              SimpleNamespace(t=1025.0, value="open", labels={"pool": "stable"})]
    assert first_state_change(states, "canary", 1020.0, 1040.0) == 1025.5
    v = anomaly_verdict(_traffic(26.0, [21.0, 23.0, 25.0]), policy, 1020.0, 1040.0, "oom-burst", state_samples=states)
    assert v.ok and v.row("tripped_after_s").measured == 0.4  # the third OOM ended at 1025.1


def test_the_anomaly_verdict_names_where_its_attempts_came_from():
    recs = UpstreamAttempts(_traffic(drain_at=26.0, ooms=[21.0, 23.0, 25.0]), "fault proxy: 1200 attempts from replica-c")
    v = anomaly_verdict(recs, BreakerPolicy(), 1020.0, 1040.0, "oom-burst")
    assert v.row("attempts_from").measured == "fault proxy: 1200 attempts from replica-c" and v.ok
    plain = anomaly_verdict(list(recs), BreakerPolicy(), 1020.0, 1040.0, "oom-burst")
    assert plain.row("attempts_from").measured == CLIENT_SIDE


def _slow_traffic(open_from: float, open_to: float, rate: float) -> list[RequestRecord]:
    """`rate` req/s for 60 s, every 5th to the canary except while the gateway held it open."""
    out, i, t = [], 0, 0.0
    while t < 60.0:
        canary = i % 5 == 0 and not open_from <= t < open_to
        out.append(RequestRecord(f"r{i}", 1, 1000 + t, e2e=0.1, status=200,
                                 served_by="canary/replica-c" if canary else "stable/replica-a"))
        i, t = i + 1, round(t + 1.0 / rate, 3)
    return out


def _open(start: float, end: float) -> list[SimpleNamespace]:
    return [SimpleNamespace(t=1000 + start, value="open", labels={"pool": "canary"}),
            SimpleNamespace(t=1000 + end, value="closed", labels={"pool": "canary"})]


def test_a_drain_at_a_low_rate_is_judged_on_the_interval_the_gateway_held_it_open():
    # the CI lab run: 6 req/s in all, the canary open 10 s with no call; five 1 s bins hold 30 calls,
    # too few for the scan (0.8^30 = 1e-3 > 1e-5), but the 60 calls of the open interval decide it
    policy = BreakerPolicy()
    recs = _slow_traffic(25.2, 35.2, rate=6.0)
    assert anomaly_verdict(recs, policy, 1020.0, 1040.0, "oom-burst").row("traffic_moved").ok is False
    v = anomaly_verdict(recs, policy, 1020.0, 1040.0, "oom-burst", state_samples=_open(25.2, 35.2))
    row = v.row("traffic_moved")
    assert row.ok is True and row.measured == 0.0 and "60 calls" in row.detail, row.line()


def test_open_but_still_served_fails_and_too_few_calls_is_not_proven():
    policy = BreakerPolicy()
    lie = anomaly_verdict(_slow_traffic(0.0, 0.0, rate=6.0), policy, 1020.0, 1040.0, "oom-burst",
                          state_samples=_open(25.2, 35.2))
    assert lie.row("traffic_moved").ok is False, "the gateway said open while the canary kept its share"
    short = anomaly_verdict(_slow_traffic(25.2, 27.2, rate=6.0), policy, 1020.0, 1040.0, "oom-burst",
                            state_samples=_open(25.2, 27.2))
    row = short.row("traffic_moved")
    assert row.ok is None and row.unproven and "too few" in row.unproven, row.line()


def test_a_drain_in_the_bin_that_straddles_the_fault_start_counts():
    # the CI lab failure: bins start at the first send (here on whole seconds), the gateway tripped
    # 0.1 s after the fault at 1019.05, and the bin it drained began before the fault; the filter on
    # the bin's start lost the drain
    policy = BreakerPolicy()
    recs = _slow_traffic(19.15, 25.0, rate=150.0)
    v = anomaly_verdict(recs, policy, 1019.05, 1040.0, "oom-burst")
    assert v.row("traffic_moved").ok is True and v.row("traffic_moved").measured == 0.0, v.row("traffic_moved").line()
