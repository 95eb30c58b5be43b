"""Wait conditions: what a run waits for, composed with `&` and `|` the way tenacity's stop conditions are,
and evaluated by the runner on the run's clock:

    run.wait_until(engine_restarted(target, before=n) | window_full(calls=200, count=canary_calls), 60)

Each is asked once a poll (`done(run)`); a composite asks every part each time (none is skipped by a
short circuit), so a condition that keeps a history (a sliding window, "closed and stayed closed") sees
every poll. `reset()` forgets that history; `wait_until` calls it before the first poll.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol


class _Restarts(Protocol):
    def restart_count(self) -> int: ...


class Condition:
    """Something a run waits for (see the module docstring)."""

    def done(self, run: Any) -> bool:
        raise NotImplementedError

    def reset(self) -> None:
        """Forget what earlier polls saw (a new wait begins)."""

    def __and__(self, other: Condition) -> Condition:
        return AllConditions((self, other))

    def __or__(self, other: Condition) -> Condition:
        return AnyCondition((self, other))


class _Composite(Condition):
    """Parts joined by `joined` (all or any), nested composites of the same kind flattened."""

    sep: ClassVar[str]

    def __init__(self, parts: tuple[Condition, ...]) -> None:
        flat: list[Condition] = []
        for c in parts:
            flat += c.parts if isinstance(c, _Composite) and type(c) is type(self) else (c,)
        self.parts: tuple[Condition, ...] = tuple(flat)

    def done(self, run: Any) -> bool:
        return self.joined([c.done(run) for c in self.parts])  # a list: every part asked

    def joined(self, answers: list[bool]) -> bool:
        raise NotImplementedError

    def reset(self) -> None:
        for c in self.parts:
            c.reset()

    def __repr__(self) -> str:
        return self.sep.join(map(repr, self.parts))


class AllConditions(_Composite):
    """Done when every part is."""

    sep = " & "

    def joined(self, answers: list[bool]) -> bool:
        return all(answers)


class AnyCondition(_Composite):
    """Done when one part is."""

    sep = " | "

    def joined(self, answers: list[bool]) -> bool:
        return any(answers)


class EngineRestarted(Condition):
    """The target's restart count moved from `before` (its supervisor replaced the replica)."""

    def __init__(self, target: _Restarts, before: int) -> None:
        self.target, self.before = target, before

    def done(self, run: Any) -> bool:
        return bool(self.target.restart_count() != self.before)

    def __repr__(self) -> str:
        return f"engine_restarted(before={self.before})"


def engine_restarted(target: _Restarts, *, before: int) -> EngineRestarted:
    """Done once `target`'s restart count is no longer `before`."""
    return EngineRestarted(target, before)


class WindowFull(Condition):
    """A breaker window holds `calls` calls. `count()` is the window's own count; with `window_s` it is a
    running total instead, and the window is what it rose by over the last `window_s` on the run's clock
    (0 until that long has been seen). `seen` is the window's calls at the last poll."""

    def __init__(self, calls: int, count: Callable[[], int], window_s: float | None) -> None:
        self.calls, self.count, self.window_s = calls, count, window_s
        self.history: list[tuple[float, int]] = []
        self.seen = 0

    def reset(self) -> None:
        self.history, self.seen = [], 0

    def done(self, run: Any) -> bool:
        now, total = run.clock(), self.count()
        if self.window_s is None:
            self.seen = total
        else:
            self.history.append((now, total))
            older = [c for t, c in self.history if t <= now - self.window_s]
            self.seen = total - older[-1] if older else 0
        return self.seen >= self.calls

    def __repr__(self) -> str:
        return f"window_full(calls={self.calls})"


def window_full(*, calls: int, count: Callable[[], int], window_s: float | None = None) -> WindowFull:
    """Done once the window holds `calls` calls (see WindowFull)."""
    return WindowFull(calls, count, window_s)


class BreakerClosed(Condition):
    """`state()` reads "closed" and has read so for `stays_s` on the run's clock, and the clock has passed
    `not_before`: right after a revert the window still holds the fault's errors and may trip once more, as
    late as one window after the revert (a closed canary's window fills to min_calls with them still in it)."""

    def __init__(self, state: Callable[[], str | None], stays_s: float, not_before: float | None = None) -> None:
        self.state, self.stays_s, self.not_before = state, stays_s, not_before
        self.closed_since: float | None = None

    def reset(self) -> None:
        self.closed_since = None

    def done(self, run: Any) -> bool:
        if self.state() != "closed":
            self.closed_since = None
        elif self.closed_since is None:
            self.closed_since = run.clock()
        now = run.clock()
        return (self.closed_since is not None and now - self.closed_since >= self.stays_s
                and (self.not_before is None or now >= self.not_before))

    def __repr__(self) -> str:
        return f"breaker_closed(stays_s={self.stays_s:g})"


def breaker_closed(state: Callable[[], str | None], *, stays_s: float, not_before: float | None = None) -> BreakerClosed:
    """Done once the breaker `state()` reads has been closed for `stays_s`, and not before `not_before`."""
    return BreakerClosed(state, stays_s, not_before)


@dataclass(frozen=True)
class Recovered(Condition):
    """`until=recovered(within=60)`: after the revert the hypothesis must hold again within 60 s. As a wait
    condition: a real completion at the run's primary endpoint succeeded after the fault's revert."""

    within_s: float

    def done(self, run: Any) -> bool:
        from chaos.observe.completion import first_ok_after

        since = run.method.t_revert or run.method.t_inject
        timeline = getattr(run, "timeline", None)
        return since is not None and timeline is not None and first_ok_after(timeline, since) is not None

    def __repr__(self) -> str:
        return f"recovered(within={self.within_s:g})"


def recovered(within: float) -> Recovered:
    """An `until` condition: the stack serves again within `within` seconds of the fault's revert."""
    return Recovered(within)
