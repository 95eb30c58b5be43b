"""The run handle under pytest: one chaos experiment written step by step, the way a suite whose
sequence is not the declared one gives it as `steps=` (a breaker waiting for its drain, a restart
policy watched for minutes):

    steady state -> start load + observers -> inject (ledger first, proof of effect) ->
    wait for recovery judged by REAL completions -> revert -> steady state again -> verify

Its steps go through the run's Method (chaos/experiment/method.py), the one runner's (runner.py): every
phase, injection and revert is a typed event on the run's bus, and the timeline, the Allure steps (with
wall-clock start and end) and the run's journal (journal.json, summary.md in its out_dir) are that bus's
subscribers. Waits run on the run's clock and end early when `chaos stop` is asked. Durations are scaled
by the environment's `time_scale` so CI and staging run the same code. Given a Budget (chaos/experiment/suite_budgets.py
derives one from the environment), each phase is held to its own share of time, and the run to their
sum: an overrun fails it with BudgetExceeded naming the phase, and its fault is reverted all the same.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.env import Environment
from chaos.errors import FaultError, FaultNotEffective, SLOViolation
from chaos.experiment import events as ev
from chaos.experiment.budget import Budget, Watchdog
from chaos.experiment.handle import LOAD_START_S
from chaos.experiment.journal import Journal
from chaos.experiment.method import Method
from chaos.experiment.run_load import LoadSteps
from chaos.experiment.stop import StopSwitch, stop_file
from chaos.experiment.subscribers import AllureSteps, TimelineEvents
from chaos.load.records import RequestRecord
from chaos.observe.completion import first_ok_after
from chaos.observe.timeline import Timeline
from chaos.report import allure as rep
from chaos.report.tables import verdict_table
from chaos.shared.cpu_watch import CpuUse, starved_of
from chaos.verify.starved import not_judged, starved_verdict
from chaos.verify.verdict import Verdict

if TYPE_CHECKING:
    from chaos.experiment.runner import ExperimentRun

__all__ = ["LOAD_START_S", "Run"]


class Run(LoadSteps):
    """The phases of one fault experiment against an environment, and everything it observed."""

    def __init__(self, env: Environment, name: str, out_dir: str | Path, *,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 bus: ev.EventBus | None = None, stop: StopSwitch | None = None,
                 budget: Budget | None = None) -> None:
        self.env = env
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.timeline = Timeline(clock)
        self.t0 = clock()
        self.budget = budget
        super().__init__(name, Method(name, bus=bus, clock=clock, sleep=sleep,
                                      stop=stop or StopSwitch(stop_file(env.state_dir), since=self.t0),
                                      watchdog=Watchdog(budget, clock, t0=self.t0) if budget is not None else None))
        self.bus.subscribe(TimelineEvents(self.timeline))
        self.bus.subscribe(AllureSteps(self.t0))
        self.journal = Journal(self.out_dir, title=name, meta={"environment": env.name})
        self.bus.subscribe(self.journal)
        self.method.publish(ev.ExperimentStarted, plan=f"scenario {name} against {env.name}"
                            + (f"; time budget {budget.describe()}" if budget is not None else ""))
        self.fault_window: tuple[float, float | None] | None = None
        self.records: list[RequestRecord] = []
        self.observers: list[Any] = []
        self.loads_started = 0
        self.load_cpu: dict[str, CpuUse | None] = {}
        self.closed = False
        self._exit_error: Exception | None = None  # a revert on the way out that failed: raised at close
        # GPU telemetry in every scenario, every GPU of every target: NVML on this host, else the target
        # host's DCGM exporter; without either the timeline and the journal say "no GPU visible" and why
        # (never a silent omission). Xids are reported from here on: the scenario's start is the baseline.
        from chaos.observe.gpu_plan import observer_for

        self.gpu = observer_for(env, self.timeline)
        self.observers.append(self.gpu.start())

    # -- phases ---------------------------------------------------------------------------------
    def steady_state(self, seconds: float = 3.0, source: str | None = None) -> None:
        """Let observers and load run, then require that real completions succeed. With a load started, the
        window begins once the load has recorded its first request: a fault injected before the load flows
        hurts no request in flight, and the accounting's allowance (what was open at the fault) is then 0."""
        with self.phase("steady state"):
            self._await_load_flowing()
            deadline = self.clock() + seconds
            self.wait(seconds)
            recent = [s for s in self.timeline.series(self.source("completion", source), "ok") if s.t >= deadline - seconds]
            sick = bool(recent) and not any(s.value for s in recent)
            self.method.publish(ev.HypothesisChecked, when="before", ok=not sick, failures=(
                f"completions at {source or 'the target'}: expected >= 1 success, got 0 of {len(recent)} "
                f"over {seconds:.1f} s",) if sick else ())
            if sick:
                raise SLOViolation(f"steady state: no completion succeeded at {source or 'the target'} in {seconds:.1f} s "
                                   "before the fault; the system was not healthy to begin with",
                                   limit=">= 1 success", measured=0, window=(deadline - seconds, deadline))

    def inject(self, fault: Any) -> dict[str, Any]:
        """Inject the fault (recorded in the ledger first; raises if it did not take effect)."""
        with self.phase("inject", fault=repr(fault)):
            info = self.method.inject(fault)
            self.fault_window = (self.method.t_inject or self.clock(), None)
        return info or {}

    def hold(self, seconds: float) -> None:
        """Keep the fault in place for a while (load keeps running)."""
        with self.phase("hold fault", seconds=round(seconds, 2)):
            self.fault.verify() if hasattr(self.fault, "verify") else None
            self.method.wait(seconds)

    def revert(self, *, check: bool = True) -> None:
        """Undo the fault and prove it is gone.

        check=False skips the before-revert proof, for faults whose victim the system itself
        replaced (a frozen rank whose engine died and restarted is gone, not un-frozen)."""
        if self.fault is None:
            return
        with self.phase("revert"):
            try:
                self.method.revert(check=check)
            finally:
                t = self.method.t_revert or self.clock()
                self.fault_window = (self.fault_window[0] if self.fault_window else t, t)

    def wait_recovered(self, since: float, timeout: float, source: str | None = None) -> float:
        """Wait until a real completion at `source` succeeds after `since`; seconds it took."""
        with self.phase("recover", source=source or "target"):
            deadline = self.clock() + timeout
            while self.clock() < deadline:
                ok = first_ok_after(self.timeline, since, source=self.source("completion", source))
                if ok is not None:
                    self.method.publish(ev.Measured, probe=f"first real completion at {source or 'the target'}",
                                        expected=f"within {timeout:.1f} s", got=round(ok.t - since, 3),
                                        window=(since, ok.t), when="after")
                    return ok.t - since
                self.method.tick()
        self.method.publish(ev.Measured, probe=f"first real completion at {source or 'the target'}",
                            expected=f"within {timeout:.1f} s", got=None, ok=False, window=(since, deadline), when="after")
        raise SLOViolation(f"recovery: no real completion succeeded at {source or 'the target'} within {timeout:.1f} s "
                           f"after t={since - self.t0:.1f} s", limit=timeout, measured=None, window=(since, deadline))

    def judge(self, stage: str, verdicts: Iterable[Verdict]) -> None:
        """One verification step: each verdict's table attached and heard as a VerdictReached event
        (the journal lists them), then all of them asserted. Stage 1 ("the fault really happened")
        and stage 2 ("the system behaved") are separate steps, so a reader sees which half failed."""
        vs = list(verdicts)
        if starved_of(list(self.load_cpu.values())) is not None:  # its timings measured the host, not the service
            starved = Verdict("the load generator ran")
            starved_verdict(starved, self.load_cpu, who="the load generator", check="load_generator_cpu")
            for v in vs:
                not_judged(v, "the load generator")
            vs.insert(0, starved)
        with self.phase(f"verify: {stage}"):
            for v in vs:
                rep.attach_table(verdict_table(v.rows, title=v.name), name=v.name)
                self.method.publish(ev.VerdictReached, name=f"{stage}: {v.name}", ok=v.ok,
                                    failures=tuple(r.line() for r in v.failures), rows=tuple(r.line() for r in v.rows),
                                    unproven=tuple(r.line() for r in v.unproven))  # never read as "holds"
            for v in vs:
                v.assert_ok()

    def close(self, status: str = "", reason: str = "") -> None:
        """Revert a fault still in place, stop observers and load, and write the timeline and the
        journal (idempotent). `status` is how the test that ran it ended, for the journal."""
        if self.closed:
            return
        self.closed = True
        if self.method.watchdog is not None:
            self.method.watchdog.disarm()  # the revert and the evidence below run whatever the time
        try:
            self._revert_on_exit()
            if self._exit_error is not None:
                raise self._exit_error
        finally:
            for o in self.observers:
                o.stop()
            self.observers.clear()
            if self.load is not None:
                self._collect(self.load.stop())
                self.load = None
            self.method.publish(ev.Noted, what="gpu", detail=self.gpu_figures())
            self.method.publish(ev.ExperimentEnded, status=status or "ENDED", reason=reason)
            self.timeline.dump(self.out_dir / "timeline.json")
            self.journal.write()

    def gpu_figures(self) -> dict[str, Any]:
        """The GPU over the scenario: temperature, power, energy, tokens per joule, or why there are none."""
        from chaos.observe.gpu import gpu_summary

        tokens = sum(r.output_tokens or 0 for r in self.records if r.ok)
        return gpu_summary(self.timeline, self.t0, self.clock(), tokens)

    def _revert_on_exit(self) -> None:
        # a scenario left with its fault in place (a failed check, an error, a stop): prove and
        # revert it, and if the proof or the revert fails, force it off without the proof
        if self.method.injected:
            try:
                self.revert()
            except FaultNotEffective:
                pass  # it was gone before the revert, and is removed all the same
            except FaultError:
                self.method.fault.revert(check=False)

    # -- the runner's hooks -----------------------------------------------------------------------
    def start(self, plan: str) -> None:
        """Nothing to add: the run said what it is when it was made (its journal opens with it)."""

    def finish(self, run: ExperimentRun) -> None:
        """The runner's way out: a fault still in place is proven and reverted now (forced off where the proof
        or the revert fails). Observers, load and journal are closed by `close`, once the test's outcome is known."""
        if self.method.watchdog is not None:
            self.method.watchdog.disarm()  # the revert below runs whatever the time
        try:
            self._revert_on_exit()
        except Exception as e:  # raised at close (the test's teardown), as a failed revert always was
            self._exit_error = e
        run.t_inject, run.t_revert = self.method.t_inject, self.method.t_revert
        run.records = self.records
        run.t_end = self.clock()

    def __enter__(self) -> Run:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
