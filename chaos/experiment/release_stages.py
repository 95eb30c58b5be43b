"""A gray release's stages as one suite scenario: the release stages of a game-day plan (by default
examples/gameday/gray-release.yaml: shadow traffic first, then read-only traffic of one tier and
region, then core traffic), each set on the environment's gateway, held under the plan's load (its
request attributes, temperature 0), judged by the stage's gate (chaos.experiment.gates, the game
day's own), and rolled back; a stage that fails its gate ends the release there, as a game day does.

Where the environment's gateway has no gray-release admin (`endpoints.gateway_admin` unset, or a
gateway that does not answer GET /admin/release) the scenario is "not proven", saying so.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from chaos.errors import ConfigError
from chaos.experiment.gates import is_shadow, stage_verdict
from chaos.experiment.plan import Plan, PlanExperiment, PlanGate, load_plan
from chaos.verify.verdict import Verdict

DEFAULT_PLAN = Path(__file__).resolve().parents[2] / "examples" / "gameday" / "gray-release.yaml"
PLAN_ENV = "CHAOS_GRAY_RELEASE_PLAN"  # a team's own stages: a game-day plan file with release stages
TAIL_S = 30.0  # load past the last stage: the runner's grace for the records still in flight


def release_plan(path: str | Path | None = None) -> tuple[Plan, list[PlanExperiment], Path]:
    """The plan (CHAOS_GRAY_RELEASE_PLAN, else the example), its release stages, and its path."""
    p = Path(path or os.environ.get(PLAN_ENV) or DEFAULT_PLAN)
    plan = load_plan(p)
    stages = [x for x in plan.experiments if x.release is not None]
    if not stages:
        raise ConfigError(f"{p}: expected release stages (experiments with `release:`), found none")
    if not is_shadow(stages[0].release):
        raise ConfigError(f"{p}: experiments[0]: expected the shadow stage first (canary_weight 0, mirror > 0): "
                          "the seed's gray release compares shadow traffic before any user reaches the canary")
    return plan, stages, p


def no_release_admin(env: Any) -> str | None:
    """Why the stages cannot be set on this environment's gateway (None: they can)."""
    from chaos.observe.gateway import GatewayAdminError, env_admin_call

    if not env.endpoints.gateway_admin:
        return (f"environment {env.name} has no gateway admin endpoint: its gateway has no gray-release admin "
                "(the stages are set through the reference gateway's /admin/release)")
    try:
        env_admin_call(env, "GET", "/admin/release")
    except GatewayAdminError as e:
        return f"the gateway at {env.endpoints.gateway_admin} has no gray-release admin: {e}"
    return None


def load_seconds(plan: Plan, stages: list[PlanExperiment]) -> float:
    """How long the load must run: each stage's baseline window and hold, and a tail."""
    return sum((x.window_s or plan.window_s) + x.hold_s for x in stages) + TAIL_S


def run_stages(sc: Any, env: Any, plan: Plan, stages: list[PlanExperiment], source: Path) -> list[Verdict]:
    """Every stage in order on the scenario `sc`, each judged as it ends (the first failing gate
    raises, so no later stage starts); the stages' verdicts."""
    from chaos.faults.gateway import release_stage

    # the game day's load: the environment's profile with the plan's overrides (attributes, temperature 0)
    sc.start_load(**{**plan.load, "duration_s": load_seconds(plan, stages)})
    verdicts: list[Verdict] = []
    for x in stages:
        assert x.release is not None  # release_plan keeps only release stages
        window = x.window_s or plan.window_s
        sc.wait(window, f"{x.name}: the same load before it")
        sc.inject(release_stage(env, canary_weight=x.release.canary_weight, mirror=x.release.mirror,
                                admit=x.release.admit))
        start = sc.method.t_inject
        sc.hold(x.hold_s)
        sc.revert()
        v = stage_verdict(env, x.release, x.gate or PlanGate(), window, sc.load.records(), (start, sc.method.t_revert_began))
        v.name = f"{x.name}: {v.name}"
        v.data["source"] = f"{source.name}; users' records, the gateway's shadow pairs" if x.release.mirror \
            else f"{source.name}; users' records by attribute and serving pool"
        verdicts.append(v)
        sc.judge(x.name, [v])
    sc.stop_load()
    return verdicts
