"""The gray-release suite's stages come from a game-day plan, shadow stage first."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos.errors import ConfigError
from chaos.experiment.release_stages import DEFAULT_PLAN, load_seconds, release_plan


def test_the_default_stages_are_the_game_days_shadow_first():
    plan, stages, path = release_plan()
    assert path == DEFAULT_PLAN
    assert [x.release.canary_weight for x in stages] == [0.0, 0.3, 0.3] and stages[0].release.mirror == 0.3
    assert plan.load["temperature"] == 0 and set(plan.load["attributes"]) == {"x-region", "x-business-line", "x-user-tier"}
    assert load_seconds(plan, stages) == 3 * (15 + 30) + 30


def _plan(tmp_path: Path, experiments: str) -> Path:
    p = tmp_path / "plan.yaml"
    p.write_text(f"name: p\nexperiments:\n{experiments}")
    return p


def test_a_plan_without_release_stages_or_with_live_first_is_refused(tmp_path, monkeypatch):
    p = _plan(tmp_path, "  - {name: a, fault: {kind: kill, target: replica-a}}\n")
    with pytest.raises(ConfigError, match=r"plan.yaml: expected release stages \(experiments with `release:`\), found none"):
        release_plan(p)
    p = _plan(tmp_path, "  - {name: live, release: {canary_weight: 0.3}}\n"
                        "  - {name: shadow, release: {canary_weight: 0, mirror: 0.3}}\n")
    monkeypatch.setenv("CHAOS_GRAY_RELEASE_PLAN", str(p))
    with pytest.raises(ConfigError, match=r"experiments\[0\]: expected the shadow stage first"):
        release_plan()
