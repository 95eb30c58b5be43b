"""The monitoring verdict from firing stretches and webhook pages: blind spots, false pages, not proven."""
from __future__ import annotations

from chaos.env.monitoring import AlertExpectation
from chaos.observe.alerts import Firing, WebhookReceiver
from chaos.verify.alerts import AlertWindow, alert_verdict

W = AlertWindow(start=100.0, effect_at=110.0, recovered_at=130.0, until=220.0)
EXPECT = AlertExpectation(fire=["ErrorsHigh"], allow=["ErrorsLow"], fire_within_s=20, clear_within_s=40)


def receiver_with(*pages: tuple[float, str, str]) -> WebhookReceiver:
    rx = WebhookReceiver()
    for t, name, status in pages:
        rx._clock = lambda t=t: t
        rx.record(b'{"alerts": [{"status": "%s", "labels": {"alertname": "%s"}}]}' % (status.encode(), name.encode()))
    return rx


def test_an_alert_that_fired_paged_and_cleared_in_time_passes_with_its_times() -> None:
    rx = receiver_with((118.0, "ErrorsHigh", "firing"), (161.0, "ErrorsHigh", "resolved"))
    v = alert_verdict([Firing("ErrorsHigh", 116.0, 160.0)], rx, W, fault="errors-rollback", expect=EXPECT)
    assert v.ok and not v.unproven
    assert v.row("ErrorsHigh: time to fire").measured == 6.0
    assert v.row("ErrorsHigh: time to page").measured == 8.0
    assert v.row("ErrorsHigh: time to resolve").measured == 30.0
    assert v.row("ErrorsHigh: time to resolved page").measured == 31.0


def test_an_expected_alert_that_never_fired_is_a_blind_spot_naming_fault_and_alert() -> None:
    v = alert_verdict([], receiver_with(), W, fault="errors-rollback", expect=EXPECT)
    assert not v.ok
    row = v.failures[0]
    assert row.check == "blind spot: no alert for errors-rollback"
    assert "ErrorsHigh" in row.limit and "ErrorsHigh never fired" in row.detail


def test_late_fire_late_page_and_no_resolve_each_fail() -> None:
    rx = receiver_with((140.0, "ErrorsHigh", "firing"))
    v = alert_verdict([Firing("ErrorsHigh", 135.0, None)], rx, W, fault="errors-rollback", expect=EXPECT)
    assert {r.check for r in v.failures} == {"ErrorsHigh: time to fire", "ErrorsHigh: time to page",
                                             "ErrorsHigh: time to resolve"}
    assert v.row("ErrorsHigh: time to resolve").measured == "still firing"


def test_an_unlisted_alert_is_a_false_page_and_an_allowed_one_is_not() -> None:
    fired = [Firing("ErrorsHigh", 115.0, 150.0), Firing("ErrorsLow", 112.0, 150.0), Firing("DiskFull", 120.0, 125.0)]
    rx = receiver_with((116.0, "ErrorsHigh", "firing"), (151.0, "ErrorsHigh", "resolved"))
    v = alert_verdict(fired, rx, W, fault="errors-rollback", expect=EXPECT)
    assert [r.check for r in v.failures] == ["unexpected alert: DiskFull"]


def test_the_baseline_fails_on_any_alert_that_began_in_it_but_not_on_one_left_over() -> None:
    quiet = alert_verdict([Firing("Old", 50.0, 105.0)], None, W, fault=None, expect=None)
    assert quiet.ok and quiet.row("no alert in the no-fault baseline").ok is True
    assert quiet.row("already firing: Old").ok is None
    noisy = alert_verdict([Firing("ErrorsLow", 150.0, None)], None, W, fault=None, expect=None)
    assert [r.check for r in noisy.failures] == ["alert fired in the no-fault baseline: ErrorsLow"]


def test_a_fault_that_was_not_proven_never_counts_as_a_missed_alert() -> None:
    v = alert_verdict([], receiver_with(), W, fault="errors-rollback", expect=EXPECT, fault_proven=False)
    assert v.ok and v.unproven and "not proven (stage 1)" in v.unproven[0].unproven


def test_without_prometheus_every_row_is_not_proven_never_green() -> None:
    v = alert_verdict(None, None, W, fault="errors-rollback", expect=EXPECT, why_not="prometheus not found")
    assert [r.mark for r in v.rows] == ["not proven"] and v.rows[0].unproven == "prometheus not found"


def test_without_an_alertmanager_the_page_is_not_proven() -> None:
    v = alert_verdict([Firing("ErrorsHigh", 115.0, 150.0)], None, W, fault="errors-rollback", expect=EXPECT)
    assert v.row("ErrorsHigh: time to page").mark == "not proven"


def test_a_fault_the_environment_says_nothing_of_shows_its_alerts_unjudged() -> None:
    v = alert_verdict([Firing("Restarted", 112.0, 140.0)], None, W, fault="crash-sigkill", expect=None)
    assert v.ok and v.row("alert fired: Restarted").ok is None


def test_without_the_programs_the_monitor_says_why_and_proves_nothing(monkeypatch) -> None:
    from chaos.env import load
    from chaos.fixtures.monitoring import monitoring_missing
    from chaos.verify.alert_watch import AlertMonitor

    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CHAOS_PROMETHEUS_BIN", raising=False)
    env = load("local", environ={})
    why = monitoring_missing(env)
    assert why is not None and "prometheus not found" in why
    watch = AlertMonitor(env.monitoring, None, None, why).watch("errors-rollback")
    watch.took_effect()
    watch.recovered()
    watch.settle()  # nothing to wait for
    v = watch.verdict()
    assert v.ok and [r.mark for r in v.rows] == ["not proven"] and "prometheus not found" in v.rows[0].unproven


def test_firing_stretches_are_read_from_the_alerts_series_with_their_gaps() -> None:
    from chaos.observe.alerts import PrometheusAlerts

    p = PrometheusAlerts("http://127.0.0.1:9")
    series = {"metric": {"alertname": "A"}, "values": [[t, "1"] for t in (10, 11, 12, 20, 21)]}
    p._get = lambda path, **kw: ({"result": [series]} if "query_range" in path  # type: ignore[method-assign]
                                 else {"alerts": [{"labels": {"alertname": "A"}, "state": "firing"}]})
    assert p.firings(0, 21.5, 1.0) == [Firing("A", 10, 13), Firing("A", 20, None)]
    p._get = lambda path, **kw: ({"result": [series]} if "query_range" in path  # type: ignore[method-assign]
                                 else {"alerts": []})
    assert p.firings(0, 30, 1.0)[-1] == Firing("A", 20, 22)


def test_an_expected_alert_left_firing_by_an_earlier_fault_is_not_proven_never_a_blind_spot() -> None:
    """A restart alert still firing from the previous scenario's restart hides this fault's firing (the
    recovery suite's rank freeze, then its crash, restarted the same replica 20 s apart)."""
    left_over = Firing("ErrorsHigh", 90.0, 135.0)
    v = alert_verdict([left_over], receiver_with(), W, fault="crash-sigkill", expect=EXPECT)
    assert not v.failures, [r.line() for r in v.failures]
    row = v.row("ErrorsHigh: time to fire")
    assert row.unproven and "already firing 10 s before the scenario" in row.unproven
    # one that had cleared before the fault took effect hides nothing: that is still a blind spot
    v = alert_verdict([Firing("ErrorsHigh", 90.0, 105.0)], receiver_with(), W, fault="crash-sigkill", expect=EXPECT)
    assert [r.check for r in v.failures] == ["blind spot: no alert for crash-sigkill"]
