"""What listens to an experiment's events inside a pytest run: the timeline (its phase markers and
fault windows, which the timeline plot shades) and the Allure steps (one per phase, with its wall-clock
start and end). The journal (journal.py) and, in a game day, the live view and the game day's own
Allure results (report.py) hang on the same bus; nothing writes to them behind the bus's back."""
from __future__ import annotations

from typing import Any

from chaos.experiment import events as ev
from chaos.observe.timeline import Event as TimelineEvent
from chaos.observe.timeline import Timeline


class TimelineEvents:
    """Phases become `phase` events (detail: end, duration_s, status), faults `fault_inject` and
    `fault_revert` events named after the experiment, and a Noted event an event of its own kind."""

    def __init__(self, timeline: Timeline) -> None:
        self.timeline = timeline
        self.open: list[TimelineEvent] = []

    def __call__(self, e: ev.Event) -> None:
        tl = self.timeline
        if isinstance(e, ev.PhaseStarted):
            self.open.append(tl.event("phase", e.phase, t=e.t, **e.detail))
        elif isinstance(e, ev.PhaseEnded):
            opened = next((p for p in reversed(self.open) if p.name == e.phase), None)
            if opened is not None:
                self.open.remove(opened)
                opened.detail.update(end=e.t, duration_s=e.t - opened.t, status=e.status)
        elif isinstance(e, ev.FaultInjected):
            tl.event("fault_inject", e.experiment, t=e.t, fault=e.fault)
        elif isinstance(e, ev.FaultReverted):
            tl.event("fault_revert", e.experiment, t=e.t, **({"error": e.error} if e.error else {}))
        elif isinstance(e, ev.Noted):
            tl.event(e.what, e.experiment, t=e.t, **e.detail)


class AllureSteps:
    """Each phase an Allure step titled with its offset from `t0` ("recover  (t+41.2 s)"), its start
    and end as parameters, failed when a check did not hold and broken when something raised."""

    def __init__(self, t0: float) -> None:
        self.t0 = t0
        self.open: list[tuple[str, Any]] = []

    def __call__(self, e: ev.Event) -> None:
        from chaos.report import allure as rep

        if isinstance(e, ev.PhaseStarted):
            self.open.append((e.phase, rep.open_step(f"{e.phase}  (t+{e.t - self.t0:.1f} s)", e.t)))
        elif isinstance(e, ev.PhaseEnded):
            at = next((i for i in range(len(self.open) - 1, -1, -1) if self.open[i][0] == e.phase), None)
            if at is not None:
                # a phase that ended closes any step still open inside it, innermost first
                for _, step in reversed(self.open[at:]):
                    rep.close_step(step, e.t, None if e.ok else e.status, e.error)
                del self.open[at:]
