"""The hang the team's liveness probe must catch (chaos.verify.liveness.catch_row): an outage shorter than the
probe's own detection time leaves it nothing to catch; a longer one must be restarted within that time at every
phase, and a probe whose path keeps answering while nothing is served fails, naming the outage."""
from __future__ import annotations

from collections.abc import Callable

from chaos.env.liveness import LivenessProbe
from chaos.verify.liveness import CATCH, PHASES, Answer, catch_bound_s, catch_row, replay
from chaos.verify.verdict import Verdict

PROBE = LivenessProbe(timeout_s=1.0, period_s=5.0, failure_threshold=3)
LIE_S = 5.0  # slas.health_truth_s: how long its path may say healthy while nothing is served


def dense(bad: Callable[[float], bool], until: float = 120.0, every: float = 0.2,
          skip: Callable[[float], bool] = lambda t: False) -> list[Answer]:
    out, t = [], 0.0
    while t <= until:
        if not skip(t):
            out.append(Answer(t, t + (1.0 if bad(t) else 0.01), bad(t)))
        t = round(t + every, 3)
    return out


def judged(answers: list[Answer], t_out: float, t_back: float) -> Verdict:
    v = Verdict("liveness")
    catch_row(v, replay(answers, PROBE, t_out, 120.0), PROBE, t_out, t_back, lie_s=LIE_S, items=("detection-signals",))
    return v


def test_the_bound_is_threshold_periods_and_a_timeout() -> None:
    assert catch_bound_s(PROBE) == 16.0


def test_a_short_outage_leaves_the_probe_nothing_to_catch() -> None:
    v = judged(dense(lambda t: False), 10.0, 30.0)  # 20 s: under 16 s and the 5 s its path may lie
    assert v.ok and v.row(CATCH).measured == 20.0 and "nothing for it to catch" in v.row(CATCH).detail


def test_a_dead_replica_is_restarted_at_every_phase_within_the_bound() -> None:
    v = judged(dense(lambda t: 10.0 <= t < 90.0), 10.0, 90.0)
    row = v.row(CATCH)
    assert v.ok and row.ok and 15.0 <= row.measured <= 16.0 + 1.0, row
    lied = judged(dense(lambda t: 14.0 <= t < 90.0), 10.0, 90.0)  # its path said healthy for 4 s first: allowed
    assert lied.ok and lied.row(CATCH).measured > 16.0, lied.row(CATCH)


def test_health_that_answers_through_a_hang_fails_naming_the_outage() -> None:
    v = judged(dense(lambda t: False), 10.0, 50.0)  # /health 200 while nothing was served for 40 s
    row = v.row(CATCH)
    assert row.ok is False and f"for 40.0 s at {PHASES} of {PHASES} phases" in row.detail, row.detail


def test_a_probe_that_fails_too_late_fails_the_bound() -> None:
    """/health answers for 20 s of the hang (a lie), then fails: the probe restarts ~37 s in, over its 16 + 5 s."""
    v = judged(dense(lambda t: t >= 30.0), 10.0, 100.0)
    row = v.row(CATCH)
    assert row.ok is False and row.measured > 22.0, row


def test_no_answers_after_the_fault_is_not_proven_never_a_pass() -> None:
    v = Verdict("liveness")
    catch_row(v, None, PROBE, 10.0, 60.0, lie_s=LIE_S, items=("detection-signals",))
    row = v.row(CATCH)
    assert row.ok is None and row.unproven and row.items == ("detection-signals",)
    gaps = judged(dense(lambda t: False, skip=lambda t: t > 12.0), 10.0, 60.0)
    assert gaps.row(CATCH).ok is None and "no answer near them" in gaps.row(CATCH).detail
