"""--require-proven against an environment's expect_not_proven list, and the lists the shipped
environments declare (no pytest run, no stack)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.env import load
from chaos.errors import ConfigError
from chaos.report.checklist import (
    CHECKLIST,
    FAILED,
    NOT_PROVEN,
    PROVEN,
    Item,
    ItemStatus,
    render,
    write_allure_result,
)
from chaos.report.checklist_guard import expected_lines, expected_not_proven, guard, mark_expected

REPO = Path(__file__).resolve().parents[3]
ITEMS = (Item("a", "claim a"), Item("b", "claim b"), Item("c", "claim c"), Item("d", "claim d"))


def statuses() -> list[ItemStatus]:
    """a proven, b not proven by a scenario, c covered by no scenario, d failed."""
    return [ItemStatus(ITEMS[0], PROVEN, ["t_a"], evidence="load"),
            ItemStatus(ITEMS[1], NOT_PROVEN, ["t_b"], "t_b: gpu_figures: no GPU"),
            ItemStatus(ITEMS[2], NOT_PROVEN, [], "no scenario ran it"),
            ItemStatus(ITEMS[3], FAILED, ["t_d"], "t_d: boom")]


def test_without_a_list_every_item_not_proven_fails_covered_or_not() -> None:
    g = guard(statuses(), None)
    assert g.failing == ["b: t_b: gpu_figures: no GPU", "c: no scenario ran it"] and g.proven_anyway == []


def test_with_a_list_only_covered_items_not_listed_fail() -> None:
    assert guard(statuses(), {}).failing == ["b: t_b: gpu_figures: no GPU"]  # c: no collected scenario covers it
    assert guard(statuses(), {"b": "no GPU here"}).failing == []


def test_a_listed_item_that_was_proven_is_reported_not_failed() -> None:
    g = guard(statuses(), {"a": "thought impossible", "b": "no GPU here"})
    assert g.failing == [] and g.proven_anyway == [
        "expected not proven but proven: a - drop it from expect_not_proven"]


def test_the_table_marks_listed_items_with_the_environments_reason() -> None:
    st = statuses()
    mark_expected(st, {"a": "thought impossible", "b": "no GPU here"})
    lines = {line.split()[0]: line for line in render(st)[1:-1]}
    assert "NOT PROVEN (EXPECTED)" in lines["b"] and lines["b"].endswith("t_b: gpu_figures: no GPU [expected: no GPU here]")
    assert "drop it from the list" in lines["a"] and "EXPECTED" not in lines["c"] and "FAILED" in lines["d"]
    assert render(st)[-1] == "1 proven, 1 failed, 2 not proven (1 expected) of 4 items"


def test_the_allure_result_carries_the_marks_and_the_list(tmp_path: Path) -> None:
    st = statuses()
    mark_expected(st, {"b": "no GPU here"})
    notes = expected_lines("local", {"b": "no GPU here"})
    assert notes == ["expect_not_proven (environment local): 1 item(s)", "  b: no GPU here"]
    doc = json.loads(write_allure_result(tmp_path, st, notes).read_text())
    assert "b: not proven (expected): t_b: gpu_figures: no GPU [expected: no GPU here]" in doc["statusDetails"]["message"]
    assert doc["description"].endswith("expect_not_proven (environment local): 1 item(s)\n  b: no GPU here")
    assert expected_lines("x", None) == [] and expected_lines("x", {}) == ["expect_not_proven (environment x): none"]


def test_an_unknown_item_id_is_one_line_naming_the_file_and_the_field(tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text('name: mine\nendpoints: {api: "http://127.0.0.1:9"}\nexpect_not_proven:\n  hmac-sign: "no key"\n')
    with pytest.raises(ConfigError) as e:
        expected_not_proven(load(str(f), environ={}), CHECKLIST)
    msg = str(e.value)
    assert msg.startswith(f"{f}: expect_not_proven.hmac-sign: unknown checklist item (known: ") and "\n" not in msg
    assert "hmac-signing" in msg


def test_no_list_is_none_and_a_teams_own_item_may_be_listed(tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text('name: mine\nendpoints: {api: "http://127.0.0.1:9"}\n')
    assert expected_not_proven(load(str(f), environ={}), CHECKLIST) is None
    f.write_text('name: mine\nendpoints: {api: "http://127.0.0.1:9"}\nexpect_not_proven: {ours: "not here"}\n')
    assert expected_not_proven(load(str(f), environ={}), (*CHECKLIST, Item("ours", "our item"))) == {"ours": "not here"}


@pytest.mark.parametrize("text, field", [
    ('expect_not_proven:\n  hmac-signing: ""\n', "expect_not_proven.hmac-signing"),
    ('expect_not_proven:\n  hmac-signing: "two\\nlines"\n', "expect_not_proven.hmac-signing"),
    ('expect_not_proven:\n  "hmac signing": "no key"\n', "expect_not_proven.hmac signing"),
    ('expect_not_proven:\n  hmac-signing: [no, key]\n', "expect_not_proven.hmac-signing"),
])
def test_the_loader_refuses_a_bad_entry_in_one_line(tmp_path: Path, text: str, field: str) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text('name: mine\nendpoints: {api: "http://127.0.0.1:9"}\n' + text)
    with pytest.raises(ConfigError) as e:
        load(str(f), environ={})
    assert str(e.value).startswith(f"{f}:") and field in str(e.value) and "\n" not in str(e.value), str(e.value)


ENV_FILES = sorted([*(REPO / "environments").glob("*.yaml"), REPO / "examples/own-suite/environments/my-stack.yaml"])


@pytest.mark.parametrize("path", ENV_FILES, ids=lambda p: p.stem)
def test_every_shipped_environment_declares_its_list_of_known_items(path: Path) -> None:
    env = load(str(path), environ={"STAGING_API_KEY": "k", "STAGING_HMAC_KEY": "k", "STAGING_ADMIN_TOKEN": "t",
                                   "CHAOS_GATEWAY_TOKEN": "t"})
    listed = expected_not_proven(env, CHECKLIST)
    assert listed, f"{path.name}: no expect_not_proven list"
    if env.monitoring is None:  # nothing to read: the monitoring item can never be proven there
        assert "monitoring-alerts" in listed
    if not env.client_commands:
        assert {"retry-interval-500ms", "exponential-backoff"} <= set(listed)


def test_local_lists_what_the_last_game_day_could_not_prove_and_no_more() -> None:
    listed = expected_not_proven(load(str(REPO / "environments/local.yaml"), environ={}), CHECKLIST)
    assert listed is not None and set(listed) == {"retry-interval-500ms", "exponential-backoff", "hmac-signing",
                                                 "baseline-gpu", "answers-stable"}


def test_the_game_day_targets_run_with_require_proven() -> None:
    make = (REPO / "Makefile").read_text()
    runs = [line for line in make.splitlines() if "$(PYTEST) $(SUITES)" in line]
    assert len(runs) == 2 and all("--require-proven" in line for line in runs), runs
