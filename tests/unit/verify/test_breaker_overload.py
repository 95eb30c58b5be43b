"""The black-box breaker verdict counts what the reference gateway counts: busy (an overload status of the
team's policy) is a failure in the window, as down is; other 4xx are not."""
from __future__ import annotations

import pytest

from chaos.env.model import BreakerPolicy
from chaos.load.records import RequestRecord
from chaos.verify.breaker import analyze, counts_as_failure


def answered(status: int, t: float = 100.0, served_by: str = "canary/c") -> RequestRecord:
    ok = status == 200
    return RequestRecord("r", 1, t, e2e=0.1, status=status, error=None if ok else "http", served_by=served_by)


@pytest.mark.parametrize("status, overload, counts", [
    (529, (), True), (503, (), True), (429, (), True), (420, (420, 529), True), (420, (429, 503, 529), False),
    (400, (429, 503, 529), False), (200, (200,), False),
])
def test_counts_as_failure(status: int, overload: tuple[int, ...], counts: bool) -> None:
    assert counts_as_failure(answered(status), overload) is counts


def test_the_window_counts_the_policys_overload_statuses() -> None:
    recs = [answered(420 if i % 2 else 200, t=100.0 + i * 0.1) for i in range(40)]
    policy = BreakerPolicy(window_s=10, min_calls=5)
    peak = analyze(recs, policy, overload_statuses=[420, 529]).peak_error_rate()
    assert peak == pytest.approx(0.5, abs=0.05)
    assert analyze(recs, policy).peak_error_rate() == 0.0  # not listed: a 4xx is the client's own
