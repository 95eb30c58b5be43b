"""Regressions: every fault schedule kept in this folder (`chaos explore` writes failing ones as
failures/schedule-<hash>.yaml; copy one here once its bug is fixed) runs again on every game day,
judged as `chaos explore` judges it: served again within the recovery SLA after every fault was
reverted, nothing lost, the client rules on retries, and the breaker's rules (a rollback held until an
operator reset, every other trip healed) where the gateway shows its breakers."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from chaos import Experiment, ExperimentRun, Run, StackHandle, SummaryCollector, plan, requires
from chaos import evidence as rep
from chaos.explore.schedule import load_schedule
from chaos.explore.wiring import explorer_for

KEPT = sorted(Path(__file__).parent.glob("schedule-*.yaml"))


@pytest.mark.destructive
@pytest.mark.parametrize("path", KEPT, ids=[p.stem for p in KEPT])
def test_kept_schedule(stack: StackHandle, run_experiment: Callable[..., ExperimentRun], summary: SummaryCollector,
        path: Path) -> None:
    env = stack.env
    requires(env, plan.no_local_standby)  # its restarts and kills need targets this run supervises
    schedule = load_schedule(path)
    rep.labels(epic="Resilience", feature="Regressions", story=path.stem, suite="regressions")
    rep.title(f"{path.name}: " + "; ".join(f.describe() for f in schedule.faults)
              + (f" (kept for: {schedule.breaks})" if schedule.breaks else ""))

    def steps(run: Run) -> None:
        ex = explorer_for(env, stack, run.out_dir, run.bus, run.method.stop, allow_destructive=True,
                          server_log=lambda records: stack.server_log(records=records))
        outcome = ex.run_one(schedule, keep=False)
        summary.count("regressions", "schedules")
        for note in outcome.errors:
            rep.attach_text(note, "a fault that would not inject or revert")
        run.judge("healed, nothing lost, clients kept their rules", outcome.verdicts)

    run_experiment(Experiment(path.stem, steps=steps))
