"""The breaker suite's fault sizes, derived from the environment's own policy (`breaker:`), and
whether the canary's traffic can judge them.

With d and r the policy's degrade and rollback error rates and L its degrade latency, the scenarios
fail d/2 of the canary's calls (no trip), (d + r)/2 (degrade, no rollback), r + max((r - d)/2, r/3)
(rollback), and stall streams 0.75 L (no trip) and 1.25 L (degrade): on the seed's policy (1 %, 3 %,
2 s) that is 0.5 %, 2 %, 4 %, 1.5 s and 2.5 s. The OOM burst is exactly `oom_burst_count` OOM
answers (the fault proxy's `limit`), then none, so it does not depend on the canary's rate; it is
told apart from the error-rate tier only where those answers stay under d in the canary's window
(more than count/d calls per window) or the window holds fewer than `min_calls` (the error-rate
tier does not judge). Where the canary's window cannot tell a tier apart, `why_not` says so in one
line: "not proven: the canary gets N calls per window, the tier needs M". Pure: no I/O.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chaos.env.monitoring import BREAKER_SCENARIOS
from chaos.verify.breaker import MAX_MERGE_BINS, drain_sends_needed
from chaos.verify.power import ALPHA, calls_needed, wrong_outcome

if TYPE_CHECKING:
    from chaos.env.model import BreakerPolicy

NAMES = BREAKER_SCENARIOS
# a window may hold this much more than at injection while the OOMs are still in it (the rate wanders)
RATE_DRIFT = 1.25


@dataclass(frozen=True)
class Size:
    """One breaker scenario: its fault (kind and size, from the policy), expected tier and hold time."""

    name: str
    kind: str  # errors | latency | oom-burst | leak
    size: float  # the fraction of calls failed, the stall's seconds, the OOM count, or 0 (leak)
    expect: str  # none | degrade | rollback | anomaly
    hold_s: float

    def label(self) -> str:
        if self.kind == "errors":
            return f"{self.size:.2%} errors"
        if self.kind == "latency":
            return f"{self.size:g} s stall"
        if self.kind == "oom-burst":
            return f"{self.size:g} OOM answers, then none"
        return "a memory-leak trend"


def error_fractions(policy: BreakerPolicy) -> tuple[float, float | None, float]:
    """(below degrade, between degrade and rollback or None where they are equal, above rollback)."""
    d, r = policy.degrade_error_rate, policy.rollback_error_rate
    between = (d + r) / 2 if r > d else None
    return d / 2, between, min(1.0, r + max((r - d) / 2, r / 3))


def latency_seconds(policy: BreakerPolicy) -> tuple[float, float]:
    """(below degrade_latency_s, above it)."""
    return round(0.75 * policy.degrade_latency_s, 3), round(1.25 * policy.degrade_latency_s, 3)


def sizes(policy: BreakerPolicy) -> dict[str, Size]:
    """Every scenario of the suite, keyed by its name (NAMES), sized from `policy`."""
    below, between, above = error_fractions(policy)
    slow, slower = latency_seconds(policy)
    held = hold_for(policy)
    out = [Size("errors-below-degrade", "errors", below, "none", held(20)),
           Size("errors-degrade", "errors", between if between is not None else math.nan, "degrade", held(20)),
           Size("errors-rollback", "errors", above, "rollback", held(25)),
           Size("latency-below-degrade", "latency", slow, "none", held(20)),
           Size("latency-degrade", "latency", slower, "degrade", held(20)),
           Size("oom-burst", "oom-burst", policy.oom_burst_count, "anomaly", 20),
           Size("leak-trend", "leak", 0, "anomaly", 30)]
    return {s.name: s for s in out}


def hold_for(policy: BreakerPolicy) -> Callable[[float], float]:
    """A rate tier's hold: its base seconds, or longer where the policy's window is longer. A sliding
    window fills with the fault's calls over one window_s, and a tier judged "in the first window" must
    see one window that holds nothing else, plus the gateway's reaction allowance (a 90 s window of a
    slow canary would otherwise judge the fault diluted by the calls before it)."""
    floor = math.ceil(policy.window_s + policy.reaction_allowance_s + 1.0)
    return lambda base: float(max(base, floor))


def window_target(policy: BreakerPolicy, size: Size, spread: str = "even") -> int:
    """The calls the canary's window should hold before the fault goes in: enough to judge it."""
    if size.kind == "oom-burst":
        return burst_calls_needed(policy)
    if size.kind == "errors" and not math.isnan(size.size):
        return max(policy.min_calls, _error_calls_needed(policy, size, spread) or policy.min_calls)
    return policy.min_calls


def burst_calls_needed(policy: BreakerPolicy) -> int:
    """The fewest calls per window in which `oom_burst_count` failures stay under the degrade rate."""
    return math.floor(policy.oom_burst_count / policy.degrade_error_rate + 1e-9) + 1


def _thresholds(policy: BreakerPolicy, size: Size) -> list[tuple[float, bool, int]]:
    """(threshold, must reach it, windows judged) for an error scenario's tier."""
    over_fault = math.ceil((size.hold_s + policy.window_s) / policy.window_s)  # every window the fault touches
    d, r = policy.degrade_error_rate, policy.rollback_error_rate
    if size.expect == "none":
        return [(d, False, over_fault)]
    if size.expect == "degrade":  # reached in the first window, and the rollback tier in none
        return [(d, True, 1), (r, False, over_fault)]
    return [(r, True, 1)]


def _error_calls_needed(policy: BreakerPolicy, size: Size, spread: str, start: int = 1) -> int | None:
    need = start
    for threshold, reach, windows in _thresholds(policy, size):
        got = calls_needed(size.size, threshold, expect_reach=reach, windows=windows, spread=spread, start=need)
        if got is None:
            return None
        need = max(need, got)
    return need


def _error_risk(policy: BreakerPolicy, size: Size, calls: int, spread: str) -> float:
    return max(wrong_outcome(calls, size.size, t, expect_reach=reach, windows=w, spread=spread)
               for t, reach, w in _thresholds(policy, size))


def why_not(policy: BreakerPolicy, size: Size, calls: int, spread: str = "even", alpha: float = ALPHA) -> str | None:
    """None when the canary's `calls` per window can judge `size`'s tier; else why not, one line."""
    window = f"calls per {policy.window_s:g} s window"
    if size.kind == "oom-burst":
        need = burst_calls_needed(policy)
        if calls >= need or calls * RATE_DRIFT < policy.min_calls:
            return None
        return (f"not proven: the canary gets {calls} {window}, the OOM-burst tier needs {need}: a burst of "
                f"{policy.oom_burst_count} OOM answers in fewer calls reaches the {policy.degrade_error_rate:.2%} "
                f"degrade tier too, and the trip could not be told apart from it (or under "
                f"{policy.min_calls / RATE_DRIFT:.0f}, where the error-rate tier's min_calls {policy.min_calls} "
                f"keeps it from judging)")
    if size.kind == "latency" and calls < policy.min_calls:  # the gateway's P99 rule waits for min_calls too
        tier = "no-trip verdict" if size.expect == "none" else f"{size.expect} tier"
        return (f"not proven: the canary gets {calls} {window}, the {tier} needs {policy.min_calls} (the policy's "
                f"min_calls: with fewer, no latency rule judges a {size.label()})")
    if size.kind != "errors":
        return None
    if math.isnan(size.size):
        return (f"not proven: degrade_error_rate and rollback_error_rate are both {policy.degrade_error_rate:.2%}: "
                f"no error rate lies between the tiers")
    if calls >= policy.min_calls and _error_risk(policy, size, calls, spread) <= alpha:
        return None
    needed = _error_calls_needed(policy, size, spread, start=max(calls, policy.min_calls))
    tier = "no-trip verdict" if size.expect == "none" else f"{size.expect} tier"
    return (f"not proven: the canary gets {calls} {window}, the {tier} needs "
            f"{'more than 100000' if needed is None else needed} to tell {size.label()} ({spread} spread) apart from "
            f"the {policy.degrade_error_rate:.2%} / {policy.rollback_error_rate:.2%} thresholds "
            f"(false-alarm rate {alpha:.0%}; the policy's min_calls {policy.min_calls})")


def drain_unseen(policy: BreakerPolicy, rate_per_s: float, bin_s: float = 1.0) -> str | None:
    """Why a degrade's drain cannot be seen at `rate_per_s` sends of every pool, else None.

    A tripped canary is out for open_wait_s at a time (then half-open probes may close it). The black-box verdict
    (chaos.verify.breaker.analyze) tells a drain from chance only over drain_sends_needed(canary_weight) sends with
    no canary call, in whole bins of `bin_s` (one may be cut at each end), merged MAX_MERGE_BINS at most: at a
    slow stack's rate a short open wait drains too few sends to be seen, and the degrade would read as none."""
    need = drain_sends_needed(policy.canary_weight)
    seen_s = min(policy.open_wait_s - bin_s, MAX_MERGE_BINS * bin_s)
    got = int(rate_per_s * max(0.0, seen_s))
    if got >= need:
        return None
    fix = (f"open_wait_s >= {need / rate_per_s + bin_s:.1f} s would do" if need / rate_per_s <= MAX_MERGE_BINS * bin_s
           else f"at most {MAX_MERGE_BINS * bin_s:g} s of sends are merged: it needs {need / MAX_MERGE_BINS / bin_s:.0f} "
                f"req/s")
    return (f"not proven: a tripped canary is out for open_wait_s {policy.open_wait_s:g} s at a time; at "
            f"{rate_per_s:.1f} req/s about {got} sends are drained in whole bins, and a drain is told from chance "
            f"only over {need} sends with no canary call at canary_weight {policy.canary_weight:g} ({fix})")
