"""`chaos gameday` with the shipped alerts plan (examples/gameday/alerts.yaml) on the embedded stack
with its real Prometheus and Alertmanager: the no-fault baseline pages nobody, the 4 % canary errors
fire both error-rate tiers and the restart fires LLMReplicaRestarted, each reaching the webhook
receiver and resolving, with the times in the journal; with the degrade alert removed from the rules
the 4 % experiment fails with a blind spot naming the fault and the alert."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests._support import free_port_offset, require, rules_without

ROOT = Path(__file__).resolve().parents[3]
PLAN = ROOT / "examples" / "gameday" / "alerts.yaml"
RULES = ROOT / "examples" / "monitoring" / "rules" / "llm-serving.rules.yml"
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def local_copy(tmp_path: Path, rules: Path = RULES) -> tuple[Path, str]:
    """environments/local.yaml with its own state dir (and `rules`), and a port offset where it is all free."""
    text = (ROOT / "environments" / "local.yaml").read_text()
    for old, new in (("rule_files: [../examples/monitoring/rules/llm-serving.rules.yml]", f"rule_files: [{rules}]"),
                     ("state_dir: ../.state/local", f"state_dir: {tmp_path / 'state'}")):
        assert old in text, f"environments/local.yaml changed: no {old!r}"
        text = text.replace(old, new)
    env_file = tmp_path / "local-alerts.yaml"
    env_file.write_text(text)
    from chaos.env import load
    from chaos.fixtures.monitoring import monitoring_missing
    from chaos.pytest_plugin import require_component
    from tests.standins.faultproxy.conftest import faultproxy_missing

    require("toxiproxy")
    require_component("faultproxy", faultproxy_missing())
    require_component("prometheus", monitoring_missing(load(str(env_file), environ={})))
    return env_file, str(free_port_offset(text))


def gameday(env_file: Path, offset: str, plan: Path, out: Path) -> tuple[int, str, dict[str, Any]]:
    proc = subprocess.run([sys.executable, "-m", "chaos.cli", "gameday", "--env", str(env_file), "--plan", str(plan),
                           "--out", str(out), "--no-live"], cwd=ROOT, capture_output=True, text=True, timeout=560,
                          env={**os.environ, "CHAOS_PORT_OFFSET": offset})
    journal = json.loads(next(out.glob("*/journal.json")).read_text())
    verdicts = {e["experiment"]: e for e in journal["events"]
                if e["event"] == "VerdictReached" and e["name"].startswith("monitoring")}
    return proc.returncode, proc.stdout[-6000:] + proc.stderr[-3000:], verdicts


def measured(verdict: dict[str, Any], check: str) -> float:
    row = next(r for r in verdict["rows"] if r.startswith(f"{check}: "))
    assert row.split(" -> ")[1].startswith("ok"), row
    return float(row.split("measured ")[1].split(",")[0])


def test_the_shipped_plan_sees_each_expected_alert_fire_page_and_resolve(tmp_path: Path) -> None:
    env_file, offset = local_copy(tmp_path)
    code, out, verdicts = gameday(env_file, offset, PLAN, tmp_path / "out")
    assert code == 0, out
    base = verdicts["no-fault baseline"]
    assert base["ok"] and not base["unproven"] and any("no alert in the no-fault baseline" in r for r in base["rows"])
    errors, restart = verdicts["canary answers 4 % 500s"], verdicts["GPU driver reset stand-in on replica-a"]
    for verdict, alerts in ((errors, ("LLMErrorRateDegrade", "LLMErrorRateRollback")),
                            (restart, ("LLMReplicaRestarted",))):
        assert verdict["ok"] and not verdict["unproven"], verdict["rows"]
        for alert in alerts:
            fire, page = measured(verdict, f"{alert}: time to fire"), measured(verdict, f"{alert}: time to page")
            assert 0 <= fire <= page + 1.0, verdict["rows"]  # paged after it fired (to about one evaluation)
            assert measured(verdict, f"{alert}: time to resolve") <= measured(
                verdict, f"{alert}: time to resolved page") + 1.0, verdict["rows"]
    summary = next((tmp_path / "out").glob("*/summary.md")).read_text()
    assert "alert firing, alert=LLMReplicaRestarted" in summary and "LLMErrorRateRollback: time to page" in summary


def test_without_the_degrade_alert_the_4_percent_experiment_is_a_blind_spot(tmp_path: Path) -> None:
    env_file, offset = local_copy(tmp_path, rules_without(RULES, "LLMErrorRateDegrade", tmp_path))
    plan = yaml.safe_load(PLAN.read_text())
    plan["experiments"] = [x for x in plan["experiments"] if x["name"] == "canary answers 4 % 500s"]
    plan_file = tmp_path / "errors-only.yaml"
    plan_file.write_text(yaml.safe_dump(plan))
    code, out, verdicts = gameday(env_file, offset, plan_file, tmp_path / "out")
    assert code == 1, out
    assert "alerts.fire: alert 'LLMErrorRateDegrade' is in no rule file" in out, out
    v = verdicts["canary answers 4 % 500s"]
    assert v["failures"] == [next(f for f in v["failures"] if f.startswith(
        "blind spot: no alert for http-error on replica-c"))], v["rows"]
    assert "LLMErrorRateDegrade never fired" in v["failures"][0], v["failures"]
    assert measured(v, "LLMErrorRateRollback: time to fire") <= 30  # the alert that is there still fired
