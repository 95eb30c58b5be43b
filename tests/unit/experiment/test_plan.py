"""Game-day plans: validated like environment files (one line naming file:line and the field), and
the shipped examples load against their environments."""
from __future__ import annotations

import pytest

from chaos.env import load
from chaos.errors import ConfigError
from chaos.experiment.plan import load_plan, parse_plan
from tests._support import REPO

GOOD = """\
name: unit plan
experiments:
  - name: one
    fault: {kind: http-error, target: replica-c, status: 500, fraction: 0.02}
    hold_s: 5
"""


@pytest.mark.parametrize("text,expected", [
    (GOOD.replace("    hold_s: 5", "    hold_s: -5"), "plan.yaml:5: experiments[one].hold_s: Input should be greater than 0"),
    (GOOD.replace("    hold_s: 5", "    hold: 5"), "plan.yaml:5: experiments[one].hold: unknown field"),
    (GOOD.replace("  - name: one\n", "  - fault_s: 1\n"), "plan.yaml:3: experiments[0].name: required field is missing"),
    (GOOD.replace("name: unit plan\n", ""), "plan.yaml:1: name: required field is missing"),
    ("name: x\nexperiments: []\n", "plan.yaml:2: experiments: List should have at least 1 item"),
    ("name: x\nexperiments: [\n", "plan.yaml:3: YAML syntax error"),
    ("- just\n- a list\n", "plan.yaml: expected a mapping with 'name' and 'experiments', found list"),
    (GOOD + "hypothesis: {error_share_below: 2}\n", "plan.yaml:6: hypothesis.error_share_below: Input should be less"),
    (GOOD + "hypothesis: {goodput_share_above: 90}\n", "plan.yaml:6: hypothesis.goodput_share_above: Input should be less"),
    (GOOD + "hypothesis: {error_rate_below: 0.05}\n", "plan.yaml:6: hypothesis.error_rate_below: unknown field"),
    (GOOD + "    release: {canary_weight: 0.1}\n", "plan.yaml:3: experiments[one]: give a fault or a release stage, not both"),
    (GOOD + "    gate: {min_pairs: 5}\n", "plan.yaml:3: experiments[one]: a gate judges a release stage: give `release` too"),
    (GOOD.replace("    fault: {kind: http-error, target: replica-c, status: 500, fraction: 0.02}",
                  "    release: {canary_weight: 0, mirror: 1.5}"),
     "plan.yaml:4: experiments[one].release.mirror: Input should be less than or equal to 1"),
])
def test_a_bad_plan_is_one_line_naming_file_line_and_field(text, expected):
    with pytest.raises(ConfigError) as e:
        parse_plan(text, "plan.yaml")
    lines = str(e.value).splitlines()
    assert lines[0].startswith(expected) and all(line.startswith("plan.yaml") for line in lines), lines


def test_every_error_of_a_plan_is_listed_with_its_experiment_by_name():
    text = GOOD.replace("    hold_s: 5", "    hold_s: -5") + "  - name: two\n    hold: 1\n"
    with pytest.raises(ConfigError) as e:
        parse_plan(text, "plan.yaml")
    assert str(e.value).splitlines() == ["plan.yaml:5: experiments[one].hold_s: Input should be greater than 0; found -5",
                                         "plan.yaml:7: experiments[two].hold: unknown field"], str(e.value)


def test_an_unreadable_plan_is_one_line(tmp_path):
    with pytest.raises(ConfigError) as e:
        load_plan(tmp_path / "nope.yaml")
    assert "nope.yaml: cannot read the game-day plan" in str(e.value)


@pytest.mark.parametrize("plan,env", [("basic.yaml", "local"), ("staging.yaml", "staging.example")])
def test_the_shipped_plans_load_and_name_what_their_environment_has(plan, env, monkeypatch):
    monkeypatch.setenv("STAGING_API_KEY", "k")
    monkeypatch.setenv("HF_TOKEN", "h")
    p = load_plan(REPO / "examples" / "gameday" / plan)
    e = load(str(REPO / "environments" / f"{env}.yaml"))
    names = {t.name for t in e.targets} | {x.name for x in (e.toxiproxy.proxies if e.toxiproxy else [])}
    for x in p.experiments:
        assert x.fault is not None and (x.fault.target or x.fault.proxy) in names, (x.name, names)
        assert (x.hypothesis or p.hypothesis).build().checks


def test_the_gray_release_plan_gates_every_stage_and_admits_vip_nowhere():
    p = load_plan(REPO / "examples" / "gameday" / "gray-release.yaml")
    assert all(x.release is not None and x.gate is not None for x in p.experiments)
    shadow, *live = p.experiments
    assert shadow.release.canary_weight == 0 and shadow.release.mirror > 0
    tiers = p.load["attributes"]["x-user-tier"]
    assert "vip" in tiers and all(x.release.admit and "vip" not in x.release.admit["x-user-tier"] for x in live)
