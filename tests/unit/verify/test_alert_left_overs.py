"""A scenario whose fault must fire an alert that still fires from an earlier fault waits it out first (bounded by
the expectation's clear_within_s), so its own firing can be told apart; nothing is waited for where nothing is held,
nothing is expected, or no Prometheus is read."""
from __future__ import annotations

from chaos.env.monitoring import AlertExpectation
from chaos.observe.alerts import Firing
from chaos.verify.alert_watch import AlertMonitor
from tests._support import FakeClock


class Prometheus:
    """An alert firing from `since` until `until` (None: for ever), as Prometheus's ALERTS series would say."""

    def __init__(self, clock: FakeClock, name: str, since: float, until: float | None) -> None:
        self.clock, self.name, self.since, self.until = clock, name, since, until
        self.asked = 0

    def firings(self, start: float, end: float, step: float) -> list[Firing]:
        self.asked += 1
        ended = self.until is not None and self.clock() >= self.until
        return [Firing(self.name, self.since, self.until if ended else None)]


EXPECT = AlertExpectation(fire=["Restarted"], clear_within_s=60)


def monitor(clock: FakeClock, prometheus: Prometheus | None) -> AlertMonitor:
    m = AlertMonitor(None, "http://127.0.0.1:9" if prometheus else None, None, clock=clock, sleep=clock.sleep)
    m.prometheus = prometheus  # type: ignore[assignment]
    return m


def test_a_held_alert_is_waited_out_until_it_clears() -> None:
    clock = FakeClock(1000.0)
    m = monitor(clock, Prometheus(clock, "Restarted", since=970.0, until=1025.0))
    assert m.held("restart", EXPECT) == ["Restarted"]
    assert m.wait_out("restart", EXPECT) == []
    assert 1025.0 <= clock() <= 1026.0


def test_the_wait_is_bounded_by_the_expectations_clear_time() -> None:
    clock = FakeClock(1000.0)
    m = monitor(clock, Prometheus(clock, "Restarted", since=970.0, until=None))
    assert m.wait_out("restart", EXPECT) == ["Restarted"]  # still held: the verdict then says "not proven", why
    assert 1060.0 <= clock() <= 1063.0


def test_nothing_is_waited_for_without_a_held_expected_alert() -> None:
    clock = FakeClock(1000.0)
    other = Prometheus(clock, "SomethingElse", since=970.0, until=None)
    m = monitor(clock, other)
    assert m.held("restart", EXPECT) == [] and m.wait_out("restart", EXPECT) == [] and clock() == 1000.0
    assert m.held("restart") == []  # no expectation of its own (no monitoring config): nothing to wait out
    assert monitor(clock, None).wait_out("restart", EXPECT) == [] and clock() == 1000.0


def test_the_firings_that_began_in_a_stretch_leave_the_earlier_ones_out() -> None:
    clock = FakeClock(1000.0)
    m = monitor(clock, Prometheus(clock, "Restarted", since=970.0, until=None))
    watch = m.watch(None)
    assert watch.started_between(960.0, 1000.0) == [Firing("Restarted", 970.0, None)]
    assert watch.started_between(980.0, 1000.0) == []  # began before the stretch: left over, not its alarm
    assert monitor(clock, None).watch(None).started_between(0.0, 2000.0) is None  # no Prometheus read: unknown
