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
from chaos.verify.verdict import Verdict

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


CATCH = "liveness_probe_catch_s"


def catch_bound_s(probe: LivenessProbe) -> float:
    """The longest the probe takes to restart a replica that stopped answering: its first failing probe comes up to
    one period after the outage began, `failure_threshold` periods in all, the last one known at its timeout."""
    return probe.failure_threshold * probe.period_s + probe.timeout_s


def catch_row(v: Verdict, rp: Replay | None, probe: LivenessProbe, t_out: float, t_back: float, *,
              lie_s: float, items: tuple[str, ...] = ()) -> None:
    """The hang the probe must catch: the replica served nothing from `t_out` (the fault took effect) to `t_back`
    (its first real completion after it). Its path may say healthy for `lie_s` of that (slas.health_truth_s, judged
    by health truth), so the limit is the probe's own catch_bound_s plus `lie_s`: a shorter outage leaves it nothing
    to catch; a longer one must be restarted within the limit (and NEAR_S, the dense probe's grain) at every phase.
    A phase that never restarts it in the outage fails in the words of what it missed; `items`: those a probe never
    answered leaves unproven."""
    bound, out, what = catch_bound_s(probe) + lie_s, t_back - t_out, f"the team's liveness probe ({probe.describe()})"
    if out <= bound:
        v.add(CATCH, bound, round(out, 2), True, f"the replica served again {out:.1f} s after the fault took effect, "
              f"within the {bound:g} s {what} may take ({catch_bound_s(probe):g} s, after a {lie_s:g} s lie of its "
              "path): nothing for it to catch")
        return
    if rp is None:
        v.not_proven(CATCH, bound, None, f"{what}: its path was not probed after the fault, so whether it would "
                     f"have caught the {out:.0f} s outage is unknown", items=items)
        return
    late = [r - t_out if r is not None and r <= t_back else None for r in rp.restarts]
    missed = sum(1 for x in late if x is None)
    if missed:
        if rp.unknown:
            v.not_proven(CATCH, bound, None, f"{what}: {rp.unknown} of its replayed probes had no answer near them, and "
                         f"{missed} of {PHASES} phases saw no restart in the {out:.1f} s outage", items=items)
            return
        v.add(CATCH, bound, f">{out:.1f}", False, f"{what} would leave the replica serving nothing for {out:.1f} s at "
              f"{missed} of {PHASES} phases: {probe.path} answered in time while no completion succeeded")
        return
    worst = max(x for x in late if x is not None)
    v.add(CATCH, bound, round(worst, 2), worst <= bound + NEAR_S,
          f"{what} restarted the replica {worst:.1f} s after the fault took effect at its unluckiest of {PHASES} "
          f"phases, in an outage of {out:.1f} s")
