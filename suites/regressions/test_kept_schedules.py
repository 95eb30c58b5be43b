"""Regressions: every fault schedule kept in this folder (`chaos explore` writes failing ones as
failures/schedule-<hash>.yaml; copy one here once its bug is fixed) runs again on every game day,
judged as `chaos explore` judges it: served again within the recovery SLA after every fault was
reverted, nothing lost, the client rules on retries."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos import plan
from chaos.experiment.gameday import make_fault
from chaos.experiment.plan import PlanFault
from chaos.explore.explorer import Explorer
from chaos.explore.schedule import load_schedule
from chaos.load.runner import start_env_load
from chaos.report import allure as rep
from chaos.stack.launcher import completion_ok
from suites.conftest import requires

KEPT = sorted(Path(__file__).parent.glob("schedule-*.yaml"))


@pytest.mark.destructive
@pytest.mark.parametrize("path", KEPT, ids=[p.stem for p in KEPT])
def test_kept_schedule(stack, scenario, summary, path: Path) -> None:
    env = stack.env
    requires(env, plan.no_local_standby)  # its restarts and kills need targets this run supervises
    schedule = load_schedule(path)
    rep.labels(epic="Resilience", feature="Regressions", story=path.stem, suite="regressions")
    rep.title(f"{path.name}: " + "; ".join(f.describe() for f in schedule.faults)
              + (f" (kept for: {schedule.breaks})" if schedule.breaks else ""))
    sc = scenario(path.stem)
    ex = Explorer(env, stack, sc.out_dir, sc.bus, sc.method.stop,
                  make_fault=lambda f: make_fault(env, stack, PlanFault(kind=f.kind, target=f.target, proxy=f.proxy,
                                                                        **f.params()), allow_destructive=True),
                  start_load=lambda out, seconds, seed: start_env_load(env, out_dir=out / "load", duration_s=seconds,
                                                                       seed=seed),
                  probe=lambda url: completion_ok(url, env.endpoints.model, 2.0, api_key=env.endpoints.api_key),
                  server_log=lambda: stack.server_log())
    outcome = ex.run_one(schedule, keep=False)
    summary.count("regressions", "schedules")
    for note in outcome.errors:
        rep.attach_text(note, "a fault that would not inject or revert")
    sc.judge("healed, nothing lost, clients kept their rules", outcome.verdicts)
