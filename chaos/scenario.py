"""One chaos experiment, the way every suite runs it:

    steady state -> start load + observers -> inject (ledger first, proof of effect) ->
    wait for recovery judged by REAL completions -> revert -> steady state again -> verify

Each phase is an Allure step with wall-clock start and end, and an Event on the Timeline, so the
report's timeline shows exactly when each thing happened. Durations are scaled by the
environment's `time_scale` so CI and staging run the same code.
"""
from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Callable

from chaos.env import Environment
from chaos.errors import FaultError, SLOViolation
from chaos.load.records import RequestRecord
from chaos.observe.completion import CompletionProber, first_ok_after
from chaos.observe.health import HealthProber
from chaos.observe.timeline import Timeline
from chaos.report import allure as rep


class Scenario:
    """Runs the phases of one fault experiment and keeps everything it observed."""

    def __init__(self, env: Environment, name: str, out_dir: str | Path, *,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep) -> None:
        self.env = env
        self.name = name
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.timeline = Timeline(clock)
        self.clock, self.sleep = clock, sleep
        self.t0 = clock()
        self.load: Any = None
        self.fault: Any = None
        self.fault_window: tuple[float, float | None] | None = None
        self.records: list[RequestRecord] = []
        self._observers: list[Any] = []
        self._stack = ExitStack()

    # -- helpers ----------------------------------------------------------------------------------
    def scaled(self, seconds: float) -> float:
        """A duration from a suite, scaled by the environment's time_scale (never below 1 s)."""
        return max(1.0, seconds * self.env.time_scale)

    @staticmethod
    def source(kind: str, where: str | None) -> str:
        """Timeline source name: `health` / `completion` for the primary (hurt) endpoint, else `kind:where`."""
        return kind if where is None else f"{kind}:{where}"

    def phase(self, name: str, **detail: Any):
        return rep.phase(name, self.timeline, t0=self.t0, **detail)

    def observe(self, base_url: str, *, source: str | None = None, health: bool = True,
                completion: bool = True) -> None:
        """Start a health prober (10 Hz) and a completion prober (~3 Hz) on base_url.

        source=None marks the primary endpoint (the one the recovery verdict reads)."""
        limit = max(600.0, self.env.safety.abort.max_fault_duration_s)
        if health:
            at_api = base_url.rstrip("/") == self.env.endpoints.api.rstrip("/")
            h = HealthProber(base_url, self.timeline, interval_s=0.1, max_duration_s=limit,
                             path=self.env.endpoints.health_path if at_api else "/health")
            h.source = self.source("health", source)
            self._observers.append(h.start())
        if completion:
            c = CompletionProber(base_url, self.timeline, model=self.env.endpoints.model, interval_s=0.3,
                                 timeout_s=2.0, api_key=self.env.endpoints.api_key, max_duration_s=limit)
            c.source = self.source("completion", source)
            self._observers.append(c.start())

    def start_load(self, **overrides: Any) -> None:
        """Start background load against the client endpoint with the environment's profile."""
        from chaos.load.runner import start_load

        p = self.env.load
        kw: dict[str, Any] = dict(users=p.users, duration_s=self.scaled(p.duration_s), mix=dict(p.mix),
                                  classes=dict(p.classes),
                                  model=self.env.endpoints.model, max_tokens=p.max_tokens, stream=p.stream,
                                  retry_policy=self.env.retry, api_key=self.env.endpoints.api_key, seed=0,
                                  workers=p.workers, worker_host=p.worker_host,
                                  worker_python=p.worker_python)
        if p.shape == "rate":
            kw.update(rate=p.rate_per_s, users=None)
        kw.update(overrides)
        self.load = start_load(self.env.endpoints.api, out_dir=self.out_dir / "load", **kw)

    def add_observer(self, observer: Any) -> Any:
        """Keep a started observer (anything with stop()) running until the scenario closes."""
        self._observers.append(observer)
        return observer

    def wait(self, seconds: float, phase: str | None = None) -> None:
        """Let the load and observers run for `seconds` (a phase of its own when named)."""
        def idle() -> None:
            end = self.clock() + seconds
            while self.clock() < end:
                self.sleep(min(0.1, max(0.0, end - self.clock())))

        if phase is None:
            idle()
        else:
            with self.phase(phase, seconds=round(seconds, 2)):
                idle()

    def poll(self, done: Callable[[], bool], timeout: float, every: float = 0.2) -> bool:
        """Ask `done()` every `every` seconds until it holds (True) or `timeout` passes (False)."""
        deadline = self.clock() + timeout
        while True:
            if done():
                return True
            if self.clock() >= deadline:
                return False
            self.sleep(every)

    def stop_load(self) -> list[RequestRecord]:
        """Stop the load now and collect its records (also kept as `records`)."""
        if self.load is not None:
            self._collect(self.load.stop())
            self.load = None
        return self.records

    # -- phases ---------------------------------------------------------------------------------
    def steady_state(self, seconds: float = 3.0, source: str | None = None) -> None:
        """Let observers and load run, then require that real completions succeed."""
        with self.phase("steady state"):
            deadline = self.clock() + seconds
            self.wait(seconds)
            recent = [s for s in self.timeline.series(self.source("completion", source), "ok") if s.t >= deadline - seconds]
            if recent and not any(s.value for s in recent):
                raise SLOViolation(f"steady state: no completion succeeded at {source or 'the target'} in {seconds:.1f} s "
                                   "before the fault; the system was not healthy to begin with",
                                   limit=">= 1 success", measured=0, window=(deadline - seconds, deadline))

    def inject(self, fault: Any) -> dict[str, Any]:
        """Inject the fault (recorded in the ledger first; raises if it did not take effect)."""
        self.fault = fault
        with self.phase("inject", fault=repr(fault)):
            t = self.clock()
            self._stack.callback(self._revert_quietly)
            info = fault.inject()
            self.fault_window = (t, None)
            self.timeline.event("fault_inject", self.name, t=t, fault=repr(fault))
        return info or {}

    def hold(self, seconds: float) -> None:
        """Keep the fault in place for a while (load keeps running)."""
        with self.phase("hold fault", seconds=round(seconds, 2)):
            self.fault.verify() if hasattr(self.fault, "verify") else None
            self.wait(seconds)

    def revert(self, *, check: bool = True) -> None:
        """Undo the fault and prove it is gone.

        check=False skips the before-revert proof, for faults whose victim the system itself
        replaced (a frozen rank whose engine died and restarted is gone, not un-frozen)."""
        if self.fault is None:
            return
        with self.phase("revert"):
            t = self.clock()
            self.fault.revert(check=check)
            self.timeline.event("fault_revert", self.name, t=t)
            self.fault_window = (self.fault_window[0] if self.fault_window else t, t)
            self.fault = None

    def wait_recovered(self, since: float, timeout: float, source: str | None = None) -> float:
        """Wait until a real completion at `source` succeeds after `since`; seconds it took."""
        with self.phase("recover", source=source or "target"):
            deadline = self.clock() + timeout
            while self.clock() < deadline:
                ok = first_ok_after(self.timeline, since, source=self.source("completion", source))
                if ok is not None:
                    return ok.t - since
                self.sleep(0.1)
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
            t_min = self.clock() + at_least_s
            while self.clock() < t_min:
                self.sleep(0.1)
            while self.clock() < until and self.load is not None and not steady(self.load.records()):
                self.sleep(1.0)
        self.timeline.event("steady_observed", self.name, t=self.clock(), since=since)

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
                self.sleep(poll_s)
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
            self.timeline.event("load_worker_lost", self.name, t=self.clock(), worker=lost)

    def close(self) -> None:
        """Stop observers and load, and revert a fault still in place (idempotent)."""
        self._stack.close()
        for o in self._observers:
            o.stop()
        self._observers.clear()
        if self.load is not None:
            self._collect(self.load.stop())
            self.load = None
        self.timeline.dump(self.out_dir / "timeline.json")

    def _revert_quietly(self) -> None:
        if self.fault is not None:
            try:
                self.revert()
            except FaultError:
                self.fault.revert(check=False)
                self.fault = None

    def __enter__(self) -> "Scenario":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
