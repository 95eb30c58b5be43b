"""The shipped alert rules load in promtool and pass their unit tests (`promtool test rules`)."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from chaos.pytest_plugin import require_component

RULES = Path(__file__).resolve().parents[3] / "examples" / "monitoring" / "rules"


def promtool() -> str:
    found = shutil.which("promtool")
    require_component("prometheus", None if found else "promtool not found (Debian package prometheus)")
    assert found is not None
    return found


@pytest.mark.parametrize("rules", sorted(p.name for p in RULES.glob("*.rules.yml")))
def test_each_shipped_rule_file_loads_and_passes_its_unit_tests(rules: str) -> None:
    tool = promtool()
    check = subprocess.run([tool, "check", "rules", rules], cwd=RULES, capture_output=True, text=True, timeout=60)
    assert check.returncode == 0, check.stdout + check.stderr
    unit = rules.replace(".rules.yml", ".test.yml")
    assert (RULES / unit).is_file(), f"{rules} has no unit test file {unit}"
    run = subprocess.run([tool, "test", "rules", unit], cwd=RULES, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr


def test_every_alert_of_the_shipped_rules_has_a_unit_test() -> None:
    import yaml

    for rules in RULES.glob("*.rules.yml"):
        alerts = {r["alert"] for g in yaml.safe_load(rules.read_text())["groups"] for r in g["rules"] if "alert" in r}
        tests = yaml.safe_load((RULES / rules.name.replace(".rules.yml", ".test.yml")).read_text())["tests"]
        tested = {t["alertname"] for case in tests for t in case.get("alert_rule_test", [])}
        assert alerts - tested == set(), f"{rules.name}: no promtool test for {sorted(alerts - tested)}"


def test_a_rule_changed_under_its_unit_test_fails_it(tmp_path: Path) -> None:
    """The unit tests can fail: the rollback tier moved from 3 % to 5 % no longer fires at 4 %."""
    tool = promtool()
    text = (RULES / "llm-serving.rules.yml").read_text()
    assert ">= 0.03" in text
    (tmp_path / "llm-serving.rules.yml").write_text(text.replace(">= 0.03", ">= 0.05"))
    shutil.copy(RULES / "llm-serving.test.yml", tmp_path)
    run = subprocess.run([tool, "test", "rules", "llm-serving.test.yml"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode != 0 and "LLMErrorRateRollback" in run.stdout + run.stderr
