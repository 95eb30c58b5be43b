"""Shrinking keeps what makes a schedule fail and drops the rest, within its run budget."""
from __future__ import annotations

from chaos.explore.schedule import Schedule, ScheduledFault
from chaos.explore.shrink import candidates, shrink

BIG = Schedule(horizon_s=60, faults=[
    ScheduledFault(kind="jitter", proxy="client", start_s=4.0, duration_s=20.0, latency=2000, jitter=500),
    ScheduledFault(kind="restart", target="replica-a", start_s=12.0, duration_s=0.0),
    ScheduledFault(kind="http-error", target="replica-c", start_s=14.0, duration_s=30.0, fraction=0.1),
    ScheduledFault(kind="reset-peer", proxy="replica-b", start_s=30.0, duration_s=8.0, toxicity=0.3),
])


def _bug(s: Schedule) -> bool:
    """A planted interaction: a restart of replica-a while replica-c answers 500s breaks the system."""
    restart = next((f for f in s.faults if f.kind == "restart" and f.target == "replica-a"), None)
    errors = next((f for f in s.faults if f.kind == "http-error" and f.target == "replica-c"), None)
    return restart is not None and errors is not None and errors.start_s <= restart.start_s + 5 <= errors.end_s


def test_shrinking_finds_the_two_faults_that_interact():
    out = shrink(BIG, _bug, max_runs=40)
    assert _bug(out.schedule) and len(out.schedule.faults) == 2
    assert {f.kind for f in out.schedule.faults} == {"restart", "http-error"}
    assert all(not f.params() for f in out.schedule.faults)  # parameters the bug does not need are gone too
    assert out.steps and out.runs <= 40


def test_the_run_budget_bounds_the_replays():
    calls = []
    out = shrink(BIG, lambda s: calls.append(s) or _bug(s), max_runs=3)
    assert len(calls) == 3 and out.runs == 3


def test_a_schedule_that_no_longer_fails_stays_as_it_was():
    out = shrink(BIG, lambda s: False, max_runs=100)
    assert out.schedule == BIG and out.steps == [] and out.runs == len(list(candidates(BIG)))


def test_with_confirm_a_candidate_that_fails_only_once_is_not_taken():
    from chaos.explore.schedule import Schedule, ScheduledFault
    from chaos.explore.shrink import shrink

    s = Schedule(horizon_s=30, faults=[
        ScheduledFault(kind="http-error", target="replica-c", start_s=0, duration_s=0.5, fraction=0.1),
        ScheduledFault(kind="restart", target="replica-a", start_s=0, duration_s=0)])
    flaky = {"n": 0}

    def still_fails(c: Schedule) -> bool:
        if len(c.faults) == 2:
            return True
        if c.faults[0].kind == "restart":  # the restart alone fails every other replay
            flaky["n"] += 1
            return flaky["n"] % 2 == 1
        return False

    assert len(shrink(s, still_fails, max_runs=6).schedule.faults) == 1  # one failure was enough
    flaky["n"] = 0
    out = shrink(s, still_fails, max_runs=6, confirm=2)
    assert [f.kind for f in out.schedule.faults] == ["http-error", "restart"] and out.runs == 6
