"""Recovery: the replica comes back within its SLAs after a GPU driver reset, a crash, an engine
death that exits 0, an NCCL timeout (rank frozen or its link cut), and a cold start; no request lost.

Matrix: targets (stable replicas of the environment) x faults x load profiles, each with a
no-fault baseline under the same load. Every verdict has two stages: the fault really happened,
then the system behaved.
"""
from __future__ import annotations

import signal
import time

import allure
import pytest

from chaos import faults
from chaos.report import allure as rep
from chaos.report.tables import latency_table
from chaos.targets import admin_token
from chaos.verify.accounting import accounting_verdict, read_server_log
from chaos.verify.recovery import recovery_verdict
from suites.conftest import fault_happened, judge

LOADS = {"steady-users": {}, "poisson": {"rate": 20.0, "users": None, "shape": "rate"}}


def _hurt_target(stack) -> str:
    stable = stack.targets_in("stable")
    return stable[0] if stable else pytest.skip("environment has no stable target")


def make_fault(kind: str, stack, name: str):
    """The fault objects of this suite, aimed at target `name`."""
    t = stack.target(name)
    cfg = stack.env.target(name)
    if kind == "gpu-driver-reset":
        return faults.restart(t)
    if kind == "crash-sigkill":
        return faults.kill(t, signal.SIGKILL)
    if kind == "engine-death-exit0":
        return faults.sim_fault(stack.direct_url(name), admin_token(stack.run_id), "engine-death")
    if kind == "nccl-rank-freeze":
        return faults.rank_freeze(t, rank=1)
    if kind == "nccl-rank-link-cut":
        if not cfg.rank_proxies or stack.toxiproxy is None:
            pytest.skip(f"target {name} has no rank link through Toxiproxy")
        return faults.rank_link_cut(stack.toxiproxy, cfg.rank_proxies[0])
    raise ValueError(kind)


# instantaneous faults are over once injected; lasting ones are held until the engine has died
INSTANT = {"gpu-driver-reset", "crash-sigkill", "engine-death-exit0"}


def run_recovery(stack, scenario, summary, kind: str | None, load: str) -> None:
    env = stack.env
    name = _hurt_target(stack)
    rep.labels(epic="Resilience", feature="Recovery", story=kind or "baseline", suite="recovery")
    rep.title(f"{kind or 'no fault (baseline)'} on {name} under {load} load")
    sc = scenario(f"{kind or 'baseline'}-{name}-{load}", hurt=[name])
    sc.observe(stack.direct_url(name))
    sc.observe(env.endpoints.api, source="api")
    with sc.phase("start load", profile=load):
        sc.start_load(duration_s=120.0, **LOADS[load])
    sc.steady_state(2.0)
    target = stack.target(name)
    restarts_before = target.restart_count()
    evidence: dict = {}
    if kind is None:
        with sc.phase("no fault: same load, same observers"):
            time.sleep(sc.scaled(20))
        t_inject = t_end = time.time()
    else:
        fault = make_fault(kind, stack, name)
        t_inject = time.time()
        info = sc.inject(fault)
        # the stack must heal itself: recovery counts from the moment the fault was injected
        t_end = t_inject
        evidence = dict(getattr(fault, "evidence", {}) or {}, **(info or {}))
        if kind not in INSTANT:
            # hold until the engine has died of the timeout (its supervisor restarts it), then undo the cause
            timeout = env.target(name).simulator.collective_timeout_s if env.target(name).simulator else 300
            deadline = time.time() + timeout + 15
            while time.time() < deadline and target.restart_count() == restarts_before:
                time.sleep(0.1)
            evidence["engine_died_after_s"] = round(time.time() - t_inject, 2)
        # the engine died of the fault and was replaced: the frozen rank or cut link's victim is gone
        sc.revert(check=target.restart_count() == restarts_before)
        sc.wait_recovered(t_end, env.slas.recovery_s * 2)
    with sc.phase("steady state after recovery"):
        time.sleep(2 * sc.scaled(30) + 1)  # room for one full rolling window after recovery
    records = sc.records = sc.load.stop().records
    sc.load = None
    restarts = target.restart_count() - restarts_before
    stage1 = []
    if kind is not None:
        checks = {"restarts_seen": lambda n: n >= 1} if kind != "gpu-driver-reset" else {}
        evidence["restarts_seen"] = restarts
        stage1 = [fault_happened(evidence, **checks)]
    # replica-level recovery: its own probes and the traffic it served (others may cover for it meanwhile)
    served = [r for r in records if (r.served_by or "").endswith(name)] or records
    rv = recovery_verdict((t_inject, t_end), sc.timeline, served, env.slas, restarts=restarts,
                          crash=kind in ("crash-sigkill", "gpu-driver-reset"), steady_window_s=sc.scaled(30))
    av = accounting_verdict(records, read_server_log(*stack.request_logs()))
    rep.attach_table(latency_table(records, env.slas.latency), name="latency per prompt class")
    summary.count("recovery", "scenarios")
    if rv.data.get("first_completion_s") is not None and kind is not None:
        summary.worst("recovery", "worst_recovery_s", round(rv.data["first_completion_s"], 2))
    summary.add("recovery", lost=av.data.get("outcomes", {}).get("failed", 0))
    if stage1:
        judge("the fault really happened", stage1)
    judge("the system behaved", [rv, av])


@pytest.mark.destructive
@pytest.mark.parametrize("load", list(LOADS), ids=list(LOADS))
@pytest.mark.parametrize("kind", ["gpu-driver-reset", "crash-sigkill", "engine-death-exit0", "nccl-rank-freeze",
                                  "nccl-rank-link-cut"])
def test_replica_recovers(stack, scenario, summary, kind: str, load: str) -> None:
    if load != "steady-users" and kind not in ("gpu-driver-reset", "crash-sigkill"):
        pytest.skip("the poisson profile runs for the restart and crash faults only (time budget)")
    run_recovery(stack, scenario, summary, kind, load)


@pytest.mark.parametrize("load", list(LOADS), ids=list(LOADS))
def test_baseline_no_fault(stack, scenario, summary, load: str) -> None:
    run_recovery(stack, scenario, summary, None, load)
