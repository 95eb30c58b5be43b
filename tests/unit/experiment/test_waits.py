"""Wait conditions on the run's clock, composed with & and | (every part asked each poll), and the factories
that build this repository's experiments: they return an Experiment and read no clock of their own."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from chaos.env import load
from chaos.experiment import Experiment
from chaos.experiment import events as ev
from chaos.experiment.handle import RunHandle
from chaos.experiment.method import Method
from chaos.experiment.waits import (
    AllConditions,
    AnyCondition,
    breaker_closed,
    engine_restarted,
    recovered,
    window_full,
)
from tests._support import FakeClock as Clock


def _handle() -> tuple[RunHandle, Clock]:
    clock = Clock()
    return RunHandle("waits", Method("waits", bus=ev.EventBus(), clock=clock, sleep=clock.sleep)), clock


class Replica:
    def __init__(self, clock: Clock, restart_at: float) -> None:
        self.clock, self.restart_at, self.asked = clock, restart_at, 0

    def restart_count(self) -> int:
        self.asked += 1
        return 3 + int(self.clock.now >= self.restart_at)


def test_engine_restarted_waits_for_the_count_to_move() -> None:
    run, clock = _handle()
    assert run.wait_until(engine_restarted(Replica(clock, 1_012.0), before=3), timeout=60.0, every=0.1)
    assert 1_012.0 <= clock.now < 1_012.2


def test_window_full_on_a_sliding_window_counts_what_the_total_rose_by() -> None:
    run, clock = _handle()
    total = SimpleNamespace(n=0)

    def count() -> int:  # 10 calls a second, read once a poll
        total.n = int((clock.now - 1_000.0) * 10)
        return total.n

    full = window_full(calls=40, count=count, window_s=5.0)
    assert run.wait_until(full, timeout=20.0, every=0.5)
    assert full.seen >= 40 and 1_005.0 <= clock.now < 1_006.0  # nothing counted before one window was seen
    own = window_full(calls=1_000, count=lambda: 7)
    assert not run.wait_until(own, timeout=2.0, every=0.5) and own.seen == 7


def test_breaker_closed_must_stay_closed_for_its_time() -> None:
    run, clock = _handle()
    states = {1_000.0: "open", 1_003.0: "closed", 1_004.0: "open", 1_006.0: "closed"}

    def state() -> str:
        return [s for t, s in sorted(states.items()) if t <= clock.now + 1e-9][-1]

    assert run.wait_until(breaker_closed(state, stays_s=5.0), timeout=30.0, every=0.2)
    assert 1_011.0 <= clock.now < 1_011.3  # the closing at 1003 did not last: timed from 1006


def test_breaker_closed_waits_out_the_window_that_still_holds_the_faults_errors() -> None:
    # reverted at 1000 with a 20 s window: closed from 1000 on, re-tripped at 1005.6 (the window reached min_calls
    # with the fault's errors in it), closed again at 1016. 5 s of closed alone ended the wait at 1005; not before
    # 1021 it must see the closing that lasts
    run, clock = _handle()
    states = {1_000.0: "closed", 1_005.6: "open", 1_016.0: "closed"}

    def state() -> str:
        return [s for t, s in sorted(states.items()) if t <= clock.now + 1e-9][-1]

    assert run.wait_until(breaker_closed(state, stays_s=5.0, not_before=1_021.0), timeout=60.0, every=0.2)
    assert 1_021.0 <= clock.now < 1_021.3


def test_and_needs_every_part_and_or_one_and_both_ask_every_part() -> None:
    run, clock = _handle()
    early, late = Replica(clock, 1_002.0), Replica(clock, 1_008.0)
    both = engine_restarted(early, before=3) & engine_restarted(late, before=3)
    either = engine_restarted(early, before=3) | engine_restarted(late, before=3)
    assert isinstance(both, AllConditions) and isinstance(either, AnyCondition)
    assert run.wait_until(either, timeout=30.0, every=0.5) and 1_002.0 <= clock.now < 1_002.5
    asked = late.asked
    assert asked >= 4  # asked each poll although the first part decides
    assert run.wait_until(both, timeout=30.0, every=0.5) and 1_008.0 <= clock.now < 1_008.5
    three = both & engine_restarted(early, before=3)
    assert isinstance(three, AllConditions) and len(three.parts) == 3  # flattened, as tenacity's stop_all
    assert not run.wait_until(engine_restarted(early, before=4) | engine_restarted(late, before=4), 3.0, every=0.5)


def test_recovered_is_the_until_condition_and_a_wait_on_the_timeline() -> None:
    run, _ = _handle()
    until = recovered(within=60)
    assert until.within_s == 60 and repr(until) == "recovered(within=60)"
    assert until.done(run) is False  # no fault reverted, no timeline: nothing to have recovered from
    assert repr(recovered(within=5) | window_full(calls=3, count=lambda: 0)) == \
        "recovered(within=5) | window_full(calls=3)"


class Stack:
    """What the factories read from the stack when they are called (no process, no socket)."""

    def __init__(self) -> None:
        self.env = load("local", environ={})

    def capacity_rps(self) -> float | None:
        return None

    def targets_in(self, pool: str) -> list[str]:
        return ["replica-c"]


def test_the_factories_return_experiments_and_read_no_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from chaos.experiment import breaker_tier as bt
    from chaos.experiment import recovery_run as rr

    def no_clock() -> float:
        raise AssertionError("a factory read the clock")

    monkeypatch.setattr(time, "time", no_clock)
    monkeypatch.setattr(time, "monotonic", no_clock)
    assert not hasattr(bt, "time") and not hasattr(rr, "time")
    stack: Any = Stack()
    base = rr.recovery_run(stack, None, None, None, "replica-a", "steady-users")  # type: ignore[arg-type]
    hurt = rr.recovery_run(stack, None, None, "crash-sigkill", "replica-a", "poisson",  # type: ignore[arg-type]
                           fault=lambda: None, crash=True)
    tier = bt.breaker_tier(stack, None, None, "errors-degrade", users=8, duration_s=240.0,  # type: ignore[arg-type]
                           faults=lambda canaries, size: [])
    for exp, name, hurts in [(base, "baseline-replica-a-steady-users", ("replica-a",)),
                             (hurt, "crash-sigkill-replica-a-poisson", ("replica-a",)),
                             (tier, "breaker-errors-degrade", ("replica-c",))]:
        assert isinstance(exp, Experiment) and exp.name == name and tuple(exp.hurt) == hurts
        assert callable(exp.steps) and exp.fault is None  # the steps inject it when its time comes
    with pytest.raises(ValueError, match="recovery_run: give `fault` exactly when `kind` names one"):
        rr.recovery_run(stack, None, None, "crash-sigkill", "replica-a", "poisson")  # type: ignore[arg-type]
