"""Health that tells the truth: the windows in which a health claim (/health, /v1/models, the gateway's
health) said healthy while real completions failed, or unhealthy while they succeeded.

Both series come from the scenario's timeline: a claim prober (`health`, `models`, `health:api`, ...:
HTTP status or None) and the completion prober of the same endpoint (`completion`, `completion:api`).
Each sample's value holds until the next one of its series, for at most `stale_s`: past that the state
is unknown. A window where the claim and the truth disagree is a lie; the longest one is judged against
`slas.health_truth_s`. Unknown time long enough to hide such a lie makes the row "not proven", never
a pass. Times are printed relative to the fault's injection (t+...).
"""
from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from chaos.env.model import TIMEOUT_HELD
from chaos.load.records import RequestRecord
from chaos.observe.timeline import Sample, Timeline
from chaos.targets.container_facts import EXECUTE_TIMEOUT_VAR
from chaos.verify.verdict import Verdict

HEALTHY_LIE, UNHEALTHY_LIE = "healthy while completions failed", "unhealthy while completions succeeded"
# the claim probes a scenario starts (chaos.experiment.run.Run.observe) and what each is called in a row
CLAIMS = {"health": "/health", "models": "/v1/models"}
# faults where real vLLM's /health is known to answer 200 while the engine cannot serve (the page says
# where it was measured); such a lie is named, and judged like any other. A killed worker: vLLM's worker
# monitor sees it at once, but marks the engine dead only after shutting the executor down, which waits
# VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS for the surviving ranks, then 4 s after their SIGTERM (read from
# vllm/v1/executor/multiproc_executor.py; its log shows both steps in the local-vllm run)
_WORKER_KILLED = ("vLLM 0.32: /health 200 for 9.2-9.8 s after a TP worker is SIGKILLed mid-step: until the executor's "
                  "shutdown gives up on the surviving workers (VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS, default 5 s, "
                  "then 4 s after SIGTERM)")
KNOWN_LIES = {
    "nccl-rank-freeze": "vLLM: a frozen TP rank leaves /health 200 until the execute-model timeout kills the engine",
    "nccl-rank-link-cut": "vLLM: a cut rank link leaves /health 200 until the execute-model timeout kills the engine",
    "nccl-timeout-allreduce-hang": "vLLM 0.32: a rank hung in the all-reduce leaves /health 200 until the execute-model "
                                   "timeout kills the engine (20.0-20.4 s on local-vllm at 20 s, 3 runs)",
    "tp-worker-sigkill": _WORKER_KILLED,
    "rank-kill": _WORKER_KILLED,
    "nccl-rank-kill": _WORKER_KILLED,  # the recovery suite's name
}
KNOWN_LIES_DOC = "docs/vllm-fidelity.md#health-that-tells-the-truth"
# the known lies that last exactly as long as the engine's execute-model timeout: the knob that bounds them
# (the faults held until the engine dies of that timeout)
TIMEOUT_BOUND = frozenset(TIMEOUT_HELD)


@dataclass
class Lie:
    """One window in which the claim disagreed with the completions (epoch seconds)."""

    kind: str
    start: float
    end: float
    claims: Counter[str] = field(default_factory=Counter)
    truths: Counter[str] = field(default_factory=Counter)

    @property
    def length(self) -> float:
        return self.end - self.start


@dataclass
class Truth:
    """The comparison of one claim series with its completions over [start, end]."""

    start: float
    end: float
    lies: list[Lie]
    unknown: list[tuple[float, float]]

    def longest(self, kind: str) -> Lie | None:
        return max((x for x in self.lies if x.kind == kind), key=lambda x: x.length, default=None)

    @property
    def unknown_s(self) -> float:
        return max((b - a for a, b in self.unknown), default=0.0)


def _status_text(s: Sample) -> str:
    return str(s.value) if s.value is not None else "refused/timeout"


def _claim(s: Sample) -> str | None:
    """healthy | unhealthy | None (404/405: the endpoint has no such path, so no claim)."""
    v = s.value
    if isinstance(v, int) and not isinstance(v, bool):
        if v in (404, 405):
            return None
        return "healthy" if 200 <= v < 300 else "unhealthy"
    return "unhealthy"


def _truth_text(s: Sample) -> str:
    if s.value is True:
        return "ok"
    err, status = s.labels.get("error", ""), s.labels.get("status", "")
    if status and err == "http":
        return status
    return {"reset": "refused", "": "failed"}.get(err, err)


def _truth_states(samples: Sequence[Sample], records: Sequence[RequestRecord]) -> list[tuple[float, bool, str]]:
    """(t, completions ok?, what the probe saw). A probe that only timed out while load traffic to the
    same endpoint completed meanwhile was slow, not failing (a busy replica on 2 CPU cores)."""
    done = sorted(r.t_end for r in records if r.ok and r.t_end is not None)
    out = []
    for s in sorted(samples, key=lambda s: s.t):
        ok, text = s.value is True, _truth_text(s)
        if not ok and s.labels.get("error") == "timeout" and done:
            i = bisect.bisect_left(done, s.t)
            if i < len(done) and done[i] <= s.t + 2.5:
                ok, text = True, "slow (load served)"
        out.append((s.t, ok, text))
    return out


def compare(claims: Sequence[Sample], completions: Sequence[Sample], records: Sequence[RequestRecord] = (), *,
            claim_stale_s: float = 2.0, truth_stale_s: float = 3.0) -> Truth | None:
    """Lie and unknown windows of one claim series against its completions; None when either is empty."""
    cs = sorted(claims, key=lambda s: s.t)
    ts = _truth_states(completions, records)
    if not cs or not ts:
        return None
    start, end = max(cs[0].t, ts[0][0]), min(cs[-1].t, ts[-1][0])
    if end <= start:
        return Truth(start, start, [], [(start, start)])
    points = sorted({t for t in (s.t for s in cs) if start <= t <= end} | {t for t, _, _ in ts if start <= t <= end}
                    | {start, end})
    lies: list[Lie] = []
    unknown: list[tuple[float, float]] = []
    ci = ti = 0
    for a, b in zip(points, points[1:], strict=False):
        while ci + 1 < len(cs) and cs[ci + 1].t <= a:
            ci += 1
        while ti + 1 < len(ts) and ts[ti + 1][0] <= a:
            ti += 1
        c, (tt, ok, text) = cs[ci], ts[ti]
        claim = _claim(c) if a - c.t <= claim_stale_s else None
        if claim is None or a - tt > truth_stale_s:
            _grow(unknown, a, b)
            continue
        kind = HEALTHY_LIE if claim == "healthy" and not ok else UNHEALTHY_LIE if claim == "unhealthy" and ok else None
        if kind is None:
            continue
        if lies and lies[-1].kind == kind and lies[-1].end == a:
            lies[-1].end = b
        else:
            lies.append(Lie(kind, a, b))
        lies[-1].claims[_status_text(c)] += 1
        lies[-1].truths[text] += 1
    return Truth(start, end, lies, unknown)


def _grow(spans: list[tuple[float, float]], a: float, b: float) -> None:
    if spans and spans[-1][1] == a:
        spans[-1] = (spans[-1][0], b)
    else:
        spans.append((a, b))


def _rel(t: float, t0: float) -> str:
    d = t - t0
    return f"t{'+' if d >= 0 else '-'}{abs(d):.1f}"


def describe(lie: Lie | None, t0: float, what: str) -> str:
    """'9.6 s (t+0.2..t+9.8): /health 200, completions 500/refused' or 'none'."""
    if lie is None:
        return "none"
    claims = "/".join(k for k, _ in lie.claims.most_common())
    truths = "/".join(k for k, _ in lie.truths.most_common())
    return (f"{lie.length:.1f} s ({_rel(lie.start, t0)}..{_rel(lie.end, t0)}): {what} {claims}, "
            f"completions {truths}")


def _pairs(timeline: Timeline) -> list[tuple[str, str, str]]:
    """(claim source, its completion source, label) for each claim prober in the timeline, the hurt
    target's /health first (always: its absence is a row of its own)."""
    sources = sorted({s.source for s in timeline.samples if s.name == "status"})
    out = [("health", "completion", "/health")]
    for src in sources:
        kind, _, where = src.partition(":")
        if kind not in CLAIMS or src == "health":
            continue
        label = CLAIMS[kind] + (f" at {where}" if where else "")
        out.append((src, "completion" + (f":{where}" if where else ""), label))
    return out


def known_lie(fault: str, engine_timeout: tuple[float, str] | None = None) -> str:
    """The row's note on a known lie: what vLLM does, and for a lie the execute-model timeout bounds, that
    knob with the value this target runs (`engine_timeout`: chaos.experiment.suite_budgets.engine_timeout's figure and why)."""
    text = f"a known lie ({KNOWN_LIES[fault]}; {KNOWN_LIES_DOC})"
    if fault in TIMEOUT_BOUND:
        where = f"; here {engine_timeout[1]}" if engine_timeout else ""
        text += (f"; it lasts as long as the engine's execute-model timeout ({EXECUTE_TIMEOUT_VAR}, an environment's "
                 f"vllm.execute_model_timeout_s; vLLM's default 300 s{where}): /health can tell the truth in time "
                 "only where that timeout is under slas.health_truth_s")
    return text


def health_truth_rows(v: Verdict, timeline: Timeline, t_fault: float, limit_s: float, *,
                      records: Sequence[RequestRecord] = (), fault: str | None = None,
                      judged: Sequence[str] = ("/health",), engine_timeout: tuple[float, str] | None = None) -> None:
    """One row per claim probe: the longest lie in each direction, judged against `limit_s` where the
    claim is one the stack acts on (`judged`, slas.health_truth_checks); the others shown unjudged.
    `engine_timeout` (seconds, which setting) is named beside a lie that timeout bounds."""
    name = fault or "no fault"
    for claim_src, truth_src, label in _pairs(timeline):
        check = f"health_truth {label}"
        if label.split(" at ")[0] not in judged:
            _shown(v, check, timeline.series(claim_src, "status"), timeline.series(truth_src, "ok"), records,
                   t_fault, limit_s, name, label)
            continue
        claims, truths = timeline.series(claim_src, "status"), timeline.series(truth_src, "ok")
        if not claims or not truths:
            missing = f"no {label} probes" if not claims else f"no completion probes ({truth_src})"
            v.not_proven(check, limit_s, None, f"{name}: {missing}: whether {label} told the truth is unknown")
            continue
        tr = compare(claims, truths, records)
        assert tr is not None
        if all(_claim(s) is None for s in claims):
            v.not_proven(check, limit_s, None, f"{name}: {label} answered {claims[0].value} throughout: "
                         "this endpoint makes no health claim to judge")
            continue
        hi, lo = tr.longest(HEALTHY_LIE), tr.longest(UNHEALTHY_LIE)
        worst = max(x.length for x in (hi, lo) if x is not None) if (hi or lo) else 0.0
        detail = (f"{name}: {label} lied {HEALTHY_LIE}: {describe(hi, t_fault, label)}; "
                  f"{UNHEALTHY_LIE}: {describe(lo, t_fault, label)}; "
                  f"{len(tr.lies)} window(s) over {_rel(tr.start, t_fault)}..{_rel(tr.end, t_fault)}")
        if hi is not None and fault in KNOWN_LIES and hi.length > limit_s:
            detail += f"; {known_lie(fault, engine_timeout)}"
        if worst > limit_s:
            v.add(check, limit_s, round(worst, 3), False, detail)
        elif tr.end < t_fault or tr.unknown_s > limit_s:
            gap = max(tr.unknown, key=lambda ab: ab[1] - ab[0], default=(tr.start, tr.start))
            why = ("the probes ended before the fault" if tr.end < t_fault else
                   f"state unknown for {gap[1] - gap[0]:.1f} s ({_rel(gap[0], t_fault)}..{_rel(gap[1], t_fault)}): "
                   "a lie could hide there")
            v.not_proven(check, limit_s, round(worst, 3), f"{detail}; {why}")
        else:
            v.add(check, limit_s, round(worst, 3), True, detail)


def _shown(v: Verdict, check: str, claims: Sequence[Sample], truths: Sequence[Sample],
           records: Sequence[RequestRecord], t_fault: float, limit_s: float, name: str, label: str) -> None:
    """A claim the stack does not act on: its lies measured and shown (ok None), never judged."""
    tr = compare(claims, truths, records) if claims and truths else None
    if tr is None:
        v.add(check, limit_s, None, None, f"{name}: no {label} or completion probes; not one of this stack's "
              "health checks (slas.health_truth_checks): not judged")
        return
    hi, lo = tr.longest(HEALTHY_LIE), tr.longest(UNHEALTHY_LIE)
    worst = max((x.length for x in (hi, lo) if x is not None), default=0.0)
    v.add(check, limit_s, round(worst, 3), None,
          f"{name}: {label} lied {HEALTHY_LIE}: {describe(hi, t_fault, label)}; {UNHEALTHY_LIE}: "
          f"{describe(lo, t_fault, label)}; shown, not judged: not one of this stack's health checks "
          "(slas.health_truth_checks)")
