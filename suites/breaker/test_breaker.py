"""Breaker: the gateway's two-tier circuit breaker, judged black-box from the traffic itself.

Faults go into the canary replicas: HTTP faults through the fault proxy in front of each canary
(any backend), the memory leak inside the simulator's engine or real vLLM's API server (the engine
plugin); the load runs through the gateway, any gateway: the reference one, or nginx or HAProxy
(environments/local-nginx.yaml, ...). Which replica served each attempt comes from the fault
proxies' logs, so nothing is asked of the gateway.
The faults are sized from the environment's own `breaker:` policy (chaos.verify.breaker_sizes):
errors below degrade, between degrade and rollback, and above rollback; stalls below and above
degrade_latency_s; an OOM burst of exactly oom_burst_count answers, then none; a leak trend. Each
scenario asserts the right tier and its timing, as a table of spec vs observed: no trip below the
thresholds, degrade, forced rollback (held until an operator reset, or to the end of the scenario
where the gateway has no reset), a trip on the OOM burst and on the leak trend, then half-open
probing and recovery, with request accounting still at zero lost; and where the environment has a
`monitoring:` section, the team's own alerts saw it (fired, paged and cleared in time, or a blind spot).
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from chaos import (
    BREAKER_SIZE_NAMES,
    AlertMonitor,
    BreakerPolicy,
    BreakerSize,
    Fault,
    GatewayStateObserver,
    Scenario,
    StackHandle,
    SummaryCollector,
    Verdict,
    accounting_verdict,
    add_breaker,
    analyze_breaker,
    anomaly_verdict,
    breaker_size_why_not,
    breaker_sizes,
    breaker_spec_vs_observed,
    breaker_window_target,
    degrade_recovery_s,
    fault_proof,
    faults,
    gateway_admin,
    gateway_state,
    http_error,
    observed_anomaly,
    oom_error,
    plan,
    plot_breaker,
    requires,
    stream_stall,
    write_breaker_table,
)
from chaos import (
    evidence as rep,
)

LEAK_BYTES = 3 * 1024 * 1024  # per request: a trend the leak rule must see within its window
# how each kind of fault goes into the canary replicas `names`, at the size the policy gave (s.size)
FAULTS: dict[str, Callable[[StackHandle, list[str], BreakerSize], list[Fault]]] = {
    "errors": lambda st, names, s: [http_error(st.fault_proxy(n), 500, fraction=s.size) for n in names],
    "latency": lambda st, names, s: [stream_stall(st.fault_proxy(n), after_tokens=1, seconds=s.size)
                                     for n in names],
    # one replica answers exactly N OOMs, then none: the gateway counts them per pool, at any canary rate
    "oom-burst": lambda st, names, s: [oom_error(st.fault_proxy(names[0]), limit=int(s.size))],
    # a leak happens inside the server: the simulator's planted one, or the engine plugin's in real vLLM
    "leak": lambda st, names, s: st.leak_faults(names, LEAK_BYTES),
}


@pytest.fixture
def gateway(stack: StackHandle) -> Iterator[StackHandle]:
    requires(stack.env, plan.no_breaker_view, plan.no_canary)
    _reset(stack)
    yield stack
    _reset(stack)


def _reset(stack: StackHandle) -> None:
    """The operator's reset, where the gateway has one (the reference gateway's admin API)."""
    if stack.env.endpoints.gateway_admin:
        gateway_admin(stack, "POST", "/admin/reset")


def _enough_canary_traffic(stack: StackHandle, size: BreakerSize) -> None:
    """Skip early where even the capacity measured at warm-up cannot give the canary the calls per
    window that `size`'s tier needs (errors and latency: more calls never hurt those)."""
    p, rate = stack.env.breaker, stack.capacity_rps()
    if rate is None or size.kind not in ("errors", "latency"):
        return
    if (why := breaker_size_why_not(p, size, int(rate * p.canary_weight * p.window_s))) is not None:
        pytest.skip(f"{why}; at most, from {rate:.1f} req/s measured at warm-up x canary_weight {p.canary_weight:g}")


def _canary_calls(stack: StackHandle, canaries: list[str]) -> int:
    """Calls in the canary's breaker window: the gateway's own count where it has an admin API, else
    the calls its fault proxies passed (all of them: a health check is a call too, 1/s at most)."""
    if stack.env.endpoints.gateway_admin:
        return int(gateway_admin(stack, "GET", "/admin/state")["pools"]["canary"]["window"]["calls"])
    return sum(int(stack.fault_proxy(n).health().get("requests", 0)) for n in canaries)


def _canary_window_full(stack: StackHandle, sc: Scenario, canaries: list[str], target: int) -> int:
    """Hold the steady state until the canary's breaker window holds `target` calls (or 2 windows
    have passed); the calls it holds then.

    The fixture resets the gateway, so its window starts empty. A fault injected before the window
    is full is judged on the calls that arrive during the fault, and a stall or an error slows
    those (closed-loop users wait on the canary): on the lab, the canary's window held 130 calls at
    inject (17 req/s for 7.5 s), the stalled canary then got 3 req/s, and the breaker could decide
    only after the fault was reverted. Without an admin API the window is the proxies' count over
    the last window_s (a gateway that still bans the canary from the last test has not filled it)."""
    p = stack.env.breaker
    counted = not stack.env.endpoints.gateway_admin
    seen: list[tuple[float, int]] = []
    calls = [0]

    def full() -> bool:
        now, total = time.monotonic(), _canary_calls(stack, canaries)
        seen.append((now, total))
        if counted:
            older = [c for t, c in seen if t <= now - p.window_s]
            calls[0] = total - older[-1] if older else 0
        else:
            calls[0] = total
        return calls[0] >= target

    with sc.phase(f"steady state: the canary's breaker window holds {target} calls"):
        sc.poll(full, timeout=2 * p.window_s, every=0.5)
    return calls[0]


def _wait_closed(sc: Scenario, obs: GatewayStateObserver, policy: BreakerPolicy) -> None:
    """Until the gateway's canary breaker is closed and STAYS closed: right after the revert the window
    still holds the fault's errors and may trip once more, a moment after the observer last read it."""
    settle = min(policy.window_s, 5.0)
    closed_since: list[float | None] = [None]

    def settled() -> bool:
        if obs.states.get("canary") != "closed":
            closed_since[0] = None
        elif closed_since[0] is None:
            closed_since[0] = time.time()
        return closed_since[0] is not None and time.time() - closed_since[0] >= settle

    sc.poll(settled, timeout=policy.window_s + 8 * policy.open_wait_s + policy.reaction_allowance_s, every=0.2)


# the release-checklist item (and part of it) each scenario proves (chaos.report.checklist)
PROVES = {"errors-below-degrade": ("breaker-degrade", "no trip below the error-rate threshold"),
          "errors-degrade": ("breaker-degrade", "degrade above the error-rate threshold"),
          "latency-below-degrade": ("breaker-degrade", "no trip below the latency threshold"),
          "latency-degrade": ("breaker-degrade", "degrade above the latency threshold"),
          "errors-rollback": ("breaker-rollback", ""), "oom-burst": ("oom-burst", ""), "leak-trend": ("leak-trend", "")}


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.proves(PROVES[n][0], part=PROVES[n][1]))
                                  for n in BREAKER_SIZE_NAMES])
def test_breaker_tier(gateway: StackHandle, scenario: Callable[..., Scenario], summary: SummaryCollector,
        monitoring: AlertMonitor, name: str) -> None:
    stack = gateway
    env = stack.env
    policy = env.breaker
    admin_url = env.endpoints.gateway_admin
    admin = bool(admin_url)
    kind = env.gateway.kind if env.gateway else "external"
    size = breaker_sizes(policy)[name]
    expect, hold = size.expect, size.hold_s
    if name == "leak-trend":
        requires(env, plan.no_simulator_canary)
    _enough_canary_traffic(stack, size)
    canaries = stack.targets_in("canary")
    rep.labels(epic="Resilience", feature="Circuit breaker", story=name, suite="breaker")
    rep.title(f"{name}: {size.label()} on the canary -> expect {expect} ({kind} gateway)")
    sc = scenario(f"breaker-{name}", hurt=canaries)
    sc.observe(env.endpoints.api)
    gateway_state.watch(sc, env)  # the gateway's own state metric, shown beside the black-box verdict
    obs = None
    if admin_url:
        token = env.gateway.admin_token if env.gateway else None
        obs = sc.add_observer(GatewayStateObserver(admin_url, sc.timeline, token=token).start())
    with sc.phase("start load"):
        load_t0 = time.time()
        # 8 closed-loop users, or the environment's own count where its gateway needs more to be busy
        sc.start_load(duration_s=240.0, users=max(8, env.load.users))
    sc.steady_state(max(3.0, policy.window_s * 0.5))
    calls = _canary_window_full(stack, sc, canaries, breaker_window_target(policy, size))
    if (why := breaker_size_why_not(policy, size, calls)) is not None:  # can this many calls per window tell the tiers apart?
        pytest.skip(why)
    fault = faults.AllOf(FAULTS[size.kind](stack, canaries, size))
    alerts = monitoring.watch(name)  # the team's alerts: what this scenario must page (monitoring.expect)
    t0 = time.time()
    sc.inject(fault)
    alerts.took_effect()
    sc.hold(hold)
    if expect == "rollback":
        sc.wait(policy.window_s * 0.5, "canary must stay out until an operator reset")
    sc.revert()
    t1 = time.time()
    alerts.recovered(t1)
    until = t1
    if expect == "rollback" and admin:
        sc.wait(policy.window_s * 0.5, "hold after revert: still rolled back")
        until = time.time()
        with sc.phase("operator reset"):
            gateway_admin(stack, "POST", "/admin/reset")
    if expect == "rollback" and not admin:
        # no reset ends it: held to the scenario's end, longer than any degrade may stay out, or
        # a timed ban (nginx's fail_timeout) that began late in the fault passes for a rollback
        sc.wait(degrade_recovery_s(policy), "no operator reset: still rolled back at the scenario's end")
        until = time.time()
    else:
        with sc.phase("recovery: half-open probing, then closed"):
            if obs is not None:
                _wait_closed(sc, obs, policy)
            else:  # no state to read: watch for as long as the policy gives a recovery
                sc.wait(policy.window_s + 2 * policy.open_wait_s + policy.reaction_allowance_s)
            sc.wait(policy.window_s * 0.5)
    alerts.settle()  # under the same load: each expected alert fires, pages and clears, or its time runs out
    records = sc.stop_load()
    stack.attribute_replicas(records)  # which replica served each request, where no pool header said so
    attempts = stack.upstream_attempts(load_t0, time.time()) or records
    stage1 = fault_proof(fault)
    verdicts: list[Verdict] = [accounting_verdict(records, stack.server_log(records=records))]
    analysis = analyze_breaker(attempts, policy, baseline_until=t0)
    try:
        if expect == "anomaly":
            states = sc.timeline.series("gateway", "pool_state") if admin else None
            verdicts.insert(0, anomaly_verdict(attempts, policy, t0, t1, name, state_samples=states))
            observed = observed_anomaly(verdicts[0])
        else:
            table, seen, analysis = breaker_spec_vs_observed(attempts, records, policy, expect=expect, fault=(t0, t1),
                                                     until=until, gateway=kind)
            write_breaker_table(Path(env.state_dir) / "breaker-tables.jsonl", name, kind, expect, table, seen)
            verdicts.insert(0, table)
            observed = seen.tier
    finally:
        analysis.to_timeline(sc.timeline)
        png = plot_breaker(sc.timeline, [(c.t, c.kind) for c in analysis.crossings], attempts,
                           title=f"breaker: {name} ({kind})")
        rep.attach_png(png, "breaker timeline")
    add_breaker(summary, name, observed=observed, expected=expect)
    gateway_state.beside(verdicts[0], observed, sc, env, (t0, t1), until)
    sc.judge("the fault really happened", [stage1])
    sc.judge("the breaker behaved", verdicts)
    sc.judge("the monitoring saw it", [alerts.verdict(fault_proven=stage1.ok, timeline=sc.timeline)])
