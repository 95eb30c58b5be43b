"""Progress truth: a replica whose /health says 200 while it decodes nothing (vLLM issue 45094: a decode deadlock
that /health called healthy) must not stay so longer than slas.health_truth_s. A decode stall on a stack that acts
on progress (the embedded one: its gateway ejects the replica, its supervisor restarts it) passes, and one that
does not fails; the same stall where only health is watched is the negative control, which must be caught, naming
the seconds; a plain restart passes. Judged from the replica's own counters (vllm:generation_tokens_total,
vllm:num_requests_running) and, where a fault proxy stands in front of it, from its streams' pauses."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from chaos import ExperimentRun, StackHandle, faults, plan, requires
from chaos.faults.gateway import health_only
from chaos.scenarios import progress_run


def _target(stack: StackHandle) -> str:
    requires(stack.env, plan.no_stall_target)
    name = plan.stall_target(stack.env)
    assert name is not None
    return name


@pytest.mark.destructive
@pytest.mark.proves("progress-truth")
def test_decode_stall_is_ejected_and_restarted(stack: StackHandle, run_experiment: Callable[..., ExperimentRun]) -> None:
    """The stack acts on a decode stall before /health's lie outlasts the SLA: it restarts the replica (the embedded
    stack: its gateway ejects it, its supervisor restarts it) or the replica stops saying healthy. A stack that
    watches health only fails here, in progress truth's words: that is the finding, not a skip."""
    name = _target(stack)
    run_experiment(progress_run(stack, "decode-stall", name, lambda: stack.decode_stall(name)))


@pytest.mark.destructive
def test_decode_stall_where_only_health_is_watched_is_caught(stack: StackHandle,
                                                             run_experiment: Callable[..., ExperimentRun]) -> None:
    """Negative control: a stack that watches health only (real vLLM's own /health, or the reference gateway told
    to), the stall held twice the SLA: progress truth fails."""
    name = _target(stack)
    acts_on_progress = plan.no_progress_gateway(stack.env) is None

    def fault() -> faults.Fault:
        stall = stack.decode_stall(name)
        return faults.AllOf([health_only(stack.env), stall]) if acts_on_progress else stall

    with pytest.raises(AssertionError) as caught:
        run_experiment(progress_run(stack, "decode-stall (health watched only)", name, fault, restarted=False))
    msg = str(caught.value)
    assert f"progress_truth {name}" in msg and "/health said 200 for" in msg and "while nothing decoded" in msg, msg
    if stack.env.fault_proxy_of(name) is not None:  # the second source, the streams' pauses, saw the same stall
        assert "fault proxy's streams: /health said 200 for" in msg, msg


@pytest.mark.destructive
def test_plain_restart_passes_progress_truth(stack: StackHandle, run_experiment: Callable[..., ExperimentRun]) -> None:
    name = _target(stack)
    run_experiment(progress_run(stack, "restart", name, lambda: faults.restart(stack.target(name))))
