"""A key written twice in one mapping of an environment file or game-day plan is a one-line error naming the file,
both lines and the key: YAML alone keeps the later value without a word (an expect_not_proven entry written twice
with two reasons, or a breaker field set twice, would be silently half-ignored)."""
from __future__ import annotations

from pathlib import Path

import pytest

from chaos.env import load
from chaos.errors import ConfigError
from chaos.experiment.plan import parse_plan


def test_a_key_twice_in_an_environment_file_names_both_lines(tmp_path: Path) -> None:
    f = tmp_path / "env.yaml"
    f.write_text("name: x\nbreaker:\n  window_s: 15\n  min_calls: 50\n  window_s: 30\n")
    with pytest.raises(ConfigError) as e:
        load(str(f), environ={})
    assert str(e.value) == (f"{f}:5: window_s: written twice (first at line 3): expected each key once, a later one "
                            f"would silently win")


def test_a_key_twice_in_a_list_item_of_a_plan_is_refused_too() -> None:
    plan = "name: p\nexperiments:\n  - name: a\n    hold_s: 5\n    hold_s: 6\n"
    with pytest.raises(ConfigError, match=r"^plan.yaml:5: hold_s: written twice \(first at line 4\)"):
        parse_plan(plan, "plan.yaml")


def test_the_same_key_in_two_mappings_is_fine() -> None:
    plan = parse_plan("name: p\nexperiments:\n  - name: a\n    hold_s: 5\n  - name: b\n    hold_s: 6\n", "plan.yaml")
    assert [e.hold_s for e in plan.experiments] == [5, 6]
