"""Lost versus failed: a request with no outcome, or a success no replica served, is lost (judged
against 0); one that ended in an error the client saw is failed (judged against the fault's allowance)."""
from __future__ import annotations

import pytest

from chaos.errors import SLOViolation
from chaos.load.records import RequestRecord
from chaos.verify.accounting import ServerLog, accounting_verdict, fault_allowance


def req(rid: str, outcome: str | None, t: float = 100.0, e2e: float = 0.5) -> RequestRecord:
    """One logical request of one attempt; outcome None: the client never recorded a final one."""
    err = None if outcome in ("succeeded", None) else "http"
    return RequestRecord(rid, 1, t, e2e=e2e, error=err, status=200 if err is None else (400 if outcome == "rejected"
                                                                                          else 503),
                         model_asked="m", model_answered="m" if err is None else None,
                         final=outcome is not None, outcome=outcome)


def served(*rids: str) -> list[dict]:
    return [{"request_id": r, "t_arrival": 100.0, "status": 200, "outcome": "stop", "model": "m"} for r in rids]


def run(failed: int, rejected: int = 0, ok: int = 5) -> list[RequestRecord]:
    return ([req(f"ok{i}", "succeeded") for i in range(ok)] + [req(f"f{i}", "failed") for i in range(failed)]
            + [req(f"r{i}", "rejected") for i in range(rejected)])


def test_failed_is_not_lost_and_is_judged_against_the_allowance() -> None:
    recs = run(failed=3, rejected=1)
    log = ServerLog(served(*(f"ok{i}" for i in range(5))), "fault proxy", ["http://127.0.0.1:1/_chaos/log"])
    v = accounting_verdict(recs, log, failed_max=4)
    assert (v.row("lost").measured, v.row("lost").ok) == (0, True)
    assert (v.row("failed").measured, v.row("failed").ok) == (4, True)
    assert v.data["lost"] == 0 and v.data["failed"] == 4 and v.data["source"] == "fault proxy"
    over = accounting_verdict(recs, log, failed_max=3)
    assert over.row("failed").ok is False
    with pytest.raises(SLOViolation, match="failed: measured 4 breaks limit 3"):
        over.assert_ok()


def test_no_allowance_shows_failed_without_judging_it() -> None:
    v = accounting_verdict(run(failed=7))
    assert v.row("failed").measured == 7 and v.row("failed").ok is None and v.ok


def test_a_request_with_no_outcome_is_lost() -> None:
    recs = run(failed=0) + [req("gone", None)]
    v = accounting_verdict(recs)
    assert (v.row("lost").measured, v.row("lost").ok) == (1, False) and "gone" in v.row("lost").detail
    assert v.data["lost"] == 1 and v.data["failed"] == 0


def test_a_success_no_replica_served_is_lost() -> None:
    v = accounting_verdict(run(failed=0, ok=3), served("ok0", "ok1"))
    assert (v.row("lost").measured, v.row("lost").ok) == (1, False) and "ok2" in v.row("lost").detail


def test_client_side_only_leaves_lost_not_proven() -> None:
    v = accounting_verdict(run(failed=1), ServerLog())
    row = v.row("lost")
    assert row.ok is None and row.unproven.startswith("client-side only") and row.measured == 0
    assert v.unproven == [row] and v.data["source"] == "client-side only"
    assert v.ok  # not a failure either: the checklist says "not proven"


def test_abandoned_is_neither_lost_nor_failed() -> None:
    v = accounting_verdict(run(failed=0) + [req("ab", "abandoned")])
    assert v.data["lost"] == 0 and v.data["failed"] == 0


def test_fault_allowance_counts_what_the_fault_could_cut_plus_the_budget() -> None:
    recs = [req("before", "succeeded", t=90.0, e2e=1.0),          # ended 91: long before the fault
            req("open", "failed", t=99.0, e2e=0.5),                # last token at 99.5, cut at 100
            req("during", "failed", t=101.0, e2e=1.0),             # sent while the fault held
            req("after", "succeeded", t=106.0)]                    # sent after the engine died at 105
    recs += [req(f"x{i}", "succeeded", t=200.0) for i in range(196)]
    assert fault_allowance(recs, (100.0, 105.0), 0.0) == 2
    assert fault_allowance(recs, (100.0, 105.0), 0.01) == 2 + 2  # 1 % of 200 requests
    assert fault_allowance(recs, None, 0.01) == 2
    allowed = fault_allowance(recs, (100.0, 105.0), 0.01)
    assert allowed.why == "2 open while the fault held + 2 error budget (1.00% of 200)"
    v = accounting_verdict(recs, failed_max=allowed)
    assert v.row("failed").ok is True and "(2 open while the fault held + 2 error budget" in v.row("failed").detail
