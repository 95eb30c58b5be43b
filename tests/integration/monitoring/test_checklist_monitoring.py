"""The monitoring item through the pytest plugin, with a real (refused) HTTP read of Prometheus: an
environment whose `monitoring:` points at nothing, or that has none, reads "not proven" and
`--require-proven` exits 1 naming `monitoring-alerts`; listed in expect_not_proven, the same run passes."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests._support import free_port

SCENARIO = """
import pytest

from chaos.bridge.monitoring import alert_monitor


@pytest.fixture
def monitoring(chaos_env):
    with alert_monitor(chaos_env) as m:  # what the plugin's `monitoring` fixture yields, without a stack
        yield m


@pytest.mark.proves("gpu-driver-reset")
def test_restart(monitoring):
    watch = monitoring.watch("gpu-driver-reset")
    watch.took_effect()
    watch.recovered()
    watch.settle()
    watch.verdict(fault_proven=True).assert_ok()
"""

ENV = 'name: staging\nendpoints: {api: "http://127.0.0.1:9"}\n'
EXPECT = "  expect:\n    gpu-driver-reset: {fire: [LLMReplicaRestarted], fire_within_s: 5, clear_within_s: 5}\n"


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for var in ("CHAOS_ENV", "CHAOS_REQUIRE_PROVEN", "CHAOS_REQUIRE"):
        monkeypatch.delenv(var, raising=False)
    pytester.mkdir("environments")
    pytester.makepyfile(SCENARIO)
    return pytester


def _env(project: pytest.Pytester, text: str) -> None:
    (Path(project.path) / "environments" / "staging.yaml").write_text(text)


def _row(r: pytest.RunResult) -> str:
    return next(line for line in r.outlines if line.startswith("monitoring-alerts "))


def test_monitoring_pointing_at_nothing_is_not_proven_and_fails_require_proven(project: pytest.Pytester) -> None:
    _env(project, ENV + f"monitoring:\n  prometheus: {{url: 'http://127.0.0.1:{free_port()}'}}\n" + EXPECT)
    r = project.runpytest("-p", "no:cacheprovider", "--env", "staging", "--require-proven")
    r.assert_outcomes(passed=1)
    assert r.ret == 1, r.stdout.str()
    assert "NOT PROVEN" in _row(r) and "prometheus did not answer" in _row(r), _row(r)
    r.stdout.fnmatch_lines(["--require-proven: * not proven*; the run fails:",
                            "  monitoring-alerts: test_*.py::test_restart: alerts read from prometheus: "
                            "prometheus did not answer: *"])


def test_no_monitoring_section_is_not_proven_never_proven(project: pytest.Pytester) -> None:
    _env(project, ENV + "expect_not_proven: {}\n")
    r = project.runpytest("-p", "no:cacheprovider", "--env", "staging", "--require-proven")
    assert r.ret == 1, r.stdout.str()
    assert "NOT PROVEN" in _row(r) and "the environment staging names no Prometheus" in _row(r), _row(r)
    r.stdout.fnmatch_lines(["--require-proven: 1 checklist item(s) not proven and not on environment staging's "
                            "expect_not_proven; the run fails:", "  monitoring-alerts: *names no Prometheus*"])


def test_listed_as_expected_the_same_run_passes(project: pytest.Pytester) -> None:
    _env(project, ENV + f"monitoring:\n  prometheus: {{url: 'http://127.0.0.1:{free_port()}'}}\n" + EXPECT
         + 'expect_not_proven:\n  monitoring-alerts: "our Prometheus is not reachable from CI"\n')
    r = project.runpytest("-p", "no:cacheprovider", "--env", "staging", "--require-proven")
    assert r.ret == 0, r.stdout.str()
    assert "NOT PROVEN (EXPECTED)" in _row(r) and "[expected: our Prometheus is not reachable from CI]" in _row(r)
