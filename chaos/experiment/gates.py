"""A release stage's gate as the runner's verdicts: the users' records of the run and, for a shadow
stage, the pairs the reference gateway mirrored (`GET /admin/mirror`), judged by chaos.verify.release."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chaos.errors import ChaosError
from chaos.observe.gateway import GatewayAdminError, env_admin_call
from chaos.verify.release import Tolerance, live_gate, shadow_gate
from chaos.verify.verdict import Verdict


class GateError(ChaosError):
    """The gate could not read what it judges (the gateway's admin API)."""


def mirror_pairs(env: Any, since: float) -> list[dict[str, Any]]:
    """The shadow pairs the environment's reference gateway kept since `since` (epoch seconds)."""
    try:
        return list(env_admin_call(env, "GET", f"/admin/mirror?since={since:.3f}", timeout_s=10)["pairs"])
    except (GatewayAdminError, KeyError, TypeError) as e:
        raise GateError(f"shadow pairs from {env.endpoints.gateway_admin}: {e}") from None


def replica_timed(pairs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int]:
    """The pairs with both sides' latencies as each replica's fault proxy saw them (arrival to finish),
    and how many pairs were so timed.

    The gateway times a mirrored call itself, and starts it the moment the user's answer is
    complete, which is when the load's user sends its next request. On a busy gateway the canary's
    side of every pair therefore waits on the gateway's loop at its busiest moments, and the stable
    side does not: on a busy 2-core machine the gateway timed the canary's P99 at 0.36-0.44 s against
    stable's 0.10-0.14 s on the same requests. At the replicas' front doors both sides are timed alike. A pair
    whose two sides are not both in the log keeps the gateway's timings for both."""
    took: dict[tuple[str, str], float] = {}
    for r in rows:
        if r.get("t_arrival") is not None and r.get("t_finish") is not None and r.get("replica"):
            took[(str(r.get("request_id")), str(r["replica"]))] = float(r["t_finish"]) - float(r["t_arrival"])
    out, timed = [], 0
    for p in pairs:
        sides = {side: took.get((str(p["request_id"]), str(p[side].get("replica", "")).rsplit("/", 1)[-1]))
                 for side in ("stable", "canary")}
        if all(t is not None for t in sides.values()):
            p = {**p, **{side: {**p[side], "latency_s": round(t or 0.0, 4)} for side, t in sides.items()}}
            timed += 1
        out.append(p)
    return out, timed


def is_shadow(release: Any) -> bool:
    """A shadow stage: the canary serves no user (weight 0) and gets copies (a mirror share)."""
    return bool(release.canary_weight == 0 and release.mirror > 0)


def stage_verdict(env: Any, release: Any, gate: Any, window_s: float, records: list[Any],
                  stage: tuple[float | None, float | None],
                  pairs: Callable[[float], list[dict[str, Any]]] | None = None) -> Verdict:
    """One stage's gate over `stage` (from its inject done to its revert begun): the shadow gate for a shadow stage (its
    baseline the `window_s` of steady state before it), else the live gate."""
    tol = Tolerance(max_diff_score=gate.max_diff_score, max_error_rate_delta=gate.max_error_rate_delta,
                    max_p99_ratio=gate.max_p99_ratio, p99_slack_s=gate.p99_slack_s, min_pairs=gate.min_pairs)
    start, end = stage
    if start is None or end is None:
        raise GateError("the stage was never in place: nothing to judge")
    if is_shadow(release):
        got = (pairs or (lambda since: _replica_timed_pairs(env, since)))(start)
        return shadow_gate(records, got, before=(start - window_s, start), during=(start, end), tol=tol)
    return live_gate(records, during=(start, end), admit=release.admit, tol=tol)


def gate_verdicts(env: Any, release: Any, gate: Any, window_s: float,
                  pairs: Callable[[float], list[dict[str, Any]]] | None = None) -> list[Callable[[Any], Verdict]]:
    """The verdicts of one game-day stage: `stage_verdict` over the time the stage was in place (its
    inject done .. its revert begun: a request routed during either call may have met either release)."""

    def judge(run: Any) -> Verdict:
        return stage_verdict(env, release, gate, window_s, run.records, (run.t_inject, run.t_revert_began), pairs)

    judge.__name__ = "shadow gate" if is_shadow(release) else "live gate"
    return [judge]


def _replica_timed_pairs(env: Any, since: float) -> list[dict[str, Any]]:
    """The gateway's pairs, timed at the replicas' fault proxies where the environment has them."""
    from chaos.verify.accounting import server_log_for

    got = mirror_pairs(env, since)
    if not env.fault_proxies:
        return got
    log = server_log_for(env, ("fault proxy",), since=since - 5.0)  # read over HTTP; slack for the replicas' clocks
    if log.unproven:
        raise GateError(f"replica timings not proven: {log.unproven}")
    return replica_timed(got, log.rows)[0]
