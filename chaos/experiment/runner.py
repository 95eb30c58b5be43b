"""One experiment, in the spirit of Chaos Toolkit's (hypothesis, method, rollbacks), with our faults:

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
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from chaos.checks import Check as Probe
from chaos.checks import Hypothesis, Reading, error_share_below
from chaos.errors import FaultNotEffective
from chaos.experiment import events as ev
from chaos.experiment.method import Method, StopAsked
from chaos.experiment.stop import EmergencyStop, StopSwitch
from chaos.load.records import RequestRecord


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


@dataclass(frozen=True)
class Recovered:
    """`until=recovered(within=60)`: after the revert the hypothesis must hold again within 60 s."""

    within_s: float


def recovered(within: float) -> Recovered:
    """An `until` condition: the stack serves again within `within` seconds of the fault's revert."""
    return Recovered(within)


class _Abort(Exception):
    pass


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

    def run(self, *, bus: ev.EventBus | None = None, clock: Callable[[], float] = time.time,
            sleep: Callable[[float], None] = time.sleep, stop: StopSwitch | None = None,
            records: Callable[[], list[RequestRecord]] | None = None) -> ExperimentRun:
        return _Runner(self, bus or ev.EventBus(), clock, sleep, stop or StopSwitch(), records).run()


class _Runner:
    """Experiment's declared sequence, walked on the shared Method (phases, waits, the fault)."""

    def __init__(self, exp: Experiment, bus: ev.EventBus, clock: Callable[[], float], sleep: Callable[[float], None],
                 stop: StopSwitch, records: Callable[[], list[RequestRecord]] | None) -> None:
        self.exp, self.clock = exp, clock
        self.m = Method(exp.name, bus=bus, clock=clock, sleep=sleep, stop=stop, tick_s=exp.tick_s)
        self.publish, self.phase, self.tick, self.wait = self.m.publish, self.m.phase, self.m.tick, self.m.wait
        self.hyp = exp.hypothesis if isinstance(exp.hypothesis, Hypothesis) or exp.hypothesis is None \
            else Hypothesis([exp.hypothesis])
        self.source = records
        self.handle: Any = None
        self.run_ = ExperimentRun(exp.name)

    def records(self) -> list[RequestRecord]:
        if self.source is not None:
            return self.source()
        return self.handle.records() if self.handle is not None else []

    def check(self, when: str, window: tuple[float, float] | None = None,
              records: list[RequestRecord] | None = None) -> list[Reading]:
        """The hypothesis over `window` (default: the last window_s); its failures."""
        if self.hyp is None:
            return []
        now = self.clock()
        window = window or (now - self.exp.window_s, now)
        readings = self.hyp.check(self.records() if records is None else records, window)
        for r in readings:
            self.run_.readings.append((when, r))
            self.publish(ev.Measured, probe=r.probe, expected=r.expected, got=r.got, ok=r.ok, window=r.window,
                         when=when)
        failed = [r for r in readings if not r.ok]
        self.publish(ev.HypothesisChecked, when=when, ok=not failed, failures=tuple(r.line() for r in failed))
        return failed

    def guard(self, records: list[RequestRecord]) -> None:
        """The abort guard: past safety.abort's limits, revert now and end the experiment ABORTED."""
        a = self.exp.abort
        if a is None or self.run_.t_inject is None:
            return
        now = self.clock()
        age = now - self.run_.t_inject
        if age > a.max_fault_duration_s:
            raise _Abort(f"the fault was in place {age:.1f} s, over safety.abort.max_fault_duration_s "
                         f"{a.max_fault_duration_s:g} s")
        r = error_share_below(a.error_rate, min_requests=a.min_requests).check(records, (now - a.window_s, now))[0]
        self.run_.readings.append(("guard", r))
        self.publish(ev.Measured, probe=r.probe, expected=r.expected, got=r.got, ok=r.ok, window=r.window, when="guard")
        if r.got is not None and not r.ok:
            raise _Abort(f"error rate {r.shown} over the last {a.window_s:g} s ({r.requests} requests), over "
                         f"safety.abort.error_rate {a.error_rate:.0%}")

    def hold(self) -> None:
        end = self.clock() + self.exp.hold_s
        next_check = self.clock() + self.exp.check_every_s
        while self.clock() < end:
            self.tick()
            if self.clock() >= next_check:
                next_check += self.exp.check_every_s
                records = self.records()  # read once a check: the guard and the hypothesis share it
                self.guard(records)
                if self.hyp is not None:
                    self.check("during", records=records)  # seen and journalled; the abort guard decides

    def revert(self, check: bool = True) -> None:
        """Undo the fault; with `check`, first prove it still held (a fault that lapsed during the hold
        tested nothing: the experiment ends ERROR, the fault removed all the same)."""
        try:
            self.m.revert(check=check)
        finally:
            self.run_.t_revert = self.m.t_revert

    def recover(self) -> None:
        """Until the hypothesis holds over a window that begins after the revert, within `until`."""
        assert self.exp.until is not None and self.run_.t_revert is not None
        since, deadline = self.run_.t_revert, self.run_.t_revert + self.exp.until.within_s
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
                self.tick()

    def run(self) -> ExperimentRun:
        e, r = self.exp, self.run_
        r.t_start = self.clock()
        fault = repr(e.fault) if e.fault is not None else "none"
        self.publish(ev.ExperimentStarted, plan=f"hypothesis {self.hyp.describe() if self.hyp else '(none)'}; "
                                                f"fault {fault} for {e.hold_s:g} s")
        try:
            if e.load is not None:
                with self.phase("load"):
                    self.handle = e.load()
            with self.phase("steady state"):
                self.wait(e.steady_s if e.steady_s is not None else e.window_s)
                failed = self.check("before")
                if failed:
                    r.status, r.reason = Status.REFUSED, "steady state not met before the fault: " + failed[0].line()
                    return r
            if e.fault is not None:
                with self.phase("inject"):
                    self.m.inject(e.fault)  # from here on every way out reverts (a half-injected fault too)
                    r.t_inject = self.m.t_inject
            with self.phase("hold"):
                self.hold()
            with self.phase("revert"):
                self.revert()
            if e.until is not None and r.t_revert is not None:
                with self.phase("recover"):
                    self.recover()
            with self.phase("verify"):
                self.verify()
        except _Abort as x:
            r.status, r.reason = Status.ABORTED, str(x)
            self.publish(ev.Aborted, reason=str(x))
        except StopAsked as x:
            r.status, r.reason = Status.STOPPED, f"stopped by {x.by}" + (f": {x.reason}" if x.reason else "")
            self.publish(ev.Stopped, by=x.by, reason=x.reason)
        except EmergencyStop as x:
            r.status, r.reason = Status.STOPPED, f"stopped by {x.by}"
            self.publish(ev.Stopped, by=x.by, reason=x.reason)
        except KeyboardInterrupt:
            r.status, r.reason = Status.STOPPED, "stopped by Ctrl-C"
            self.publish(ev.Stopped, by="SIGINT")
        except AssertionError as x:
            r.status, r.reason = Status.FAILED, str(x)
        except FaultNotEffective as x:  # it did not take hold, or it lapsed during the hold
            r.status, r.reason = Status.ERROR, f"fault not effective: {x}"
        except Exception as x:
            r.status, r.reason = Status.ERROR, f"{type(x).__name__}: {x}"
        finally:
            self.finish()
        return r

    def verify(self) -> None:
        self.run_.records = self.records()
        failures: list[str] = []
        for judge in self.exp.verdicts:
            v = judge(self.run_)
            bad = tuple(row.line() for row in getattr(v, "failures", []))
            self.publish(ev.VerdictReached, name=getattr(v, "name", getattr(judge, "__name__", "verdict")),
                         ok=not bad, failures=bad, rows=tuple(row.line() for row in getattr(v, "rows", [])),
                         unproven=tuple(row.line() for row in getattr(v, "unproven", [])))
            failures += bad
        if failures:
            raise AssertionError("; ".join(failures))

    def finish(self) -> None:
        r = self.run_
        try:
            self.m.revert_on_exit()  # left the method early (abort, stop, error): revert at once
            r.t_revert = self.m.t_revert
        except BaseException as x:
            r.status, r.reason = Status.ERROR, f"revert failed: {x}; run `chaos cleanup`"
        if self.handle is not None:
            try:
                result = self.handle.stop()
                r.records = getattr(result, "records", r.records) or r.records
            except Exception as x:
                r.reason += f" (the load did not stop cleanly: {x})"
        r.t_end = self.clock()
        self.publish(ev.ExperimentEnded, status=r.status.value, reason=r.reason)
