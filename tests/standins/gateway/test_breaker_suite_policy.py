"""The breaker suite judges the environment's own policy: a copy of environments/local.yaml that
degrades at 3 % errors and rolls back at 9 % runs the suite's error scenarios against the reference
gateway started with that policy, and each passes with the tier the policy gives (degrade,
rollback). With the seed's literal sizes (0.5 %, 1.5 %, 4 %) the degrade and rollback scenarios
would fail on this policy: 1.5 % trips nothing and 4 % only degrades.

Only those two tell the policy's sizes from the literals, so only they run here: below degrade, the
policy's size and the literal 0.5 % both trip nothing (it ran here until 2026-12-05, 58 s of the
stand-ins lane's longest path; the lab lane runs it on its own policy).
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import free_port_offset

ROOT = Path(__file__).resolve().parents[3]
EXPECTED = {"errors-degrade": "degrade", "errors-rollback": "rollback"}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_3_and_9_percent_policy_is_judged_by_its_own_thresholds(tmp_path: Path) -> None:
    text = (ROOT / "environments" / "local.yaml").read_text()
    for old, new in (("degrade_error_rate: 0.01", "degrade_error_rate: 0.03"),
                     ("rollback_error_rate: 0.03", "rollback_error_rate: 0.09"),
                     # the canary's share is no part of the claim: at 0.2 a host busy with the lane's other worker
                     # gave the canary 158 calls per window, under the degrade tier's 200, and skipped that tier
                     ("canary_weight: 0.2", "canary_weight: 0.35"),
                     ("state_dir: ../.state/local", "state_dir: .state"),
                     # relative to the environment file, and the copy lives in tmp_path
                     ("rule_files: [../examples/", f"rule_files: [{ROOT / 'examples'}/")):
        assert old in text, f"environments/local.yaml changed: no {old!r}"
        text = text.replace(old, new)
    env_file = tmp_path / "local-3-9.yaml"
    env_file.write_text(text)
    offset = free_port_offset(text)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "suites/breaker", "--env", str(env_file), "-k", " or ".join(EXPECTED), "-q",
         "-p", "no:cacheprovider", "-o", "addopts=", f"--alluredir={tmp_path / 'results'}"],
        cwd=ROOT, capture_output=True, text=True, timeout=840,
        env={**os.environ, "CHAOS_PORT_OFFSET": str(offset)})
    out = proc.stdout[-6000:] + proc.stderr[-2000:]
    state = tmp_path / f".state-port{offset:+d}"
    tables = state / "breaker-tables.jsonl"
    assert tables.exists(), f"the suite wrote no verdict table:\n{out}"
    got = {row["scenario"]: row for row in map(json.loads, tables.read_text().splitlines())}
    assert sorted(got) == sorted(EXPECTED), f"scenarios judged: {sorted(got)}\n{out}"
    for name, tier in EXPECTED.items():
        row = got[name]
        assert row["expect"] == tier
        assert row["observed"]["tier"] == tier, f"{name}: observed {row['observed']}\n{out}"
        assert row["ok"] is True, f"{name}: {row['rows']}"
    assert proc.returncode == 0, out
    # the gateway ran the copy's policy: it degraded at 3 % and rolled back at 9 %
    log = (state / "gateway.log").read_text()
    assert re.search(r"\(error rate 0\.\d+ >= 0\.03\)", log), log[-3000:]
    assert re.search(r"rollback: error rate 0\.\d+ >= 0\.09", log), log[-3000:]
