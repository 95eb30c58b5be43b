"""Network: 300 ms - 5 s jitter, resets and timeouts between client and server (Toxiproxy).

The reference client must keep its backoff rules (>= 500 ms between retries), retries must not
amplify traffic beyond the environment's bound, no request may be lost, and latency must stay
within the degraded-mode SLA.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from chaos import (
    Experiment,
    ExperimentRun,
    Fault,
    Run,
    StackHandle,
    SummaryCollector,
    Verdict,
    accounting_verdict,
    fault_happened,
    faults,
    latency_table,
    plan,
    requires,
)
from chaos import evidence as rep
from chaos.env import SLAs
from chaos.load.records import RequestRecord
from chaos.load.stats import percentile
from chaos.verify.retries import retry_verdict

TOXICS: dict[str, tuple[Callable[[Any, str], Fault], dict[str, Any], float]] = {
    # name: (factory, load overrides, seconds held before scaling)
    "jitter-300ms-5s": (lambda t, p: faults.jitter(t, p, latency=2650, jitter=2350), {}, 100),
    "reset-peer": (lambda t, p: faults.reset_peer(t, p, timeout=0, stream="upstream", toxicity=1.0), {}, 40),
    "timeout": (lambda t, p: faults.timeout(t, p, timeout=0), {"timeout_s": 3.0}, 40),
}


def _client_proxy(stack: StackHandle) -> str:
    requires(stack.env, plan.no_client_proxy)
    proxy = plan.client_proxy(stack.env)
    assert proxy is not None  # requires() skipped an environment without one
    return proxy


def _listed(names: object) -> bool:
    """Toxiproxy listed the toxic with its settings"""
    return bool(names)


def _measured(probe: object) -> bool:
    """a probe through the proxy saw the toxic's effect"""
    return isinstance(probe, dict) and probe.get("during") is not None


def _degraded_latency(records: list[RequestRecord], t0: float, t1: float, slas: SLAs) -> Verdict:
    v = Verdict("degraded-mode latency", window=(t0, t1))
    during = [r.e2e for r in records if r.ok and r.e2e is not None and t0 <= r.t_send <= t1]
    base = max((l.e2e_p99_s for l in slas.latency.values()), default=10.0)
    limit = base * slas.degraded_latency_factor
    p99 = percentile(during, 99) if during else None
    v.add("e2e_p99_under_fault_s", limit, None if p99 is None else round(p99, 3),
          None if p99 is None else p99 <= limit, f"{len(during)} successful requests sent during the fault")
    return v


@pytest.mark.parametrize("toxic", [pytest.param(t, marks=[pytest.mark.proves("network-jitter")] if t.startswith("jitter")
                                                   else []) for t in TOXICS])
def test_client_path_toxic(stack: StackHandle, run_experiment: Callable[..., ExperimentRun], summary: SummaryCollector,
        toxic: str) -> None:
    env = stack.env
    proxy = _client_proxy(stack)
    make, overrides, hold = TOXICS[toxic]
    rep.labels(epic="Resilience", feature="Network", story=toxic, suite="network")
    rep.title(f"{toxic} between client and gateway (proxy {proxy})")

    def steps(run: Run) -> None:
        run.observe(env.endpoints.api)
        with run.phase("start load"):
            run.start_load(duration_s=180.0, **overrides)
        run.steady_state(2.0)
        fault = make(stack.toxiproxy, proxy)
        t0 = time.time()
        run.inject(fault)
        run.hold(run.scaled(hold))
        run.revert()
        t1 = time.time()
        run.wait_recovered(t1, env.slas.recovery_s)
        run.wait(max(env.retry.deadline_s * 0.5, run.scaled(30)), "steady state after revert")
        records = run.stop_load()
        rep.attach_table(latency_table(records, env.slas.latency), name="latency per prompt class")
        rv = retry_verdict(records, env.retry, max_amplification=env.slas.max_retry_amplification, window=(t0, t1))
        av = accounting_verdict(records, stack.server_log(records=records))
        verdicts = [rv, av]
        if toxic.startswith("jitter"):
            verdicts.append(_degraded_latency(records, t0, t1, env.slas))
        summary.count("network", "scenarios")
        summary.worst("network", "max_amplification", round(rv.data["amplification"] or 0, 2))
        run.judge("the fault really happened", [fault_happened(dict(fault.evidence), listed=_listed, probe=_measured)])
        run.judge("the system behaved", verdicts)

    run_experiment(Experiment(f"network-{toxic}", steps=steps))
