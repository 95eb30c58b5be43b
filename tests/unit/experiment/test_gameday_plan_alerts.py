"""A game day's monitoring stage: plans name the alerts each fault must raise (checked against the
environment's rule files), each experiment is judged by the suites' alert verdict on a fake clock, and
without Prometheus its rows are "not proven" in the journal, never "holds"."""
from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from chaos.env.monitoring import Monitoring
from chaos.errors import ConfigError
from chaos.experiment import events as ev
from chaos.experiment.alerts import alert_judge, plan_alert_problems
from chaos.experiment.journal import Journal
from chaos.experiment.plan import parse_plan
from chaos.experiment.runner import ExperimentRun
from chaos.observe.alerts import Firing
from chaos.verify.alert_watch import AlertMonitor

PLAN = """\
name: alerts
experiments:
  - name: quiet
    hold_s: 5
  - name: canary 4 %
    fault: {kind: http-error, target: replica-c, status: 500, fraction: 0.04}
    hold_s: 5
    alerts: {fire: [ErrorsHigh], allow: [ErrorsLow], fire_within_s: 20, clear_within_s: 40}
"""


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


class Prometheus:
    """What PrometheusAlerts.firings answers: these stretches, whatever the range."""

    def __init__(self, firings: list[Firing]) -> None:
        self.fired = firings

    def firings(self, start: float, end: float, step: float) -> list[Firing]:
        return list(self.fired)


def monitor(clock: Clock, firings: list[Firing] | None) -> AlertMonitor:
    if firings is None:
        return AlertMonitor(None, None, None, "no monitoring section", clock=clock, sleep=clock.sleep)
    m = AlertMonitor(None, "http://127.0.0.1:9", None, clock=clock, sleep=clock.sleep)
    m.prometheus = Prometheus(firings)  # type: ignore[assignment]
    return m


def run(t_inject: float | None) -> ExperimentRun:
    return ExperimentRun("x", t_start=100.0, t_inject=t_inject, t_revert=None if t_inject is None else 130.0)


def test_alerts_on_an_experiment_without_a_fault_are_one_line() -> None:
    with pytest.raises(ConfigError) as e:
        parse_plan(PLAN.replace("    hold_s: 5\n  - name: canary", "    hold_s: 5\n    alerts: {fire: [A]}\n  - name: "
                                                                     "canary"), "plan.yaml")
    assert str(e.value).startswith("plan.yaml:3: experiments[quiet]: alerts: an experiment without a fault is a "
                                   "no-fault baseline"), str(e.value)


def test_an_alert_no_rule_file_defines_is_named_with_file_experiment_and_field(tmp_path: Path) -> None:
    rules = tmp_path / "r.rules.yml"
    rules.write_text("groups:\n  - name: g\n    rules:\n      - alert: ErrorsHigh\n        expr: vector(1)\n")
    env = SimpleNamespace(name="e", monitoring=Monitoring.model_validate(
        {"prometheus": {"url": "http://127.0.0.1:9"}, "rule_files": [str(rules)]}))
    problems = plan_alert_problems(parse_plan(PLAN, "plan.yaml"), env, "plan.yaml")
    assert problems == ["plan.yaml: experiments[1] (canary 4 %): alerts.allow: alert 'ErrorsLow' is in no rule file "
                        "of environment e (rule_files define: ErrorsHigh)"]
    assert plan_alert_problems(parse_plan(PLAN, "plan.yaml"), SimpleNamespace(name="e", monitoring=None), "p") == []


def test_the_plans_alert_fired_and_cleared_in_time_with_each_firing_on_the_journal() -> None:
    clock, bus = Clock(200.0), ev.EventBus()
    x = parse_plan(PLAN, "plan.yaml").experiments[1]
    v = alert_judge(monitor(clock, [Firing("ErrorsHigh", 106.0, 150.0)]), x, bus, clock=clock)(run(101.0))
    assert v.name == "monitoring: http-error on replica-c"
    assert v.row("ErrorsHigh: time to fire").measured == 5.0 and v.row("ErrorsHigh: time to fire").ok
    assert v.row("ErrorsHigh: time to resolve").measured == 20.0 and v.row("ErrorsHigh: time to resolve").ok
    assert [(e.t, e.detail["alert"]) for e in bus.events if isinstance(e, ev.Noted)] == [(106.0, "ErrorsHigh")]


def test_a_missing_alert_is_a_blind_spot_naming_fault_and_alert() -> None:
    clock = Clock(200.0)
    x = parse_plan(PLAN, "plan.yaml").experiments[1]
    v = alert_judge(monitor(clock, []), x, ev.EventBus(), clock=clock)(run(101.0))
    assert [r.check for r in v.failures] == ["blind spot: no alert for http-error on replica-c"]
    assert "ErrorsHigh never fired" in v.failures[0].detail


def test_an_alert_in_the_no_fault_experiment_is_a_false_page() -> None:
    clock = Clock(200.0)
    x = parse_plan(PLAN, "plan.yaml").experiments[0]
    v = alert_judge(monitor(clock, [Firing("ErrorsLow", 120.0, None)]), x, ev.EventBus(), clock=clock)(run(None))
    assert [r.check for r in v.failures] == ["alert fired in the no-fault baseline: ErrorsLow"]


def test_without_prometheus_the_rows_are_not_proven_and_the_journal_never_says_holds(tmp_path: Path) -> None:
    clock = Clock(200.0)
    x = parse_plan(PLAN, "plan.yaml").experiments[1]
    v: Any = alert_judge(monitor(clock, None), x, ev.EventBus(), clock=clock)(run(101.0))
    assert v.ok and [r.mark for r in v.rows] == ["not proven"] and "no monitoring section" in v.rows[0].detail
    journal = Journal(tmp_path, title="t")
    journal(ev.ExperimentStarted(t=100.0, experiment="x"))
    journal(ev.VerdictReached(t=140.0, experiment="x", name=v.name, ok=True, rows=tuple(r.line() for r in v.rows),
                              unproven=tuple(r.line() for r in v.unproven)))
    summary = journal.summary()
    assert "verdict monitoring: http-error on replica-c: not proven: alerts read from prometheus" in summary
    assert "holds" not in summary and "**What deviated.** verdict monitoring" in summary


def test_a_fault_the_plan_names_no_alerts_for_says_so_instead_of_an_empty_pass() -> None:
    clock = Clock(200.0)
    x = parse_plan(PLAN.replace("    alerts: {fire: [ErrorsHigh], allow: [ErrorsLow], fire_within_s: 20, "
                                "clear_within_s: 40}\n", ""), "plan.yaml").experiments[1]
    v = alert_judge(monitor(clock, []), x, ev.EventBus(), clock=clock)(run(101.0))
    assert [(r.check, r.ok) for r in v.rows] == [("alerts expected of this fault", None)]
