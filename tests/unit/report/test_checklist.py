"""The release checklist's rules on crafted scenario results (no pytest run)."""
from __future__ import annotations

import pytest

from chaos.errors import ConfigError
from chaos.report.checklist import FAILED, NOT_PROVEN, PROVEN, SEED_CHECKLIST, Item, ScenarioResult, judge, parse_items
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
