"""Spec vs observed: what the environment's breaker policy asks of a gateway, and what it did.

One table per breaker scenario, for any gateway: the tier it reached (none, degrade, rollback),
the time from the fault to the canary being drained, how far the canary's share moved, the time to
recover after the fault, the flaps (drains after the first), and the requests clients lost. The
tier row's pass/fail is verify_breaker's judgement; where it fails, the observed tier says what
the gateway did instead (for example nginx: "degrade, came back 2 times during the fault" where the
policy asks for a rollback held until an operator reset).
"""
from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from chaos.env.model import BreakerPolicy
from chaos.errors import SLOViolation
from chaos.load.records import RequestRecord
from chaos.verify.breaker import (
    BreakerAnalysis,
    analyze,
    check_degrade,
    check_no_trip,
    check_rollback,
    degrade_recovery_s,
    verify_breaker,
)
from chaos.verify.upstream import attempts_source
from chaos.verify.verdict import Verdict


@dataclass
class Observed:
    """What the gateway did in one scenario (seconds are from the fault's start or end)."""

    tier: str                     # none | degrade | rollback | late (drained after the allowance)
    reaction_s: float | None      # fault start -> canary drained
    baseline_share: float         # the canary's share of upstream traffic before the fault
    share_during: float | None    # its median share from the drain to the fault's end
    recover_s: float | None       # fault end -> restored
    returns_during_fault: int     # restored while the fault was still on (a gateway that gave up)
    flaps: int                    # drains after the first one
    lost: int                     # logical requests whose last attempt failed


def lost_requests(records: Iterable[RequestRecord]) -> int:
    """Logical requests the clients saw fail in the end (their final attempt an error, not a 4xx reject)."""
    return sum(1 for r in records if r.final and r.outcome == "failed")


def observe(a: BreakerAnalysis, fault: tuple[float, float], until: float, records: Sequence[RequestRecord]) -> Observed:
    """Classify the gateway's reaction to a fault over `fault`, watched until `until` (the operator
    reset, or the end of the hold after the revert)."""
    p, (t0, t1) = a.policy, fault
    tier = "none"
    try:
        check_no_trip(a, t0, t1 + p.window_s)
    except SLOViolation:
        tier = "late"
        try:
            check_degrade(a, t0)
            tier = "degrade"
            check_rollback(a, t0, until)
            tier = "rollback"
        except SLOViolation:
            pass
    drain = a.first_move("drained", after=t0)
    drains = [m for m in a.moves if m.kind == "drained" and t0 <= m.t <= t1 + p.window_s]
    returns = [m for m in a.moves if m.kind == "restored" and drain is not None and drain.t < m.t <= t1]
    during = sorted(s for t, s in a.share if drain is not None and drain.t <= t <= t1)
    back = a.first_move("restored", after=t1) if drain is not None else None
    return Observed(tier=tier, reaction_s=None if drain is None else round(drain.t - t0, 2),
                    baseline_share=round(a.baseline_share, 3),
                    share_during=round(during[len(during) // 2], 3) if during else None,
                    recover_s=None if back is None else round(back.t - t1, 2),
                    returns_during_fault=len(returns), flaps=max(0, len(drains) - 1), lost=lost_requests(records))


def _said(obs: Observed) -> str:
    if obs.tier == "none":
        return "none (the canary kept its share)"
    extra = f", came back {obs.returns_during_fault} time(s) during the fault" if obs.returns_during_fault else ""
    return f"{obs.tier}{extra}"


def spec_vs_observed(attempts: Sequence[RequestRecord], clients: Sequence[RequestRecord], policy: BreakerPolicy, *,
                     expect: str, fault: tuple[float, float], until: float,
                     gateway: str) -> tuple[Verdict, Observed, BreakerAnalysis]:
    """The scenario's verdict as a table; FAILS where the gateway departs from the policy.

    `attempts`: what the replicas were asked (the breaker's view: chaos.verify.upstream, else the
    clients' records with a pool header); `clients`: the clients' records, for the requests lost."""
    p, (t0, t1) = policy, fault
    a = analyze(attempts, p, baseline_until=t0)
    obs = observe(a, fault, until, clients)
    v = Verdict(f"breaker spec vs observed ({gateway}): expect {expect}", window=(t0, t1))
    try:
        verify_breaker(attempts, p, expect=expect, fault=fault, until=until if expect == "rollback" else None)
        judged, why = True, ""
    except SLOViolation as e:
        judged, why = False, str(e)
    v.add("tier", expect, expect if judged else _said(obs), judged, why or "verify_breaker: every check holds")
    react_limit = p.window_s + p.reaction_allowance_s
    v.add("reaction_s", "no reaction" if expect == "none" else f"<= {react_limit:g}",
          "never" if obs.reaction_s is None else obs.reaction_s, None, "fault start -> canary drained")
    v.add("canary_share", f"baseline {obs.baseline_share:.0%}" if expect == "none" else "<= 25 % of baseline",
          "-" if obs.share_during is None else f"{obs.share_during:.0%} (baseline {obs.baseline_share:.0%})", None,
          "median share of upstream attempts from the drain to the fault's end")
    recover = ("n/a" if expect == "none" else "held until operator reset" if expect == "rollback"
               else f"<= {degrade_recovery_s(p):g}")
    v.add("recover_s", recover, "-" if obs.recover_s is None else obs.recover_s, None, "fault end -> canary restored")
    v.add("flaps", "0" if expect != "degrade" else f"<= {2 * (1 + math.ceil((t1 - t0) / max(p.open_wait_s, 1.0)))}",
          obs.flaps, None, f"returned during the fault: {obs.returns_during_fault}")
    v.add("failed", "-", obs.lost, None, "logical requests whose last attempt failed: errors the client saw, not lost "
          "ones (request accounting judges both)")
    v.add("attempts_from", "replica side (fault proxies)", attempts_source(attempts), None,
          "the upstream attempts every row above counts (the canary's share, its errors and latency)")
    return v, obs, a


def write_table(path: Path, scenario: str, gateway: str, expect: str, v: Verdict, obs: Observed) -> None:
    """Append one scenario's result as a JSON line (what tests of third-party gateways read back)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    row = {"scenario": scenario, "gateway": gateway, "expect": expect, "ok": v.ok, "observed": asdict(obs),
           "rows": [{"check": r.check, "expected": str(r.limit), "measured": str(r.measured), "ok": r.ok}
                    for r in v.rows]}
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")
