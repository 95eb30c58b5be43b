"""The spec-vs-observed table on crafted traffic: the tier a gateway reached, or what it did instead."""
from __future__ import annotations

from chaos.verify.breaker import degrade_recovery_s
from chaos.verify.breaker_table import spec_vs_observed
from chaos.verify.upstream import CLIENT_SIDE, UpstreamAttempts, upstream_attempts
from tests.standins.gateway.test_gateway_verdict import FAULT, POLICY, T0, fixed_share, traffic


def nginx_like(max_fails: int = 3, fail_timeout: float = 10.0):
    """A passive ejector in nginx's manner: `max_fails` failures with gaps under `fail_timeout` ban
    the canary for `fail_timeout`; then it gets its full share again."""
    state = {"fails": 0, "last": -1e9, "banned_until": -1e9}

    def route(t, rng):
        return "stable" if t < state["banned_until"] else fixed_share(t, rng)

    def record(t, failed):
        if failed:
            state["fails"] = state["fails"] + 1 if t - state["last"] < fail_timeout else 1
            state["last"] = t
            if state["fails"] >= max_fails:
                state["banned_until"], state["fails"] = t + fail_timeout, 0
    return route, record


def nginx_traffic(fraction):
    route, record = nginx_like()
    acc, out = [0.0], []

    def routed(t, rng):
        pool = route(t, rng)
        if pool == "canary" and FAULT[0] - T0 <= t < FAULT[1] - T0:
            acc[0] += fraction
            if acc[0] >= 1:
                acc[0] -= 1
                record(t, True)
        return pool
    out = traffic(fraction, routed)
    return out


def test_the_reference_gateway_reaches_each_tier_and_the_table_says_so():
    v, seen, _ = spec_vs_observed(traffic(0.015), [], POLICY, expect="degrade", fault=FAULT, until=FAULT[1],
                                  gateway="reference")
    assert v.ok and seen.tier == "degrade" and seen.reaction_s is not None and seen.recover_s is not None
    assert v.row("tier").measured == "degrade"
    v, seen, _ = spec_vs_observed(traffic(0.04, reset_at=75), [], POLICY, expect="rollback", fault=FAULT,
                                  until=T0 + 75, gateway="reference")
    assert v.ok and seen.tier == "rollback"  # degrade first, then the 3 % tier: it may come back once between


def test_a_gateway_that_never_moves_fails_with_none_observed():
    v, seen, _ = spec_vs_observed(traffic(0.015, fixed_share), [], POLICY, expect="degrade", fault=FAULT,
                                  until=FAULT[1], gateway="haproxy")
    assert not v.ok and seen.tier == "none" and seen.reaction_s is None
    assert v.row("tier").measured.startswith("none") and "did not move" in v.row("tier").detail
    v, seen, _ = spec_vs_observed(traffic(0.005, fixed_share), [], POLICY, expect="none", fault=FAULT,
                                  until=FAULT[1], gateway="haproxy")
    assert v.ok and seen.tier == "none"


def test_a_passive_ejector_is_a_degrade_that_comes_back_not_a_rollback():
    v, seen, _ = spec_vs_observed(nginx_traffic(0.04), [], POLICY, expect="rollback", fault=FAULT,
                                  until=T0 + 75, gateway="nginx")
    assert not v.ok and seen.tier == "degrade" and seen.returns_during_fault >= 1, seen
    assert "came back" in v.row("tier").measured and "not held" in v.row("tier").detail


def test_a_timed_ban_is_told_from_a_rollback_only_when_watched_past_a_degrades_recovery():
    """CI, nginx: a 10 s ban that began 5 s before the revert outlasted a 7.5 s watch, and a gateway
    with no reset passed for a rollback. Watched for degrade_recovery_s after the revert (what the
    breaker suite does where no operator reset ends the scenario), the same traffic fails."""
    def bans(t, rng):  # two fail_timeout bans, the second still on when the fault ends (at 60)
        return "stable" if 22 <= t < 32 or 55 <= t < 65 else fixed_share(t, rng)
    records = traffic(0.04, bans, until=FAULT[1] - T0 + degrade_recovery_s(POLICY) + 5)
    short, seen, _ = spec_vs_observed(records, [], POLICY, expect="rollback", fault=FAULT, until=FAULT[1] + 3,
                                      gateway="nginx")
    assert short.ok and seen.tier == "rollback", seen  # the blind spot: the watch ended inside the ban
    v, seen, _ = spec_vs_observed(records, [], POLICY, expect="rollback", fault=FAULT,
                                  until=FAULT[1] + degrade_recovery_s(POLICY), gateway="nginx")
    assert not v.ok and seen.tier == "degrade" and seen.recover_s is not None, seen
    assert "not held" in v.row("tier").detail


def test_upstream_attempts_from_fault_proxy_lines():
    rows = [
        {"request_id": "a", "t_arrival": 10.0, "t_first_token": 10.1, "t_finish": 10.5, "status": 200,
         "outcome": "stop", "replica": "replica-c", "path": "/v1/chat/completions", "rule": None},
        {"request_id": "a", "t_arrival": 9.0, "t_finish": 9.01, "status": 500, "outcome": "error",
         "replica": "replica-c", "path": "/v1/chat/completions", "rule": "chaos-abort-1"},
        {"request_id": "b", "t_arrival": 11.0, "t_finish": 11.2, "status": 200, "outcome": "error",
         "replica": "replica-a", "path": "/v1/completions"},
        {"request_id": "h", "t_arrival": 11.0, "t_finish": 11.0, "status": 200, "outcome": "ok",
         "replica": "replica-a", "path": "/health"},
        {"request_id": "late", "t_arrival": 99.0, "t_finish": 99.1, "status": 200, "outcome": "stop",
         "replica": "replica-a", "path": "/v1/completions"},
    ]
    got = upstream_attempts(rows, {"replica-a": "stable", "replica-c": "canary"}, since=0, until=50)
    assert [(r.request_id, r.served_by, r.error) for r in got] == [
        ("a", "canary/replica-c", "http"), ("a", "canary/replica-c", None), ("b", "stable/replica-a", "stream_cut")]
    assert abs(got[1].e2e - 0.5) < 1e-9 and abs(got[1].ttft - 0.1) < 1e-9


def test_the_table_names_where_its_attempts_came_from():
    """The canary's counts are the fault proxies' (read over HTTP) where the stack gave them, and the
    table says so; the clients' own records are named as such, never passed off as the replica side."""
    proxies = UpstreamAttempts(traffic(0.015), "fault proxy: 900 attempts in 950 lines from replica-c (http://x/_chaos/log)")
    v, _, _ = spec_vs_observed(proxies, [], POLICY, expect="degrade", fault=FAULT, until=FAULT[1], gateway="reference")
    assert v.row("attempts_from").measured.startswith("fault proxy: 900 attempts") and v.ok
    v, _, _ = spec_vs_observed(traffic(0.015), [], POLICY, expect="degrade", fault=FAULT, until=FAULT[1],
                               gateway="reference")
    assert v.row("attempts_from").measured == CLIENT_SIDE
