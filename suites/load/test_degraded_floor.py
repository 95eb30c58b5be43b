"""Degraded mode: the seed's checklist asks for the least a replica must still deliver with its
fast paths off (continuous batching off: max_num_seqs 1, on the simulator and on vLLM alike). A
standby replica is started in that configuration beside the stack and the environment's load
profile is sent to it directly; its output tokens per second and E2E P99 are judged against the
environment's `degraded_floor`."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from chaos import Experiment, ExperimentRun, Run, StackHandle, SummaryCollector, latency_table, plan, requires
from chaos import evidence as rep
from chaos.verify.load import degraded_floor_verdict


@pytest.mark.proves("degraded-floor")
def test_degraded_mode_floor(stack: StackHandle, run_experiment: Callable[..., ExperimentRun], summary: SummaryCollector,
        tmp_path: Path) -> None:
    env = stack.env
    requires(env, plan.no_degraded_floor, plan.no_local_standby)
    floor = env.degraded_floor
    assert floor is not None  # requires() skipped an environment without one
    rep.labels(epic="Performance", feature="Load", story="degraded-mode floor", suite="load")
    rep.title(f"a replica with {floor.simulator or floor.vllm} against the floor: >= {floor.min_tokens_per_s:g} "
              f"tokens/s, E2E P99 <= {floor.max_e2e_p99_s:g} s")
    cfg, target = stack.standby(tmp_path, name="degraded", simulator=floor.simulator, vllm=floor.vllm)
    url = f"http://{cfg.host}:{cfg.port}"

    def steps(run: Run) -> None:
        try:
            with run.phase("start the degraded replica", changes=floor.simulator if cfg.simulator else floor.vllm):
                target.start()
                served = run.poll(lambda: stack.serves(url), timeout=env.slas.cold_start_s, every=0.1)
                assert served, f"the degraded replica did not serve within cold_start_s {env.slas.cold_start_s:g} s"
            run.observe(url, source="degraded", health=False)
            with run.phase("the environment's load, sent to it directly", users=floor.users):
                run.start_load(url=url, users=floor.users, duration_s=run.scaled(floor.duration_s))
                records = run.finish_load()
        finally:
            target.remove()
        rep.attach_table(latency_table(records, env.slas.latency), name="latency per prompt class")
        v = degraded_floor_verdict(records, floor)
        summary.set("load", degraded_tokens_per_s=v.row("tokens_per_s").measured)
        run.judge("the degraded replica kept its floor", [v])

    run_experiment(Experiment("degraded-floor", steps=steps))
