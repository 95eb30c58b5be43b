"""A replica's recovery as an Experiment (`recovery_run(...)`), whose steps are:
load (closed-loop users or Poisson arrivals), a fault on one target (or
none: the baseline under the same load and observers), held where it lasts until the engine died of it, the
stack healing itself, a steady window after, then the verdicts: the fault happened, the replica recovered
within the SLAs with nothing lost beyond the fault's allowance and every answer still the steady state's, the
alerts saw it (and the baseline paged nobody)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from chaos.experiment import suite_budgets as budgets
from chaos.experiment.answers_steps import LOAD_ANSWERS, collect_after, collect_golden
from chaos.experiment.detection_control import attach_detection
from chaos.experiment.progress_run import proxy_streams, watch_peers
from chaos.experiment.runner import Experiment
from chaos.experiment.suite import fault_happened, wait_out_left_over_alerts
from chaos.experiment.waits import engine_restarted
from chaos.observe.metrics import engine_counter_scraper
from chaos.report import allure as rep
from chaos.report.checklist import DETECTION, PROGRESS
from chaos.report.summary import add_recovery
from chaos.report.tables import latency_table
from chaos.verify.accounting import accounting_verdict, fault_allowance
from chaos.verify.answers import answers_across_fault
from chaos.verify.health_truth import TIMEOUT_BOUND
from chaos.verify.liveness import Replay, catch_row
from chaos.verify.progress_truth import progress_truth_rows
from chaos.verify.recovery import recovery_verdict, served_by, steady_seen
from chaos.verify.restart_policy import check_restart_policy
from chaos.verify.verdict import Verdict

if TYPE_CHECKING:
    from chaos.experiment.run import Run
    from chaos.experiment.running_stack import RunningStack as StackHandle
    from chaos.faults import Fault
    from chaos.report.summary import SummaryCollector
    from chaos.verify.alert_watch import AlertMonitor


def recovery_run(stack: StackHandle, monitoring: AlertMonitor, summary: SummaryCollector, kind: str | None,
                 name: str, load: str, *, profile: dict[str, Any] | None = None,
                 fault: Callable[[], Fault] | None = None, lasting: bool = False, crash: bool = False,
                 proof: str = "restarts_seen", golden_s: float | None = None) -> Experiment:
    """Fault `kind` (None: the no-fault baseline) on target `name` under load `load` (`profile`: the load's
    overrides, see RecoverySteps.start_load), as an Experiment for the one runner.

    `fault()` makes the fault when its time comes (after the steady state); `lasting`, `crash` and `proof`:
    RecoverySteps.inject; `golden_s`: how long the steady state may wait for its golden answers, and the one
    after recovery for as many after the fault (default answers_steps.golden_wait_s). The run observes the hurt
    replica directly and the API in front of it."""
    rep.labels(epic="Resilience", feature="Recovery", story=kind or "baseline", suite="recovery")
    rep.title(f"{kind or 'no fault (baseline)'} on {name} under {load} load")
    if (kind is None) != (fault is None):
        raise ValueError("recovery_run: give `fault` exactly when `kind` names one")

    def steps(run: Run) -> None:
        r = RecoverySteps(stack, run, monitoring, kind, name, load)
        r.start_load(**(profile or {}))
        collect_golden(run, timeout_s=golden_s)  # the answers every answer during and after the fault is held to
        if fault is None:
            r.no_fault()
        else:
            r.inject(fault(), lasting=lasting, crash=crash, proof=proof)
            r.wait_recovered()  # the stack must heal itself, from the moment the fault had taken effect
        r.observe_steady()  # a full rolling window after recovery at least, up to the steady-state SLA
        collect_after(run, r.t_inject, timeout_s=golden_s)  # as many answers after the fault as before it
        r.judge(summary)  # the fault happened; recovered within the SLAs, nothing lost; the alerts saw it

    return Experiment(f"{kind or 'baseline'}-{name}-{load}", steps=steps, hurt=(name,))


class RecoverySteps:
    """The steps of one recovery run on the run handle `sc`; every time it reads is the handle's clock."""

    def __init__(self, stack: StackHandle, sc: Run, monitoring: AlertMonitor,
                 kind: str | None, name: str, load: str) -> None:
        """Observing the hurt replica directly and the API in front of it."""
        self.stack, self.monitoring, self.kind, self.name, self.load = stack, monitoring, kind, name, load
        self.env = env = stack.env
        self.sc = sc
        sc.observe(stack.direct_url(name))
        sc.observe(env.endpoints.api, source="api")
        sc.add_observer(engine_counter_scraper(stack.direct_url(name), sc.timeline, name).start())  # the heartbeat
        sc.observe_liveness(stack.direct_url(name))  # the team's liveness probe, where the environment declares one
        self.peers = watch_peers(sc, stack, name)  # the other replicas' progress, judged over the whole run
        self.target = stack.target(name)
        self.evidence: dict[str, Any] = {}
        self.t_inject = self.t_end = self.t_steady = self.t_recovered = 0.0
        self.crash = False
        self.proof = "restarts_seen"

    def start_load(self, **profile: Any) -> None:
        """The load, long enough for the slowest allowed recovery plus the steady windows after it.

        `profile`: Run.start_load's overrides (shape "rate": arrivals at the environment's load.rate_per_s).
        Then steady state, the alerts' watch and the target's restart count before anything is done to it."""
        sc, env = self.sc, self.env
        wait_out_left_over_alerts(sc, self.monitoring, self.kind)
        with sc.phase("start load", profile=self.load):
            rate: dict[str, Any] = {"rate": env.load.rate_per_s} if profile.get("shape") == "rate" else {}
            sc.start_load(duration_s=2 * env.slas.recovery_s + 4 * sc.scaled(30) + 60, **{**LOAD_ANSWERS, **profile},
                          **rate)
        sc.steady_state(2.0)
        self.t_steady = sc.clock()  # the steady state before the fault, whose decode progress is judged
        self.alerts = self.monitoring.watch(self.kind)  # what this fault must page (monitoring.expect)
        self.restarts_before = self.target.restart_count()

    def no_fault(self) -> None:
        """The baseline: the same load and observers for as long as a fault's scenario would hurt."""
        self.sc.wait(self.sc.scaled(20), "no fault: same load, same observers")
        self.t_inject = self.t_end = self.t_recovered = self.sc.clock()

    def inject(self, fault: Fault, *, lasting: bool, crash: bool, proof: str = "restarts_seen") -> None:
        """Inject `fault`; a `lasting` one is held until the engine died of it, then undone.

        Lasting: a frozen rank or a cut link, held until the engine's timeout killed it (its supervisor restarts
        it). `crash`: the replica's process died (recovery judges a crash); `proof`: the stage-1 evidence,
        "restarts_seen" (any restart seen) or "restart_count" (the fault's own count rose: a supervisor's
        restart is not what a restart fault raised)."""
        sc, target = self.sc, self.target
        self.crash, self.proof = crash, proof
        self.t_inject = self.sc.clock()
        info = sc.inject(fault)
        # the stack must heal itself: recovery counts from the moment the fault had taken effect (a
        # restart's inject returns once the old process is gone: a probe the old process answered while
        # it was terminating is not a recovery; at time_scale 1.0 one read 0.04 s for a 620 s restart)
        self.t_end = self.sc.clock()
        self.alerts.took_effect(self.t_end)
        self.evidence = dict(getattr(fault, "evidence", {}) or {}, **(info or {}))
        engine_died = False
        if lasting:
            engine_died = self._wait_engine_death(fault)
        # the engine died of the fault (and was replaced): the frozen rank or cut link's victim is gone, whatever
        # state the rank is in now (a rank vLLM SIGKILLed shows R while the kernel tears it down)
        sc.revert(check=target.restart_count() == self.restarts_before and not engine_died)

    def _wait_engine_death(self, fault: Fault) -> bool:
        """Hold a lasting fault until its engine died of it, then until its supervisor restarted the replica.

        The engine's death is seen directly where the fault can tell (a frozen rank: its engine's or its own
        process gone, RankFreeze.engine_died), else by the restart. The replica's restart may come well after:
        its processes must all exit first, and a frozen rank vLLM SIGKILLed took 18 s to (docs/vllm-fidelity.md);
        that wait is the replica's recovery, bounded by slas.recovery_s. Returns whether the engine died."""

        sc, target, cfg = self.sc, self.target, self.env.target(self.name)
        died: Callable[[], bool] | None = getattr(fault, "engine_died", None)

        def restarted() -> bool:
            return bool(target.restart_count() != self.restarts_before)

        asked = [0.0]

        def dead() -> bool:  # the restart every tick; the engine's processes once a second (a docker top each)
            if restarted():
                return True
            if died is None or sc.clock() - asked[0] < 1.0:
                return False
            asked[0] = sc.clock()
            return died()

        timeout, wait = budgets.engine_timeout(cfg)[0], budgets.engine_death_wait(cfg)[0]  # vLLM's teardown included
        with sc.phase("wait for the engine to die", timeout_s=timeout):  # its budget: chaos/experiment/suite_budgets.py
            sc.poll(dead, timeout=wait, every=0.1)
        was_restarted = restarted()  # asked once: each ask is a call to the target's engine
        gone = was_restarted or (died is not None and died())
        if gone and not was_restarted:
            self.evidence["engine_dead_seen_after_s"] = round(self.sc.clock() - self.t_inject, 2)
            restart_s = budgets.restart_after_engine_death(self.env)[0]
            with sc.phase("wait for the replica's restart", timeout_s=restart_s):
                sc.wait_until(engine_restarted(target, before=self.restarts_before), restart_s, every=0.1)
        # the fault's window (its accounting allowance) ends when the replica was replaced, as before
        self.evidence["engine_died_after_s"] = round(self.sc.clock() - self.t_inject, 2)
        return gone

    def wait_recovered(self) -> None:
        """Until the replica serves again, twice the recovery SLA at most.

        If it never does, the failure names the restart policy where that is why."""
        stack, name = self.stack, self.name
        try:
            self.t_recovered = self.t_end + self.sc.wait_recovered(self.t_end, self.env.slas.recovery_s * 2)
        except AssertionError:
            check_restart_policy(self.target, self.env.target(name), lambda: stack.serves(stack.direct_url(name)),
                                 wait_s=0.1)  # names the policy if that is why
            raise
        self.alerts.recovered()

    def observe_steady(self) -> None:
        """Observe one full rolling window after recovery at least, up to the steady-state SLA.

        Longer than one window while the hurt replica's traffic is not yet judged steady."""
        sc, slas, t_end, name = self.sc, self.env.slas, self.t_end, self.name
        self.window = window = sc.scaled(30)
        sc.observe_steady(t_end, at_least_s=2 * window + 1, until=t_end + slas.steady_state_s + window,
                          steady=lambda recs: steady_seen(served_by(recs, name), t_end, window, slas))

    def judge(self, summary: SummaryCollector) -> None:
        """Stop the load and judge: the fault happened, the replica recovered, nothing lost, the alerts saw it.

        Stage 1: the fault's proof and the restarts seen. Then recovery within the SLAs (its probes and the traffic
        it served) and the accounting (nothing lost beyond the fault's allowance); then the alerts."""

        sc, stack, env, name, kind = self.sc, self.stack, self.env, self.name, self.kind
        self.alerts.settle()  # under the same load: each expected alert fires, pages and clears, or its time runs out
        records = sc.stop_load()
        stack.attribute_replicas(records)  # which replica served each request, where no pool header said so
        restarts = self.target.restart_count() - self.restarts_before
        stage1: list[Verdict] = []
        if kind is not None:
            if self.proof == "restart_count":
                checks: dict[str, Callable[..., bool]] = {
                    "restart_count": lambda n, b=self.restarts_before: n is not None and n > b}
            else:
                checks = {"restarts_seen": lambda n: n >= 1}
            self.evidence["restarts_seen"] = restarts
            stage1 = [fault_happened(self.evidence, **checks)]
        # replica-level recovery: its own probes and the traffic it served (others may cover for it meanwhile)
        # GPU memory judged on each of the hurt target's GPUs; no fault here touches the GPU itself (the driver
        # reset is a container restart), so any Xid new during the scenario fails it (expected_xids None)
        rv = recovery_verdict((self.t_inject, self.t_end), sc.timeline, served_by(records, name), env.slas,
                              restarts=restarts, crash=self.crash, steady_window_s=self.window, target=name, fault=kind,
                              engine_timeout=budgets.engine_timeout(env.target(name)) if kind in TIMEOUT_BOUND else None)
        # the fault may cost what it held when it struck (to the engine's death) plus the error budget
        t_dead = self.t_inject + float(self.evidence.get("engine_died_after_s", 0.0))
        allowance = fault_allowance(records, (self.t_inject, t_dead) if kind is not None else None, env.slas.error_budget)
        av = accounting_verdict(records, stack.server_log(records=records), failed_max=allowance)
        answers = answers_across_fault(records, self.t_inject)  # every answer during and after the fault, by the steady ones
        progress = self._progress(sc.clock())
        rep.attach_table(latency_table(records, env.slas.latency), name="latency per prompt class")
        behaved = [rv, av, answers, progress]
        if kind is not None:  # which signal saw the fault first, beside the slow-but-healthy control's false alarms
            read = self.monitoring.prometheus is not None
            rp = attach_detection(sc, summary, kind, name, self.t_inject, self.alerts.first_fired_s(self.t_inject)
                                  if read else None, read)
            behaved += self._liveness_catch(rp)
        add_recovery(summary, rv, av, fault=kind is not None, target=name)
        if stage1:
            sc.judge("the fault really happened", stage1)
        sc.judge("the system behaved", behaved)
        # a fault that did not happen is no missed alert: stage 1 decides whether a silence counts
        sc.judge("the monitoring saw it", [self.alerts.verdict(fault_proven=all(v.ok for v in stage1), timeline=sc.timeline)])

    def _liveness_catch(self, rp: Replay | None) -> list[Verdict]:
        """The team's liveness probe, where the environment declares one, must catch an outage longer than its own
        detection time (the slow-but-healthy control judges the other way: the slow work it must not kill)."""
        probe = self.env.liveness
        if probe is None:
            return []
        v = Verdict("the team's liveness probe catches the outage", window=(self.t_end, self.t_recovered))
        catch_row(v, rp, probe, self.t_end, self.t_recovered, lie_s=self.env.slas.health_truth_s, items=(DETECTION.id,))
        return [v]

    def _progress(self, until: float) -> Verdict:
        """Decode progress in the steady states: the hurt replica's before the fault, and from its recovery on (a
        restart that answers /health but decodes nothing is no recovery; the fault's own window is recovery's and
        health truth's to judge); every other replica's over the whole run, the fault included (they carry the hurt
        one's load meanwhile). Counters that cannot be read leave only the progress-truth item unproven, not the
        recovery's."""
        windows = [(self.t_steady, self.t_inject), (self.t_recovered, until)] if self.kind else [(self.t_steady, until)]
        v = Verdict("decode progress in the steady states", window=(self.t_steady, until))
        streams = proxy_streams(self.stack, [self.name, *self.peers], self.t_steady, until)
        limit = self.env.slas.health_truth_s
        progress_truth_rows(v, self.sc.timeline, self.t_inject, limit, {self.name: "health"}, fault=self.kind,
                            windows=windows, items=(PROGRESS.id,), streams=streams)
        progress_truth_rows(v, self.sc.timeline, self.t_inject, limit, self.peers, fault=self.kind,
                            windows=[(self.t_steady, until)], items=(PROGRESS.id,), streams=streams)
        return v
