"""Passive outlier ejection (chaos.stack.gateway.ejection) on a fake clock: out after N failures in a row,
back after the hold for one try, out again at its next failure; never every replica of a pool; off at 0."""
from __future__ import annotations

from chaos.stack.gateway.ejection import Ejection


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_out_after_n_failures_in_a_row_and_back_after_the_hold() -> None:
    clock = Clock()
    e = Ejection(after=3, hold_s=10.0, clock=clock)
    for ok in (False, False, True, False, False):  # an answer resets the count: never three in a row
        e.record("a", ok)
    assert not e.out("a") and e.rotation(["a", "b"], str) == ["a", "b"]
    e.record("a", False)
    assert e.out("a") and e.rotation(["a", "b"], str) == ["b"] and e.ejections == 1
    assert e.state()["out"] == {"a": 10.0}
    clock.t += 10.0
    assert not e.out("a")  # the hold is over: the next request may try it
    e.record("a", False)  # and one more failure takes it out again, its count never reset
    assert e.out("a") and e.ejections == 2
    clock.t += 10.0
    e.record("a", True)
    e.record("a", False)
    assert not e.out("a")  # it answered: three in a row again before it is out


def test_a_pool_whose_every_replica_is_out_tries_them_all() -> None:
    e = Ejection(after=1, hold_s=5.0, clock=Clock())
    e.record("a", False)
    e.record("b", False)
    assert e.out("a") and e.out("b") and e.rotation(["a", "b"], str) == ["a", "b"]


def test_off_by_default() -> None:
    e = Ejection()
    for _ in range(100):
        e.record("a", False)
    assert not e.out("a") and e.ejections == 0 and e.rotation(["a"], str) == ["a"]


def test_progress_ejection_is_counted_apart_and_works_with_failure_ejection_off() -> None:
    clock = Clock()
    e = Ejection(after=0, hold_s=10.0, clock=clock)
    e.eject("a", "no decode progress", progress=True)
    assert e.out("a") and e.rotation(["a", "b"], str) == ["b"]
    assert e.state()["progress_ejections"] == {"a": 1} and e.ejections == 1
    clock.t += 10.0
    assert not e.out("a") and e.rotation(["a", "b"], str) == ["a", "b"]
