"""A release stage's gate as the runner's verdicts: the users' records of the run and, for a shadow
stage, the pairs the reference gateway mirrored (`GET /admin/mirror`), judged by chaos.verify.release."""
from __future__ import annotations

from typing import Any, Callable

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


def gate_verdicts(env: Any, release: Any, gate: Any, window_s: float,
                  pairs: Callable[[float], list[dict[str, Any]]] | None = None) -> list[Callable[[Any], Verdict]]:
    """The verdicts of one stage: the shadow gate where the canary serves no user (weight 0 with a
    mirror share), else the live gate; the stage's window is the run's inject..revert, its baseline
    the `window_s` of steady state before it."""
    tol = Tolerance(max_diff_score=gate.max_diff_score, max_error_rate_delta=gate.max_error_rate_delta,
                    max_p99_ratio=gate.max_p99_ratio, p99_slack_s=gate.p99_slack_s, min_pairs=gate.min_pairs)
    fetch = pairs or (lambda since: mirror_pairs(env, since))
    shadow = release.canary_weight == 0 and release.mirror > 0

    def judge(run: Any) -> Verdict:
        start, end = run.t_inject, run.t_revert
        if start is None or end is None:
            raise GateError("the stage was never in place: nothing to judge")
        if shadow:
            return shadow_gate(run.records, fetch(start), before=(start - window_s, start), during=(start, end), tol=tol)
        return live_gate(run.records, during=(start, end), admit=release.admit, tol=tol)

    judge.__name__ = "shadow gate" if shadow else "live gate"
    return [judge]
