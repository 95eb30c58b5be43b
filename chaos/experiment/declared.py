"""An experiment's declared sequence, the steps the runner walks when it was given none of its own:

    load -> steady state (the hypothesis must hold before anything is injected: a sick system is
    REFUSED, not hurt) -> inject -> hold (every `check_every_s` the abort guard reads the load's error
    rate and the fault's age; past `abort`'s limits the experiment is ABORTED) -> revert -> recover
    (the hypothesis must hold again within `until`) -> verify

Each step acts through the run handle; the runner maps how they ended to a Status and reverts the
fault on every way out.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from chaos.experiment import events as ev
from chaos.experiment.hypothesis import Hypothesis, Reading, error_rate_below

if TYPE_CHECKING:
    from chaos.experiment.handle import RunHandle
    from chaos.experiment.runner import Experiment, ExperimentRun
    from chaos.load.records import RequestRecord


class Abort(Exception):
    """The abort guard fired: the runner ends the experiment ABORTED."""


def declared_steps(run: RunHandle) -> None:
    """The declared sequence of `run.experiment` (see the module docstring)."""
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
        r = error_rate_below(a.error_rate, min_requests=a.min_requests).measure(records, (now - a.window_s, now))
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
            self.r.t_revert = self.run.method.t_revert

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
        from chaos.experiment.runner import Status

        e, r, run = self.exp, self.r, self.run
        if e.load is not None:
            with run.phase("load"):
                run.load = e.load()
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
