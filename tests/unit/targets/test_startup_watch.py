"""The start-up watch (chaos.targets.startup): a replica that cannot start fails the wait naming itself and its last error."""
from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import pytest

from chaos.errors import StackError, TargetError
from chaos.targets.base import Target
from chaos.targets.startup import StartupWatch, wait_all_healthy

DEATH = ("INFO starting\nERROR 12-06 10:00:00 [engine.py:1] EngineCore encountered a fatal error.\n"
         "Traceback (most recent call last):\n  File \"core.py\", line 1, in step\n"
         "RuntimeError: Unsupported CPU attention configuration: head_dim=64 isa=0\nINFO starting again\n")


class FakeTarget:
    """The parts of a Target the watch reads, set by the test."""

    def __init__(self, name: str, *, policy: str = "always", log: str = DEATH) -> None:
        self.name, self.restart_policy, self.text = name, policy, log
        self.log_path = Path(f"/state/{name}.log")
        self.restarts, self.running, self.healthy, self.gone = 0, True, False, False

    def restart_count(self) -> int:
        if self.gone:
            raise TargetError("container does not exist", target=self.name)
        return self.restarts

    def is_running(self) -> bool:
        return self.running

    def health(self) -> bool:
        return self.healthy

    def logs(self, tail: int = 100) -> str:
        return self.text


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, s: float) -> None:
        self.now += s


def _watch(*targets: FakeTarget, clock: Clock, **kw: Any) -> StartupWatch:
    return StartupWatch({t.name: cast(Target, t) for t in targets}, where="stack 'x'", clock=clock, **kw)


def test_two_restarts_fail_naming_the_replica_and_quoting_its_error() -> None:
    a, c, clock = FakeTarget("replica-a"), FakeTarget("replica-c"), Clock()
    watch = _watch(a, c, clock=clock, every_s=0)
    a.restarts = 1
    watch.check()  # one restart may be a flake
    a.restarts = 2
    with pytest.raises(StackError) as e:
        watch.check()
    msg = str(e.value)
    assert msg.startswith("stack 'x': replica-a restarted 2 times before the stack served")
    assert "/state/replica-a.log" in msg
    assert msg.endswith("RuntimeError: Unsupported CPU attention configuration: head_dim=64 isa=0")


def test_restarts_before_the_watch_began_do_not_count() -> None:
    a, clock = FakeTarget("replica-a"), Clock()
    a.restarts = 5
    watch = _watch(a, clock=clock, every_s=0)
    a.restarts = 6
    watch.check()


def test_exit_without_restart_policy_fails_at_once() -> None:
    a, clock = FakeTarget("replica-a", policy="no"), Clock()
    watch = _watch(a, clock=clock, every_s=0)
    a.running = False
    with pytest.raises(StackError, match=r"replica-a exited before the stack served; last error .*RuntimeError"):
        watch.check()


def test_down_between_restarts_is_given_time_then_fails() -> None:
    a, clock = FakeTarget("replica-a"), Clock()
    watch = _watch(a, clock=clock, every_s=0, down_for_s=15)
    a.running = False
    watch.check()
    clock.now = 14.0
    watch.check()
    a.running = True  # restarted: the down time starts again at its next exit
    watch.check()
    a.running = False
    clock.now = 20.0
    watch.check()
    clock.now = 35.0
    with pytest.raises(StackError, match="replica-a exited and stayed down 15 s"):
        watch.check()


def test_a_gone_container_fails_and_says_so() -> None:
    a, clock = FakeTarget("replica-a"), Clock()
    watch = _watch(a, clock=clock, every_s=0)
    a.gone = True
    with pytest.raises(StackError, match="replica-a is gone .*container does not exist"):
        watch.check()


def test_checks_are_spaced() -> None:
    a, clock = FakeTarget("replica-a"), Clock()
    watch = _watch(a, clock=clock, every_s=1.0)
    watch.check()
    a.restarts = 2
    clock.now = 0.5
    watch.check()  # too soon: not read
    clock.now = 1.0
    with pytest.raises(StackError):
        watch.check()


def test_a_log_without_an_error_line_shows_its_tail() -> None:
    a, clock = FakeTarget("replica-a", log="INFO one\nINFO two\nINFO three\nINFO four\n"), Clock()
    watch = _watch(a, clock=clock, every_s=0)
    a.restarts = 2
    with pytest.raises(StackError, match=r"no error line in its log \(/state/replica-a.log\); its last lines: "
                                         r"INFO two \| INFO three \| INFO four$"):
        watch.check()


def test_gateway_added_later_is_watched() -> None:
    a, gw, clock = FakeTarget("replica-a"), FakeTarget("gateway", log="ERROR bind: address already in use\n"), Clock()
    watch = _watch(a, clock=clock, every_s=0)
    watch.add("gateway", cast(Target, gw))
    gw.restarts = 2
    with pytest.raises(StackError, match="gateway restarted 2 times .*ERROR bind: address already in use"):
        watch.check()


def test_troubled_names_each_restarted_or_down_target() -> None:
    a, c, clock = FakeTarget("replica-a"), FakeTarget("replica-c"), Clock()
    watch = _watch(a, c, clock=clock)
    assert watch.troubled() == ""
    a.restarts = 1
    assert watch.troubled().startswith("replica-a restarted 1 time, last error in its log")
    assert "replica-c" not in watch.troubled()


def test_wait_all_healthy_returns_once_each_answers() -> None:
    a, c, clock = FakeTarget("replica-a"), FakeTarget("replica-c"), Clock()
    a.healthy = True

    def sleep(s: float) -> None:
        clock.sleep(s)
        c.healthy = clock.now >= 1.0

    wait_all_healthy({"replica-a": cast(Target, a), "replica-c": cast(Target, c)}, 30, _watch(a, c, clock=clock),
                     sleep=sleep, clock=clock)
    assert 1.0 <= clock.now < 2.0


def test_wait_all_healthy_stops_when_the_watch_fails() -> None:
    a, clock = FakeTarget("replica-a"), Clock()
    watch = _watch(a, clock=clock, every_s=0)

    def sleep(s: float) -> None:
        clock.sleep(s)
        a.restarts = 2 if clock.now > 3 else 0

    with pytest.raises(StackError, match="replica-a restarted 2 times"):
        wait_all_healthy({"replica-a": cast(Target, a)}, 240, watch, sleep=sleep, clock=clock)
    assert clock.now < 4


def test_wait_all_healthy_timeout_names_the_target_and_quotes_it() -> None:
    a, clock = FakeTarget("replica-a"), Clock()
    with pytest.raises(TargetError, match=r"^target replica-a: /health 200 not reached within 5s; last error .*RuntimeError"):
        wait_all_healthy({"replica-a": cast(Target, a)}, 5, None, sleep=clock.sleep, clock=clock)
