"""One session's monitoring as suites use it: `AlertMonitor.watch(fault)` marks a scenario's times,
waits (bounded by the expectation) for the expected alerts to fire, page and clear, and turns what
Prometheus and the webhook receiver saw into the monitoring verdict (chaos.verify.alerts)."""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chaos.errors import TargetError
from chaos.observe.alerts import Firing, PrometheusAlerts, WebhookReceiver
from chaos.verify.alerts import AlertWindow, alert_verdict

if TYPE_CHECKING:
    from chaos.env.monitoring import AlertExpectation, Monitoring
    from chaos.verify.verdict import Verdict


# how far back a left-over firing is looked for (a firing that began earlier is still one: end None)
HELD_LOOKBACK_S = 600.0


class AlertMonitor:
    """Prometheus to read, the webhook receiver pages arrive at, and the environment's expectations
    (`why_not` says why there is nothing to read: then every monitoring row is "not proven")."""

    def __init__(self, config: Monitoring | None, prometheus_url: str | None, receiver: WebhookReceiver | None,
                 why_not: str = "", clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.config = config
        self.prometheus = PrometheusAlerts(prometheus_url) if prometheus_url else None
        self.receiver, self.why_not = receiver, why_not or ("" if prometheus_url else "no monitoring section")
        self.clock, self.sleep = clock, sleep

    @property
    def step_s(self) -> float:
        return self.config.prometheus.evaluation_interval_s if self.config else 1.0

    def _expected(self, fault: str | None, expect: AlertExpectation | None) -> AlertExpectation | None:
        return expect if expect is not None else self.config.expectation(fault) if self.config else None

    def held(self, fault: str | None, expect: AlertExpectation | None = None) -> list[str]:
        """The alerts `fault` must fire that are firing already, left over from an earlier fault (none without
        expectations or Prometheus, or where Prometheus does not answer: the verdict says that)."""
        exp = self._expected(fault, expect)
        if exp is None or self.prometheus is None or not exp.fire:
            return []
        now = self.clock()
        try:
            firings = self.prometheus.firings(now - HELD_LOOKBACK_S, now, max(1.0, self.step_s / 4))
        except TargetError:
            return []
        return sorted({f.alertname for f in firings if f.end is None and f.alertname in exp.fire})

    def wait_out(self, fault: str | None, expect: AlertExpectation | None = None) -> list[str]:
        """Before a scenario: wait while an alert `fault` must fire is still firing from an earlier fault (at most
        its clear_within_s plus two evaluations), since this fault's own firing could not be told from it and
        the monitoring row would say "not proven". The alerts still held when the wait ended (none: all clear)."""
        exp = self._expected(fault, expect)
        deadline = self.clock() + (exp.clear_within_s if exp else 0.0) + 2 * self.step_s
        while (still := self.held(fault, expect)) and self.clock() < deadline:
            self.sleep(min(1.0, self.step_s))
        return still

    def watch(self, fault: str | None, expect: AlertExpectation | None = None, start: float | None = None) -> AlertWatch:
        """Start watching one scenario (fault None: a no-fault baseline).

        `expect` stands in for the environment's expectation of `fault` (a game-day plan's own); `start`
        is when the scenario began (default: now)."""
        return AlertWatch(self, fault, expect, start)


class AlertWatch:
    """One scenario's alerts: mark when the fault took effect and when the system recovered, `settle()`,
    then `verdict()`."""

    def __init__(self, monitor: AlertMonitor, fault: str | None, expect: AlertExpectation | None = None,
                 start: float | None = None) -> None:
        self.m, self.fault = monitor, fault
        self.expect = monitor._expected(fault, expect)
        self.start = monitor.clock() if start is None else start
        self.effect_at = self.recovered_at = self.start
        self.until: float | None = None

    def took_effect(self, at: float | None = None) -> None:
        self.effect_at = self.m.clock() if at is None else at

    def recovered(self, at: float | None = None) -> None:
        self.recovered_at = self.m.clock() if at is None else at

    def _firings(self) -> list[Firing]:
        assert self.m.prometheus is not None
        start, end = self.start - 60 * self.m.step_s, self.m.clock()
        # a quarter of an evaluation: each firing's start is known to that (Prometheus returns at most
        # 11,000 points a series, so a long game day is read coarser)
        step = max(self.m.step_s / 4, (end - start) / 10_000)
        return self.m.prometheus.firings(start, end, step)

    def first_fired_s(self, after: float) -> float | None:
        """Seconds from `after` to the first alert that started firing since; None where none did or none is read."""
        if self.m.prometheus is None:
            return None
        starts = [f.start for f in self._firings() if f.start >= after]
        return min(starts) - after if starts else None

    def started_between(self, a: float, b: float) -> list[Firing] | None:
        """The firings that began within [a, b] (a firing left over from before is not one); None where no
        Prometheus is read or it did not answer."""
        if self.m.prometheus is None:
            return None
        try:
            return [f for f in self._firings() if a <= f.start <= b]
        except TargetError:
            return None

    def settle(self) -> None:
        """Wait until each expected alert has fired and paged (at most fire_within_s after the fault took
        effect), then until each has cleared and its resolved page arrived (at most clear_within_s after
        recovery, plus two evaluations); nothing to wait for without expectations or Prometheus."""
        if self.expect is None or self.m.prometheus is None:
            return
        names, rx, slack = self.expect.fire, self.m.receiver, 2 * self.m.step_s

        def fired() -> bool:
            on = {f.alertname for f in self._firings() if f.start >= self.start}
            return all(n in on and (rx is None or rx.first(n, "firing", self.start) is not None) for n in names)

        def cleared() -> bool:
            mine = [f for f in self._firings() if f.start >= self.start and f.alertname in names]
            return all(f.end is not None for f in mine) and all(
                rx is None or rx.first(f.alertname, "resolved", f.start) is not None for f in mine)

        self._poll(fired, self.effect_at + self.expect.fire_within_s + slack)
        self._poll(cleared, max(self.recovered_at, self.m.clock()) + self.expect.clear_within_s + slack)

    def _poll(self, done: Callable[[], bool], deadline: float) -> None:
        while True:
            try:
                if done():
                    return
            except TargetError:  # the verdict reads again and says what failed
                return
            if self.m.clock() >= deadline:
                return
            self.m.sleep(min(1.0, self.m.step_s))

    def verdict(self, fault_proven: bool = True, timeline: Any = None) -> Verdict:
        """The monitoring rows: fire, page, resolve, resolved page; unexpected alerts; blind spots (each
        firing also an event on `timeline`, beside the fault window)."""
        self.until = self.m.clock()
        w = AlertWindow(self.start, self.effect_at, self.recovered_at, self.until)
        firings: list[Firing] | None = None
        why = self.m.why_not
        if self.m.prometheus is not None:
            try:
                firings = self._firings()
            except TargetError as e:
                why = f"prometheus did not answer: {e}"
        cfg = self.m.config
        for f in firings or []:
            if timeline is not None and (f.end is None or f.end > self.start):
                timeline.event("alert", f.alertname, t=f.start, end=f.end)
        return alert_verdict(firings, self.m.receiver, w, fault=self.fault, expect=self.expect,
                             fault_proven=fault_proven, baseline_silent=cfg.baseline_silent if cfg else True,
                             why_not=why)
