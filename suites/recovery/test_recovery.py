"""Recovery: the replica comes back within its SLAs after a GPU driver reset, a crash, an engine
death that exits 0, an NCCL timeout (rank frozen, its link cut, or hung in the all-reduce), and a cold
start; no request lost. On real vLLM with the engine plugin (vllm.engine_faults) the engine death is a
step exception inside the model runner and the all-reduce hang acts inside the engine.

Matrix: targets x faults x load profiles, each with a no-fault baseline under the same load. The
targets are the ones the environment marks for each fault (a stable target, or `hurt:`), or those
`--target` names; the NCCL faults keep those with TP > 1 (chaos/hurt.py). Each test id names its
target, as the plan does. Every verdict has two stages: the fault really happened, then the system
behaved; and where the environment has a `monitoring:` section, the team's own alerts saw it (each
expected alert fired, paged and cleared in time; the baseline paged nobody).
"""
from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos import (
    AlertMonitor,
    Fault,
    Scenario,
    StackHandle,
    SummaryCollector,
    accounting_verdict,
    add_recovery,
    budgets,
    check_restart_policy,
    fault_allowance,
    fault_happened,
    faults,
    hurt_params,
    latency_table,
    plan,
    recovery_verdict,
    requires,
    served_by,
    steady_seen,
)
from chaos import (
    evidence as rep,
)

# Poisson arrivals at the environment's load.rate_per_s (what its replicas are sized for)
LOADS: dict[str, dict[str, Any]] = {"steady-users": {}, "poisson": {"users": None, "shape": "rate"}}


def make_fault(kind: str, stack: StackHandle, name: str) -> Fault:
    """The fault objects of this suite, aimed at target `name`."""
    t = stack.target(name)
    cfg = stack.env.target(name)
    if kind == "gpu-driver-reset":
        return faults.restart(t)
    if kind == "crash-sigkill":
        return faults.kill(t, signal.SIGKILL)
    if kind == "engine-death-exit0":
        # simulator: its admin fault; real vLLM: the engine plugin's step exception (a CUDA error) where the
        # target enables it, else SIGKILL of VLLM::EngineCore
        return stack.engine_death(name)
    if kind == "nccl-rank-freeze":  # the target was chosen with TP > 1 (chaos/hurt.py)
        return faults.rank_freeze(t, rank=1)
    if kind == "nccl-timeout-allreduce-hang":  # real vLLM with the engine plugin, TP > 1 (chaos/hurt.py)
        fault = stack.engine_plugin_fault(name, "allreduce-hang")
        assert fault is not None, "chaos/hurt.py picks an all-reduce hang only where the engine plugin is on"
        return fault
    if kind == "nccl-rank-link-cut":  # ... and a rank link through Toxiproxy
        assert stack.toxiproxy is not None, "chaos/hurt.py picks a link cut only where Toxiproxy carries the rank link"
        return faults.rank_link_cut(stack.toxiproxy, cfg.rank_proxies[0])
    raise ValueError(kind)


def engine_timeout_s(stack: StackHandle, name: str) -> float:
    """How long the engine waits on a frozen or cut-off rank before it dies (then its supervisor restarts it)."""
    return budgets.engine_timeout(stack.env.target(name))[0]


# instantaneous faults are over once injected; lasting ones are held until the engine has died
INSTANT = {"gpu-driver-reset", "crash-sigkill", "engine-death-exit0"}


def run_recovery(stack: StackHandle, scenario: Callable[..., Scenario], summary: SummaryCollector,
        monitoring: AlertMonitor, kind: str | None, load: str, name: str) -> None:
    env = stack.env
    rep.labels(epic="Resilience", feature="Recovery", story=kind or "baseline", suite="recovery")
    rep.title(f"{kind or 'no fault (baseline)'} on {name} under {load} load")
    sc = scenario(f"{kind or 'baseline'}-{name}-{load}", hurt=[name])
    sc.observe(stack.direct_url(name))
    sc.observe(env.endpoints.api, source="api")
    with sc.phase("start load", profile=load):
        # long enough for the slowest allowed recovery plus the steady-state windows after it
        rate: dict[str, Any] = {"rate": env.load.rate_per_s} if load == "poisson" else {}
        sc.start_load(duration_s=2 * env.slas.recovery_s + 4 * sc.scaled(30) + 60, **LOADS[load], **rate)
    sc.steady_state(2.0)
    alerts = monitoring.watch(kind)  # the team's alerts: what this fault must page (monitoring.expect)
    target = stack.target(name)
    restarts_before = target.restart_count()
    evidence: dict[str, Any] = {}
    if kind is None:
        sc.wait(sc.scaled(20), "no fault: same load, same observers")
        t_inject = t_end = time.time()
    else:
        fault = make_fault(kind, stack, name)
        t_inject = time.time()
        info = sc.inject(fault)
        # the stack must heal itself: recovery counts from the moment the fault had taken effect (a
        # restart's inject returns once the old process is gone: a probe the old process answered while
        # it was terminating is not a recovery; at time_scale 1.0 one read 0.04 s for a 620 s restart)
        t_end = time.time()
        alerts.took_effect(t_end)
        evidence = dict(getattr(fault, "evidence", {}) or {}, **(info or {}))
        if kind not in INSTANT:
            # hold until the engine has died of the timeout (its supervisor restarts it), then undo the cause
            timeout = engine_timeout_s(stack, name)
            with sc.phase("wait for the engine to die", timeout_s=timeout):  # its budget: chaos/budgets.py
                sc.poll(lambda: target.restart_count() != restarts_before, timeout=timeout + 15, every=0.1)
            evidence["engine_died_after_s"] = round(time.time() - t_inject, 2)
        # the engine died of the fault and was replaced: the frozen rank or cut link's victim is gone
        sc.revert(check=target.restart_count() == restarts_before)
        try:
            sc.wait_recovered(t_end, env.slas.recovery_s * 2)
        except AssertionError:
            check_restart_policy(target, env.target(name), lambda: stack.serves(stack.direct_url(name)),
                                 wait_s=0.1)  # names the policy if that is why
            raise
        alerts.recovered()
    window = sc.scaled(30)
    # one full rolling window after recovery at least; longer while the hurt replica's traffic is not
    # yet judged steady, up to the steady-state SLA
    sc.observe_steady(t_end, at_least_s=2 * window + 1, until=t_end + env.slas.steady_state_s + window,
                      steady=lambda recs: steady_seen(served_by(recs, name), t_end, window, env.slas))
    alerts.settle()  # under the same load: each expected alert fires, pages and clears, or its time runs out
    records = sc.stop_load()
    stack.attribute_replicas(records)  # which replica served each request, where no pool header said so
    restarts = target.restart_count() - restarts_before
    stage1 = []
    if kind is not None:
        if kind == "gpu-driver-reset":  # the restart's own count: a supervisor's is not what it raised
            checks: dict[str, Callable[..., bool]] = {
                "restart_count": lambda n, b=restarts_before: n is not None and n > b}
        else:
            checks = {"restarts_seen": lambda n: n >= 1}
        evidence["restarts_seen"] = restarts
        stage1 = [fault_happened(evidence, **checks)]
    # replica-level recovery: its own probes and the traffic it served (others may cover for it meanwhile)
    # GPU memory judged on each of the hurt target's GPUs; no fault here touches the GPU itself (the driver
    # reset is a container restart), so any Xid new during the scenario fails it (expected_xids None)
    rv = recovery_verdict((t_inject, t_end), sc.timeline, served_by(records, name), env.slas, restarts=restarts,
                          crash=kind in ("crash-sigkill", "gpu-driver-reset"), steady_window_s=window, target=name,
                          fault=kind)
    # the fault may cost what it held when it struck (to the engine's death) plus the error budget
    t_dead = t_inject + float(evidence.get("engine_died_after_s", 0.0))
    allowance = fault_allowance(records, (t_inject, t_dead) if kind is not None else None, env.slas.error_budget)
    av = accounting_verdict(records, stack.server_log(records=records), failed_max=allowance)
    rep.attach_table(latency_table(records, env.slas.latency), name="latency per prompt class")
    add_recovery(summary, rv, av, fault=kind is not None, target=name)
    if stage1:
        sc.judge("the fault really happened", stage1)
    sc.judge("the system behaved", [rv, av])
    # a fault that did not happen is no missed alert: stage 1 decides whether a silence counts
    sc.judge("the monitoring saw it", [alerts.verdict(fault_proven=all(v.ok for v in stage1), timeline=sc.timeline)])


# the matrix: every fault under steady load; the restart and crash faults under Poisson arrivals too
MATRIX = [(k, "steady-users") for k in ("gpu-driver-reset", "crash-sigkill", "engine-death-exit0",
                                        "nccl-rank-freeze", "nccl-rank-link-cut", "nccl-timeout-allreduce-hang")]
MATRIX += [(k, "poisson") for k in ("gpu-driver-reset", "crash-sigkill")]
# the release-checklist item each fault proves (chaos.report.checklist)
PROVES = {"gpu-driver-reset": "gpu-driver-reset", "nccl-rank-freeze": "nccl-timeout", "nccl-rank-link-cut": "nccl-timeout",
          "nccl-timeout-allreduce-hang": "nccl-timeout"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each (fault, load) of the matrix against every target the fault hurts; the id names the target."""
    if metafunc.function is test_replica_recovers:
        metafunc.parametrize("kind, load, target", hurt_params(
            metafunc.config, MATRIX, {k: [pytest.mark.proves(v)] for k, v in PROVES.items()}))
    elif metafunc.function is test_baseline_no_fault:
        metafunc.parametrize("kind, load, target", hurt_params(metafunc.config, [(None, l) for l in LOADS]))


@pytest.mark.destructive
def test_replica_recovers(stack: StackHandle, scenario: Callable[..., Scenario], summary: SummaryCollector,
        monitoring: AlertMonitor, kind: str, load: str, target: str) -> None:
    run_recovery(stack, scenario, summary, monitoring, kind, load, target)


def test_baseline_no_fault(stack: StackHandle, scenario: Callable[..., Scenario], summary: SummaryCollector,
        monitoring: AlertMonitor, kind: None, load: str, target: str) -> None:
    run_recovery(stack, scenario, summary, monitoring, None, load, target)


def _standby(stack: StackHandle, tmp_path: Path, **changes: Any) -> tuple[Any, Any]:
    """A new replica shaped like the smallest stable one, on free ports, reached directly (no proxies)."""
    requires(stack.env, plan.no_local_standby)
    return stack.standby(tmp_path, **changes)


@pytest.mark.proves("cold-start")
def test_cold_start_of_a_new_replica(stack: StackHandle, scenario: Callable[..., Scenario], summary: SummaryCollector,
        tmp_path: Path) -> None:
    """Standby capacity: from `start` to the first real completion, against the cold-start SLA."""
    env = stack.env
    rep.labels(epic="Resilience", feature="Recovery", story="cold start (standby SLA)", suite="recovery")
    cfg, target = _standby(stack, tmp_path)
    url = f"http://{cfg.host}:{cfg.port}"
    sc = scenario("cold-start", hurt=[])
    try:
        with sc.phase("start a new replica"):
            t0 = time.time()
            target.start()
        with sc.phase("wait until it serves a real completion"):
            sc.poll(lambda: stack.serves(url), timeout=env.slas.cold_start_s * 2,
                    every=0.05)
            took = time.time() - t0
        logs = target.logs(40)
    finally:
        target.remove()
    from chaos import Verdict

    v = Verdict("cold start", window=(t0, t0 + took))
    v.add("time_to_serve_s", env.slas.cold_start_s, round(took, 3), took <= env.slas.cold_start_s,
          "process start -> first successful completion")
    v.add("startup_line_logged", "Application startup complete.", "Application startup complete." in logs,
          "Application startup complete." in logs)
    summary.set("recovery", cold_start_s=round(took, 2))
    sc.judge("the new replica served in time", [v])


@pytest.mark.destructive
def test_on_failure_policy_is_caught(stack: StackHandle, summary: SummaryCollector, tmp_path: Path) -> None:
    """Negative control: vLLM's engine death exits 0, so `restart: on-failure` never brings it back.
    The recovery check must fail, and say why."""
    env = stack.env
    rep.labels(epic="Resilience", feature="Recovery", story="restart policy on-failure (negative control)",
               suite="recovery")
    cfg, target = _standby(stack, tmp_path, restart_policy="on-failure")
    url = f"http://{cfg.host}:{cfg.port}"
    try:
        target.start()
        target.wait_healthy(env.slas.cold_start_s)
        with rep.phase("engine death (exit 0) on a replica with restart: on-failure"):
            faults.engine_death(target, cfg.backend, sim_url=url, token=stack.admin_token(tmp_path)).inject()
        with pytest.raises(AssertionError) as caught:
            with rep.phase("expect: it never comes back, and the verdict says why"):
                check_restart_policy(target, cfg, lambda: stack.serves(url),
                                     wait_s=min(env.slas.recovery_s, 10.0))
    finally:
        target.remove()
    msg = str(caught.value)
    rep.attach_text(msg, "verdict (expected to fail)")
    summary.set("recovery", on_failure_caught="yes")
    assert "on-failure" in msg and "exit code 0" in msg, msg
