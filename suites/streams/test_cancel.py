"""Cancellation frees compute: streaming clients hang up (really close their TCP connections) after their k-th
token, at the client side of the gateway, while other streams read on; within `slas.cancel_s` every hop must let
their requests go: the gateway ends its upstream request (the fault proxy in front of each replica logs it ended
by client disconnect) and the engine stops generating for them (running requests and generation rate back to
the staying streams', from each replica's /metrics).

The simulator's `instant` profile would finish a long answer before a client could hang up, so its decode is
slowed to a GPU's pace for the experiment (simulator fault `slow`, reverted after); a real engine runs at its own
pace (vLLM on 2 CPU cores: 60 tokens in 1-2 s), and the staying streams are closed once judged, so no engine
need finish their 2000 tokens. Negative control: a second
reference gateway with the planted defect upstream-held-after-disconnect keeps reading the upstream after its
client left; the verdict must catch it.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from chaos import Experiment, ExperimentRun, Run, StackHandle, SummaryCollector, faults
from chaos import evidence as rep
from chaos.experiment.events import VerdictReached
from chaos.load.hangup import HangUp
from chaos.observe.engine_load import EngineLoadSampler
from chaos.verify.cancel import cancel_verdict
from chaos.verify.verdict import Verdict

SLOW_FACTOR = 20  # the simulator's instant step x 20: 20 ms a decode step, ~50 tokens/s per stream
# 4 streams hung up after 60 tokens (~1.2 s of decode: long enough for the sweeps to see them run) beside 2 that
# stay; 2000 tokens each, so a held stream would decode for 40 s, far past any cancel_s
STEP = HangUp(clients=4, after_tokens=60, stay=2, max_tokens=2000, deadline_s=90.0)
AFTER_S = 1.5  # sweeps after cancel_s for the freed generation rate (the verdict needs >= 0.5 s of them)
HELD_DEFECT = "upstream-held-after-disconnect"  # chaos/stack/gateway/defects.py, by name: suites never import it


def _cancel_steps(stack: StackHandle, url: str | None, out: list[Verdict]) -> Callable[[Run], None]:
    env = stack.env

    def steps(run: Run) -> None:
        names = [t.name for t in env.targets]
        sims = [n for n in names if stack.backend(n) == "simulator"]
        if sims:
            run.inject(faults.AllOf([stack.sim_admin_fault(n, "slow", factor=SLOW_FACTOR) for n in sims]))
        engines = run.add_observer(EngineLoadSampler({n: stack.direct_url(n) for n in names}).start())
        t0 = time.time()
        hung = run.hang_up(STEP, url=url)
        run.wait(env.slas.cancel_s + AFTER_S, phase="the hops let go")
        read_at = time.time()
        rows = stack.proxy_rows(since=t0 - 1.0) if all(env.fault_proxy_of(n) for n in names) else None
        engines.stop()
        run.revert()  # the simulators decode at full speed again: the staying (and any held) streams end at once
        hung.finish()  # the staying streams closed: the load they stood for is judged
        v = cancel_verdict(hung, rows, engines.load, cancel_s=env.slas.cancel_s, read_at=read_at,
                           no_proxy_why="" if rows is not None else
                           "a replica without a fault proxy in front: nothing logs when its upstream request ended")
        rep.attach_text("\n".join(f"{c.role} {c.request_id}: tokens={c.tokens} sent={c.t_sent:.3f} "
                                  f"hangup={c.t_hangup} end={c.t_end} error={c.error}" for c in hung.clients),
                        "clients")
        out.append(v)

    return steps


@pytest.mark.proves("cancel-frees-compute")
def test_hung_up_clients_free_the_engine(stack: StackHandle, run_experiment: Callable[..., ExperimentRun],
                                         summary: SummaryCollector) -> None:
    rep.labels(epic="Resilience", feature="Cancellation", story="clients hang up mid-stream", suite="streams")
    rep.title(f"{STEP.clients} clients hang up after {STEP.after_tokens} tokens -> every hop lets go within "
              f"slas.cancel_s {stack.env.slas.cancel_s:g} s")
    got: list[Verdict] = []

    def steps(run: Run) -> None:
        _cancel_steps(stack, None, got)(run)
        summary.set("streams", cancel="FAILED" if not got[0].ok else "not proven" if got[0].unproven else "ok")
        run.judge("every hop let go", got)

    run_experiment(Experiment("streams-cancel", steps=steps))


def test_a_gateway_that_holds_the_upstream_is_caught(stack: StackHandle,
        extra_gateway: Callable[..., AbstractContextManager[str]],
        run_experiment: Callable[..., ExperimentRun], summary: SummaryCollector) -> None:
    """Negative control: the reference gateway with a planted defect reads the upstream on after its client
    left; the upstream and engine rows must fail."""
    rep.labels(epic="Resilience", feature="Cancellation", story="negative control: upstream held", suite="streams")
    got: list[Verdict] = []

    def steps(run: Run) -> None:
        _cancel_steps(stack, url, got)(run)
        v = got[0]  # journalled, not asserted: it must fail
        run.publish(VerdictReached, name=f"negative control, expected to fail: {v.name}", ok=v.ok,
                    failures=tuple(r.line() for r in v.failures), rows=tuple(r.line() for r in v.rows))

    with extra_gateway(extra_env={"CHAOS_PLANTED_DEFECT": HELD_DEFECT}) as url:
        run_experiment(Experiment("streams-cancel-held", steps=steps))
    v = got[0]
    failed = {r.check for r in v.failures}
    rep.attach_text("\n".join(r.line() for r in v.rows), "verdict on the defective gateway (expected to fail)")
    caught = {"upstream_let_go_s", "engine_running_back_s"} <= failed
    summary.set("streams", cancel_held_caught="yes" if caught else "NO")
    assert caught, f"a gateway that holds the upstream open was not caught: {[r.line() for r in v.rows]}"
