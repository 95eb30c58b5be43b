"""An experiment on the real embedded stack given a short budget fails on it, naming the phase, and its
fault (a real Toxiproxy toxic) is reverted: the next test of the same session finds no toxic left.
Run as a team's own suite would be: a project outside the repository, no conftest.py, the fixtures
from the installed plugin."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests._support import REPO, require
from tests.standins.stack.stack_env import write_env

SUITE = """
from chaos import Budget, Experiment
from chaos.experiment.budget import PhaseBudget
from chaos.faults import jitter


def test_a_hold_past_its_budget(stack, run_experiment):
    def steps(run):
        run.observe(stack.env.endpoints.api)
        run.inject(jitter(stack.toxiproxy, "client", latency=50, jitter=10))
        run.hold(120.0)

    run_experiment(Experiment("short budget", steps=steps),
                   budget=Budget([PhaseBudget("inject", 60.0, "room for the rest"),
                                  PhaseBudget("hold fault", 3.0, "a 3 s test budget")]))


def test_the_toxic_is_gone(stack):
    assert stack.toxiproxy.toxics("client") == []
"""


@pytest.mark.slow
def test_a_scenario_over_its_budget_fails_naming_the_phase_and_reverts(tmp_path: Path) -> None:
    require("toxiproxy")
    env_file = write_env(tmp_path)
    project = tmp_path / "project"
    (project / "suites" / "demo").mkdir(parents=True)
    (project / "suites" / "demo" / "test_demo.py").write_text(SUITE)
    environ = {k: v for k, v in os.environ.items() if k not in ("CHAOS_REQUIRE", "CHAOS_ENV")}
    environ["PYTHONPATH"] = os.pathsep.join([str(REPO), environ.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, "-m", "pytest", "suites/demo", "--env", str(env_file), "-p", "no:cacheprovider",
                        "-q", "-rA", "--rootdir", str(project)], cwd=project, capture_output=True, text=True,
                       timeout=400, env=environ)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "1 failed, 1 passed" in out, out[-4000:]
    # the one line a user sees: the phase, how long it ran, its budget and where the figure came from
    assert re.search(r"^E +chaos\.experiment\.budget\.BudgetExceeded: scenario budget: phase 'hold fault' ran 3\.\d s, "
                     r"its budget 3\.0 s \(a 3 s test budget\)$", out, re.M), out[-4000:]
