"""Shrinking a failing schedule to a smaller one that still fails the same way, as property-based
testing shrinks a failing input: drop a fault, halve a duration, move a start earlier, drop a
parameter (the fault's default takes over). Each candidate is replayed; the first that still breaks
the same verdict row becomes the schedule, and the search starts again from it, until no candidate
fails or the run budget is spent. Greedy, so the result is a local minimum: no single step makes it
smaller and still failing.

A real stack is not deterministic: a candidate that fails once may pass the next time (a canary
restart rolls the canary back only when enough of its calls fail in the window). With `confirm` > 1
a candidate is taken only when it fails that many replays in a row, so that the schedule kept is one
that fails when replayed, not one that failed once."""
from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from pydantic import ValidationError

from chaos.explore.schedule import Schedule, ScheduledFault

FIELDS = ("kind", "target", "proxy", "start_s", "duration_s")


def _with(s: Schedule, faults: list[ScheduledFault]) -> Schedule:
    return s.model_copy(update={"faults": faults})


def _fault(f: ScheduledFault, **update: object) -> ScheduledFault:
    data = {**f.model_dump(), **update}
    return ScheduledFault(**{k: v for k, v in data.items() if v is not None or k in FIELDS})


def candidates(s: Schedule) -> Iterator[Schedule]:
    """Smaller schedules, the biggest cuts first."""
    if len(s.faults) > 1:
        for i in range(len(s.faults)):
            yield _with(s, s.faults[:i] + s.faults[i + 1:])
    for i, f in enumerate(s.faults):
        if f.duration_s >= 1.0:
            yield _with(s, s.faults[:i] + [_fault(f, duration_s=round(f.duration_s / 2, 1))] + s.faults[i + 1:])
    for i, f in enumerate(s.faults):
        if f.start_s >= 1.0:
            yield _with(s, s.faults[:i] + [_fault(f, start_s=round(f.start_s / 2, 1))] + s.faults[i + 1:])
    for i, f in enumerate(s.faults):
        for p in sorted(f.params()):
            rest = {k: v for k, v in f.params().items() if k != p}
            try:
                simpler = ScheduledFault(**{k: getattr(f, k) for k in FIELDS}, **rest)
            except ValidationError:
                continue  # a required parameter (slow-headers' seconds) has no default to fall back on
            yield _with(s, s.faults[:i] + [simpler] + s.faults[i + 1:])


@dataclass
class Shrunk:
    schedule: Schedule
    runs: int = 0
    steps: list[str] = field(default_factory=list)


def shrink(s: Schedule, still_fails: Callable[[Schedule], bool], *, max_runs: int = 12, confirm: int = 1) -> Shrunk:
    """The smallest schedule reached within `max_runs` replays for which `still_fails` holds
    (`confirm` times in a row)."""
    out = Shrunk(s)
    progress = True
    while progress and out.runs < max_runs:
        progress = False
        for c in candidates(out.schedule):
            if out.runs >= max_runs:
                break
            fails = 0
            while fails < confirm and out.runs < max_runs:
                out.runs += 1
                if not still_fails(c):
                    break
                fails += 1
            if fails == confirm:
                out.steps.append(f"{len(out.schedule.faults)} -> {len(c.faults)} faults: "
                                 + "; ".join(f.describe() for f in c.faults))
                out.schedule = c
                progress = True
                break
    return out
