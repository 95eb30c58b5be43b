"""One chaos experiment written step by step, the way the suites whose scenario is not a fixed
sequence run it (a breaker waiting for its drain, a restart policy watched for minutes):

    steady state -> start load + observers -> inject (ledger first, proof of effect) ->
    wait for recovery judged by REAL completions -> revert -> steady state again -> verify

Its steps are the shared experiment method's (chaos/experiment/method.py), the same that the
declarative `Experiment` walks: every phase, injection and revert is a typed event on the scenario's
bus, and the timeline, the Allure steps (with wall-clock start and end) and the scenario's journal
(journal.json, summary.md in its out_dir) are that bus's subscribers. Waits run on the scenario's
clock and end early when `chaos stop` is asked. Durations are scaled by the environment's
`time_scale` so CI and staging run the same code. Given a Budget (chaos/budgets.py derives one from
the environment), each phase is held to its own share of time, and the scenario to their sum: an
overrun fails it with BudgetExceeded naming the phase, and its fault is reverted all the same.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from chaos.env import Environment
from chaos.errors import FaultError, FaultNotEffective, SLOViolation
from chaos.experiment import events as ev
from chaos.experiment.budget import Budget, Watchdog
from chaos.experiment.journal import Journal
from chaos.experiment.method import Method
from chaos.experiment.stop import StopSwitch, stop_file
from chaos.experiment.subscribers import AllureSteps, TimelineEvents
from chaos.load.records import RequestRecord
from chaos.observe.completion import CompletionProber, first_ok_after
from chaos.observe.health import HealthProber
from chaos.observe.timeline import Timeline
from chaos.report import allure as rep
from chaos.report.tables import verdict_table
from chaos.verify.verdict import Verdict

# how long a started load may take to record its first request (Locust's start and its users' spawn on a
# busy 2-core machine take seconds; a load that sends nothing in a minute is broken, not slow)
LOAD_START_S = 60.0


class Scenario:
    """Runs the phases of one fault experiment and keeps everything it observed."""

    def __init__(self, env: Environment, name: str, out_dir: str | Path, *,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 bus: ev.EventBus | None = None, stop: StopSwitch | None = None,
                 budget: Budget | None = None) -> None:
        self.env = env
        self.name = name
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.timeline = Timeline(clock)
        self.clock, self.sleep = clock, sleep
        self.t0 = clock()
        self.budget = budget
        self.method = Method(name, bus=bus, clock=clock, sleep=sleep,
                             stop=stop or StopSwitch(stop_file(env.state_dir), since=self.t0),
                             watchdog=Watchdog(budget, clock, t0=self.t0) if budget is not None else None)
        self.bus = self.method.bus
        self.bus.subscribe(TimelineEvents(self.timeline))
        self.bus.subscribe(AllureSteps(self.t0))
        self.journal = Journal(self.out_dir, title=name, meta={"environment": env.name})
        self.bus.subscribe(self.journal)
        self.method.publish(ev.ExperimentStarted, plan=f"scenario {name} against {env.name}"
                            + (f"; time budget {budget.describe()}" if budget is not None else ""))
        self.load: Any = None
        self.fault_window: tuple[float, float | None] | None = None
        self.records: list[RequestRecord] = []
        self.observers: list[Any] = []
        self.loads_started = 0
        self.closed = False
        # GPU telemetry in every scenario, every GPU of every target: NVML on this host, else the target
        # host's DCGM exporter; without either the timeline and the journal say "no GPU visible" and why
        # (never a silent omission). Xids are reported from here on: the scenario's start is the baseline.
        from chaos.observe.gpu_plan import observer_for

        self.gpu = observer_for(env, self.timeline)
        self.observers.append(self.gpu.start())

    @property
    def fault(self) -> Any:
        """The fault in place (None once reverted)."""
        return self.method.fault if self.method.injected else None

    # -- helpers ----------------------------------------------------------------------------------
    def scaled(self, seconds: float) -> float:
        """A duration from a suite, scaled by the environment's time_scale (never below 1 s)."""
        return max(1.0, seconds * self.env.time_scale)

    @staticmethod
    def source(kind: str, where: str | None) -> str:
        """Timeline source name: `health` / `completion` for the primary (hurt) endpoint, else `kind:where`."""
        return kind if where is None else f"{kind}:{where}"

    def phase(self, name: str, **detail: Any) -> Any:
        """A named phase of this scenario (an event: the timeline, the report and the journal see it)."""
        return self.method.phase(name, **detail)

    def observe(self, base_url: str, *, source: str | None = None, health: bool = True,
                completion: bool = True, models: bool = True) -> None:
        """Start /health (10 Hz), /v1/models (2 Hz) and completion (~3 Hz) probers on base_url.

        The first two are what the endpoint claims, the third what it does (chaos.verify.health_truth).

        source=None marks the primary endpoint (the one the recovery verdict reads)."""
        # probers outlive the scenario's time budget: at time_scale 1.0 a restart can take longer than 600 s
        limit = max(600.0, self.env.safety.abort.max_fault_duration_s, self.budget.total if self.budget else 0.0)
        if health:
            at_api = base_url.rstrip("/") == self.env.endpoints.api.rstrip("/")
            h = HealthProber(base_url, self.timeline, interval_s=0.1, max_duration_s=limit,
                             path=self.env.endpoints.health_path if at_api else "/health")
            h.source = self.source("health", source)
            self.observers.append(h.start())
        if models:  # a second claim, at a modest rate: it lists the model while the engine may be dead
            auth = {"authorization": f"Bearer {self.env.endpoints.api_key}"} if self.env.endpoints.api_key else {}
            m = HealthProber(base_url, self.timeline, interval_s=0.5, timeout_s=1.0, max_duration_s=limit,
                             path="/v1/models", headers=auth)
            m.source = self.source("models", source)
            self.observers.append(m.start())
        if completion:
            c = CompletionProber(base_url, self.timeline, model=self.env.endpoints.model, interval_s=0.3,
                                 timeout_s=2.0, api_key=self.env.endpoints.api_key, max_duration_s=limit)
            c.source = self.source("completion", source)
            self.observers.append(c.start())

    def start_load(self, url: str | None = None, **overrides: Any) -> None:
        """Start background load against the client endpoint (or `url`) with the environment's profile."""
        from chaos.load.runner import start_env_load

        self.loads_started += 1  # each load its own record directory: a second run never reads the first's
        out = self.out_dir / ("load" if self.loads_started == 1 else f"load-{self.loads_started}")
        self.load = start_env_load(self.env, out_dir=out, url=url,
                                   **{"duration_s": self.scaled(self.env.load.duration_s), "seed": 0, **overrides})

    def add_observer(self, observer: Any) -> Any:
        """Keep a started observer (anything with stop()) running until the scenario closes."""
        self.observers.append(observer)
        return observer

    def wait(self, seconds: float, phase: str | None = None) -> None:
        """Let the load and observers run for `seconds` (a phase of its own when named)."""
        if phase is None:
            self.method.wait(seconds)
        else:
            with self.phase(phase, seconds=round(seconds, 2)):
                self.method.wait(seconds)

    def poll(self, done: Callable[[], bool], timeout: float, every: float = 0.2) -> bool:
        """Ask `done()` every `every` seconds until it holds (True) or `timeout` passes (False)."""
        return self.method.poll(done, timeout, every)

    def stop_load(self) -> list[RequestRecord]:
        """Stop the load now and collect its records (also kept as `records`)."""
        if self.load is not None:
            self._collect(self.load.stop())
            self.load = None
        return self.records

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

    def _await_load_flowing(self) -> None:
        """Wait until the started load has recorded a request (its records reach the file every flush_s). On a
        busy machine Locust can take longer to start than the steady state's window: a fault injected before
        any request is open gets the error budget alone as its allowance, and the requests sent into the
        restart then break it."""
        progress = getattr(self.load, "progress", None)
        if progress is None:
            return
        if not self.poll(lambda: progress()[0] > 0, timeout=LOAD_START_S, every=0.2):
            raise SLOViolation(f"steady state: the load recorded no request in {LOAD_START_S:g} s after it started; "
                               "a fault now would be judged against traffic that never flowed",
                               limit=">= 1 request", measured=0)

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

    def observe_steady(self, since: float, *, at_least_s: float, until: float,
                       steady: Callable[[list[RequestRecord]], bool]) -> None:
        """Keep the load running for `at_least_s`, then until `steady(records so far)` holds or the
        clock reaches `until` (the steady-state SLA's deadline), whichever comes first.

        A fixed hold decided nothing when the recovered replica got little traffic (its clients were
        still backing off, or stuck on a slow neighbour): its rolling window had too few requests to
        judge, and the verdict read "never steady" although the SLA's time was not used up."""
        with self.phase("steady state after recovery"):
            self.method.wait(at_least_s)
            while self.clock() < until and self.load is not None and not steady(self.load.records()):
                self.method.wait(1.0)
        self.method.publish(ev.Noted, what="steady_observed", detail={"since": since})

    def load_until(self, enough: Callable[[], bool], *, min_s: float, max_s: float, poll_s: float = 1.0,
                   **overrides: Any) -> list[RequestRecord]:
        """Run load for at least `min_s` and until `enough()` holds (at most `max_s`), then collect it.

        For a verdict that needs a number of requests, not a duration: a slow backend (real vLLM on
        2 cores serves a tenth of the simulator's rate) gets the time it needs, a fast one stops early."""
        self.start_load(duration_s=max_s, **overrides)
        start = self.clock()
        with self.phase("load until enough requests", min_s=round(min_s, 1), max_s=round(max_s, 1)):
            while self.clock() - start < max_s:
                if self.clock() - start >= min_s and enough():
                    break
                self.method.wait(poll_s)
            self._collect(self.load.stop())
        self.load = None
        return self.records

    def finish_load(self) -> list[RequestRecord]:
        """Wait for the load run to end and collect its records."""
        if self.load is None:
            return self.records
        with self.phase("drain load"):
            self._collect(self.load.wait())  # the run's own deadline: its duration plus the runner's grace
        self.load = None
        return self.records

    def _collect(self, result: Any) -> None:
        self.records = result.records
        for lost in result.lost_workers:  # the run went on without it: say so next to the verdicts
            self.method.publish(ev.Noted, what="load_worker_lost", detail={"worker": lost})

    def judge(self, stage: str, verdicts: Iterable[Verdict]) -> None:
        """One verification step: each verdict's table attached and heard as a VerdictReached event
        (the journal lists them), then all of them asserted. Stage 1 ("the fault really happened")
        and stage 2 ("the system behaved") are separate steps, so a reader sees which half failed."""
        vs = list(verdicts)
        with self.phase(f"verify: {stage}"):
            for v in vs:
                rep.attach_table(verdict_table(v.rows, title=v.name), name=v.name)
                self.method.publish(ev.VerdictReached, name=f"{stage}: {v.name}", ok=v.ok,
                                    failures=tuple(r.line() for r in v.failures), rows=tuple(r.line() for r in v.rows))
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

    def __enter__(self) -> Scenario:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
