"""The team's liveness probe (chaos.env.liveness), replayed at every phase it could have run at: from a dense probe
of the same path with the same timeout (source `liveness`), each of its probes takes the answer of the dense probe
sent nearest to it, and `failure_threshold` failures in a row restart the replica. Over the slow-but-healthy control
a restart at any phase is a false kill (slow work it must not kill); after a fault, the phases' first restarts say
how soon it catches the fault, from the luckiest phase to the unluckiest. Pure: no I/O."""
from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

from chaos.env.liveness import LivenessProbe
from chaos.observe.timeline import Timeline
from chaos.verify.detection import Answer
from chaos.verify.detection import answers as probe_answers

SOURCE = "liveness"
PROBE_EVERY_S = 0.2  # the dense probe's interval: a phase's probe finds an answer sent within 0.1 s of it
PHASES = 20  # phases tried per period
NEAR_S = 1.0  # a phase's probe takes the dense answer sent within this of it; none: unknown


def answers(timeline: Timeline) -> list[Answer]:
    """The dense probe's answers, in the order they were sent (none where the environment declares no probe)."""
    return probe_answers(timeline, SOURCE)


@dataclass(frozen=True)
class Replay:
    """Each phase's first restart (None: none within the stretch), and the probes no dense answer stood for."""

    restarts: tuple[float | None, ...]
    unknown: int

    @property
    def killed(self) -> int:
        return sum(1 for r in self.restarts if r is not None)

    def first(self) -> float | None:
        return min((r for r in self.restarts if r is not None), default=None)

    def last(self) -> float | None:
        """The unluckiest phase's restart; None where some phase never restarted it."""
        return None if not self.restarts or None in self.restarts else max(r for r in self.restarts if r is not None)


def replay(got: list[Answer], probe: LivenessProbe, a: float, b: float) -> Replay:
    """The probe run at each of PHASES phases from `a` until `b`: where `failure_threshold` of its probes in a row
    failed, the time the last failure was known (the restart). A probe with no dense answer sent within NEAR_S
    of it is unknown and ends the run of failures: never counted as one."""
    sent = [x.t for x in got]
    restarts: list[float | None] = []
    unknown = 0
    for i in range(PHASES):
        t, run, restart = a + probe.period_s * i / PHASES, 0, None
        while t <= b and restart is None:
            near = _nearest(sent, t)
            if near is None or abs(got[near].t - t) > NEAR_S:
                unknown, run = unknown + 1, 0
            elif got[near].bad:
                run += 1
                if run >= probe.failure_threshold:
                    restart = got[near].known
            else:
                run = 0
            t += probe.period_s
        restarts.append(restart)
    return Replay(tuple(restarts), unknown)


def _nearest(sorted_t: list[float], t: float) -> int | None:
    if not sorted_t:
        return None
    i = bisect_left(sorted_t, t)
    if i == 0:
        return 0
    if i == len(sorted_t):
        return i - 1
    return i if sorted_t[i] - t < t - sorted_t[i - 1] else i - 1
