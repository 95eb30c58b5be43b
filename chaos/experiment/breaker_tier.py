"""A breaker tier as an Experiment (`breaker_tier(...)`), whose steps are:
load through the gateway until the canary's breaker window is full, a fault
sized from the environment's own `breaker:` policy on the canaries, hold, revert, recovery (operator reset,
held to the end, or half-open probing back to closed), then the verdicts: the fault happened, the breaker
reached the tier the policy gives (spec vs observed, or the anomaly rule), nothing lost, every answer still
the steady state's, the alerts saw it."""
from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from chaos.experiment.answers_steps import PROMPT_SET, collect_golden, golden_wait_s
from chaos.experiment.runner import Experiment
from chaos.experiment.suite import fault_proof, gateway_admin, wait_out_left_over_alerts
from chaos.experiment.suite_budgets import BREAKER_FILL, breaker_steady_s
from chaos.experiment.waits import breaker_closed, window_full
from chaos.faults import AllOf
from chaos.faults.http import HttpFault
from chaos.observe.gateway import GatewayStateObserver
from chaos.report import allure as rep
from chaos.report.summary import add_breaker
from chaos.report.timeline import plot_breaker
from chaos.verify import gateway_state
from chaos.verify.accounting import accounting_verdict
from chaos.verify.anomaly import anomaly_verdict, observed_anomaly
from chaos.verify.answers import answers_across_fault
from chaos.verify.breaker import analyze, degrade_recovery_s
from chaos.verify.breaker_sizes import Size, drain_unseen, sizes, why_not, window_target
from chaos.verify.breaker_table import spec_vs_observed, write_table
from chaos.verify.verdict import Verdict

if TYPE_CHECKING:
    from chaos.experiment.run import Run
    from chaos.experiment.running_stack import RunningStack as StackHandle
    from chaos.faults import Fault
    from chaos.report.summary import SummaryCollector
    from chaos.verify.alert_watch import AlertMonitor


def _skip(why: str) -> None:
    import pytest

    pytest.skip(why)


def breaker_tier(stack: StackHandle, monitoring: AlertMonitor, summary: SummaryCollector, name: str, *,
                 users: int, duration_s: float,
                 faults: Callable[[list[str], Size], Sequence[Fault]]) -> Experiment:
    """Breaker scenario `name` (one of BREAKER_SIZE_NAMES) on the stack's canaries, as an Experiment for the
    one runner: `users` closed-loop users for `duration_s`, `faults(canaries, size)` made when the canary's
    window is full. It is skipped (not proven) where the canary's full window cannot tell this tier apart,
    judged on the calls the load really sent: a warm-up's rate (a fresh real-vLLM replica's first seconds) says less."""
    size = sizes(stack.env.breaker)[name]
    canaries = stack.targets_in("canary")
    kind = stack.env.gateway.kind if stack.env.gateway else "external"
    rep.labels(epic="Resilience", feature="Circuit breaker", story=name, suite="breaker")
    rep.title(f"{name}: {size.label()} on the canary -> expect {size.expect} ({kind} gateway)")

    def steps(run: Run) -> None:
        tier = BreakerSteps(stack, run, monitoring, name)
        tier.start_load(users=users, duration_s=duration_s)
        tier.fill_canary_window()  # the fault is judged on a full window, not on the calls the fault slows
        tier.inject(faults(tier.canaries, tier.size))
        tier.hold()  # a rollback: the canary stays out until an operator reset
        tier.revert()
        tier.recover()  # the operator reset, or half-open probing until the canary is closed and stays so
        tier.judge(summary)  # the fault happened; the breaker's tier and timing, nothing lost; the alerts saw it

    return Experiment(f"breaker-{name}", steps=steps, hurt=tuple(canaries))


class BreakerSteps:
    """The steps of one breaker run on the run handle `sc`; every time it reads is the handle's clock."""

    def __init__(self, stack: StackHandle, sc: Run, monitoring: AlertMonitor, name: str) -> None:
        """The gateway's state watched (its metric; its admin API where it has one) beside the black-box verdict."""
        self.stack, self.name, self.monitoring = stack, name, monitoring
        env = stack.env
        self.policy = env.breaker
        self.size: Size = sizes(self.policy)[name]
        self.admin = bool(env.endpoints.gateway_admin)
        self.kind = env.gateway.kind if env.gateway else "external"
        self.canaries = stack.targets_in("canary")
        self.sc = sc
        sc.observe(env.endpoints.api)
        gateway_state.watch(sc, env)  # the gateway's own state metric, shown beside the black-box verdict
        self.obs: GatewayStateObserver | None = None
        if env.endpoints.gateway_admin:
            token = env.gateway.admin_token if env.gateway else None
            self.obs = sc.add_observer(GatewayStateObserver(env.endpoints.gateway_admin, sc.timeline, token=token).start())
        self.fault: AllOf | None = None
        self.load_t0 = self.t0 = self.t1 = self.until = 0.0

    def start_load(self, *, users: int, duration_s: float) -> None:
        """Closed-loop users through the gateway, then steady state for half a breaker window (3 s at least).
        The load outlasts every step at its longest (a long window's fill, hold and recovery), or the canary's
        recovery would be judged with no calls to probe it."""
        p = self.policy
        wait_out_left_over_alerts(self.sc, self.monitoring, self.name)
        longest = (4.5 * p.window_s + self.size.hold_s + 8 * p.open_wait_s + p.reaction_allowance_s
                   + golden_wait_s(self.stack.env) + 10.0)
        with self.sc.phase("start load"):
            self.load_t0 = self.sc.clock()
            self.sc.start_load(duration_s=max(duration_s, longest), users=users, answers=PROMPT_SET)
        self.sc.steady_state(breaker_steady_s(self.policy))  # its budget: the same figure
        collect_golden(self.sc)  # the answers every answer during and after the fault is held to

    def fill_canary_window(self) -> None:
        """Hold the steady state until the canary's window holds the calls this tier needs.

        Skips where the calls it holds then cannot tell the tiers apart, or where a degrade's drain (the
        canary out for open_wait_s) could not be told from chance at the rate the load sent meanwhile."""
        p = self.policy
        calls = self._canary_window_full(window_target(p, self.size))
        if (why := why_not(p, self.size, calls)) is not None:
            _skip(f"{why} (counted in the canary's window once it was full)")
        # open_wait_s is how long the reference gateway keeps a tripped canary out; another gateway's ban is its own
        if self.kind == "reference" and self.size.expect == "degrade" and (rate := self._send_rate()) is not None:
            if (why := drain_unseen(p, rate)) is not None:
                _skip(f"{why}; from the {rate:.1f} req/s the load sent while the canary's window filled")

    def _send_rate(self) -> float | None:
        """Attempts per second the load sent over the last breaker window (every pool's), from its records."""
        load = self.sc.load
        sends = sorted(r.t_send for r in load.records()) if load is not None else []
        if len(sends) < 2:
            return None
        start = max(sends[0], sends[-1] - self.policy.window_s)
        span = sends[-1] - start
        return sum(1 for t in sends if t >= start) / span if span > 0 else None

    def inject(self, faults: Sequence[Fault]) -> None:
        """The faults, all at once (the breaker sees them as one); the alerts' clock starts."""
        self.fault = AllOf(faults)
        self.alerts = self.monitoring.watch(self.name)  # what this scenario must page (monitoring.expect)
        self.t0 = self.sc.clock()
        self.sc.inject(self.fault)
        self.alerts.took_effect()

    def hold(self) -> None:
        """Hold the fault for the size's hold_s, and until it has met the calls it needs to act; a rollback
        for half a window more (the canary stays out)."""
        self.sc.hold(self.size.hold_s)
        self._until_fault_met_its_calls()
        if self.size.expect == "rollback":
            self.sc.wait(self.policy.window_s * 0.5, "canary must stay out until an operator reset")

    def _until_fault_met_its_calls(self) -> None:
        """An error fraction f spread evenly hits one call in every 1/f: a slow canary may see fewer than
        1/f calls in hold_s (200 at 0.5 %: 57 s at real vLLM's 3.5 req/s), and a fault that hit nothing
        proves nothing. Hold on until every proxy's rule has matched 1/f calls, for one window at most; a
        rule still short then fails the fault's own proof at the revert."""
        if self.size.kind != "errors" or not 0 < self.size.size < 1 or self.fault is None:
            return
        need = math.ceil(1 / self.size.size - 1e-9)
        parts = [p for p in self.fault.faults if isinstance(p, HttpFault)]

        def met() -> bool:
            return all(int(p.counters().get("matched", 0)) >= need for p in parts)

        if parts and not met():
            with self.sc.phase(f"hold on: until the fault has met {need} calls at each canary"):
                self.sc.poll(met, timeout=self.policy.window_s, every=0.5)

    def revert(self) -> None:
        """Undo the faults; the alerts' recovery clock starts."""
        self.sc.revert()
        self.t1 = self.until = self.sc.clock()
        self.alerts.recovered(self.t1)

    def recover(self) -> None:
        """Recovery: the operator reset (a rollback), or half-open probing until the canary is closed and stays so.

        A rollback is still out half a window after the revert, then reset where the gateway has an admin API, or
        held to the scenario's end where it has none."""
        sc, policy = self.sc, self.policy
        if self.size.expect == "rollback" and self.admin:
            sc.wait(policy.window_s * 0.5, "hold after revert: still rolled back")
            self.until = self.sc.clock()
            with sc.phase("operator reset"):
                gateway_admin(self.stack, "POST", "/admin/reset")
        if self.size.expect == "rollback" and not self.admin:
            # no reset ends it: held to the scenario's end, longer than any degrade may stay out, or
            # a timed ban (nginx's fail_timeout) that began late in the fault passes for a rollback
            sc.wait(degrade_recovery_s(policy), "no operator reset: still rolled back at the scenario's end")
            self.until = self.sc.clock()
        else:
            with sc.phase("recovery: half-open probing, then closed"):
                if self.obs is not None:
                    self._wait_closed()
                else:  # no state to read: watch for as long as the policy gives a recovery
                    sc.wait(policy.window_s + 2 * policy.open_wait_s + policy.reaction_allowance_s)
                sc.wait(policy.window_s * 0.5)

    def judge(self, summary: SummaryCollector) -> None:
        """Stop the load and judge: the fault happened; the breaker's tier and timing; the alerts saw it.

        The breaker stage holds the spec-vs-observed table (or the anomaly rule) and the accounting (nothing lost);
        the table goes to breaker-tables.jsonl, the timeline plot to the report."""
        sc, stack, policy, expect = self.sc, self.stack, self.policy, self.size.expect
        assert self.fault is not None, "judge() after inject()"
        self.alerts.settle()  # under the same load: each expected alert fires, pages and clears, or its time runs out
        records = sc.stop_load()
        stack.attribute_replicas(records)  # which replica served each request, where no pool header said so
        attempts = stack.upstream_attempts(self.load_t0, self.sc.clock()) or records
        stage1 = fault_proof(self.fault)
        verdicts: list[Verdict] = [accounting_verdict(records, stack.server_log(records=records)),
                                   answers_across_fault(records, self.t0)]
        analysis = analyze(attempts, policy, baseline_until=self.t0)
        try:
            if expect == "anomaly":
                states = sc.timeline.series("gateway", "pool_state") if self.admin else None
                verdicts.insert(0, anomaly_verdict(attempts, policy, self.t0, self.t1, self.name, state_samples=states))
                observed = observed_anomaly(verdicts[0])
            else:
                table, seen, analysis = spec_vs_observed(attempts, records, policy, expect=expect,
                                                         fault=(self.t0, self.t1), until=self.until, gateway=self.kind)
                write_table(Path(stack.env.state_dir) / "breaker-tables.jsonl", self.name, self.kind, expect, table, seen)
                verdicts.insert(0, table)
                observed = seen.tier
        finally:
            analysis.to_timeline(sc.timeline)
            png = plot_breaker(sc.timeline, [(c.t, c.kind) for c in analysis.crossings], attempts,
                               title=f"breaker: {self.name} ({self.kind})")
            rep.attach_png(png, "breaker timeline")
        add_breaker(summary, self.name, observed=observed, expected=expect)
        gateway_state.beside(verdicts[0], observed, sc, stack.env, (self.t0, self.t1), self.until)
        sc.judge("the fault really happened", [stage1])
        sc.judge("the breaker behaved", verdicts)
        sc.judge("the monitoring saw it", [self.alerts.verdict(fault_proven=stage1.ok, timeline=sc.timeline)])

    def _canary_calls(self) -> int:
        """Calls in the canary's breaker window: the gateway's own count where it has an admin API, else
        the calls its fault proxies passed (all of them: a health check is a call too, 1/s at most)."""
        if self.admin:
            return int(gateway_admin(self.stack, "GET", "/admin/state")["pools"]["canary"]["window"]["calls"])
        return sum(int(self.stack.fault_proxy(n).health().get("requests", 0)) for n in self.canaries)

    def _canary_window_full(self, target: int) -> int:
        """Hold the steady state until the canary's breaker window holds `target` calls (or 2 windows
        have passed); the calls it holds then.

        The fixture resets the gateway, so its window starts empty. A fault injected before the window
        is full is judged on the calls that arrive during the fault, and a stall or an error slows
        those (closed-loop users wait on the canary): on the lab, the canary's window held 130 calls at
        inject (17 req/s for 7.5 s), the stalled canary then got 3 req/s, and the breaker could decide
        only after the fault was reverted. Without an admin API the window is the proxies' count over
        the last window_s (a gateway that still bans the canary from the last test has not filled it)."""
        p = self.policy
        full = window_full(calls=target, count=self._canary_calls, window_s=None if self.admin else p.window_s)
        with self.sc.phase(BREAKER_FILL, calls=target):  # its own budget (2 windows), not the steady state's 3 s
            self.sc.wait_until(full, timeout=2 * p.window_s, every=0.5)
        return full.seen

    def _wait_closed(self) -> None:
        """Until the gateway's canary breaker is closed and STAYS closed: right after the revert the window
        still holds the fault's errors and may trip once more, as late as a window after the revert (a canary
        closed during the fault fills its window to min_calls with them still in it, and trips once those calls
        reach min_calls). So a tier that tripped also waits out one window after the revert, and the black-box
        verdict then sees the canary's traffic back, not a trip the wait ended just before."""
        policy, obs = self.policy, self.obs
        assert obs is not None
        settle = min(policy.window_s, 5.0)
        tripped = self.size.expect != "none"  # below the thresholds the fault's errors cannot trip it later either
        closed = breaker_closed(lambda: obs.states.get("canary"), stays_s=settle,
                                not_before=self.t1 + policy.window_s + 1.0 if tripped else None)
        self.sc.wait_until(closed, timeout=degrade_recovery_s(policy) + settle, every=0.2)
