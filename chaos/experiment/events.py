"""Typed events an experiment publishes, and the bus its subscribers (journal, timeline, Allure,
the live view) hang on. A subscriber that raises is reported once and unhooked: it never stops an
experiment from reverting its fault."""
from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Event:
    """Something that happened in an experiment, at wall-clock time `t` (epoch seconds)."""

    t: float
    experiment: str

    @property
    def kind(self) -> str:
        return type(self).__name__

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.kind, **asdict(self)}


@dataclass(frozen=True)
class ExperimentStarted(Event):
    """The experiment began (its plan in words)."""

    plan: str = ""


@dataclass(frozen=True)
class PhaseStarted(Event):
    """A phase began: steady state, inject, hold, revert, recover, verify (or a suite's own)."""

    phase: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class PhaseEnded(Event):
    """A phase ended; `error` is why it did not end well, `status` how (failed: a check did not
    hold; broken: the harness or the system raised)."""

    phase: str = ""
    ok: bool = True
    error: str | None = None
    status: str = "passed"  # passed | failed | broken


@dataclass(frozen=True)
class FaultInjected(Event):
    """The fault took hold."""

    fault: str = ""


@dataclass(frozen=True)
class FaultReverted(Event):
    """The fault was undone (ok=False: the revert itself failed, `error` says how)."""

    fault: str = ""
    ok: bool = True
    error: str | None = None


@dataclass(frozen=True)
class Measured(Event):
    """One probe's reading: what was expected, what was seen, over which window."""

    probe: str = ""
    expected: str = ""
    got: float | None = None
    ok: bool = True
    window: tuple[float, float] = (0.0, 0.0)
    when: str = ""  # before | during | after


@dataclass(frozen=True)
class HypothesisChecked(Event):
    """The steady-state hypothesis was checked; `failures` are the probes' one-line reasons."""

    when: str = ""  # before | during | after
    ok: bool = True
    failures: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Aborted(Event):
    """The abort guard fired: the system was hurt past the environment's safety.abort limit."""

    reason: str = ""


@dataclass(frozen=True)
class Stopped(Event):
    """An emergency stop: who asked (Ctrl-C, SIGTERM, `chaos stop`, the stop file) and why."""

    by: str = ""
    reason: str = ""


@dataclass(frozen=True)
class VerdictReached(Event):
    """A verdict's outcome: its failing rows, the rows it could not judge ("not proven"), every row."""

    name: str = ""
    ok: bool = True
    failures: tuple[str, ...] = field(default_factory=tuple)
    rows: tuple[str, ...] = field(default_factory=tuple)  # every row: check, limit, measured, ok
    unproven: tuple[str, ...] = field(default_factory=tuple)


@dataclass(frozen=True)
class Noted(Event):
    """Something else worth a line on the timeline and in the journal: a load worker lost, the
    steady state seen again after recovery."""

    what: str = ""
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ExperimentEnded(Event):
    """The experiment's final status: PASSED, FAILED, ABORTED, STOPPED, REFUSED or ERROR."""

    status: str = ""
    reason: str = ""


Subscriber = Callable[[Event], None]


class EventBus:
    """Publishes each event to every subscriber in order."""

    def __init__(self) -> None:
        self._subs: list[Subscriber] = []
        self.events: list[Event] = []

    def subscribe(self, fn: Subscriber) -> Subscriber:
        self._subs.append(fn)
        return fn

    def publish(self, event: Event) -> None:
        self.events.append(event)
        for fn in list(self._subs):
            try:
                fn(event)
            except Exception as e:  # a broken journal or view must not keep a fault in place
                print(f"chaos: event subscriber {getattr(fn, '__qualname__', fn)!s} failed on {event.kind}: {e}; "
                      "unhooked", file=sys.stderr)
                self._subs.remove(fn)


def describe(e: Event) -> str | None:
    """One line in words for the journal's summary and the report's steps (None: nothing to say)."""
    if isinstance(e, PhaseStarted):
        return f"phase {e.phase}"
    if isinstance(e, PhaseEnded):
        return None if e.ok else f"phase {e.phase} ended: {e.error}"
    if isinstance(e, FaultInjected):
        return f"injected {e.fault}"
    if isinstance(e, FaultReverted):
        return (f"reverted {e.fault}" + (f" ({e.error})" if e.error else "")) if e.ok \
            else f"REVERT FAILED for {e.fault}: {e.error}"
    if isinstance(e, VerdictReached) and e.ok and e.unproven:  # never shown as holding
        return f"verdict {e.name}: not proven: " + "; ".join(e.unproven)
    if isinstance(e, (HypothesisChecked, VerdictReached)):
        what = f"hypothesis {e.when}" if isinstance(e, HypothesisChecked) else f"verdict {e.name}"
        return f"{what}: " + ("holds" if e.ok else "; ".join(e.failures))
    if isinstance(e, Aborted):
        return f"ABORTED: {e.reason}"
    if isinstance(e, Stopped):
        return f"STOPPED by {e.by}" + (f": {e.reason}" if e.reason else "")
    if isinstance(e, Noted):
        return e.what.replace("_", " ") + "".join(f", {k}={v}" for k, v in e.detail.items())
    if isinstance(e, ExperimentEnded):
        return f"ended {e.status}" + (f": {e.reason}" if e.reason else "")
    return e.kind
