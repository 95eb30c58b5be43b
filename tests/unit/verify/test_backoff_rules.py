"""Backoff rules on crafted arrivals: each boundary passes on one side and fails on the other."""
from __future__ import annotations

import pytest

from chaos.env.model import RetryPolicy
from chaos.errors import SLOViolation
from chaos.verify.backoff import ClientRun, gaps, judge
from chaos.verify.recorder import Arrival

POLICY = RetryPolicy(min_interval_s=0.5, multiplier=2.0, max_interval_s=2.0, max_attempts=4, jitter=0.2, deadline_s=10)


def seq(key: str, waits: list[float], action: str = "503", retry_after: float | None = None,
        t0: float = 100.0, service: float = 0.01) -> list[Arrival]:
    """Arrivals of one logical request whose client waited `waits` between attempts."""
    out, t = [], t0
    for i in range(len(waits) + 1):
        a = Arrival(key, key.split("/")[0], key, i + 1, t, 1e9 + t, "/v1/chat/completions", action,
                    retry_after=retry_after, t_end_perf=t + service)
        out.append(a)
        if i < len(waits):
            t = a.t_end_perf + waits[i]
    return out


def test_gaps_measure_from_end_of_attempt_to_next_arrival() -> None:
    g = gaps(seq("r0/a", [0.5, 1.0]))
    assert [round(x.seconds, 9) for x in g] == [0.5, 1.0] and [x.index for x in g] == [0, 1]


@pytest.mark.parametrize("wait, ok", [(0.499, False), (0.500, True)])
def test_min_interval_boundary(wait: float, ok: bool) -> None:
    v = judge({"retry": seq("r0/a", [wait, 1.1])}, POLICY)
    assert v.row("min_interval").ok is ok


@pytest.mark.parametrize("second, ok", [(0.74, False), (0.76, True)])
def test_exponential_boundary(second: float, ok: bool) -> None:
    policy = RetryPolicy(min_interval_s=0.5, multiplier=2.0, max_interval_s=8.0, jitter=0.0)
    v = judge({"retry": seq("r0/a", [0.5, second])}, policy, growth_min=1.5)
    assert v.row("exponential").ok is ok


def test_exponential_ignores_waits_at_the_cap() -> None:
    v = judge({"retry": seq("r0/a", [0.5, 1.0, 2.0, 2.0, 2.0])}, POLICY)
    assert v.row("exponential").ok is True


def test_exponential_needs_three_attempts() -> None:
    assert judge({"retry": seq("r0/a", [0.6])}, POLICY).row("exponential").ok is None


def test_jitter_lockstep_fails_and_spread_passes() -> None:
    lock = [a for i in range(6) for a in seq(f"r{i}/x", [0.6, 1.2], t0=100 + i * 0.001)]
    spread = [a for i in range(6) for a in seq(f"r{i}/x", [0.5 + 0.02 * i, 1.0 + 0.04 * i])]
    assert judge({"retry": lock}, POLICY).row("jitter").ok is False
    quiet = [a for i in range(6) for a in seq(f"q{i}/x", [0.5 + 0.001 * (i % 2), 0.5 + 0.001 * (i % 3)])]
    assert judge({"retry": spread, "noise": quiet}, POLICY).row("jitter").ok is True
    assert judge({"retry": seq("r0/x", [0.5, 1.0])}, POLICY).row("jitter").ok is None  # one client: n/a


@pytest.mark.parametrize("longest, ok", [(2.05, True), (2.06, False)])
def test_cap_boundary_with_tolerance(longest: float, ok: bool) -> None:
    v = judge({"give_up": seq("g0/a", [0.5, 1.0, longest])}, POLICY, tolerance_s=0.05)
    assert v.row("cap").ok is ok


def test_gives_up_attempts_and_deadline() -> None:
    ok = judge({"give_up": seq("g0/a", [0.5, 1.0, 2.0])}, POLICY, runs=[ClientRun("g0", True, 4.0)])
    assert ok.row("gives_up.attempts").ok and ok.row("gives_up.deadline").ok
    many = judge({"give_up": seq("g0/a", [0.5] * 4)}, POLICY)
    assert many.row("gives_up.attempts").measured == 5 and many.row("gives_up.attempts").ok is False
    stuck = judge({"give_up": seq("g0/a", [0.5, 1.0])}, POLICY, runs=[ClientRun("g0", False, 15.0)])
    assert stuck.row("gives_up.deadline").ok is False and "still running" in stuck.row("gives_up.deadline").detail
    slow = judge({"give_up": seq("g0/a", [2.0, 2.0, 6.1])}, POLICY, tolerance_s=0.05)
    assert slow.row("gives_up.deadline").ok is False


@pytest.mark.parametrize("retry_after, wait, ok", [(0.2, 0.499, False), (0.2, 0.5, True), (1.5, 1.49, False),
                                                  (1.5, 1.5, True)])
def test_retry_after_never_below_floor(retry_after: float, wait: float, ok: bool) -> None:
    v = judge({"retry": seq("r0/a", [wait], action="429", retry_after=retry_after)}, POLICY)
    assert v.row("retry_after").ok is ok


def test_non_retryable() -> None:
    once = judge({"non_retryable": seq("n0/a", [], action="400")}, POLICY)
    again = judge({"non_retryable": seq("n0/a", [0.6], action="400")}, POLICY)
    assert once.row("non_retryable").ok is True and again.row("non_retryable").ok is False


def test_assert_ok_raises_slo_violation_with_evidence() -> None:
    v = judge({"retry": seq("r0/a", [0.1, 0.1])}, POLICY)
    with pytest.raises(SLOViolation) as e:
        v.assert_ok()
    assert "min_interval" in str(e.value) and "0.500" in str(e.value) and "0.100" in str(e.value)
    rows = {r["check"]: r for r in e.value.evidence["rows"]}
    assert e.value.limit == 0.5 and rows["min_interval"]["ok"] is False and rows["retries"]["ok"] is True
    assert isinstance(e.value, AssertionError)


def test_a_retryable_failure_that_is_never_retried_fails_the_retries_rule() -> None:
    v = judge({"retry": seq("r0/a", [0.6]) + seq("r1/b", []), "give_up": seq("g0/c", [])}, POLICY)
    row = v.row("retries")
    assert row.ok is False and row.measured == "1/3 retried" and "r1/b" in row.detail and "g0/c" in row.detail
    assert judge({"retry": seq("r0/a", [0.6]) + seq("r1/b", [0.7])}, POLICY).row("retries").ok is True


def test_no_request_at_all_fails_and_a_one_attempt_policy_expects_no_retry() -> None:
    assert judge({"retry": []}, POLICY).row("retries").ok is False
    once = RetryPolicy(min_interval_s=0.5, multiplier=2.0, max_interval_s=2.0, max_attempts=1, jitter=0.2, deadline_s=10)
    assert judge({"retry": seq("r0/a", [])}, once).row("retries").ok is None
