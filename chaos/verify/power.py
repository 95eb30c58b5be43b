"""Can a breaker tier be told apart at this sample size? The sample-size side of the breaker verdict.

A gateway's error-rate rule looks at a window of n calls and trips at `threshold` (1 % to degrade,
3 % to roll back). A fault that fails a fraction f of the canary's calls reaches it in one window
with a probability that depends on n and on how the failures fall:
- spread "even" (the fault proxy's default: one failure every 1/f calls): the window holds
  floor(nf) or ceil(nf) failures, so the outcome is certain unless those two straddle the threshold;
- spread "random" (each call fails with probability f, as in a real incident): Binomial(n, f). At
  n = 200, 0.5 % reaches 1 % (2 failures) in 26 % of windows: the tiers cannot be told apart.

A scenario judged over `windows` disjoint windows is wrong when an expected crossing happens in
none of them, or an unexpected one in any. `judgeable` says when that risk exceeds the stated
false-alarm rate `alpha`: the suite then reports INCONCLUSIVE, with the calls per window it would
need, instead of a pass or a fail that is a coin toss. (Sliding windows overlap and correlate;
disjoint ones are the conservative count for a crossing that must happen, an optimistic one for a
crossing that must not, so `windows` counts every window the gateway could close over the fault.)
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chaos.env.model import BreakerPolicy

SPREADS = ("even", "random")
ALPHA = 0.01  # the stated false-alarm rate of one scenario's tier verdict


def failures_needed(calls: int, threshold: float) -> int:
    """The failures a window of `calls` must hold to reach `threshold` (rate >= threshold)."""
    return max(0, math.ceil(threshold * calls - 1e-9))


def _binom_sf(k: int, n: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), in log space (n in the tens of thousands)."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    lp, lq, lgn = math.log(p), math.log1p(-p), math.lgamma(n + 1)
    below = sum(math.exp(lgn - math.lgamma(i + 1) - math.lgamma(n - i + 1) + i * lp + (n - i) * lq) for i in range(k))
    return min(1.0, max(0.0, 1.0 - below))


def reach_probability(calls: int, fraction: float, threshold: float, spread: str = "even") -> float:
    """P(one window of `calls` calls reaches `threshold` when a fraction `fraction` of calls fail)."""
    if spread not in SPREADS:
        raise ValueError(f"spread: expected one of {', '.join(SPREADS)}, got {spread!r}")
    k = failures_needed(calls, threshold)
    if spread == "random":
        return _binom_sf(k, calls, fraction)
    expected = calls * fraction
    low, high = math.floor(expected + 1e-9), math.ceil(expected - 1e-9)
    if low >= k:
        return 1.0
    if high < k:
        return 0.0
    return expected - low  # how often a window catches the ceiling


def wrong_outcome(calls: int, fraction: float, threshold: float, *, expect_reach: bool, windows: int = 1,
                  spread: str = "even") -> float:
    """P(the scenario sees the wrong outcome): no crossing in any of `windows` when one is expected,
    or a crossing in at least one when none is."""
    p = reach_probability(calls, fraction, threshold, spread)
    return (1.0 - p) ** windows if expect_reach else 1.0 - (1.0 - p) ** windows


def calls_needed(fraction: float, threshold: float, *, expect_reach: bool, windows: int = 1, spread: str = "even",
                 alpha: float = ALPHA, start: int = 1, cap: int = 100_000) -> int | None:
    """The fewest calls per window (>= start) at which the wrong outcome is at most `alpha`; None up to `cap`."""
    n = max(1, start)
    while n <= cap:
        if wrong_outcome(n, fraction, threshold, expect_reach=expect_reach, windows=windows, spread=spread) <= alpha:
            return n
        n = n + 1 if n < 1000 else int(n * 1.05)
    return None


def judgeable(calls: int, fraction: float, threshold: float, *, expect_reach: bool, windows: int = 1,
              spread: str = "even", alpha: float = ALPHA, min_calls: int = 1) -> str | None:
    """None when the tier can be judged at `calls` per window; else why not, in one line (INCONCLUSIVE)."""
    n = max(calls, min_calls)
    risk = wrong_outcome(n, fraction, threshold, expect_reach=expect_reach, windows=windows, spread=spread)
    if risk <= alpha:
        return None
    need = calls_needed(fraction, threshold, expect_reach=expect_reach, windows=windows, spread=spread,
                        alpha=alpha, start=n)
    want = "reach" if expect_reach else "stay under"
    return (f"INCONCLUSIVE: {fraction:.2%} failures ({spread} spread) {want} the {threshold:.1%} tier over {windows} "
            f"window(s) of {n} calls with a {risk:.1%} chance of the wrong outcome, above the stated false-alarm rate "
            f"{alpha:.0%}; it needs {'more than 100000' if need is None else need} calls per window")


def tier_judgeable(policy: BreakerPolicy, fraction: float, expect: str, calls: int, hold_s: float, spread: str = "even",
                   alpha: float = ALPHA) -> str | None:
    """None when an error-rate scenario (`fraction` of the canary's calls fail for `hold_s`) can show
    the tier `expect` (none | degrade | rollback) of `policy` (a BreakerPolicy) at `calls` per window."""
    over_fault = math.ceil((hold_s + policy.window_s) / policy.window_s)  # every window the fault touches
    kw: dict[str, Any] = dict(spread=spread, alpha=alpha, min_calls=policy.min_calls)
    if expect == "none":
        return judgeable(calls, fraction, policy.degrade_error_rate, expect_reach=False, windows=over_fault, **kw)
    if expect == "degrade":  # reached in the first window, and the rollback tier in none
        return (judgeable(calls, fraction, policy.degrade_error_rate, expect_reach=True, **kw)
                or judgeable(calls, fraction, policy.rollback_error_rate, expect_reach=False, windows=over_fault, **kw))
    if expect == "rollback":
        return judgeable(calls, fraction, policy.rollback_error_rate, expect_reach=True, **kw)
    raise ValueError(f"expect: none, degrade or rollback, got {expect!r}")
