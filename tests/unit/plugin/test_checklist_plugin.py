"""The release checklist and --require-proven, through pytester in throwaway projects."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

ENV = 'name: local\nendpoints: {api: "http://127.0.0.1:9"}\n'

SCENARIOS = """
import pytest
from chaos.verify.verdict import Verdict

@pytest.mark.proves("gpu-driver-reset")
def test_restart():
    v = Verdict("recovery")
    v.add("first_completion_s", 60, 1.5, True)
    v.data["source"] = "simulator"
    v.assert_ok()

@pytest.mark.proves("oom-burst")
def test_oom():
    pytest.skip("INCONCLUSIVE: the canary serves 23.0 req/s here")

@pytest.mark.proves("cold-start")
def test_client_side_only():
    v = Verdict("request accounting")
    v.not_proven("lost", 0, 0, "client-side only: no replica-side log")
    v.assert_ok()

@pytest.mark.proves("nccl-timeout")
def test_freeze():
    assert False, "recovery: first_completion_s: measured 99 breaks limit 60"

@pytest.mark.proves("no-store")
@pytest.mark.xfail(reason="gateway drops the header")
def test_xfail():
    assert False
"""


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    for var in ("CHAOS_ENV", "CHAOS_REQUIRE_PROVEN"):
        monkeypatch.delenv(var, raising=False)
    (pytester.mkdir("environments") / "local.yaml").write_text(ENV)
    return pytester


def _table(r: pytest.RunResult) -> dict[str, str]:
    """Item id -> its table line, from the checklist section of the output."""
    lines = r.outlines[r.outlines.index(next(l for l in r.outlines if "llm-chaos release checklist" in l)) + 2:]
    return {l.split()[0]: l for l in lines if l and l.split()[0] != "--require-proven:"
            and not l.startswith(" ") and "  " in l}


def test_table_shows_each_status_with_scenario_and_why(project: pytest.Pytester) -> None:
    project.makepyfile(SCENARIOS)
    r = project.runpytest("-p", "no:cacheprovider")
    r.assert_outcomes(passed=2, failed=1, skipped=1, xfailed=1)
    assert r.ret == 1  # the failed scenario, as always
    t = _table(r)
    assert t["gpu-driver-reset"].split()[1] == "proven"
    assert "test_restart" in t["gpu-driver-reset"] and "recovery [simulator]" in t["gpu-driver-reset"]
    assert t["nccl-timeout"].split()[1] == "FAILED" and "first_completion_s: measured 99" in t["nccl-timeout"]
    assert "NOT PROVEN" in t["oom-burst"] and "INCONCLUSIVE: the canary serves 23.0 req/s" in t["oom-burst"]
    assert "NOT PROVEN" in t["cold-start"] and "lost: client-side only" in t["cold-start"]
    assert "NOT PROVEN" in t["no-store"] and "xfail: gateway drops the header" in t["no-store"]
    assert "NOT PROVEN" in t["gray-release"] and "no scenario ran it" in t["gray-release"]
    r.stdout.fnmatch_lines(["1 proven, 1 failed, 23 not proven of 25 items"])


def test_require_proven_fails_a_green_run_naming_each_item(project: pytest.Pytester) -> None:
    project.makepyfile(SCENARIOS)
    r = project.runpytest("-p", "no:cacheprovider", "-k", "restart or oom or client_side", "--require-proven")
    r.assert_outcomes(passed=2, skipped=1)
    assert r.ret == 1
    r.stdout.fnmatch_lines(["--require-proven: 24 checklist item(s) not proven; the run fails:",
                            "  cold-start: test_*.py::test_client_side_only: lost: client-side only*",
                            "  oom-burst: test_*.py::test_oom: INCONCLUSIVE: the canary serves 23.0 req/s here",
                            "  gray-release: no scenario ran it"])
    assert "gpu-driver-reset:" not in r.stdout.str().split("--require-proven:")[1]


def test_without_the_flag_the_same_run_passes_and_shows_the_table(project: pytest.Pytester) -> None:
    project.makepyfile(SCENARIOS)
    r = project.runpytest("-p", "no:cacheprovider", "-k", "restart or oom or client_side")
    assert r.ret == 0
    assert "NOT PROVEN" in _table(r)["oom-burst"]
    assert "--require-proven:" not in r.stdout.str()


@pytest.mark.parametrize("how", ["env", "ini"])
def test_env_var_and_ini_twin(project: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    project.makepyfile(SCENARIOS)
    if how == "env":
        monkeypatch.setenv("CHAOS_REQUIRE_PROVEN", "1")
    else:
        project.makeini("[pytest]\nchaos_require_proven = true\n")
    assert project.runpytest("-p", "no:cacheprovider", "-k", "restart").ret == 1


def test_all_proven_passes_under_the_flag(project: pytest.Pytester) -> None:
    """Only the team's own checklist (an empty base is not possible: the built-in items stay), so every
    built-in item is covered here by one passing test; the monitoring and answers items by the alert and
    answers verdicts it asserts."""
    from chaos.report.checklist import CHECKLIST

    ids = ", ".join(repr(i.id) for i in CHECKLIST)
    project.makepyfile(f"""import pytest
from chaos.verify.verdict import Verdict

@pytest.mark.proves({ids}, 'ours')
def test_all():
    v = Verdict("monitoring: gpu-driver-reset")
    v.data["alerts_judged"] = True
    v.add("LLMReplicaRestarted: time to fire", 15, 4.0, True)
    v.assert_ok()
    a = Verdict("answers")
    a.data["answers_judged"] = True
    a.add("answer_divergence", "<= 0.00 %", "0/600", True)
    a.assert_ok()
""")
    project.makeini("[pytest]\nchaos_checklist =\n    ours: our own release item\n")
    r = project.runpytest("-p", "no:cacheprovider", "--require-proven")
    assert r.ret == 0, r.stdout.str()
    r.stdout.fnmatch_lines(["26 proven, 0 failed, 0 not proven of 26 items"])


def test_parts_each_need_a_proof(project: pytest.Pytester) -> None:
    project.makepyfile("""
import pytest

@pytest.mark.proves("breaker-degrade", part="no trip below")
def test_below():
    pass

@pytest.mark.proves("breaker-degrade", part="degrade above")
def test_above():
    pytest.skip("INCONCLUSIVE: too few calls")
""")
    r = project.runpytest("-p", "no:cacheprovider")
    line = _table(r)["breaker-degrade"]
    assert "NOT PROVEN" in line and "test_above (degrade above): INCONCLUSIVE" in line and "test_below:" not in line


def test_unknown_item_is_one_line(project: pytest.Pytester) -> None:
    project.makepyfile("import pytest\n\n@pytest.mark.proves('gpu-reset')\ndef test_x():\n    pass\n")
    r = project.runpytest("-p", "no:cacheprovider")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*test_x: @pytest.mark.proves('gpu-reset'): unknown checklist item (known: *"])
    assert "Traceback" not in r.stderr.str() + r.stdout.str()


def test_no_table_where_nothing_proves_anything(project: pytest.Pytester) -> None:
    project.makepyfile("def test_plain():\n    pass\n")
    r = project.runpytest("-p", "no:cacheprovider")
    assert r.ret == 0 and "release checklist" not in r.stdout.str()


def test_allure_result_opens_the_report(project: pytest.Pytester) -> None:
    project.makepyfile(SCENARIOS)
    results = Path(project.path) / "allure-results"
    project.runpytest("-p", "no:cacheprovider", "-k", "restart or oom", f"--alluredir={results}")
    mine = [json.loads(p.read_text()) for p in results.glob("*-result.json")]
    check = next(m for m in mine if m["name"] == "Release checklist")
    assert check["status"] == "skipped"  # nothing failed, items not proven
    assert "oom-burst: not proven: test_" in check["statusDetails"]["message"]
    html = (results / check["attachments"][0]["source"]).read_text()
    assert "gpu-driver-reset" in html and "INCONCLUSIVE" in html


def test_a_refused_scenario_is_not_proven(project: pytest.Pytester) -> None:
    (Path(project.path) / "environments" / "staging.yaml").write_text(
        'name: staging\nendpoints: {api: "http://127.0.0.1:9"}\nsafety: {protected: true}\n')
    project.makepyfile("import pytest\n\n@pytest.mark.destructive\n@pytest.mark.proves('gpu-driver-reset')\n"
                       "def test_restart():\n    pass\n")
    r = project.runpytest("-p", "no:cacheprovider", "--env", "staging", "--require-proven")
    assert r.ret == 1
    line = _table(r)["gpu-driver-reset"]
    assert "NOT PROVEN" in line and "refused: destructive test against protected environment 'staging'" in line


def _listed(project: pytest.Pytester, listed: str) -> None:
    (Path(project.path) / "environments" / "local.yaml").write_text(ENV + "expect_not_proven:\n" + listed)


def test_a_listed_item_is_excused_and_an_uncovered_one_not_judged(project: pytest.Pytester) -> None:
    project.makepyfile(SCENARIOS)
    _listed(project, '  oom-burst: "the canary is too slow here"\n  cold-start: "no standby to start"\n')
    r = project.runpytest("-p", "no:cacheprovider", "-k", "restart or oom or client_side", "--require-proven")
    assert r.ret == 0, r.stdout.str()
    t = _table(r)
    assert "NOT PROVEN (EXPECTED)" in t["oom-burst"] and t["oom-burst"].endswith("[expected: the canary is too slow here]")
    assert "NOT PROVEN " in t["gray-release"] and "(EXPECTED)" not in t["gray-release"]  # no scenario ran it: not judged
    r.stdout.fnmatch_lines(["1 proven, 0 failed, 24 not proven (2 expected) of 25 items",
                            "expect_not_proven (environment local): 2 item(s)",
                            "  oom-burst: the canary is too slow here"])
    assert "--require-proven:" not in r.stdout.str()


def test_a_covered_item_not_on_the_list_fails_naming_it(project: pytest.Pytester) -> None:
    project.makepyfile(SCENARIOS)
    _listed(project, '  oom-burst: "the canary is too slow here"\n')
    r = project.runpytest("-p", "no:cacheprovider", "-k", "restart or oom or client_side", "--require-proven")
    assert r.ret == 1
    r.stdout.fnmatch_lines(["--require-proven: 1 checklist item(s) not proven and not on environment local's "
                            "expect_not_proven; the run fails:",
                            "  cold-start: test_*.py::test_client_side_only: lost: client-side only*"])


def test_a_listed_item_that_was_proven_is_reported_without_failing(project: pytest.Pytester) -> None:
    project.makepyfile(SCENARIOS)
    _listed(project, '  gpu-driver-reset: "thought impossible"\n')
    r = project.runpytest("-p", "no:cacheprovider", "-k", "restart", "--require-proven")
    assert r.ret == 0, r.stdout.str()
    r.stdout.fnmatch_lines(["expected not proven but proven: gpu-driver-reset - drop it from expect_not_proven"])


def test_an_unknown_listed_item_is_one_line(project: pytest.Pytester) -> None:
    project.makepyfile(SCENARIOS)
    _listed(project, '  hmac-sign: "no key"\n')
    r = project.runpytest("-p", "no:cacheprovider", "-k", "restart")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    r.stderr.fnmatch_lines(["*local.yaml: expect_not_proven.hmac-sign: unknown checklist item (known: *"])
    assert "Traceback" not in r.stderr.str() + r.stdout.str()


def test_a_scenario_using_the_monitoring_fixture_covers_the_monitoring_item(project: pytest.Pytester) -> None:
    """It judged no alert verdict here (its fixture is a stand-in), so the item is covered and not proven."""
    project.makepyfile("""
import pytest

@pytest.fixture
def monitoring():
    return None

@pytest.mark.proves("gpu-driver-reset")
def test_restart(monitoring):
    pass
""")
    # a list, empty: judged on the covered items
    (Path(project.path) / "environments" / "local.yaml").write_text(ENV + "expect_not_proven: {}\n")
    r = project.runpytest("-p", "no:cacheprovider", "--require-proven")
    assert r.ret == 1
    r.stdout.fnmatch_lines(["  monitoring-alerts: no scenario judged it: test_*.py::test_restart: judged no alerts*"])
    assert "gpu-driver-reset:" not in r.stdout.str().split("--require-proven:")[1]
