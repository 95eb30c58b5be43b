"""The team's liveness probe replayed at every phase over a dense probe (chaos.verify.liveness): slow work it would
restart is caught at the phases that land on it, a long outage at every phase, a periodic stall at the phases
aligned with it; a probe with no dense answer near it is unknown, never a failure. The hang it must catch
(catch_row): an outage shorter than the probe may take leaves it nothing to catch; a longer one must be restarted
within that at every phase, and a path that keeps answering while nothing is served fails, naming the outage."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from chaos.env.liveness import LivenessProbe
from chaos.observe.timeline import Timeline
from chaos.verify.liveness import CATCH, PHASES, Answer, answers, catch_bound_s, catch_row, replay
from chaos.verify.verdict import Verdict

PROBE = LivenessProbe(timeout_s=1.0, period_s=5.0, failure_threshold=3)


def dense(bad: Callable[[float], bool], until: float = 60.0, every: float = 0.2,
          skip: Callable[[float], bool] = lambda t: False) -> list[Answer]:
    out, t = [], 0.0
    while t <= until:
        if not skip(t):
            out.append(Answer(t, t + (1.0 if bad(t) else 0.01), bad(t)))
        t = round(t + every, 3)
    return out


def test_healthy_answers_restart_nothing() -> None:
    rp = replay(dense(lambda t: False), PROBE, 0.0, 60.0)
    assert rp.killed == 0 and rp.first() is None and rp.unknown == 0 and len(rp.restarts) == PHASES


def test_a_stall_longer_than_two_periods_is_restarted_at_the_phases_that_land_on_it() -> None:
    """12 s of failures from t=20: three probes 5 s apart fit in it for a first probe in [20, 22], 2 s of 5."""
    rp = replay(dense(lambda t: 20.0 <= t < 32.0), PROBE, 0.0, 60.0)
    assert rp.killed == pytest.approx(PHASES * 2 / 5, abs=1)
    assert rp.first() == pytest.approx(31.0, abs=0.3) and rp.last() is None  # known at its timeout; some phases never
    short = replay(dense(lambda t: 20.0 <= t < 29.0), PROBE, 0.0, 60.0)  # under two periods: no phase restarts it
    assert short.killed == 0


def test_a_long_outage_is_restarted_at_every_phase_from_the_luckiest_to_the_unluckiest() -> None:
    rp = replay(dense(lambda t: t >= 10.0), PROBE, 10.0, 60.0)
    assert rp.killed == PHASES
    assert rp.first() == pytest.approx(21.0, abs=0.3) and rp.last() == pytest.approx(25.75, abs=0.3)


def test_a_periodic_stall_is_restarted_at_the_phases_aligned_with_it() -> None:
    """/health late for 1 s every 5 s (a busy loop): no stretch is long, but the probes that land on it fail each time."""
    rp = replay(dense(lambda t: t % 5.0 < 1.0), PROBE, 0.0, 60.0)
    assert 0 < rp.killed < PHASES and rp.first() is not None and rp.first() < 12.0


def test_a_probe_with_no_dense_answer_near_it_is_unknown_never_a_failure() -> None:
    rp = replay(dense(lambda t: t >= 10.0, skip=lambda t: 14.0 < t < 40.0), PROBE, 10.0, 60.0)
    assert rp.unknown > 0 and all(r is None or r > 40.0 for r in rp.restarts)


def test_answers_read_the_dense_probe_from_the_timeline() -> None:
    tl = Timeline(clock=lambda: 0.0)
    for t, status, latency in [(1.0, 200, 0.01), (1.2, None, 1.0), (1.4, 503, 0.02)]:
        tl.sample("liveness", "status", status, t=t)
        tl.sample("liveness", "latency", latency, t=t)
    assert answers(tl) == [Answer(1.0, 1.01, False), Answer(1.2, 2.2, True), Answer(1.4, 1.42, True)]
    assert answers(Timeline(clock=lambda: 0.0)) == []


LIE_S = 5.0  # slas.health_truth_s: how long its path may say healthy while nothing is served


def judged(got: list[Answer], t_out: float, t_back: float) -> Verdict:
    v = Verdict("liveness")
    catch_row(v, replay(got, PROBE, t_out, 120.0), PROBE, t_out, t_back, lie_s=LIE_S, items=("detection-signals",))
    return v


def test_the_bound_is_threshold_periods_and_a_timeout() -> None:
    assert catch_bound_s(PROBE) == 16.0


def test_a_short_outage_leaves_the_probe_nothing_to_catch() -> None:
    v = judged(dense(lambda t: False, until=120.0), 10.0, 30.0)  # 20 s: under 16 s and the 5 s its path may lie
    assert v.ok and v.row(CATCH).measured == 20.0 and "nothing for it to catch" in v.row(CATCH).detail


def test_a_dead_replica_is_restarted_at_every_phase_within_the_bound() -> None:
    v = judged(dense(lambda t: 10.0 <= t < 90.0, until=120.0), 10.0, 90.0)
    row = v.row(CATCH)
    assert v.ok and row.ok and 15.0 <= row.measured <= 16.0 + 1.0, row
    lied = judged(dense(lambda t: 14.0 <= t < 90.0, until=120.0), 10.0, 90.0)  # its path said healthy for 4 s first: allowed
    assert lied.ok and lied.row(CATCH).measured > 16.0, lied.row(CATCH)


def test_health_that_answers_through_a_hang_fails_naming_the_outage() -> None:
    v = judged(dense(lambda t: False, until=120.0), 10.0, 50.0)  # /health 200 while nothing was served for 40 s
    row = v.row(CATCH)
    assert row.ok is False and f"for 40.0 s at {PHASES} of {PHASES} phases" in row.detail, row.detail


def test_a_probe_that_fails_too_late_fails_the_bound() -> None:
    """/health answers for 20 s of the hang (a lie), then fails: the probe restarts ~37 s in, over its 16 + 5 s."""
    v = judged(dense(lambda t: t >= 30.0, until=120.0), 10.0, 100.0)
    row = v.row(CATCH)
    assert row.ok is False and row.measured > 22.0, row


def test_no_answers_after_the_fault_is_not_proven_never_a_pass() -> None:
    v = Verdict("liveness")
    catch_row(v, None, PROBE, 10.0, 60.0, lie_s=LIE_S, items=("detection-signals",))
    row = v.row(CATCH)
    assert row.ok is None and row.unproven and row.items == ("detection-signals",)
    gaps = judged(dense(lambda t: False, until=120.0, skip=lambda t: t > 12.0), 10.0, 60.0)
    assert gaps.row(CATCH).ok is None and "no answer near them" in gaps.row(CATCH).detail
