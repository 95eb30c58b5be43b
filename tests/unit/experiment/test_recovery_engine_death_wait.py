"""The recovery suite's hold of a frozen rank (chaos.experiment.recovery_run.RecoverySteps._wait_engine_death):
it ends when the engine died of the freeze, seen directly (the fault's engine_died) well before the replica's
restart, then waits for that restart in a phase of its own, bounded by slas.recovery_s; the revert then does not
ask the rank to be still stopped. Measured on the stripped vLLM image: the engine gone 18 s after the freeze, the
container's exit another 18 s later (the SIGKILLed frozen rank's teardown), past the old single 44 s wait."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from chaos.experiment import suite_budgets as budgets
from chaos.experiment.recovery_run import RecoverySteps


class Clock:
    t = 0.0


class FakeRun:
    """The run handle's clock, phases and waits; the steps read no clock of their own."""

    def __init__(self, clock: Clock) -> None:
        self.c, self.phases = clock, []  # type: ignore[var-annotated]

    def clock(self) -> float:
        return self.c.t

    @contextmanager
    def phase(self, name: str, **detail: Any) -> Iterator[None]:
        self.phases.append(name)
        yield

    def poll(self, done: Callable[[], bool], timeout: float, every: float = 0.2) -> bool:
        end = self.c.t + timeout
        while self.c.t < end:
            if done():
                return True
            self.c.t += every
        return done()

    def wait_until(self, condition: Any, timeout: float, every: float = 0.2) -> bool:
        condition.reset()
        return self.poll(lambda: condition.done(self), timeout, every)


class Replica:
    def __init__(self, clock: Clock, restart_at: float | None) -> None:
        self.clock, self.restart_at = clock, restart_at

    def restart_count(self) -> int:
        return int(self.restart_at is not None and self.clock.t >= self.restart_at)


class Freeze:
    def __init__(self, clock: Clock, dies_at: float | None) -> None:
        self.clock, self.dies_at, self.asked = clock, dies_at, 0

    def engine_died(self) -> bool:
        self.asked += 1
        return self.dies_at is not None and self.clock.t >= self.dies_at


class Slas:
    recovery_s = 300.0


class Env:
    slas = Slas()

    def target(self, name: str) -> None:
        return None


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    c = Clock()
    monkeypatch.setattr(budgets, "engine_timeout", lambda cfg: (20.0, "timeout"))
    monkeypatch.setattr(budgets, "engine_death_wait", lambda cfg: (49.0, "timeout + teardown + slack"))
    return c


def _run(clock: Clock, restart_at: float | None) -> RecoverySteps:
    run = object.__new__(RecoverySteps)
    run.sc, run.env, run.name = FakeRun(clock), Env(), "replica-a"  # type: ignore[assignment]
    run.target, run.restarts_before = Replica(clock, restart_at), 0  # type: ignore[assignment]
    run.evidence, run.t_inject = {}, 0.0
    return run


def test_the_engines_death_ends_the_first_wait_and_the_restart_is_waited_for_after(clock: Clock) -> None:
    run = _run(clock, restart_at=46.0)  # the container exited at t+46 s once: past the old single 44 s wait
    freeze = Freeze(clock, dies_at=18.3)
    assert run._wait_engine_death(freeze) is True  # type: ignore[arg-type]
    assert run.sc.phases == ["wait for the engine to die", "wait for the replica's restart"]  # type: ignore[attr-defined]
    assert 46.0 <= clock.t < 46.2  # the restart seen: the fault's window ends there, as before
    assert freeze.asked <= 25  # once a second, not every tick (a docker top each)
    assert "engine_dead_seen_after_s" in run.evidence and "engine_died_after_s" in run.evidence


def test_a_restart_past_the_engine_death_wait_is_still_seen(clock: Clock) -> None:
    run = _run(clock, restart_at=120.0)  # a slow teardown: within slas.recovery_s of the death, not of the timeout
    assert run._wait_engine_death(Freeze(clock, dies_at=18.3)) is True  # type: ignore[arg-type]
    assert clock.t >= 120.0


def test_an_engine_that_never_dies_ends_the_wait_at_its_bound_and_the_revert_checks(clock: Clock) -> None:
    run = _run(clock, restart_at=None)
    assert run._wait_engine_death(Freeze(clock, dies_at=None)) is False  # type: ignore[arg-type]
    assert run.sc.phases == ["wait for the engine to die"] and 49.0 <= clock.t < 49.3  # type: ignore[attr-defined]


def test_a_fault_that_cannot_tell_waits_for_the_restart_as_before(clock: Clock) -> None:
    run = _run(clock, restart_at=30.0)  # a cut rank link: only the replica's restart says the engine died
    assert run._wait_engine_death(object()) is True  # type: ignore[arg-type]
    assert run.sc.phases == ["wait for the engine to die"] and 30.0 <= clock.t < 30.2  # type: ignore[attr-defined]
