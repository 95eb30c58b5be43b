"""One experiment, in the spirit of Chaos Toolkit's (hypothesis, method, rollbacks), with our faults, and
the one runner that every suite, game-day plan and team's own suite goes through:

    Experiment("canary 500s", load=..., hypothesis=error_rate_below(0.01) & p99_below(2.0),
               fault=http_error(proxy, 500, fraction=0.04), hold_s=30, until=recovered(within=60),
               abort=AbortLimits(error_rate=0.3), verdicts=[...]).run(bus=bus)

Phases: load -> steady state (the hypothesis must hold before anything is injected: a sick system
is REFUSED, not hurt) -> inject -> hold (every `check_every_s` the abort guard reads the load's
error rate and the fault's age; past `abort`'s limits the fault is reverted at once and the
experiment is ABORTED) -> revert -> recover (the hypothesis must hold again within `until`) ->
verify. The fault is reverted on every way out: success, a failed check, an exception, Ctrl-C,
SIGTERM, `chaos stop`, the stop file. Time is the runner's own clock and sleep, so every phase is
testable on a fake clock.

That declared sequence (declared.py) is the default steps. An experiment that needs a sequence of its own
gives `steps=`, a function of the run handle (handle.py; under pytest the `run_experiment` fixture's `Run`,
run.py), and the same runner walks it: the same outcome -> Status mapping, the same revert on every way
out, the same events for the journal, timeline and Allure steps, the same stop switch and budget watchdog.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from chaos.errors import FaultNotEffective
from chaos.experiment import events as ev
from chaos.experiment.declared import Abort, declared_steps
from chaos.experiment.handle import RunHandle
from chaos.experiment.hypothesis import Hypothesis, Probe, Reading
from chaos.experiment.method import Method, StopAsked
from chaos.experiment.stop import EmergencyStop, StopSwitch
from chaos.experiment.waits import Recovered, recovered
from chaos.load.records import RequestRecord

__all__ = ["EXIT_CODES", "AbortLimits", "Experiment", "ExperimentRun", "Recovered", "Status", "execute", "recovered"]


class Status(str, Enum):
    """How an experiment ended; each has its own exit code (EXIT_CODES) and report category."""

    PASSED = "PASSED"
    FAILED = "FAILED"      # a verdict, or the hypothesis after recovery, did not hold
    STOPPED = "STOPPED"    # an emergency stop
    ABORTED = "ABORTED"    # the abort guard: hurt past the environment's safety.abort limits
    REFUSED = "REFUSED"    # the hypothesis did not hold before the fault: nothing was injected
    ERROR = "ERROR"        # the harness could not run it (a fault that would not inject or revert)


EXIT_CODES = {Status.PASSED: 0, Status.FAILED: 1, Status.STOPPED: 2, Status.ABORTED: 3, Status.REFUSED: 4,
              Status.ERROR: 5}


@dataclass(frozen=True)
class AbortLimits:
    """When to stop hurting: the load's error rate over `window_s`, or the fault's age."""

    error_rate: float = 0.5
    max_fault_duration_s: float = 600.0
    window_s: float = 10.0
    min_requests: int = 5

    @classmethod
    def from_env(cls, env: Any, window_s: float = 10.0) -> AbortLimits:
        a = env.safety.abort
        return cls(error_rate=a.error_rate, max_fault_duration_s=a.max_fault_duration_s, window_s=window_s)


@dataclass
class ExperimentRun:
    """What one run saw; verdicts read it, the journal keeps it."""

    name: str
    status: Status = Status.PASSED
    reason: str = ""
    t_start: float = 0.0
    t_inject: float | None = None
    t_revert: float | None = None
    t_end: float = 0.0
    readings: list[tuple[str, Reading]] = field(default_factory=list)  # (when, reading)
    records: list[RequestRecord] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]


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
    steps: Callable[[Any], Any] | None = None  # a sequence of its own over the run handle; None: the declared one
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
