"""The `run_experiment` fixture through pytester, on a stand-in `stack` (no process, no socket): a failed check
surfaces as its own SLOViolation with its text, a skip is a skip, the fault left in place is proven and
reverted, and each run's journal says how its test ended."""
from __future__ import annotations

from pathlib import Path

import pytest

ENV = 'name: local\nendpoints: {api: "http://127.0.0.1:9"}\n'

CONFTEST = """
from types import SimpleNamespace

import pytest


@pytest.fixture
def stack(chaos_env):
    return SimpleNamespace(env=chaos_env, embedded=None, log_tail=lambda name, n: "the last line")
"""

SUITE = """
import pytest
from chaos import Experiment, SLOViolation

LOG = []


class Fault:
    def inject(self):
        LOG.append("inject")

    def revert(self, check=True):
        LOG.append(f"revert check={check}")


def test_a_failed_check(stack, run_experiment):
    def steps(run):
        run.inject(Fault())
        raise SLOViolation("recovery: no real completion succeeded at the target within 30.0 s", limit=30.0,
                           measured=None)

    run_experiment(Experiment("fails", steps=steps, hurt=["replica-a"]))


def test_the_fault_was_reverted_on_the_way_out():
    assert LOG == ["inject", "revert check=True"]


def test_a_skip(stack, run_experiment):
    run_experiment(Experiment("skips", steps=lambda run: pytest.skip("not enough canary calls")))


def test_a_pass(stack, run_experiment):
    r = run_experiment(Experiment("passes", steps=lambda run: run.wait(0.2, "a short wait")))
    assert r.status.value == "PASSED"
"""


def test_failures_surface_as_themselves_and_every_run_is_journalled(pytester: pytest.Pytester,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("CHAOS_ENV", "CHAOS_REQUIRE_PROVEN"):
        monkeypatch.delenv(var, raising=False)
    (pytester.mkdir("environments") / "local.yaml").write_text(ENV)
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_suite=SUITE)
    r = pytester.runpytest("-p", "no:cacheprovider", "--basetemp", str(pytester.path / "tmp"))
    r.assert_outcomes(failed=1, passed=2, skipped=1)
    r.stdout.fnmatch_lines(["E *chaos.errors.SLOViolation: recovery: no real completion succeeded at the target within 30.0 s*"])
    journals = {p.parent.name: p.read_text() for p in Path(pytester.path / "tmp").rglob("summary.md")}
    assert set(journals) == {"fails", "skips", "passes"}, journals
    assert "| fails | FAILED | chaos.errors.SLOViolation: recovery: no real completion" in journals["fails"]
    assert "| skips | SKIPPED |" in journals["skips"] and "| passes | PASSED |" in journals["passes"]
