"""The progress-truth scenarios on the embedded stack (a copy of environments/local.yaml on free ports), as a team
runs them: a decode stall is ejected and restarted within slas.health_truth_s, so the checklist item
`progress-truth` is proven under --require-proven; the same stall where only health is watched fails in the
verdict's words (the suite asserts them), and a plain restart passes progress truth."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import REPO, require
from tests.standins.stack.stack_env import write_env


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_progress_scenarios_prove_their_item_and_catch_a_stack_that_watches_health_only(tmp_path: Path) -> None:
    require("toxiproxy")
    env_file = write_env(tmp_path)
    env = {k: v for k, v in os.environ.items() if k != "CHAOS_REQUIRE"}  # a skip inside is an outcome here
    r = subprocess.run([sys.executable, "-m", "pytest", "suites/recovery/test_progress.py", "--env", str(env_file),
                        "--require-proven", "-p", "no:cacheprovider", "-q", "-rs", "--basetemp", str(tmp_path / "run")],
                       cwd=REPO, capture_output=True, text=True, timeout=540, env=env)
    out = r.stdout + r.stderr
    assert r.returncode == 0 and "3 passed" in out, out[-4000:]
    row = next((line for line in out.splitlines() if line.startswith("progress-truth")), "")
    assert row.split()[1:2] == ["proven"], out[-4000:]  # the checklist's row: proven, FAILED or NOT PROVEN
