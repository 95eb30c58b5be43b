"""The breaker suite's 4 % error scenario against a rule set without the rollback alert: the scenario
fails with "blind spot: no alert for errors-rollback", naming the missing alert, while the breaker
itself behaved (the copy of environments/local.yaml differs only in its rule file)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import free_port_offset, rules_without

ROOT = Path(__file__).resolve().parents[3]
RULES = ROOT / "examples" / "monitoring" / "rules" / "llm-serving.rules.yml"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_without_the_rollback_alert_the_4_percent_scenario_fails_with_a_blind_spot(tmp_path: Path) -> None:
    from chaos.fixtures.monitoring import monitoring_missing
    from chaos.pytest_plugin import require_component

    rules = rules_without(RULES, "LLMErrorRateRollback", tmp_path)
    text = (ROOT / "environments" / "local.yaml").read_text()
    for old, new in (("rule_files: [../examples/monitoring/rules/llm-serving.rules.yml]", f"rule_files: [{rules}]"),
                     ("state_dir: ../.state/local", "state_dir: .state")):
        assert old in text, f"environments/local.yaml changed: no {old!r}"
        text = text.replace(old, new)
    env_file = tmp_path / "local-no-rollback-alert.yaml"
    env_file.write_text(text)
    from chaos.env import load

    require_component("prometheus", monitoring_missing(load(str(env_file), environ={})))
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/breaker/test_breaker.py", "--env", str(env_file), "-k",
         "errors-rollback", "-q", "-p", "no:cacheprovider", "-o", "addopts=", f"--basetemp={tmp_path / 'run'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=560,
        env={**os.environ, "CHAOS_PORT_OFFSET": str(free_port_offset(text))})
    out = proc.stdout[-6000:] + proc.stderr[-2000:]
    assert proc.returncode == 1, out
    assert "blind spot: no alert for errors-rollback" in out, out
    assert "LLMErrorRateRollback never fired" in out, out
    # the fault happened and the breaker behaved: only the monitoring stage failed
    journal = next((tmp_path / "run").rglob("journal.json"))
    verdicts = {e["name"].split(":")[0]: e["ok"] for e in json.loads(journal.read_text())["events"]
                if e["event"] == "VerdictReached"}
    assert verdicts == {"the fault really happened": True, "the breaker behaved": True,
                        "the monitoring saw it": False}, verdicts
