"""Drains are declared only beyond the canary share's own noise (a binomial test per bin)."""
from __future__ import annotations

import random

from chaos.env.model import BreakerPolicy
from chaos.load.records import RequestRecord
from chaos.verify.breaker import DRAIN_ALPHA, analyze, binom_cdf

POLICY = BreakerPolicy(window_s=15, min_calls=200, canary_weight=0.2)
T0 = 1_700_000_000.0


def sparse(rps: float, seconds: float, *, seed: int, gap: tuple[float, float] | None = None):
    """Weighted-random routing at 20 % to the canary, `rps` calls a second; none to it during `gap`."""
    rng, out, t = random.Random(seed), [], T0
    while t < T0 + seconds:
        t += rng.expovariate(rps)
        canary = rng.random() < 0.2 and not (gap and gap[0] <= t - T0 < gap[1])
        out.append(RequestRecord(f"r{len(out)}", 1, t, e2e=0.02, status=200,
                                 served_by="canary/c" if canary else "stable/a"))
    return out


def test_binom_cdf():
    assert abs(binom_cdf(1, 20, 0.2) - (0.8 ** 20 + 20 * 0.2 * 0.8 ** 19)) < 1e-12
    assert binom_cdf(0, 52, 0.2) < DRAIN_ALPHA < binom_cdf(0, 51, 0.2)


def test_a_busy_machines_sparse_bins_are_not_drains():
    # 15 calls a second (a stalled canary on 2 busy cores): 1 s bins of about 15 calls
    false_drains = sum(len([m for m in analyze(sparse(15, 100, seed=s), POLICY).moves if m.kind == "drained"])
                       for s in range(20))
    assert false_drains == 0
    # the same traffic judged per bin with no noise test (alpha 1: any low bin is a drain) drains by chance
    assert sum(len(analyze(sparse(15, 100, seed=s), POLICY, alpha=1.0).moves) for s in range(20)) > 0


def test_a_real_drain_at_the_same_rate_is_still_found():
    # the price of the test: at 15 calls a second it takes 50-70 calls (4-5 s) with none to the canary
    # to be sure; the reaction allowance is window_s + reaction_allowance_s (17 s here)
    for s in range(20):
        a = analyze(sparse(15, 60, seed=s, gap=(30, 38)), POLICY, baseline_until=T0 + 30)
        drained = a.first_move("drained", after=T0 + 30)
        assert drained is not None and drained.t + 1.0 - (T0 + 30) <= 6.0, a.moves  # decided at the bin's end
        assert a.first_move("restored", after=drained.t) is not None
