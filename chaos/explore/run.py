"""Running one fault schedule: the faults go in and out at their moments under the environment's load,
several at once where they overlap; then Jepsen's final generator, heal-and-check: every fault is
reverted, the system gets `slas.recovery_s` to serve again, and the whole history is judged.

The loop walks the shared experiment method (chaos/experiment/method.py): its clock, its stop switch
(`chaos stop`, the stop file) and its events, one FaultInjected / FaultReverted per fault, so the
journal and the timeline read a schedule as they read any experiment. Every fault still in place is
reverted on every way out.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.experiment import events as ev
from chaos.experiment.method import Method
from chaos.explore.schedule import Schedule, ScheduledFault


@dataclass
class ScheduleRun:
    """What one schedule did: when each fault went in and out, the load's records, how it ended."""

    schedule: Schedule
    injected: list[tuple[float, str]] = field(default_factory=list)   # (t, fault)
    reverted: list[tuple[float, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)                    # faults that would not inject or revert
    records: list[Any] = field(default_factory=list)
    t_start: float = 0.0
    t_healed: float | None = None   # when the last fault was reverted


def walk(schedule: Schedule, method: Method, build: Callable[[ScheduledFault], Any]) -> ScheduleRun:
    """Inject and revert the schedule's faults at their moments (relative to now) on `method`'s clock.

    A fault that will not inject is noted and skipped (the schedule goes on: what it tests is the
    system, not one fault); every fault in place is reverted before this returns, however it returns."""
    run = ScheduleRun(schedule, t_start=method.clock())
    t0 = run.t_start
    moments = sorted([(f.start_s, 0, i) for i, f in enumerate(schedule.faults)] +
                     [(f.end_s, 1, i) for i, f in enumerate(schedule.faults)])
    active: dict[int, Any] = {}
    try:
        for at, is_end, i in moments:
            method.wait(max(0.0, t0 + at - method.clock()))
            f = schedule.faults[i]
            if not is_end:
                fault = build(f)
                active[i] = fault  # a half-injected fault is reverted too
                try:
                    with method.phase(f"inject {f.describe()}"):
                        fault.inject()
                except Exception as e:
                    run.errors.append(f"{f.describe()}: would not inject: {e}")
                    try:  # whatever part of it took hold goes now (a fault's revert is idempotent)
                        active.pop(i).revert(check=False)
                    except Exception as e2:
                        run.errors.append(f"{f.describe()}: revert after a failed injection failed: {e2}")
                    continue
                run.injected.append((method.clock(), f.describe()))
                method.publish(ev.FaultInjected, fault=f.describe())
            elif i in active:
                _revert(method, run, f, active.pop(i))
    finally:
        for i in sorted(active, reverse=True):
            _revert(method, run, schedule.faults[i], active.pop(i))
        run.t_healed = method.clock()
    return run


def _revert(method: Method, run: ScheduleRun, f: ScheduledFault, fault: Any) -> None:
    try:
        fault.revert(check=False)  # a lapsed fault is no error here: overlapping faults make that normal
        run.reverted.append((method.clock(), f.describe()))
        method.publish(ev.FaultReverted, fault=f.describe())
    except Exception as e:
        run.errors.append(f"{f.describe()}: revert failed: {e}")
        method.publish(ev.FaultReverted, fault=f.describe(), ok=False, error=str(e))
