"""Gray release: the release stages, shadow traffic compared first, run against the environment's gateway.

Under the release plan's load (users by region, business line and tier; temperature 0 so answers
compare), each stage is set on the gateway, held, judged by its gate, and rolled back:
  1 shadow: users get stable's answers, a share is copied to the canary, and the canary's answers
    must match stable's (diff score, errors, P99 per class) while no user is answered by it;
  2, 3 live: only the admitted traffic reaches the canary, and the canary serves it as stable does.
A stage that fails its gate ends the release: the next never starts. The stages are the game day's
(examples/gameday/gray-release.yaml, or the plan CHAOS_GRAY_RELEASE_PLAN names).
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from chaos import Experiment, ExperimentRun, Run, StackHandle, SummaryCollector, plan, requires
from chaos import evidence as rep
from chaos.experiment.release_stages import no_release_admin, release_plan, run_stages


@pytest.mark.slow
@pytest.mark.proves("gray-release")
def test_gray_release_stages(stack: StackHandle, run_experiment: Callable[..., ExperimentRun], summary: SummaryCollector) -> None:
    env = stack.env
    requires(env, plan.no_canary, no_release_admin)
    release, stages, source = release_plan()
    rep.labels(epic="Traffic switching", feature="Gray release", story="shadow -> live stages", suite="release")
    rep.title(f"gray release: {' -> '.join(x.name for x in stages)}")

    def steps(run: Run) -> None:
        verdicts = run_stages(run, env, release, stages, source)
        shadow = verdicts[0].row("response diff score")
        summary.set("release", stages=f"{len(verdicts)} of {len(stages)} passed their gates", shadow_diff=shadow.measured)

    run_experiment(Experiment("gray-release", steps=steps, hurt=stack.targets_in("canary")))
