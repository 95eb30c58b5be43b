"""pytest-timeout where it belongs: the harness's own tests keep 600 s; a suite test's ceiling comes from
its environment (chaos/experiment/suite_budgets.py), above its scenario's budget, even where a project's ini sets a
global timeout; pyproject sets none."""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from chaos.env import load
from chaos.experiment import suite_budgets as budgets
from tests._support import REPO

REAL_TIME_ENV = """
name: realtime
time_scale: 1.0
endpoints: {api: "http://127.0.0.1:9"}
slas: {recovery_s: 900, cold_start_s: 1200, steady_state_s: 1000}
load: {duration_s: 600}
"""

SHOW = """
def test_shows_its_ceiling(request):
    m = request.node.get_closest_marker("timeout")
    print("CEILING", request.node.path.parent.name, m.args[0] if m else None, request.config.getini("timeout"))
"""


def test_a_suite_test_gets_its_environments_ceiling_over_a_global_ini_timeout(pytester: pytest.Pytester,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CHAOS_ENV", raising=False)
    env_file = pytester.path / "realtime.yaml"
    env_file.write_text(REAL_TIME_ENV)
    pytester.makeini("[pytest]\ntimeout = 600\n")  # a team's own project with a global timeout
    for where in ("suites/recovery", "suites/load", "unit"):
        d = pytester.path / where
        d.mkdir(parents=True)
        (d / f"test_ceiling_shown_{d.name}.py").write_text(SHOW)  # unique: pytester runs in this process
    r = pytester.runpytest("-s", "--env", str(env_file), "-p", "no:cacheprovider")
    r.assert_outcomes(passed=3)
    env = load(str(env_file))
    shown = [line.split("CEILING", 1)[1].split() for line in r.outlines if "CEILING " in line]
    seen = {words[0]: words[1:] for words in shown}
    for suite in ("recovery", "load"):
        ceiling = float(seen[suite][0])
        assert ceiling == budgets.item_ceiling_s(env, suite) and ceiling > budgets.for_suite(env, suite).total, seen
        assert ceiling > 1800, seen  # 2 x recovery_s 900 alone is past the ini's 600 s
    assert seen["unit"] == ["None", "600"], seen  # outside the suites the project's own ini applies
    explicit = pytester.runpytest("-s", "--env", str(env_file), "--timeout", "77", "suites")
    explicit.assert_outcomes(passed=2)  # a --timeout on the command line is the user's word: no marker outranks it
    assert [line.split("CEILING", 1)[1].split()[1] for line in explicit.outlines if "CEILING " in line] == ["None"] * 2


def test_the_repository_sets_no_global_timeout_and_its_own_tests_keep_600_s(request: pytest.FixtureRequest) -> None:
    ini = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    assert "timeout" not in ini, ini
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None and marker.args == (600.0,), marker


def test_the_shipped_suites_carry_their_environments_ceiling_not_600_s(tmp_path: Path) -> None:
    """Collected against staging.example (time_scale 1.0): every suite test's ceiling is its suite's,
    above 600 s (the load suite alone runs 1200 s of load)."""
    (tmp_path / "show_timeouts.py").write_text(
        "def pytest_collection_finish(session):\n"
        "    for i in session.items:\n"
        "        m = i.get_closest_marker('timeout')\n"
        "        print('TIMEOUT', i.nodeid, m.args[0] if m else None)\n")
    environ = {**os.environ, "STAGING_API_KEY": "k", "HF_TOKEN": "t",
               "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO), os.environ.get("PYTHONPATH", "")])}
    environ.pop("CHAOS_ENV", None)
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "show_timeouts", "suites",
                        "--env", "staging.example"], cwd=REPO, capture_output=True, text=True, timeout=300, env=environ)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    env = load("staging.example", environ={"STAGING_API_KEY": "k", "HF_TOKEN": "t"})
    rows = [line.split() for line in r.stdout.splitlines() if line.startswith("TIMEOUT ")]
    assert len(rows) > 40, r.stdout[-3000:]
    for _, nodeid, value in rows:
        suite = nodeid.split("/")[1]
        assert value != "None" and float(value) == budgets.item_ceiling_s(env, suite) > 600, (nodeid, value)
    load_ceiling = budgets.item_ceiling_s(env, "load")
    assert load_ceiling > 2 * env.load.duration_s * env.time_scale, load_ceiling


def test_the_ceiling_marker_does_not_match_a_keyword_expression(pytester: pytest.Pytester,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """`-k 'not timeout'` (the vLLM lane's way to leave out the network suite's timeout tests) keeps
    every other suite test: the ceiling is marked after -k has chosen, so its marker is no keyword.
    CI's vLLM lane once selected 0 of 30 tests this way."""
    monkeypatch.delenv("CHAOS_ENV", raising=False)
    env_file = pytester.path / "realtime.yaml"
    env_file.write_text(REAL_TIME_ENV)
    d = pytester.path / "suites" / "network"
    d.mkdir(parents=True)
    (d / "test_keyword_choice.py").write_text(SHOW + "\n\ndef test_a_read_timeout_is_retried():\n    pass\n")
    r = pytester.runpytest("-s", "--env", str(env_file), "-p", "no:cacheprovider", "-k", "not timeout")
    r.assert_outcomes(passed=1, deselected=1)
    shown = [line.split("CEILING", 1)[1].split() for line in r.outlines if "CEILING " in line]
    env = load(str(env_file))
    assert shown and float(shown[0][1]) == budgets.item_ceiling_s(env, "network"), shown
