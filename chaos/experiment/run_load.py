"""The load and the observers of a run under pytest (`Run`, run.py): probers on an endpoint, the
environment's load profile started, stopped, drained or run until enough requests came back. Every wait
runs on the run's clock through its Method."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.errors import SLOViolation
from chaos.experiment import events as ev
from chaos.experiment.handle import LOAD_START_S, RunHandle
from chaos.load.hangup import HANGUP, STAY, HangUp, HangUpRun, start_streams
from chaos.load.records import RequestRecord
from chaos.observe.completion import CompletionProber
from chaos.observe.health import HealthProber
from chaos.shared.cpu_watch import CpuUse
from chaos.verify.liveness import PROBE_EVERY_S
from chaos.verify.liveness import SOURCE as LIVENESS

if TYPE_CHECKING:
    from chaos.env import Environment
    from chaos.experiment.budget import Budget
    from chaos.observe.timeline import Timeline


class LoadSteps(RunHandle):
    """A run's observers and load (the environment's); `Run` adds the fault and the verdicts."""

    env: Environment
    out_dir: Path
    timeline: Timeline
    budget: Budget | None
    observers: list[Any]
    records: list[RequestRecord]
    loads_started: int
    load_cpu: dict[str, CpuUse | None]  # each load process's CPU use: a starved generator judges the host

    @staticmethod
    def source(kind: str, where: str | None) -> str:
        """Timeline source name: `health` / `completion` for the primary (hurt) endpoint, else `kind:where`."""
        return kind if where is None else f"{kind}:{where}"

    def scaled(self, seconds: float) -> float:
        """A duration from a suite, scaled by the environment's time_scale (never below 1 s)."""
        return max(1.0, seconds * self.env.time_scale)

    def observe(self, base_url: str, *, source: str | None = None, health: bool = True,
                completion: bool = True, models: bool = True) -> None:
        """Start /health (10 Hz), /v1/models (2 Hz) and completion (~3 Hz) probers on base_url.

        The first two are what the endpoint claims, the third what it does (chaos.verify.health_truth).

        source=None marks the primary endpoint (the one the recovery verdict reads)."""
        limit = self._prober_limit_s()
        if health:
            at_api = base_url.rstrip("/") == self.env.endpoints.api.rstrip("/")
            h = HealthProber(base_url, self.timeline, interval_s=0.1, max_duration_s=limit,
                             path=self.env.endpoints.health_path if at_api else "/health")
            h.source = self.source("health", source)
            self.observers.append(h.start())
        if models:  # a second claim, at a modest rate: it lists the model while the engine may be dead
            m = HealthProber(base_url, self.timeline, interval_s=0.5, timeout_s=1.0, max_duration_s=limit,
                             path="/v1/models", headers=self._api_auth())
            m.source = self.source("models", source)
            self.observers.append(m.start())
        if completion:
            c = CompletionProber(base_url, self.timeline, model=self.env.endpoints.model, interval_s=0.3,
                                 timeout_s=2.0, api_key=self.env.endpoints.api_key, max_duration_s=limit)
            c.source = self.source("completion", source)
            self.observers.append(c.start())

    def observe_health(self, base_url: str, source: str, *, every_s: float) -> str:
        """A /health prober alone on base_url every `every_s`, as timeline source `source` (returned): what a replica
        other than the hurt one says of itself, for progress truth (no completion prober beside it)."""
        h = HealthProber(base_url, self.timeline, interval_s=every_s, max_duration_s=self._prober_limit_s())
        h.source = source
        self.observers.append(h.start())
        return source

    def observe_liveness(self, base_url: str) -> None:
        """The team's liveness probe's path with its timeout, every PROBE_EVERY_S (source `liveness`), for
        chaos.verify.liveness to replay at every phase; nothing where the environment declares no probe."""
        probe = self.env.liveness
        if probe is None:
            return
        p = HealthProber(base_url, self.timeline, interval_s=PROBE_EVERY_S, timeout_s=probe.timeout_s,
                         max_duration_s=self._prober_limit_s(), path=probe.path,
                         headers=self._api_auth() if probe.path == "/v1/models" else {})
        p.source = LIVENESS
        self.observers.append(p.start())

    def _prober_limit_s(self) -> float:
        """How long a prober may run: past the scenario's time budget (at time_scale 1.0 a restart can take longer
        than 600 s)."""
        return max(600.0, self.env.safety.abort.max_fault_duration_s, self.budget.total if self.budget else 0.0)

    def _api_auth(self) -> dict[str, str]:
        """The API key's header for the OpenAI routes (/v1/models), none where the environment has no key."""
        return {"authorization": f"Bearer {self.env.endpoints.api_key}"} if self.env.endpoints.api_key else {}

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

    def stop_load(self) -> list[RequestRecord]:
        """Stop the load now and collect its records (also kept as `records`)."""
        if self.load is not None:
            self._collect(self.load.stop())
            self.load = None
        return self.records

    def _await_load_flowing(self) -> None:
        """load_flowing(), or the steady state fails: a fault injected before any request is open gets the
        error budget alone as its allowance, and the requests sent into the restart then break it."""
        if not self.load_flowing():
            raise SLOViolation(f"steady state: the load recorded no request in {LOAD_START_S:g} s after it started; "
                               "a fault now would be judged against traffic that never flowed",
                               limit=">= 1 request", measured=0)

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

    def hang_up(self, step: HangUp, *, url: str | None = None, baseline_s: float = 1.0) -> HangUpRun:
        """The hang-up step (chaos.load.hangup) against the client endpoint (or `url`): the staying streams
        first, `baseline_s` of them alone once all stream (the baseline the engine must come back to), then
        the clients that hang up after their k-th token. Returns once every one of those hung up (or failed);
        the staying streams go on until `HangUpRun.finish()` closes them."""
        env = self.env
        url = url or env.endpoints.api
        run = HangUpRun(step)
        with self.phase("staying streams", streams=step.stay):
            stay, run.join_stayers = start_streams(url, step, STAY, model=env.endpoints.model,
                                                   api_key=env.endpoints.api_key, clock=self.clock)
            run.clients += stay
            streaming = self.poll(lambda: all(c.t_first_token or c.t_end for c in stay), timeout=step.deadline_s)
            if streaming and all(c.error is None for c in stay):  # none staying: the baseline is an idle engine
                t0 = self.clock()
                self.method.wait(baseline_s)
                run.baseline = (t0, self.clock())
        with self.phase(f"{step.clients} clients hang up after {step.after_tokens} tokens"):
            hung, join = start_streams(url, step, HANGUP, model=env.endpoints.model,
                                       api_key=env.endpoints.api_key, clock=self.clock)
            run.clients += hung
            self.poll(lambda: all(c.t_end for c in hung), timeout=step.deadline_s + 10.0)
            join(False)
        self.method.publish(ev.Noted, what="clients_hung_up", detail={
            "clients": sum(1 for c in hung if c.hung_up), "after_tokens": step.after_tokens,
            "t_last_hangup": run.t_last_hangup})
        return run

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
        self.load_cpu.update(result.generator_cpu())
        for lost in result.lost_workers:  # the run went on without it: say so next to the verdicts
            self.method.publish(ev.Noted, what="load_worker_lost", detail={"worker": lost})
