"""`chaos gameday --plan`: a plan's experiments in order against an environment, with a live view,
the journal, Allure results, an abort guard and an emergency stop.

A release stage (`release:` with a `gate:`) sets the reference gateway's gray release for its hold
and puts the previous one back at its end; a stage whose gate fails ends the plan there, so stage
2 never starts on a canary that failed the shadow comparison.

An embedded environment's stack is started here (and its targets are then ours to hurt) and taken
down at the end. Each experiment runs its own load (the environment's profile, the plan's
overrides). An ABORTED or STOPPED experiment ends the game day: the next one never starts, and the
journal says so. The exit code is the worst experiment's (runner.EXIT_CODES).

Where the environment has a `monitoring:` section (or the plan expects alerts), its monitoring is
started after the stack (the face hands in how: `start_monitoring`) and each experiment ends with the
monitoring verdict the suites use (chaos.experiment.alerts).
"""
from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack, nullcontext
from pathlib import Path
from typing import Any

from chaos.errors import ConfigError
from chaos.experiment import events as ev
from chaos.experiment.alerts import alert_judge, plan_alert_problems, watched
from chaos.experiment.plan import Plan, PlanFault, experiments
from chaos.experiment.report import AllureResults, LiveView
from chaos.experiment.runner import EXIT_CODES, ExperimentRun, Status
from chaos.experiment.session import Session

ENDS_THE_DAY = (Status.ABORTED, Status.STOPPED)


def _slug(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-")[:60] or "experiment"


def make_fault(env: Any, stack: Any, spec: PlanFault, *, allow_destructive: bool = False) -> Any:
    """A plan's fault, aimed at a target this process supervises where the stack is ours (a restart
    needs its supervisor), else built as `chaos fault inject` builds it; with the environment's policy."""
    from chaos import faults
    from chaos.faults.base import Policy
    from chaos.faults.build import TARGET, build_fault
    from chaos.faults.params import check

    params = spec.params()
    if spec.kind in TARGET and stack is not None:
        kwargs = check(spec.kind, params)
        if spec.target not in stack.targets:
            raise ConfigError(f"target {spec.target!r}: the environment has {', '.join(stack.targets) or 'no targets'}")
        fault = getattr(faults, spec.kind.replace("-", "_"))(stack.target(spec.target), **kwargs)
    else:
        fault = build_fault(env, spec.kind, target=spec.target, proxy=spec.proxy, params=params,
                            run_id=f"gameday-{env.name}")
    return fault.using(Policy.for_env(env, allow_destructive=allow_destructive))


class GameDay:
    """One game day of `plan` against `env`."""

    def __init__(self, env: Any, plan: Plan, *, plan_path: str | Path, out_dir: str | Path,
                 allow_destructive: bool = False, console: Any = None, live: bool = True,
                 start_stack: Callable[[Any], Any] | None = None,
                 start_monitoring: Callable[[Any], AbstractContextManager[Any]] | None = None) -> None:
        self.env, self.plan, self.plan_path = env, plan, Path(plan_path)
        # the face that runs the day hands in how to start the stand-ins (the bridge): the harness never imports them
        self.start_stack, self.start_monitoring = start_stack, start_monitoring
        # an expected alert no rule file defines can only be a blind spot: said now, judged by the run
        self.alert_problems = plan_alert_problems(plan, env, self.plan_path)
        self.out_dir = Path(out_dir)
        self.allow_destructive, self.console, self.live = allow_destructive, console, live
        # the fault policy, the bus and its journal, the emergency stop and the stack, wired once
        self.session = Session(env, self.out_dir, title=plan.name, meta={"plan": str(self.plan_path)},
                               allow_destructive=allow_destructive, start_stack=self._start_stack)
        self.bus, self.journal = self.session.bus, self.session.journal
        self.bus.subscribe(AllureResults(self.out_dir / "allure-results", plan.name, env))
        self.runs: list[ExperimentRun] = []

    def make_fault(self, spec: PlanFault) -> Any:
        return make_fault(self.env, self.stack, spec, allow_destructive=self.allow_destructive)

    def make_release(self, spec: Any) -> Any:
        from chaos.faults.base import Policy
        from chaos.faults.gateway import release_stage

        return release_stage(self.env, canary_weight=spec.canary_weight, mirror=spec.mirror, admit=spec.admit).using(
            Policy.for_env(self.env, allow_destructive=self.allow_destructive))

    def make_gate(self, x: Any, window_s: float) -> list[Any]:
        from chaos.experiment.gates import gate_verdicts

        return gate_verdicts(self.env, x.release, x.gate, window_s)

    def make_load(self, overrides: dict[str, Any], seconds: float, name: str) -> Any:
        from chaos.load.runner import start_env_load

        return start_env_load(self.env, out_dir=self.out_dir / "load" / _slug(name),
                              **{"duration_s": seconds, **overrides})

    @property
    def stack(self) -> Any:
        """The stack the session started (None before and after the day, or where the environment is not embedded)."""
        return self.session.stack

    def run(self) -> int:
        view = LiveView(self.console, [x.name for x in self.plan.experiments], self.env.safety.abort.error_rate,
                        live=self.live)
        self.bus.subscribe(view)
        for problem in self.alert_problems:
            print(f"chaos: {problem}: it can only be a blind spot", file=sys.stderr)
        with view, self.session:  # the stand-ins start under the live view
            stop = self.session.stop
            # the monitoring closes before the session takes the stack down: its scrape targets
            with ExitStack() as monitoring:
                monitor = monitoring.enter_context(self._monitoring()) if watched(self.plan, self.env) else None
                built = experiments(self.plan, self.env, make_fault=self.make_fault, make_load=self.make_load,
                                    path=self.plan_path, make_release=self.make_release, make_gate=self.make_gate)
                for spec, exp in zip(self.plan.experiments, built, strict=True):
                    if monitor is not None:  # the monitoring stage, after the fault's own verdicts
                        exp.verdicts = [*exp.verdicts, alert_judge(monitor, spec, self.bus)]
                    run = exp.run(bus=self.bus, stop=stop)
                    self.runs.append(run)
                    # a release stage that fails its gate was rolled back (its revert) and gates the rest
                    gated = spec.gate is not None and run.status is not Status.PASSED
                    if run.status in ENDS_THE_DAY or gated:
                        why = f"{run.name} failed its gate (rolled back)" if gated and run.status not in ENDS_THE_DAY \
                            else f"{run.name} ended {run.status.value}"
                        for rest in self.plan.experiments[len(self.runs):]:
                            self.bus.publish(ev.ExperimentEnded(t=time.time(), experiment=rest.name,
                                                                status="NOT STARTED", reason=why))
                        break
        return exit_code(self.runs)

    def _monitoring(self) -> AbstractContextManager[Any]:
        """The environment's monitoring, as the face starts it; without a face that can, the team's
        Prometheus where the environment names one, else nothing to read (every row "not proven")."""
        if self.start_monitoring is not None:
            return self.start_monitoring(self.env)
        from chaos.verify.alert_watch import AlertMonitor

        mon = self.env.monitoring
        if mon is not None and mon.prometheus.url:
            return nullcontext(AlertMonitor(mon, str(mon.prometheus.url), None,
                                            "the game day runs no webhook receiver for the team's alertmanager"))
        return nullcontext(AlertMonitor(mon, None, None, "no monitoring section" if mon is None else
                                        "embedded monitoring needs `chaos gameday` to start it"))

    def _start_stack(self, env: Any) -> Any:
        """The session's start_stack for an embedded environment: the one the face handed in."""
        if self.start_stack is None:
            raise ConfigError(f"environment {env.name}: embedded: {env.embedded} needs the stand-ins started "
                              "(run the game day with `chaos gameday`, which starts them)")
        return self.start_stack(env)


# the game day's exit code: the first of these that any experiment ended with
PRECEDENCE = (Status.STOPPED, Status.ABORTED, Status.ERROR, Status.REFUSED, Status.FAILED, Status.PASSED)


def exit_code(runs: list[ExperimentRun]) -> int:
    seen = {r.status for r in runs}
    return next((EXIT_CODES[s] for s in PRECEDENCE if s in seen), EXIT_CODES[Status.ERROR])
