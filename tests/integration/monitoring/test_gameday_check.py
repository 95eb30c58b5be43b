"""`chaos gameday --check`: every alert a plan expects is checked against the environment's rule files,
one line naming the plan file, the experiment and the field; nothing is started."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests._support import REPO


def check(plan: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "chaos.cli", "gameday", "--check", "--env", "local", "--plan",
                           str(plan), "--out", str(plan.parent / "out")], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_the_shipped_alerts_plan_names_only_alerts_the_shipped_rules_define() -> None:
    r = check(REPO / "examples" / "gameday" / "alerts.yaml")
    assert r.returncode == 0 and r.stdout.strip().endswith("alerts.yaml: ok (environment local)"), r.stdout + r.stderr


def test_an_alert_no_rule_file_defines_is_one_line_and_exit_1(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text("name: p\nexperiments:\n  - name: canary 500s\n"
                    "    fault: {kind: http-error, target: replica-c, status: 500, fraction: 0.04}\n"
                    "    alerts: {fire: [LLMErrorRateDegrade, CanaryOnFire]}\n")
    r = check(plan)
    assert r.returncode == 1, r.stdout + r.stderr
    fails = [line for line in r.stdout.splitlines() if line.startswith("FAIL")]
    assert fails == [f"FAIL  {plan}: experiments[0] (canary 500s): alerts.fire: alert 'CanaryOnFire' is in no rule file "
                     "of environment local (rule_files define: LLMErrorRateDegrade, LLMErrorRateRollback, "
                     "LLMKVCacheNearlyFull, LLMLatencyHigh, LLMLongContextFailureRate, LLMMemoryGrowth, LLMOOMBurst, "
                     "LLMReplicaDown, LLMReplicaRestarted)"], r.stdout
    assert not (tmp_path / "out").exists()  # nothing started, nothing written
