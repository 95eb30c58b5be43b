"""Recovery: the replica comes back within its SLAs after a GPU driver reset, a crash, an engine
death that exits 0, an NCCL timeout (rank frozen, its link cut, or hung in the all-reduce), a TP rank
killed (SIGKILL), and a cold start; no request lost. On real vLLM with the engine plugin
(vllm.engine_faults) the engine death is a step exception inside the model runner and the all-reduce
hang acts inside the engine. Every verdict carries the health-truth rows: how long /health said
healthy while completions failed (a killed TP worker is one of vLLM's known lies).

Matrix: targets x faults x load profiles, each with a no-fault baseline under the same load. The
targets are the ones the environment marks for each fault (a stable target, or `hurt:`), or those
`--target` names; the NCCL faults keep those with TP > 1 (chaos/env/hurt.py). Each test id names its
target, as the plan does. Every verdict has two stages: the fault really happened, then the system
behaved; and where the environment has a `monitoring:` section, the team's own alerts saw it (each
expected alert fired, paged and cleared in time; the baseline paged nobody).
"""
from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos import AlertMonitor, Experiment, ExperimentRun, Fault, Run, StackHandle, SummaryCollector, faults, plan, requires
from chaos import evidence as rep
from chaos.pytest_plugin import hurt_params
from chaos.scenarios import detection_control, recovery_run
from chaos.verify.restart_policy import check_restart_policy

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
    if kind == "nccl-rank-freeze":  # the target was chosen with TP > 1 (chaos/env/hurt.py)
        return faults.rank_freeze(t, rank=1)
    if kind == "nccl-rank-kill":  # ... and so is this one: SIGKILL of TP rank 1 (a GPU fallen off the bus)
        return faults.rank_kill(t, rank=1)
    if kind == "nccl-timeout-allreduce-hang":  # real vLLM with the engine plugin, TP > 1 (chaos/env/hurt.py)
        fault = stack.engine_plugin_fault(name, "allreduce-hang")
        assert fault is not None, "chaos/env/hurt.py picks an all-reduce hang only where the engine plugin is on"
        return fault
    if kind == "nccl-rank-link-cut":  # ... and a rank link through Toxiproxy
        assert stack.toxiproxy is not None, "chaos/env/hurt.py picks a link cut only where Toxiproxy carries the rank link"
        return faults.rank_link_cut(stack.toxiproxy, cfg.rank_proxies[0])
    raise ValueError(kind)


# instantaneous faults are over once injected; lasting ones are held until the engine has died. A killed
# rank is instant: nothing can be undone, the engine's worker monitor notices the death at once (no timeout
# to wait for), the engine dies and its supervisor restarts it
INSTANT = {"gpu-driver-reset", "crash-sigkill", "engine-death-exit0", "nccl-rank-kill"}
# the faults whose victim is a process SIGKILLed on its GPU: the recovery verdict judges each GPU's memory
# released and taken again (a rank's peers left holding theirs after the engine died is what it catches)
CRASH = {"crash-sigkill", "gpu-driver-reset", "nccl-rank-kill"}


def run_recovery(stack: StackHandle, run_experiment: Callable[..., ExperimentRun], summary: SummaryCollector,
        monitoring: AlertMonitor, kind: str | None, load: str, name: str) -> None:
    """`kind` on target `name` under `load` (None: the baseline, same load and observers, no fault): the
    replica heals itself within the SLAs, nothing lost beyond the fault's allowance, the alerts saw it."""
    # lasting faults are held until the engine died of its timeout (its supervisor restarts it), then undone;
    # a driver reset is proven by its own restart count (a supervisor's restart is not what it raised)
    run_experiment(recovery_run(
        stack, monitoring, summary, kind, name, load, profile=LOADS[load],
        fault=None if kind is None else lambda: make_fault(kind, stack, name),
        lasting=kind not in INSTANT, crash=kind in CRASH,
        proof="restart_count" if kind == "gpu-driver-reset" else "restarts_seen"))


# the matrix: every fault under steady load; the restart and crash faults under Poisson arrivals too. The
# killed rank runs before the freeze: a scenario whose alerts monitoring.expect names waits until they cleared,
# one without (the freeze on local) ends with LLMReplicaRestarted still firing, and the kill's own firing
# could not be told from that left-over one ("not proven", measured when it ran second)
MATRIX = [(k, "steady-users") for k in ("gpu-driver-reset", "crash-sigkill", "engine-death-exit0", "nccl-rank-kill",
                                        "nccl-rank-freeze", "nccl-rank-link-cut", "nccl-timeout-allreduce-hang")]
MATRIX += [(k, "poisson") for k in ("gpu-driver-reset", "crash-sigkill")]
# the release-checklist item each fault proves (chaos.report.checklist). None for the killed rank: its
# engine dies of the worker monitor seeing a process exit, not of a collective timing out, and no GPU
# driver was reset; its verdict is reported, it proves no seed item
PROVES = {"gpu-driver-reset": "gpu-driver-reset", "nccl-rank-freeze": "nccl-timeout", "nccl-rank-link-cut": "nccl-timeout",
          "nccl-timeout-allreduce-hang": "nccl-timeout"}


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Each (fault, load) of the matrix against every target the fault hurts; the id names the target."""
    if metafunc.function is test_replica_recovers:
        metafunc.parametrize("kind, load, target", hurt_params(
            metafunc.config, MATRIX, {k: [pytest.mark.proves(v)] for k, v in PROVES.items()}))
    elif metafunc.function is test_baseline_no_fault:
        metafunc.parametrize("kind, load, target", hurt_params(metafunc.config, [(None, l) for l in LOADS]))
    elif metafunc.function is test_slow_but_healthy_control:
        metafunc.parametrize("kind, load, target", hurt_params(metafunc.config, [(None, "long-prefills")]))


@pytest.mark.proves("detection-signals")
def test_slow_but_healthy_control(stack: StackHandle, run_experiment: Callable[..., ExperimentRun],
        summary: SummaryCollector, monitoring: AlertMonitor, kind: None, load: str, target: str) -> None:
    """No fault, the longest prompts at the load's peak: each signal's false alarms, the team's alerts included (the
    column beside every fault's detection table; it runs first), and the engine's execute-model timeout would not
    kill such work."""
    run_experiment(detection_control(stack, summary, target, monitoring))


@pytest.mark.destructive
def test_replica_recovers(stack: StackHandle, run_experiment: Callable[..., ExperimentRun], summary: SummaryCollector,
        monitoring: AlertMonitor, kind: str, load: str, target: str) -> None:
    run_recovery(stack, run_experiment, summary, monitoring, kind, load, target)


def test_baseline_no_fault(stack: StackHandle, run_experiment: Callable[..., ExperimentRun], summary: SummaryCollector,
        monitoring: AlertMonitor, kind: None, load: str, target: str) -> None:
    run_recovery(stack, run_experiment, summary, monitoring, None, load, target)


def _standby(stack: StackHandle, tmp_path: Path, **changes: Any) -> tuple[Any, Any]:
    """A new replica shaped like the smallest stable one, on free ports, reached directly (no proxies)."""
    requires(stack.env, plan.no_local_standby)
    return stack.standby(tmp_path, **changes)


@pytest.mark.proves("cold-start")
def test_cold_start_of_a_new_replica(stack: StackHandle, run_experiment: Callable[..., ExperimentRun],
        summary: SummaryCollector, tmp_path: Path) -> None:
    """Standby capacity: from `start` to the first real completion, against the cold-start SLA."""
    env = stack.env
    rep.labels(epic="Resilience", feature="Recovery", story="cold start (standby SLA)", suite="recovery")
    cfg, target = _standby(stack, tmp_path)
    url = f"http://{cfg.host}:{cfg.port}"

    def steps(run: Run) -> None:
        try:
            with run.phase("start a new replica"):
                t0 = run.clock()
                target.start()
            with run.phase("wait until it serves a real completion"):
                run.poll(lambda: stack.serves(url), timeout=env.slas.cold_start_s * 2,
                         every=0.05)
                took = run.clock() - t0
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
        run.judge("the new replica served in time", [v])

    run_experiment(Experiment("cold-start", steps=steps))


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
