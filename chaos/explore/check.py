"""Heal-and-check, the final generator of a schedule run (Jepsen's name for it): with every fault
reverted, the system must serve a real completion through its client endpoint, and every replica
directly, within `slas.recovery_s`; and over the whole history no request may be lost, no retry may
come sooner than the client rules allow, and retries may not amplify traffic past the bound; where the
gateway shows its breakers (an admin API), a forced rollback is held until an operator resets it, and
every other trip heals once the faults are gone."""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from chaos.load.records import RequestRecord
from chaos.verify.accounting import accounting_verdict
from chaos.verify.breaker import default_pool_of, degrade_recovery_s
from chaos.verify.retries import retry_verdict
from chaos.verify.verdict import Verdict


def served_again(env: Any, urls: dict[str, str], t_healed: float, *,
                 probe: Callable[[str], bool], clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep) -> Verdict:
    """Seconds from the heal until `probe(url)` (a real completion) succeeds at the client endpoint
    and at each replica, each against slas.recovery_s."""
    v = Verdict("served again after the heal", window=(t_healed, t_healed + env.slas.recovery_s))
    pending = dict(urls)
    took: dict[str, float] = {}
    deadline = t_healed + env.slas.recovery_s
    while pending and clock() < deadline:
        for name, url in list(pending.items()):
            if probe(url):
                took[name] = clock() - t_healed
                del pending[name]
        if pending:
            sleep(0.2)
    for name in urls:
        got = took.get(name)
        v.add(f"{name}.first_completion_s", env.slas.recovery_s, None if got is None else round(got, 3),
              got is not None and got <= env.slas.recovery_s, "a real completion after every fault was reverted")
    # when the faults' effects were gone too: a restart is reverted when injected, but its replica
    # serves again only after a cold start (seconds on the simulator, 60-165 s for real vLLM here)
    v.data = {"t_served": t_healed + max(took.values(), default=0.0) if not pending else None}
    return v


def history_verdicts(env: Any, records: Sequence[RequestRecord], server_log: Any = None) -> list[Verdict]:
    """Over the whole run: nothing lost (accounting), and the client rules on retries."""
    return [accounting_verdict(records, server_log),
            retry_verdict(records, env.retry, max_amplification=env.slas.max_retry_amplification)]


FORCED_OPEN, CLOSED = "forced_open", "closed"


def rollbacks(transitions: Sequence[dict[str, Any]], pool: str = "canary") -> list[dict[str, Any]]:
    """The gateway's moves of `pool` into forced_open (its rollbacks), oldest first."""
    return [t for t in transitions if t.get("name") == pool and t.get("dst") == FORCED_OPEN]


def breaker_verdict(env: Any, records: Sequence[RequestRecord], transitions: Sequence[dict[str, Any]], *,
                    t_end: float, healed_after_s: dict[str, float | None]) -> Verdict:
    """The breaker's rules over one schedule's history, from the gateway's own transitions (`GET
    /admin/state`, those of this run only) and the traffic the clients saw (`served_by`):

    - a forced rollback ends only by an operator reset: its pool never leaves forced_open otherwise,
      and no request reaches it from `reaction_allowance_s` + 1 s after it (the routing decision of
      a request already on its way) until the end of the run;
    - every pool not rolled back at the heal is closed again within the degrade allowance (window +
      8 open waits + reaction allowance) of it (`healed_after_s`: pool -> seconds, None for never),
      the heal being the moment every replica served again (a breaker cannot close on a replica
      still in its cold start: half-open probes need it to answer)."""
    p = env.breaker
    v = Verdict("breaker rules over the history")
    grace = p.reaction_allowance_s + 1.0
    for pool in sorted({str(t.get("name")) for t in transitions}):
        for rb in rollbacks(transitions, pool):
            t_f = float(rb["t"])
            later = [t for t in transitions if t.get("name") == pool and float(t["t"]) > t_f]
            left = next((t for t in later if t.get("src") == FORCED_OPEN), None)
            by_operator = left is None or str(left.get("reason", "")).startswith("operator")
            v.add(f"{pool}.rollback_held", "left only by an operator reset",
                  "held" if left is None else f"left at +{float(left['t']) - t_f:.1f}s to {left['dst']}: "
                                              f"{left.get('reason')}", by_operator,
                  f"rolled back at {t_f:.1f} ({rb.get('reason')})")
            sent = [r for r in records if default_pool_of(r.served_by) == pool and t_f + grace <= r.t_send <= t_end]
            v.add(f"{pool}.requests_after_rollback", 0, len(sent), not sent,
                  f"requests it served from {grace:g} s after the rollback to the end of the run"
                  + (f" (first at +{min(r.t_send for r in sent) - t_f:.1f}s)" if sent else ""))
    limit = degrade_recovery_s(p)
    for pool, took in sorted(healed_after_s.items()):
        v.add(f"{pool}.closed_after_heal_s", limit, None if took is None else round(took, 1),
              took is not None and took <= limit,
              "every trip that was no rollback heals once the faults are gone and every replica served again")
    return v
