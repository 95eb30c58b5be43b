"""A game day's monitoring stage: each experiment's alerts judged by the verdict the suites use
(chaos.verify.alert_watch, chaos.verify.alerts), its rows in the journal beside the fault window.

An experiment whose plan lists `alerts` must see each fire within `fire_within_s` of the fault taking
effect and clear within `clear_within_s` of its revert; an experiment without a fault is a no-fault
baseline, where an alert that fires is a false page (the environment's `baseline_silent`). Without a
Prometheus to read, every row is "not proven". Alert names are checked against the environment's rule
files before anything starts (`plan_alert_problems`): a name no rule file defines can only be a blind spot.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from chaos.experiment import events as ev
from chaos.experiment.plan import Plan, PlanExperiment
from chaos.experiment.runner import ExperimentRun


def plan_alert_problems(plan: Plan, env: Any, path: Any) -> list[str]:
    """One line per alert the plan expects that none of the environment's rule files defines (and per
    rule file that cannot be read), naming the plan file, the experiment and the field."""
    from chaos.env_check.monitoring import rule_alerts

    wanted = [(i, x) for i, x in enumerate(plan.experiments) if x.alerts is not None]
    if not wanted or env.monitoring is None:
        return []
    names, problems = rule_alerts(env.monitoring.rule_files)
    for i, x in wanted:
        assert x.alerts is not None
        for field in ("fire", "allow"):
            for alert in getattr(x.alerts, field):
                if alert not in names:
                    problems.append(f"{path}: experiments[{i}] ({x.name}): alerts.{field}: alert {alert!r} is in no "
                                    f"rule file of environment {env.name} (rule_files define: "
                                    f"{', '.join(sorted(names)) or 'none'})")
    return problems


def watched(plan: Plan, env: Any) -> bool:
    """Whether the game day judges alerts at all: the environment has monitoring, or the plan expects alerts."""
    return env.monitoring is not None or any(x.alerts is not None for x in plan.experiments)


def fault_label(x: PlanExperiment) -> str | None:
    """The fault as the monitoring rows name it ("http-error on replica-c"); None: a no-fault baseline."""
    if x.release is not None:
        return f"release stage {x.name}"
    if x.fault is None:
        return None
    where = x.fault.target or x.fault.proxy
    return f"{x.fault.kind} on {where}" if where else x.fault.kind


class _OnTheBus:
    """What AlertWatch.verdict draws on a timeline, published as journal events: each firing at its own
    time, so the summary shows it between the fault's injection and its revert."""

    def __init__(self, bus: ev.EventBus, experiment: str) -> None:
        self.bus, self.experiment = bus, experiment

    def event(self, kind: str, name: str, *, t: float, end: float | None = None) -> None:
        self.bus.publish(ev.Noted(t=t, experiment=self.experiment, what=f"{kind} firing",
                                  detail={"alert": name, "for": f"{end - t:.0f} s" if end is not None else "still"}))


def alert_judge(monitor: Any, x: PlanExperiment, bus: ev.EventBus,
                clock: Callable[[], float] = time.time) -> Callable[[ExperimentRun], Any]:
    """The experiment's monitoring verdict, run in its verify phase (under its load): waits for the
    expected alerts to fire, page and clear (bounded by the plan's times), then judges them."""
    label = fault_label(x)

    def monitoring(run: ExperimentRun) -> Any:
        watch = monitor.watch(label, expect=x.alerts, start=run.t_start)
        watch.took_effect(run.t_inject if run.t_inject is not None else run.t_start)
        watch.recovered(run.t_revert if run.t_revert is not None else clock())
        watch.settle()
        # the runner's inject proved the fault took hold (else ERROR, and no verify phase)
        v = watch.verdict(fault_proven=True, timeline=_OnTheBus(bus, x.name))
        if label is not None and x.alerts is None and not v.rows:  # say so rather than an empty "holds"
            v.add("alerts expected of this fault", "-", "none fired", None, "the plan names none (alerts:): not judged")
        return v

    return monitoring
