"""Every number of the summary's recovery and breaker lines, against the verdicts it came from:
counts add up over scenarios, lost and failed are told apart, the breaker shows observed beside expected."""
from __future__ import annotations

import pytest

from chaos.load.records import RequestRecord
from chaos.report.summary import HEADER, SummaryCollector, add_breaker, add_recovery
from chaos.verify.accounting import accounting_verdict
from chaos.verify.anomaly import observed_anomaly
from chaos.verify.verdict import Verdict


def records(failed: int, lost: int = 0, ok: int = 20) -> list[RequestRecord]:
    out = [RequestRecord(f"ok{i}", 1, 100.0, e2e=0.2, status=200, outcome="succeeded") for i in range(ok)]
    out += [RequestRecord(f"f{i}", 1, 100.0, e2e=0.2, status=503, error="http", outcome="failed")
            for i in range(failed)]
    out += [RequestRecord(f"l{i}", 1, 100.0, e2e=0.2, status=503, error="http", final=False) for i in range(lost)]
    return out


def recovery(first_completion_s: float | None) -> Verdict:
    v = Verdict("recovery")
    v.data = {"first_completion_s": first_completion_s}
    return v


def test_three_recovery_scenarios_with_7_3_and_0_failed_requests() -> None:
    s = SummaryCollector()
    scenarios = [(records(7), 4.213), (records(3, lost=1), 9.5), (records(0), 2.0)]
    verdicts = [accounting_verdict(recs, failed_max=10) for recs, _ in scenarios]
    for av, (_, t) in zip(verdicts, scenarios, strict=True):
        add_recovery(s, recovery(t), av, fault=True)
    assert [av.data["failed"] for av in verdicts] == [7, 3, 0]
    assert [av.data["lost"] for av in verdicts] == [0, 1, 0]
    assert s.render() == [HEADER, "recovery  scenarios=3 worst_recovery_s=9.5 lost=1 failed=10"]


def test_a_baseline_adds_its_requests_but_no_recovery_time() -> None:
    s = SummaryCollector()
    add_recovery(s, recovery(0.1), accounting_verdict(records(2)), fault=False)
    assert s.suites()["recovery"] == {"scenarios": 1, "lost": 0, "failed": 2}


def test_breaker_line_shows_observed_beside_expected() -> None:
    s = SummaryCollector()
    add_breaker(s, "errors-4pct", observed="rollback", expected="rollback")
    add_breaker(s, "errors-1.5pct", observed="none", expected="degrade")
    assert s.render()[1] == ("breaker  scenarios=2 errors-4pct=rollback (expected rollback) "
                             "errors-1.5pct=none (expected degrade)")


def anomaly(tripped: float | None, peak: float) -> Verdict:
    v = Verdict("anomaly trip (oom-burst)")
    v.add("tripped_after_s", 2.0, tripped, tripped is not None and tripped <= 3.0)
    v.add("error_rate_below_degrade", 0.01, peak, peak < 0.01)
    return v


@pytest.mark.parametrize("tripped, peak, said", [(None, 0.004, "none"), (1.2, 0.004, "anomaly"),
                                                 (1.2, 0.02, "trip (error_rate_below_degrade failed)")])
def test_observed_anomaly_tier_comes_from_its_verdict(tripped: float | None, peak: float, said: str) -> None:
    assert observed_anomaly(anomaly(tripped, peak)) == said


def test_add_sums_and_set_replaces() -> None:
    s = SummaryCollector()
    s.add("recovery", failed=7)
    s.add("recovery", failed=3)
    s.set("load", goodput="12/s")
    s.set("load", goodput="13/s")
    assert s.suites() == {"recovery": {"failed": 10}, "load": {"goodput": "13/s"}}
    with pytest.raises(TypeError, match="counters must be numbers.*use set"):
        s.add("routing", no_store="3/4")
