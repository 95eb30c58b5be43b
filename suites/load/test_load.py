"""Load: the production mix (512 / 8k / 32k tokens at 7:2:1) and 100 consecutive 32k-token requests,
judged per prompt class: TTFT, TPOT and E2E P99 over every attempt (a failed attempt is an SLO miss),
the error rate against the error budget, the goodput share against its floor, the 32k class's own
failure rate, the burst's latency drift, and the stored baseline (`chaos baseline record`).

A missing baseline is a skip of the regression check after everything else was judged, with the
command that records one; never a silent write.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from chaos import Experiment, ExperimentRun, Run, StackHandle, SummaryCollector, Verdict, accounting_verdict, latency_table
from chaos import evidence as rep
from chaos.load import baseline as bl
from chaos.verify.load import burst_drift, load_verdict, long_prompt_failures


def baseline_gpu(baseline: dict[str, Any]) -> Verdict:
    """The seed's baseline record holds the GPU's temperature and power; without them it is not proven."""
    v = Verdict("baseline GPU figures")
    gpu = baseline.get("gpu") or {}
    if gpu.get("visible") and gpu.get("temperature_c") and gpu.get("power_w"):
        v.add("gpu_figures", "temperature and power recorded",
              f"{gpu['temperature_c']['max']} C, {gpu['power_w']['max']} W (max)", True)
    else:
        v.not_proven("gpu_figures", "temperature and power recorded", "none",
                     f"the baseline holds no GPU figures ({gpu.get('why', 'no gpu entry')})", items=("baseline-gpu",))
    return v


# the release-checklist items each workload proves (chaos.report.checklist)
PROVES = {"mix-7-2-1": ("mix-7-2-1", "xl-failure-rate", "baseline-gpu"),
          "burst-100x32k": ("burst-100x32k", "xl-failure-rate", "baseline-gpu")}


@pytest.mark.slow
@pytest.mark.parametrize("workload", [pytest.param(w, marks=pytest.mark.proves(*PROVES.get(w, ())))
                                      for w in bl.WORKLOADS])
def test_load_against_sla_and_baseline(stack: StackHandle, run_experiment: Callable[..., ExperimentRun],
        summary: SummaryCollector, workload: str) -> None:
    env = stack.env
    rep.labels(epic="Performance", feature="Load", story=workload, suite="load")
    rep.title(f"{workload} against the SLAs and the stored baseline")

    def steps(run: Run) -> None:
        run.observe(env.endpoints.api)
        xl = bl.largest_class(env)
        with run.phase("run load", workload=workload):
            run.start_load(**bl.workload_load(env, workload))  # the burst runs to completion, bounded by its SLA
            records = run.finish_load()
        assert records, "the load run produced no records"
        rep.attach_table(latency_table(records, env.slas.latency), name="latency per prompt class")
        absent = bl.missing(env, workload)  # the question `chaos env check` asks too
        path = bl.path_for(env, workload)
        baseline = bl.read(path) if path is not None and not absent else None
        verdicts = [load_verdict(records, env.slas, baseline=baseline),
                    long_prompt_failures(records, xl, env.slas.long_prompt_failure_rate),
                    # "lost" against the replicas' own logs; without them it leaves this workload's
                    # items not proven, not the baseline's GPU figures
                    accounting_verdict(records, stack.server_log(records=records), strict_orphans=False,
                                       items=[i for i in PROVES.get(workload, ()) if i != "baseline-gpu"])]
        if workload.startswith("burst"):
            sent = len({r.request_id for r in records if r.prompt_class == xl})
            assert sent == 100, f"the burst sent {sent} {xl} requests, expected 100"
            verdicts.append(burst_drift(records, xl))
        if baseline is not None:
            verdicts.append(baseline_gpu(baseline))
        summary.set("load", **{f"{workload}_goodput_per_s": round(verdicts[0].data["goodput_per_s"], 1)})
        run.judge("latency, errors, goodput and accounting", verdicts)
        if absent:
            pytest.skip(f"SLAs held; regression check skipped: {absent}: run "
                        f"`chaos baseline record --env {env.name} --workload {workload}` and commit the file")

    run_experiment(Experiment(f"load-{workload}", steps=steps))
