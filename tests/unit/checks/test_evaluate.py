"""evaluate(check, records): the same checks as a Verdict, too few requests an n/a row, and a verdict
whose every row is n/a "not proven"."""
from __future__ import annotations

import pytest

from chaos.checks import error_share_below, evaluate, p50_below_s, p99_below_s
from chaos.errors import SLOViolation
from chaos.load.records import RequestRecord


def run(n: int, failed: int, e2e: float = 0.1) -> list[RequestRecord]:
    return [RequestRecord(f"r{i}", 1, 100.0 + i * 0.01, e2e=e2e, ttft=e2e / 2, error="http" if i < failed else None,
                          outcome="failed" if i < failed else "succeeded") for i in range(n)]


@pytest.mark.parametrize("failed, ok", [(99, True), (100, True), (101, False)])  # 0.99 %, 1.00 %, 1.01 %
def test_error_share_boundary(failed: int, ok: bool) -> None:
    assert evaluate(error_share_below(0.01), run(10_000, failed)).ok is ok


def test_combined_checks_report_every_row() -> None:
    check = p99_below_s(2.0) & error_share_below(0.01) & p50_below_s(1.3, metric="ttft")
    v = evaluate(check, run(100, 0, e2e=2.5))
    assert [r.check for r in v.rows] == ["e2e P99", "error rate", "ttft P50"]
    assert [r.ok for r in v.rows] == [False, True, True]
    assert v.row("e2e P99").limit == 2.0 and v.row("e2e P99").measured == 2.5
    with pytest.raises(SLOViolation, match="e2e P99.*2.500.*2.000"):
        v.assert_ok()


def test_the_window_keeps_the_requests_that_ended_inside_it() -> None:
    v = evaluate(error_share_below(0.01, min_requests=1), run(100, 0), window=(100.0, 100.3))
    assert v.window == (100.0, 100.3) and v.data["requests"] == 21  # sent 100.00 .. 100.20, each 0.1 s long


def test_checks_over_traffic_that_never_flowed_prove_nothing() -> None:
    # every row n/a: no limit broken (the assert passes), and the verdict says "not proven", never a pass
    v = evaluate(p99_below_s(1.0) & error_share_below(0.01), [], window=(0.0, 10.0))
    assert [r.ok for r in v.rows[:2]] == [None, None]
    assert v.assert_ok() is v and [r.check for r in v.unproven] == ["requests judged"]
    why = v.unproven[0].unproven
    assert "0 requests in window 0.000-10.000" in why and "e2e P99: too few requests: 0 requests" in why
    # all failed: judged (and failing), so nothing is added
    v = evaluate(p99_below_s(1.0) & error_share_below(0.01), run(10, 10))
    assert not v.unproven and not v.ok
    assert v.row("e2e P99").ok is False  # a failure is a latency miss, not a missing sample
    # one check judged, one n/a: judged
    assert not evaluate(p99_below_s(1.0, min_requests=20) & error_share_below(0.01, min_requests=1), run(10, 0)).unproven
