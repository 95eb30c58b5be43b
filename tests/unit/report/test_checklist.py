"""The release checklist's rules on crafted scenario results (no pytest run)."""
from __future__ import annotations

from typing import Any

import pytest

from chaos.env.monitoring import AlertExpectation
from chaos.errors import ConfigError
from chaos.observe.alerts import Firing
from chaos.report.checklist import (
    ANSWERS,
    CHECKLIST,
    FAILED,
    MONITORING,
    NOT_PROVEN,
    PROVEN,
    SEED_CHECKLIST,
    Item,
    ScenarioResult,
    judge,
    parse_items,
)
from chaos.verify.alerts import MONITORING_ITEM, AlertWindow, alert_verdict
from chaos.verify.answers import ANSWERS_ITEM
from chaos.verify.verdict import Verdict

ITEMS = (Item("a", "claim a"), Item("b", "claim b"))


def passed(name: str, **items: str) -> ScenarioResult:
    r = ScenarioResult(name, items)
    for when in ("setup", "call", "teardown"):
        r.record(when, "passed")
    return r


def test_a_teardown_error_after_a_pass_fails_the_item() -> None:
    r = passed("t", a="")
    r.record("teardown", "failed", "fault not reverted")
    assert (r.status, r.reason) == (FAILED, "fault not reverted")
    assert judge(ITEMS, [r])[0].status == FAILED


def test_a_not_proven_row_touches_only_the_items_it_names() -> None:
    r = passed("t", a="", b="")
    v = Verdict("load")
    v.not_proven("gpu_figures", "recorded", "none", "no GPU", items=("b",))
    r.verdicts.append(v)
    a, b = judge(ITEMS, [r])
    assert a.status == PROVEN and (b.status, b.why) == (NOT_PROVEN, "t: gpu_figures: no GPU")


def test_one_proof_is_enough_when_nothing_failed_but_a_failure_wins() -> None:
    skipped = ScenarioResult("s", {"a": ""})
    skipped.record("setup", "skipped", "no rank link")
    assert judge(ITEMS, [skipped, passed("p", a="")])[0].status == PROVEN
    failed = ScenarioResult("f", {"a": ""})
    failed.record("call", "failed", "boom")
    st = judge(ITEMS, [failed, passed("p", a="")])[0]
    assert (st.status, st.scenarios, st.why) == (FAILED, ["f"], "f: boom")


def test_a_collected_scenario_that_never_reported_did_not_run() -> None:
    st = judge(ITEMS, [ScenarioResult("x", {"a": ""})])[0]
    assert (st.status, st.why) == (NOT_PROVEN, "x: did not run")


def test_team_items_are_added_and_bad_lines_are_one_clear_error() -> None:
    items = parse_items(["", "canary-dashboard: the canary dashboard shows the trip"])
    assert items[:len(SEED_CHECKLIST)] == SEED_CHECKLIST and items[-1] == Item("canary-dashboard",
                                                                              "the canary dashboard shows the trip")
    with pytest.raises(ConfigError, match="ini chaos_checklist: 'no colon here': expected 'item-id: what it proves'"):
        parse_items(["no colon here"])


def test_the_seed_checklist_has_each_item_of_the_issue_once() -> None:
    ids = [i.id for i in SEED_CHECKLIST]
    assert len(ids) == len(set(ids)) == 20


# --- the monitoring item: proven by the alert verdicts alone --------------------------------------

W = AlertWindow(start=100.0, effect_at=110.0, recovered_at=130.0, until=220.0)
RESTARTED = AlertExpectation(fire=["Restarted"], fire_within_s=20, clear_within_s=40)


class _Pages:
    """What the webhook receiver heard (alert_verdict asks only `first`): no socket in the unit lane."""

    def __init__(self, *pages: tuple[float, str]) -> None:
        self.pages = pages

    def first(self, alertname: str, status: str, since: float) -> float | None:
        return next((t for t, st in self.pages if st == status and t >= since), None)


def _paged(*pages: tuple[float, str]) -> Any:
    return _Pages(*pages)


def watched(name: str, *verdicts: Verdict) -> ScenarioResult:
    r = passed(name, **{"gpu-driver-reset": "", MONITORING_ITEM: ""})
    r.verdicts.extend(verdicts)
    return r


def fired_and_resolved() -> Verdict:
    return alert_verdict([Firing("Restarted", 115.0, 150.0)], _paged((116.0, "firing"), (151.0, "resolved")), W,
                         fault="gpu-driver-reset", expect=RESTARTED)


def monitoring(*results: ScenarioResult) -> tuple[str, str]:
    st = judge((MONITORING,), results)[0]
    return st.status, st.why


def test_the_monitoring_and_answers_items_are_built_in_after_the_seeds() -> None:
    assert CHECKLIST[-2].id == MONITORING_ITEM == "monitoring-alerts" and CHECKLIST[:len(SEED_CHECKLIST)] == SEED_CHECKLIST
    assert [i.id for i in CHECKLIST[len(SEED_CHECKLIST):-2]] == [  # beyond the seed
        "progress-truth", "cancel-frees-compute", "detection-signals"]
    assert CHECKLIST[-1] == ANSWERS and ANSWERS.id == "answers-stable"
    assert MONITORING.every and ANSWERS.every and parse_items([])[-2:] == (MONITORING, ANSWERS)


def _answers(wrong: int, *, n: int = 600, steady: int = 600) -> Verdict:
    """An answers verdict over crafted records: `steady` answers before t=100, `n` after, `wrong` of them changed."""
    from chaos.load.records import RequestRecord
    from chaos.verify.answers import answers_across_fault

    recs = []
    for i in range(steady + n):
        after = i >= steady
        changed = after and i - steady < wrong
        t = 100.0 + i if after else float(i % 100)
        recs.append(RequestRecord(f"r{i}", 1, t, e2e=0.1, status=200, outcome="succeeded",
                                  prompt_key=f"short-{i % 8}", answer="bad" if changed else f"good-{i % 8}"))
    return answers_across_fault(recs, 100.0)


def answered(name: str, v: Verdict) -> ScenarioResult:
    r = passed(name, **{ANSWERS_ITEM: ""})
    r.verdicts.append(v)
    return r


def test_answers_verdicts_alone_prove_fail_or_leave_the_answers_item_not_proven() -> None:
    ok = _answers(0)
    st = judge((ANSWERS,), [answered("restart", ok)])[0]
    assert st.status == PROVEN and st.evidence == "answers", (st.status, st.why)
    changed = _answers(12)
    failed = ScenarioResult("corrupt", {ANSWERS_ITEM: ""})
    failed.verdicts.append(changed)
    failed.record("call", "failed", "answers changed")
    st = judge((ANSWERS,), [failed])[0]
    assert st.status == FAILED and "r600" in st.why  # the changed requests named
    few = _answers(0, n=5, steady=8)
    st = judge((ANSWERS,), [answered("short", few)])[0]
    assert st.status == NOT_PROVEN and "answer_divergence" in st.why
    # a scenario that failed on its recovery time: its answers item is not failed by that
    other = ScenarioResult("slow", {ANSWERS_ITEM: "", "a": ""})
    other.verdicts.append(ok)
    other.record("call", "failed", "recovery took too long")
    st = judge((ANSWERS,), [other])[0]
    assert st.status == NOT_PROVEN and "its answers were not what failed" in st.why


def test_alerts_that_fired_paged_and_resolved_prove_the_monitoring_item_with_their_evidence() -> None:
    other = Verdict("recovery")
    other.add("first_completion_s", 60, 2.0, True)
    st = judge((MONITORING,), [watched("restart", other, fired_and_resolved())])[0]
    assert st.status == PROVEN and st.evidence == "monitoring: gpu-driver-reset"  # not the recovery verdict


def test_no_prometheus_read_leaves_it_not_proven_with_why_and_never_touches_the_scenarios_own_item() -> None:
    v = alert_verdict(None, None, W, fault="gpu-driver-reset", expect=RESTARTED,
                      why_not="the environment staging names no Prometheus (no monitoring section)")
    r = watched("restart", v)
    own, mon = judge((SEED_CHECKLIST[0], MONITORING), [r])
    assert own.status == PROVEN
    assert mon.status == NOT_PROVEN and "names no Prometheus" in mon.why and mon.why.startswith("restart: ")


def test_an_unanswering_prometheus_and_a_missing_page_are_not_proven() -> None:
    down = alert_verdict(None, None, W, fault="gpu-driver-reset", expect=RESTARTED,
                         why_not="prometheus did not answer: connection refused")
    assert monitoring(watched("a", down)) == (NOT_PROVEN, "a: alerts read from prometheus: prometheus did not answer: "
                                                          "connection refused")
    unpaged = alert_verdict([Firing("Restarted", 115.0, 150.0)], None, W, fault="gpu-driver-reset", expect=RESTARTED)
    status, why = monitoring(watched("b", unpaged))
    assert status == NOT_PROVEN and "Restarted: time to page: no alertmanager routes" in why


def test_a_blind_spot_fails_the_item() -> None:
    blind = alert_verdict([], _paged(), W, fault="gpu-driver-reset", expect=RESTARTED)
    r = ScenarioResult("restart", {"gpu-driver-reset": "", MONITORING_ITEM: ""})
    r.record("call", "failed", "the monitoring saw it: blind spot")
    r.verdicts.append(blind)
    status, why = monitoring(r)
    assert status == FAILED and "blind spot: no alert for gpu-driver-reset" in why


def test_every_scenario_that_judged_alerts_must_prove_them_and_one_that_judged_none_does_not_count() -> None:
    down = alert_verdict(None, None, W, fault="crash-sigkill", expect=RESTARTED, why_not="no prometheus to read")
    assert monitoring(watched("a", fired_and_resolved()), watched("b", down))[0] == NOT_PROVEN
    unexpected = alert_verdict([Firing("Restarted", 115.0, 150.0)], None, W, fault="nccl-rank-freeze", expect=None)
    skipped = ScenarioResult("c", {MONITORING_ITEM: ""})
    skipped.record("setup", "skipped", "INCONCLUSIVE")
    assert monitoring(watched("a", fired_and_resolved()), watched("n", unexpected), skipped) == (PROVEN, "")


def test_no_scenario_judging_alerts_is_not_proven_never_proven() -> None:
    unexpected = alert_verdict([], None, W, fault="nccl-rank-freeze", expect=None)
    status, why = monitoring(watched("n", unexpected), passed("quiet", **{MONITORING_ITEM: ""}))
    assert status == NOT_PROVEN and why.startswith("no scenario judged it: ")
    assert "monitoring.expect names no alert" in why and "judged no alerts" in why


def test_a_scenario_failing_elsewhere_leaves_its_good_alerts_not_proven_not_failed() -> None:
    r = watched("restart", fired_and_resolved())
    r.record("call", "failed", "recovery: first_completion_s: measured 99 breaks limit 60")
    own, mon = judge((SEED_CHECKLIST[0], MONITORING), [r])
    assert own.status == FAILED and mon.status == NOT_PROVEN and "the scenario failed (recovery" in mon.why


def test_the_no_fault_baseline_proves_silence() -> None:
    quiet = alert_verdict([], None, W, fault=None, expect=None)
    assert monitoring(watched("baseline", quiet)) == (PROVEN, "")


def test_alerts_judged_before_a_skip_prove_nothing() -> None:
    r = ScenarioResult("load", {MONITORING_ITEM: ""})
    r.verdicts.append(fired_and_resolved())
    r.record("call", "skipped", "SLAs held; regression check skipped")
    assert monitoring(r) == (NOT_PROVEN, "load: SLAs held; regression check skipped")
