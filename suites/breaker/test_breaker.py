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

from collections.abc import Callable, Iterator

import pytest

from chaos import AlertMonitor, ExperimentRun, Fault, StackHandle, SummaryCollector, plan, requires
from chaos.experiment.suite import gateway_admin
from chaos.faults.http import http_error, oom_error, stream_stall
from chaos.scenarios import breaker_tier
from chaos.verify.breaker_sizes import NAMES as BREAKER_SIZE_NAMES
from chaos.verify.breaker_sizes import Size as BreakerSize

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


# the release-checklist item (and part of it) each scenario proves (chaos.report.checklist)
PROVES = {"errors-below-degrade": ("breaker-degrade", "no trip below the error-rate threshold"),
          "errors-degrade": ("breaker-degrade", "degrade above the error-rate threshold"),
          "latency-below-degrade": ("breaker-degrade", "no trip below the latency threshold"),
          "latency-degrade": ("breaker-degrade", "degrade above the latency threshold"),
          "errors-rollback": ("breaker-rollback", ""), "oom-burst": ("oom-burst", ""), "leak-trend": ("leak-trend", "")}


@pytest.mark.slow
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.proves(PROVES[n][0], part=PROVES[n][1]))
                                  for n in BREAKER_SIZE_NAMES])
def test_breaker_tier(gateway: StackHandle, run_experiment: Callable[..., ExperimentRun], summary: SummaryCollector,
        monitoring: AlertMonitor, name: str) -> None:
    """`name`'s fault, sized from the environment's breaker policy, on the canaries under load: the tier the
    policy gives (none, degrade, rollback, an anomaly trip), in time, then back to closed, nothing lost."""
    if name == "leak-trend":
        requires(gateway.env, plan.no_simulator_canary)
    # 8 closed-loop users, or the environment's own count where its gateway needs more to be busy; the fault is
    # judged on a full canary window; skips now where the canary cannot get enough calls
    run_experiment(breaker_tier(gateway, monitoring, summary, name, users=max(8, gateway.env.load.users),
                                duration_s=240.0,
                                faults=lambda canaries, size: FAULTS[size.kind](gateway, canaries, size)))
