"""Series behind the timeline plots: windows, rates, rolling P99, health runs, breaker steps, share."""
from __future__ import annotations

import math

import pytest

from chaos.load.records import RequestRecord
from chaos.load.stats import percentile
from chaos.observe.timeline import Timeline
from chaos.report.series import (
    Marker,
    Window,
    as_markers,
    fault_windows,
    health_intervals,
    is_healthy,
    phase_markers,
    request_series,
    state_steps,
    time_origin,
    traffic_share,
)

T = 1_700_000_000.0


def rec(t: float, ok: bool = True, e2e: float = 0.1, served_by: str | None = None) -> RequestRecord:
    return RequestRecord("r", 1, T + t, e2e=e2e, error=None if ok else "reset", served_by=served_by)


def test_fault_windows_pair_inject_and_revert_by_name_in_order():
    tl = Timeline()
    tl.event("fault_inject", "kill a", t=T + 1)
    tl.event("fault_inject", "jitter", t=T + 2)
    tl.event("fault_revert", "kill a", t=T + 5)
    tl.event("fault_inject", "kill a", t=T + 8)
    tl.event("fault_revert", "jitter", t=T + 9)
    tl.event("fault_revert", "nothing-open", t=T + 3)
    wins = fault_windows(tl, [Window(T + 20, T + 21, "explicit")])
    assert wins == [
        Window(T + 1, T + 5, "kill a"),
        Window(T + 2, T + 9, "jitter"),
        Window(T + 8, None, "kill a"),
        Window(T + 20, T + 21, "explicit"),
    ]


def test_request_series_rate_error_rate_and_rolling_p99():
    recs = [rec(0.1 * i) for i in range(10)]                       # 10 in [0, 1): all fine, 0.1 s
    recs += [rec(1 + 0.2 * i, ok=i % 2 == 0, e2e=1.0) for i in range(5)]  # 5 in [1, 2): 2 failed, 1.0 s
    rs = request_series(recs, T, T + 3, bucket_s=1.0, p99_window_s=10)
    assert rs.t == [0.0, 1.0, 2.0]
    assert rs.rate == [10.0, 5.0, 0.0]
    assert rs.error_rate[:2] == [0.0, pytest.approx(2 / 5)]
    assert math.isnan(rs.error_rate[2])
    assert rs.p99[0] == pytest.approx(0.1)
    assert rs.p99[2] == pytest.approx(1.0)  # the slow ones finished by t=3 and are in the window


def test_rolling_p99_forgets_samples_older_than_the_window():
    recs = [rec(0, e2e=5.0)] + [rec(9 + 0.01 * i, e2e=0.2) for i in range(50)]
    rs = request_series(recs, T, T + 12, bucket_s=1.0, p99_window_s=3.0)
    assert rs.p99[5] == pytest.approx(5.0)   # bucket [5,6): the 5 s request ended at t=5
    assert rs.p99[10] == pytest.approx(0.2)  # older than 3 s by then


def test_percentile_nearest_rank():
    assert percentile(list(range(1, 101)), 99, method="nearest") == 99
    assert percentile([3.0], 50, method="nearest") == 3.0
    assert percentile([], 99, method="nearest") is None
    assert percentile([1.0, 2.0], 50) == 1.5  # linear, numpy's default
    with pytest.raises(ValueError, match="method"):
        percentile([1.0], 50, method="median")


@pytest.mark.parametrize("value,healthy", [(True, True), (False, False), (200, True), (503, False), (1, True),
                                           (0, False), ("up", True), ("DOWN", False), ("ok", True)])
def test_is_healthy(value, healthy):
    assert is_healthy(value) is healthy


def test_health_intervals_merge_runs_per_target():
    tl = Timeline()
    for k, v in enumerate([200, 200, 503, 503, 200]):
        tl.sample("health", "status", v, t=T + k, target="a")
    tl.sample("health", "status", "up", t=T + 1, target="b")
    runs = health_intervals(tl.series("health", "status"), T + 6)
    assert runs["a"] == [(T, T + 2, True), (T + 2, T + 4, False), (T + 4, T + 6, True)]
    assert runs["b"] == [(T + 1, T + 6, True)]


def test_state_steps_keep_only_changes():
    tl = Timeline()
    for k, s in enumerate(["closed", "closed", "degraded", "degraded", "closed"]):
        tl.sample("gateway", "pool_state", s, t=T + k, pool="canary")
    assert state_steps(tl.series("gateway", "pool_state")) == {
        "canary": [(T, "closed"), (T + 2, "degraded"), (T + 4, "closed")]}


def test_traffic_share_counts_only_requests_with_a_known_pool():
    recs = [rec(0.1, served_by="canary/replica-c"), rec(0.2, served_by="stable/replica-a"),
            rec(0.3, served_by=None), rec(0.4, served_by="stable/replica-b"), rec(1.5, served_by="stable/x")]
    xs, share = traffic_share(recs, T, T + 3, bucket_s=1.0)
    assert xs == [0.0, 1.0, 2.0]
    assert share[0] == pytest.approx(1 / 3)
    assert share[1] == 0.0
    assert math.isnan(share[2])


def test_markers_and_origin():
    tl = Timeline()
    tl.event("phase", "verify", t=T + 9, end=T + 12)
    tl.event("phase", "inject", t=T + 3)
    assert [m.label for m in phase_markers(tl)] == ["inject", "verify"]
    assert time_origin([rec(1, e2e=0.5)], tl) == (T + 1, T + 12)

    class Crossing:
        t = T + 4
        label = "error rate >= 1 %"
    assert as_markers([(T + 5, "b"), Crossing(), Marker(T + 1, "a")]) == [
        Marker(T + 1, "a"), Marker(T + 4, "error rate >= 1 %"), Marker(T + 5, "b")]
