"""One experiment, in the spirit of Chaos Toolkit's (hypothesis, method, rollbacks), with our faults, and
the one runner that every suite, game-day plan and team's own suite goes through:

    Experiment("canary 500s", load=..., hypothesis=error_share_below(0.01) & p99_below_s(2.0),
               fault=http_error(proxy, 500, fraction=0.04), hold_s=30, until=recovered(within=60),
               abort=AbortLimits(error_rate=0.3), verdicts=[...]).run(bus=bus)

Phases: load -> steady state (the hypothesis must hold before anything is injected: a sick system
is REFUSED, not hurt) -> inject -> hold (every `check_every_s` the abort guard reads the load's
error rate and the fault's age; past `abort`'s limits the fault is reverted at once and the
experiment is ABORTED) -> revert -> recover (the hypothesis must hold again within `until`) ->
verify. The fault is reverted on every way out: success, a failed check, an exception, Ctrl-C,
SIGTERM, `chaos stop`, the stop file. Time is the runner's own clock and sleep, so every phase is
testable on a fake clock.

That declared sequence (declared_steps, below) is the default steps. An experiment that needs a sequence of its own
gives `steps=`, a function of the run handle (handle.py; under pytest the `run_experiment` fixture's `Run`,
run.py), and the same runner walks it: the same outcome -> Status mapping, the same revert on every way
out, the same events for the journal, timeline and Allure steps, the same stop switch and budget watchdog.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from chaos.checks import Check as Probe
from chaos.checks import Hypothesis, Reading, error_share_below
from chaos.errors import FaultNotEffective
from chaos.experiment import events as ev
from chaos.experiment.handle import LOAD_START_S, RunHandle
from chaos.experiment.method import Method, StopAsked
from chaos.experiment.outcome import EXIT_CODES, AbortLimits, ExperimentRun, Status
from chaos.experiment.stop import EmergencyStop, StopSwitch
from chaos.experiment.waits import Recovered, recovered
from chaos.load.records import RequestRecord

__all__ = ["EXIT_CODES", "Abort", "AbortLimits", "Experiment", "ExperimentRun", "Recovered", "Status", "execute",
           "recovered"]


@dataclass
class Experiment:
    """A fault experiment: see the module docstring."""

    name: str
    fault: Any = None                       # inject()/revert(); None: a no-fault control
    hold_s: float = 30.0
    hypothesis: Hypothesis | Probe | None = None
    window_s: float = 10.0                  # the hypothesis's window
    steady_s: float | None = None           # load before the first check (default: window_s)
    until: Recovered | None = None
    abort: AbortLimits | None = None
    verdicts: Sequence[Callable[[ExperimentRun], Any]] = ()
    load: Callable[[], Any] | None = None   # starts load: a handle with records() and stop()
    check_every_s: float = 1.0
    tick_s: float = 0.1
    steps: Callable[[Any], Any] | None = None  # its own sequence over the run handle (a Run under pytest); None: declared
    hurt: Sequence[str] = ()                # the targets it hurts (the report attaches their log tails)

    def run(self, *, bus: ev.EventBus | None = None, clock: Callable[[], float] = time.time,
            sleep: Callable[[float], None] = time.sleep, stop: StopSwitch | None = None,
            records: Callable[[], list[RequestRecord]] | None = None) -> ExperimentRun:
        """Run it on a bare handle (a game day, the capacity search): how it ended is its Status."""
        method = Method(self.name, bus=bus or ev.EventBus(), clock=clock, sleep=sleep, stop=stop or StopSwitch(),
                        tick_s=self.tick_s)
        return execute(self, RunHandle(self.name, method, records=records))


def execute(exp: Experiment, run: RunHandle, *, reraise: bool = False) -> ExperimentRun:
    """The one runner: `exp`'s steps (its declared sequence when it has none) on the handle `run`, how they
    ended mapped to a Status, the fault reverted on every way out (the handle's finish).

    reraise=True (under pytest) raises what ended the steps once the Status is recorded, so a failed check
    surfaces as its own SLOViolation or AssertionError; a skip or any other BaseException passes through."""
    r = ExperimentRun(exp.name)
    run.result, run.experiment = r, exp
    r.t_start = run.clock()
    if exp.steps is None:
        h = exp.hypothesis if isinstance(exp.hypothesis, Hypothesis) or exp.hypothesis is None \
            else Hypothesis([exp.hypothesis])
        hyp = h.describe() if h else "(none)"
        fault = repr(exp.fault) if exp.fault is not None else "none"
        run.start(f"hypothesis {hyp}; fault {fault} for {exp.hold_s:g} s")
    else:
        run.start(f"steps {getattr(exp.steps, '__name__', 'of its own')}")
    try:
        (exp.steps or declared_steps)(run)
    except Abort as x:
        r.status, r.reason = Status.ABORTED, str(x)
        run.publish(ev.Aborted, reason=str(x))
        if reraise:
            raise
    except StopAsked as x:
        r.status, r.reason = Status.STOPPED, f"stopped by {x.by}" + (f": {x.reason}" if x.reason else "")
        run.publish(ev.Stopped, by=x.by, reason=x.reason)
        if reraise:
            raise
    except EmergencyStop as x:
        r.status, r.reason = Status.STOPPED, f"stopped by {x.by}"
        run.publish(ev.Stopped, by=x.by, reason=x.reason)
        if reraise:
            raise
    except KeyboardInterrupt:
        r.status, r.reason = Status.STOPPED, "stopped by Ctrl-C"
        run.publish(ev.Stopped, by="SIGINT")
        if reraise:
            raise
    except AssertionError as x:
        r.status, r.reason = Status.FAILED, str(x)
        if reraise:
            raise
    except FaultNotEffective as x:  # it did not take hold, or it lapsed during the hold
        r.status, r.reason = Status.ERROR, f"fault not effective: {x}"
        if reraise:
            raise
    except Exception as x:
        r.status, r.reason = Status.ERROR, f"{type(x).__name__}: {x}"
        if reraise:
            raise
    finally:
        run.finish(r)
    return r


# -- the declared sequence: the steps the runner walks when an experiment gives none of its own --------------
class Abort(Exception):
    """The abort guard fired: the runner ends the experiment ABORTED."""


def declared_steps(run: RunHandle) -> None:
    """The declared sequence of `run.experiment` (see the module docstring): load, steady state, inject,
    hold under the abort guard, revert, recover, verify."""
    assert run.experiment is not None and run.result is not None, "the runner sets both"
    _Declared(run.experiment, run, run.result).walk()


class _Declared:
    def __init__(self, exp: Experiment, run: RunHandle, result: ExperimentRun) -> None:
        self.exp, self.run, self.r = exp, run, result
        self.clock = run.clock
        self.hyp = exp.hypothesis if isinstance(exp.hypothesis, Hypothesis) or exp.hypothesis is None \
            else Hypothesis([exp.hypothesis])

    def check(self, when: str, window: tuple[float, float] | None = None,
              records: list[RequestRecord] | None = None) -> list[Reading]:
        """The hypothesis over `window` (default: the last window_s); its failures."""
        if self.hyp is None:
            return []
        now = self.clock()
        window = window or (now - self.exp.window_s, now)
        readings = self.hyp.check(self.run.load_records() if records is None else records, window)
        for r in readings:
            self.r.readings.append((when, r))
            self.run.publish(ev.Measured, probe=r.probe, expected=r.expected, got=r.got, ok=r.ok, window=r.window,
                             when=when)
        failed = [r for r in readings if not r.ok]
        self.run.publish(ev.HypothesisChecked, when=when, ok=not failed, failures=tuple(r.line() for r in failed))
        return failed

    def guard(self, records: list[RequestRecord]) -> None:
        """The abort guard: past safety.abort's limits, revert now and end the experiment ABORTED."""
        a = self.exp.abort
        if a is None or self.r.t_inject is None:
            return
        now = self.clock()
        age = now - self.r.t_inject
        if age > a.max_fault_duration_s:
            raise Abort(f"the fault was in place {age:.1f} s, over safety.abort.max_fault_duration_s "
                        f"{a.max_fault_duration_s:g} s")
        r = error_share_below(a.error_rate, min_requests=a.min_requests).check(records, (now - a.window_s, now))[0]
        self.r.readings.append(("guard", r))
        self.run.publish(ev.Measured, probe=r.probe, expected=r.expected, got=r.got, ok=r.ok, window=r.window,
                         when="guard")
        if r.got is not None and not r.ok:
            raise Abort(f"error rate {r.shown} over the last {a.window_s:g} s ({r.requests} requests), over "
                        f"safety.abort.error_rate {a.error_rate:.0%}")

    def hold(self) -> None:
        end = self.clock() + self.exp.hold_s
        next_check = self.clock() + self.exp.check_every_s
        while self.clock() < end:
            self.run.tick()
            if self.clock() >= next_check:
                next_check += self.exp.check_every_s
                records = self.run.load_records()  # read once a check: the guard and the hypothesis share it
                self.guard(records)
                if self.hyp is not None:
                    self.check("during", records=records)  # seen and journalled; the abort guard decides

    def revert(self, check: bool = True) -> None:
        """Undo the fault; with `check`, first prove it still held (a fault that lapsed during the hold
        tested nothing: the experiment ends ERROR, the fault removed all the same)."""
        try:
            self.run.method.revert(check=check)
        finally:
            self.r.t_revert, self.r.t_revert_began = self.run.method.t_revert, self.run.method.t_revert_began

    def recover(self) -> None:
        """Until the hypothesis holds over a window that begins after the revert, within `until`."""
        assert self.exp.until is not None and self.r.t_revert is not None
        since, deadline = self.r.t_revert, self.r.t_revert + self.exp.until.within_s
        failed: list[Reading] = []
        while True:
            now = self.clock()
            failed = self.check("after", (max(since, now - self.exp.window_s), now))
            if not failed:
                return
            if now >= deadline:
                raise AssertionError(f"not recovered within {self.exp.until.within_s:g} s of the revert: "
                                     + "; ".join(r.line() for r in failed))
            for _ in range(max(1, round(self.exp.check_every_s / self.exp.tick_s))):
                self.run.tick()

    def walk(self) -> None:
        e, r, run = self.exp, self.r, self.run
        if e.load is not None:
            with run.phase("load"):
                run.load = e.load()
                if not run.load_flowing():  # the steady state's window begins once the load sends
                    r.status, r.reason = Status.REFUSED, ("steady state not met before the fault: the load recorded "
                                                          f"no request in {LOAD_START_S:g} s after it started")
                    return
        with run.phase("steady state"):
            run.wait(e.steady_s if e.steady_s is not None else e.window_s)
            failed = self.check("before")
            if failed:
                r.status, r.reason = Status.REFUSED, "steady state not met before the fault: " + failed[0].line()
                return
        if e.fault is not None:
            with run.phase("inject"):
                run.method.inject(e.fault)  # from here on every way out reverts (a half-injected fault too)
                r.t_inject = run.method.t_inject
        with run.phase("hold"):
            self.hold()
        with run.phase("revert"):
            self.revert()
        if e.until is not None and r.t_revert is not None:
            with run.phase("recover"):
                self.recover()
        with run.phase("verify"):
            self.verify()

    def verify(self) -> None:
        self.r.records = self.run.load_records()
        failures: list[str] = []
        for judge in self.exp.verdicts:
            v = judge(self.r)
            bad = tuple(row.line() for row in getattr(v, "failures", []))
            self.run.publish(ev.VerdictReached, name=getattr(v, "name", getattr(judge, "__name__", "verdict")),
                             ok=not bad, failures=bad, rows=tuple(row.line() for row in getattr(v, "rows", [])),
                             unproven=tuple(row.line() for row in getattr(v, "unproven", [])))
            failures += bad
        if failures:
            raise AssertionError("; ".join(failures))
