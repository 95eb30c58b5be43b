"""The overload rule: busy (529, or any of the policy's overload_statuses) is not down. A client must retry
the same service, no sooner than min_interval_s; never retrying it (failing over, giving up) or retrying
within 100 ms fails, each in its own words."""
from __future__ import annotations

import pytest

from chaos.env.model import RetryPolicy
from chaos.verify.backoff import judge
from chaos.verify.recorder import Arrival

POLICY = RetryPolicy(min_interval_s=0.5, multiplier=2.0, max_interval_s=2.0, max_attempts=4, jitter=0.2, deadline_s=10)


def seq(key: str, waits: list[float], action: str) -> list[Arrival]:
    """Arrivals of one logical request whose client waited `waits` between attempts, each answered `action`."""
    out, t = [], 100.0
    for i in range(len(waits) + 1):
        out.append(Arrival(key, key.split("/")[0], key, i + 1, t, 1e9 + t, "/v1/chat/completions", action,
                           t_end_perf=t + 0.01))
        if i < len(waits):
            t += 0.01 + waits[i]
    return out


def ok_after(arrivals: list[Arrival]) -> list[Arrival]:
    """The recorder answers the last attempt of a retry-phase request properly."""
    arrivals[-1].action = "ok"
    return arrivals


@pytest.mark.parametrize("wait, ok", [(0.499, False), (0.5, True)])
def test_529_backoff_floor_boundary(wait: float, ok: bool) -> None:
    v = judge({"retry": ok_after(seq("r0/a", [wait, 1.1], action="529"))}, POLICY)
    assert v.row("overload").ok is ok and v.row("min_interval").ok is ok
    words = "backs off on 529: 1/1 retried" if ok else "backs off too little on 529: 1/2 waits below 0.5 s"
    assert v.row("overload").detail.startswith(words), v.row("overload").detail


def test_529_retried_within_100ms_is_hammering() -> None:
    v = judge({"retry": ok_after(seq("r0/a", [0.099, 0.1, 0.1], action="529"))}, POLICY)
    row = v.row("overload")
    assert row.ok is False and row.detail.startswith("hammers on 529: 3/3 retries within 100 ms"), row.detail
    assert v.row("exponential").ok is False  # judged like a 503: no growth is a failure too


def test_529_never_retried_is_treated_as_down() -> None:
    """A client that fails over on a 529 leaves this service after one attempt: the recorder sees it give up."""
    v = judge({"retry": [a for i in range(3) for a in seq(f"r{i}/a", [], action="529")]}, POLICY)
    row = v.row("overload")
    assert row.ok is False and row.detail.startswith("treats 529 as down: 3/3 logical requests never retried"), row
    assert v.row("retries").ok is False


def test_the_policy_says_which_codes_are_busy() -> None:
    hammer = ok_after(seq("r0/a", [0.05, 0.05], action="503"))
    assert judge({"retry": hammer}, POLICY).row("overload").ok is False  # 503 is busy by default
    only_529 = RetryPolicy(**{**POLICY.model_dump(), "overload_statuses": [529]})
    assert judge({"retry": hammer}, only_529).row("overload").ok is None  # not busy here: other rules judge it
    assert judge({"retry": ok_after(seq("r0/a", [0.5, 1.0], action="reset"))}, POLICY).row("overload").ok is None


def test_a_busy_give_up_phase_counts_too() -> None:
    v = judge({"give_up": seq("g0/a", [0.5, 1.0, 2.0], action="529")}, POLICY)
    assert v.row("overload").ok is True and v.row("gives_up.attempts").ok is True
