"""The checks themselves: each measures over the requests that ended in a window, a failure counts
against every one, limits are inclusive, and too few requests is a reading without a judgement."""
from __future__ import annotations

import pytest

from chaos.checks import (
    AnyOf,
    Hypothesis,
    error_share_below,
    goodput_per_s_above,
    goodput_share_above,
    live,
    p50_below_s,
    p99_below_s,
    percentile_below_s,
)
from chaos.load.records import RequestRecord

WINDOW = (100.0, 200.0)


def run(n: int, failed: int = 0, e2e: float = 0.1, *, cls: str | None = None, rejected: int = 0) -> list[RequestRecord]:
    out = []
    for i in range(n):
        bad = i < failed + rejected
        outcome = "succeeded" if not bad else "failed" if i < failed else "rejected"
        out.append(RequestRecord(f"r{i}", 1, 100.0 + i * 0.01, e2e=e2e, ttft=e2e / 2, error="http" if bad else None,
                                 status=429 if outcome == "rejected" else 200, outcome=outcome, prompt_class=cls))
    return out


@pytest.mark.parametrize("failed, ok", [(99, True), (100, True), (101, False)])  # 0.99 %, 1.00 %, 1.01 %
def test_the_error_share_limit_is_inclusive(failed: int, ok: bool) -> None:
    r = error_share_below(0.01).measure(run(10_000, failed), (100.0, 300.0))
    assert r.ok is ok and r.probe == "error rate" and r.requests == 10_000


def test_error_share_counts_final_requests_or_every_attempt() -> None:
    recs = run(10) + [RequestRecord(f"r{i}", 1, 100.0, e2e=0.1, error="reset", final=False) for i in range(10)]
    assert error_share_below(0.0).measure(recs, WINDOW).got == 0.0
    attempts = error_share_below(0.4, attempts=True).measure(recs, WINDOW)
    assert attempts.got == 0.5 and attempts.ok is False and attempts.probe == "attempt error rate"


def test_a_request_the_client_rejected_is_not_an_error_but_misses_latency_and_goodput() -> None:
    recs = run(10, rejected=1)
    assert error_share_below(0.0).measure(recs, WINDOW).ok is True
    assert p99_below_s(1.0).measure(recs, WINDOW).ok is False
    assert goodput_share_above(0.9).measure(recs, WINDOW).got == 0.9


def test_a_failed_request_counts_as_an_infinite_latency_never_dropped() -> None:
    r = p99_below_s(1.0).measure(run(100, failed=1, e2e=0.1), WINDOW)
    assert r.ok is True and r.got == 0.1  # 1 % failed: the P99 (nearest rank) is still a success
    r = p99_below_s(1.0).measure(run(100, failed=2, e2e=0.1), WINDOW)
    assert r.ok is False and r.got is None and r.shown == "a failure (counted as a miss)"
    assert p50_below_s(1.0).measure(run(10, failed=5), WINDOW).ok is True
    assert p50_below_s(1.0).measure(run(10, failed=6), WINDOW).ok is False
    assert percentile_below_s(90, 0.1).measure(run(10), WINDOW).ok is True
    assert percentile_below_s(90, 0.05, metric="ttft").measure(run(10), WINDOW).got == 0.05


def test_too_few_requests_is_no_judgement_and_the_hypothesis_fails_it() -> None:
    check = p99_below_s(1.0, min_requests=5)
    r = check.measure(run(4), WINDOW)
    assert r.ok is None and r.got is None and "on >= 5 requests" in r.expected
    held = check.check(run(4), WINDOW)
    assert [x.ok for x in held] == [False]
    assert check.check(run(5), WINDOW)[0].ok is True


def test_only_requests_that_ended_in_the_window_and_of_the_class_count() -> None:
    recs = run(10, e2e=5.0, cls="long") + run(10, e2e=0.1, cls="short")
    assert p99_below_s(1.0, prompt_class="short").measure(recs, WINDOW).requests == 10
    assert p99_below_s(1.0, prompt_class="short").measure(recs, WINDOW).probe == "e2e P99 (short)"
    assert p99_below_s(1.0).measure(recs, (100.0, 101.0)).requests == 10  # the long ones end after 105 s


def test_goodput_as_a_share_and_per_second() -> None:
    recs = run(100, failed=10, e2e=0.1)
    assert goodput_share_above(0.9, e2e_s=0.2).measure(recs, WINDOW).ok is True
    assert goodput_share_above(0.91, e2e_s=0.2).measure(recs, WINDOW).ok is False
    assert goodput_share_above(0.9, e2e_s=0.05).measure(recs, WINDOW).got == 0.0
    assert goodput_per_s_above(0.9).measure(recs, WINDOW).got == pytest.approx(0.9)  # 90 good over 100 s
    assert goodput_per_s_above(0.91).measure(recs, WINDOW).ok is False


def test_checks_combine_with_and_and_or() -> None:
    h = p99_below_s(1.0) & error_share_below(0.01) & goodput_share_above(0.5)
    assert isinstance(h, Hypothesis) and len(h.checks) == 3
    assert h.describe() == "e2e P99 & error rate & goodput"
    assert [r.ok for r in h.readings(run(100, failed=2), WINDOW)] == [False, False, True]
    either = p99_below_s(0.01) | error_share_below(0.01)
    assert isinstance(either, AnyOf)
    assert [r.ok for r in either.readings(run(100), WINDOW)] == [True]
    assert [r.ok for r in (p99_below_s(0.01) | p50_below_s(0.01)).readings(run(100), WINDOW)] == [False]
    # & binds first: (fails & holds) | fails does not hold, though one of its three readings does
    tight = p99_below_s(0.01) & error_share_below(0.01) | p50_below_s(0.01)
    assert [r.ok for r in tight.readings(run(100), WINDOW)] == [False]
    assert [r.ok for r in (tight | error_share_below(0.5)).readings(run(100), WINDOW)] == [True]


def test_a_live_check_asks_now() -> None:
    r = live("api health", "200", lambda: (False, 503.0, "HTTP 503")).readings(run(3), WINDOW)[0]
    assert (r.ok, r.got, r.requests) == (False, 503.0, 3)
    assert "api health: expected 200, got HTTP 503 over window 100.0 s (3 requests)" == r.line()


@pytest.mark.parametrize("make, field", [
    (lambda: error_share_below(1.5), "share"), (lambda: goodput_share_above(90), "share"),
    (lambda: p99_below_s(1.0, metric="itl"), "metric"), (lambda: percentile_below_s(0, 1.0), "q"),
    (lambda: p99_below_s(0), "limit_s"), (lambda: goodput_per_s_above(-1), "per_s"),
    (lambda: goodput_share_above(0.9, ttft_s=0), "ttft_s"), (lambda: error_share_below(0.1, min_requests=0), "min_requests"),
])
def test_bad_arguments_are_one_line_naming_the_field(make, field) -> None:
    with pytest.raises(ValueError, match=rf"^{field}: expected [^\n]*, got "):
        make()
