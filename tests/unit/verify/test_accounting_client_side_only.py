"""Replica-side evidence: "no request lost" is judged against the replicas' or fault proxies' own logs;
without one it is "not proven: client-side only", never ok, and the release checklist's items of that
scenario read not proven; every suite that sends load hands the verdict the replica side's log."""
from __future__ import annotations

import ast

from chaos.load.records import RequestRecord
from chaos.report.checklist import NOT_PROVEN, PROVEN, SEED_CHECKLIST, ScenarioResult, judge
from chaos.verify.accounting import ServerLog, accounting_verdict
from tests._support import REPO


def ok(rid: str) -> RequestRecord:
    return RequestRecord(rid, 1, 100.0, e2e=0.5, status=200, model_asked="m", model_answered="m",
                         final=True, outcome="succeeded")


def served(*rids: str) -> list[dict[str, object]]:
    return [{"request_id": r, "t_arrival": 100.0, "status": 200, "outcome": "stop", "model": "m"} for r in rids]


def test_no_log_at_all_leaves_lost_not_proven_client_side_only() -> None:
    v = accounting_verdict([ok("a"), ok("b")])
    row = v.row("lost")
    assert row.ok is None and row.mark == "not proven"
    assert row.unproven == ("client-side only: no replica-side log given; no replica-side log says which "
                            "successes a replica served")
    assert v.unproven == [row] and v.data["source"] == "client-side only"


def test_an_empty_replica_side_says_the_environment_has_none() -> None:
    row = accounting_verdict([ok("a")], ServerLog()).row("lost")
    assert row.unproven.startswith("client-side only: the environment has no simulator or fault proxy")


def test_a_loss_the_client_saw_fails_even_without_a_log() -> None:
    gone = RequestRecord("gone", 1, 100.0, e2e=0.5, status=503, error="http", final=False)
    for log in (None, ServerLog()):
        row = accounting_verdict([ok("a"), gone], log).row("lost")
        assert (row.measured, row.ok, row.unproven) == (1, False, ""), log


def test_a_log_judges_lost_both_ways() -> None:
    fine = accounting_verdict([ok("a"), ok("b")], ServerLog(served("a", "b"), "fault proxy", ["replica-a"]))
    assert fine.row("lost").ok is True and not fine.unproven and fine.data["source"] == "fault proxy"
    short = accounting_verdict([ok("a"), ok("b")], served("a"))
    assert (short.row("lost").measured, short.row("lost").ok) == (1, False) and "b" in short.row("lost").detail


def test_items_limit_which_checklist_items_stay_unproven() -> None:
    row = accounting_verdict([ok("a")], items=("mix-7-2-1",)).row("lost")
    assert row.items == ("mix-7-2-1",)
    assert accounting_verdict([ok("a")], served("a"), items=("mix-7-2-1",)).row("lost").unproven == ""


def _load_scenario(log: ServerLog) -> ScenarioResult:
    """The load suite's mix scenario as the checklist sees it: passed, with the verdicts it judged."""
    items = ("mix-7-2-1", "xl-failure-rate", "baseline-gpu")
    sc = ScenarioResult("test_load[mix-7-2-1]", {i: "" for i in items})
    sc.record("call", "passed")
    sc.verdicts.append(accounting_verdict([ok("a"), ok("b")], log, strict_orphans=False,
                                          items=[i for i in items if i != "baseline-gpu"]))
    return sc


def _status(sc: ScenarioResult) -> dict[str, tuple[str, str]]:
    return {s.item.id: (s.status, s.why) for s in judge(SEED_CHECKLIST, [sc]) if s.item.id in sc.items}


def test_an_environment_without_replica_logs_leaves_the_items_not_proven() -> None:
    got = _status(_load_scenario(server_log_of_plain_env()))
    for item in ("mix-7-2-1", "xl-failure-rate"):
        assert got[item][0] == NOT_PROVEN and "lost: client-side only" in got[item][1], got[item]
    assert got["baseline-gpu"][0] == PROVEN  # the GPU figures do not rest on the replica side


def test_an_environment_with_replica_logs_proves_them() -> None:
    got = _status(_load_scenario(ServerLog(served("a", "b"), "simulator", ["replica-a"])))
    assert {s for s, _ in got.values()} == {PROVEN}, got


def server_log_of_plain_env() -> ServerLog:
    """What the stack fixture reads of an environment whose replicas are plain servers behind no fault proxy."""
    from chaos.env.model import Environment
    from chaos.verify.accounting import server_log_for

    env = Environment.model_validate({"name": "plain", "endpoints": {"api": "http://127.0.0.1:9"},
                                      "targets": [{"name": "r1", "kind": "process", "port": 9,
                                                   "command": ["python", "-m", "http.server", "9"]}]})
    log = server_log_for(env)
    assert (log.source, log.unproven, log.rows) == (None, None, [])
    return log


def _accounting_calls(path: object) -> list[ast.Call]:
    tree = ast.parse(REPO.joinpath(str(path)).read_text(encoding="utf-8"))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "accounting_verdict"]


def test_every_suite_hands_accounting_the_replica_side() -> None:
    calls = {str(p.relative_to(REPO)): _accounting_calls(p.relative_to(REPO)) for p in sorted((REPO / "suites").rglob("*.py"))}
    calls = {p: c for p, c in calls.items() if c}
    assert {"suites/load/test_load.py", "suites/network/test_network.py", "suites/inputs/test_inputs.py"} <= set(calls)
    bare = [f"{p}:{c.lineno}" for p, cs in calls.items() for c in cs
            if len(c.args) < 2 and not any(k.arg == "server_log" for k in c.keywords)]
    assert bare == [], f"accounting_verdict without the replica side's log: {bare}"
