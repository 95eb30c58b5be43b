"""The gray-release suite fails where the game day does: with an answer difference planted in the
canary (the simulator's answer-drift on 20 % of its answers), `pytest suites/release` fails the shadow
stage's gate on the diff score, and the release checklist says gray-release FAILED."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests._support import FIXED_OFFSETS, REPO
from tests.e2e.experiment.test_gameday import _components  # noqa: F401 - fixture
from tests.e2e.experiment.test_gray_release import _env_dir

OFFSET = str(FIXED_OFFSETS["release-suite"])  # ports and state of its own


@pytest.mark.slow
@pytest.mark.timeout(700)
def test_a_planted_answer_difference_fails_the_suites_shadow_stage(tmp_path):
    env = {**os.environ, "CHAOS_PORT_OFFSET": OFFSET, "CHAOS_ENV_DIR": str(_env_dir(tmp_path, 0.2))}
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "suites/release", "--env", "local-gray",
                        "-q", "--basetemp", str(tmp_path / "run")], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=650)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out[-4000:]
    assert "stage 1: shadow traffic: gray release: shadow gate: response diff score" in out, out[-4000:]
    row = next((line for line in out.splitlines() if line.startswith("gray-release ")), "")
    assert "FAILED" in row and "test_gray_release_stages" in row, out[-4000:]
    journal = next((tmp_path / "run").rglob("journal.json")).read_text()
    assert "stage 1: shadow traffic" in journal and "stage 2" not in journal  # rolled back; stage 2 never started
