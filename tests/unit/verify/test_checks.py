"""Combinable checks: p99_below(...) & error_rate_below(...)."""
from __future__ import annotations

import pytest

from chaos.errors import SLOViolation
from chaos.load.records import RequestRecord
from chaos.verify.checks import all_of, error_rate_below, evaluate, goodput_above, p50_below, p99_below
from chaos.verify.verdict import Row


def run(n: int, failed: int, e2e: float = 0.1) -> list[RequestRecord]:
    return [RequestRecord(f"r{i}", 1, 100.0 + i * 0.01, e2e=e2e, ttft=e2e / 2, error="http" if i < failed else None,
                          outcome="failed" if i < failed else "succeeded") for i in range(n)]


@pytest.mark.parametrize("failed, ok", [(99, True), (100, True), (101, False)])  # 0.99 %, 1.00 %, 1.01 %
def test_error_rate_boundary(failed: int, ok: bool) -> None:
    assert evaluate(error_rate_below(0.01), run(10_000, failed)).ok is ok


def test_combined_checks_report_every_row() -> None:
    check = p99_below(2.0) & error_rate_below(0.01) & p50_below(1.3, metric="ttft")
    assert isinstance(check, all_of) and len(check.checks) == 3
    v = evaluate(check, run(100, 0, e2e=2.5))
    assert [r.check for r in v.rows] == ["e2e_p99", "error_rate", "ttft_p50"]
    assert [r.ok for r in v.rows] == [False, True, True]
    with pytest.raises(SLOViolation, match="e2e_p99.*2.500.*2.000"):
        v.assert_ok()


def test_plain_callable_combines_and_window_filters() -> None:
    def at_least_50(records):
        return Row("count", 50, len(records), len(records) >= 50)

    check = at_least_50 & p99_below(1.0)
    assert evaluate(check, run(100, 0)).ok
    v = evaluate(check, run(100, 0), window=(100.0, 100.3))
    assert v.row("count").ok is False and v.window == (100.0, 100.3)


def test_goodput_and_no_data() -> None:
    assert evaluate(goodput_above(10.0, window_s=10.0, e2e=0.2), run(100, 0)).ok
    assert not evaluate(goodput_above(10.1, window_s=10.0, e2e=0.2), run(100, 0)).ok
    assert evaluate(p99_below(1.0), []).rows[0].ok is None


def test_checks_over_traffic_that_never_flowed_prove_nothing() -> None:
    # every row n/a: no limit broken (the assert passes), and the verdict says "not proven", never a pass
    v = evaluate(p99_below(1.0) & error_rate_below(0.01), [], window=(0.0, 10.0))
    assert v.assert_ok() is v and [r.check for r in v.unproven] == ["requests judged"]
    why = v.unproven[0].unproven
    assert "0 requests in window 0.000-10.000" in why and "e2e_p99: no successful samples" in why
    # all failed: the error rate is judged (and fails), so nothing is added
    v = evaluate(p99_below(1.0) & error_rate_below(0.01), run(10, 10))
    assert not v.unproven and not v.ok
    # one check judged, one n/a: judged
    assert not evaluate(p99_below(1.0) & error_rate_below(0.01), run(10, 0)).unproven
