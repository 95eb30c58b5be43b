"""Black-box breaker verdict: judge any gateway from its per-request records (and optionally a metric).

What it needs: RequestRecords with t_send, e2e, status, error and `served_by` (the value of the
env's `breaker.pool_header`, "<pool>/<replica>" for the reference gateway); optionally Timeline
samples of `breaker.state_metric` labelled by pool (0 = closed, anything else = tripped).
It recomputes the canary's sliding-window error rate and P99 over time (by completion time, as a
gateway counts), finds each threshold crossing, and finds when traffic actually moved: the canary's
share of sends, in bins, falling to <= drained_share x its baseline ("drained") and coming back to
>= half of it ("restored"). A failure for the window: transport errors, stream cuts, error chunks,
5xx, 429 and any other status the team's policy calls overload (`retry.overload_statuses`: busy counts
as down does, as the reference gateway counts it), not 4xx such as a refused signature.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from chaos.env.model import BreakerPolicy
from chaos.errors import SLOViolation
from chaos.load.records import LOST_ANSWER_ERRORS, RequestRecord
from chaos.load.stats import nearest_rank

if TYPE_CHECKING:
    from chaos.observe.timeline import Sample, Timeline

WindowRow = tuple[float, int, float, float | None]  # t, calls, error rate, p99


def default_pool_of(served_by: str | None) -> str | None:
    """'canary/replica-c' -> 'canary'; a header without '/' is taken whole."""
    return served_by.split("/", 1)[0].strip() if served_by else None


def counts_as_failure(r: RequestRecord, overload_statuses: Collection[int] = ()) -> bool:
    """The failures a breaker window should count (overload_statuses: the environment's retry.overload_statuses)."""
    if r.error in LOST_ANSWER_ERRORS:
        return True
    return r.error == "http" and r.status is not None and (r.status >= 500 or r.status == 429
                                                           or r.status in overload_statuses)


@dataclass
class Crossing:
    """The records' window crossed a threshold upwards at t."""

    t: float
    kind: str          # degrade_error_rate | degrade_latency | rollback_error_rate
    value: float
    calls: int


@dataclass
class Move:
    """Traffic actually moved: the canary was drained from, or restored to, its share."""

    t: float           # the start of the bin of sends it was seen in
    kind: str          # drained | restored
    share: float
    bin_s: float = 1.0


@dataclass
class BreakerAnalysis:
    """Series and events the checks read and the report plots."""

    policy: BreakerPolicy
    canary: str
    baseline_share: float
    window: list[tuple[float, int, float, float | None]] = field(default_factory=list)  # t, calls, err, p99
    share: list[tuple[float, float]] = field(default_factory=list)                     # bin start, share
    crossings: list[Crossing] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    metric_changes: list[tuple[float, str, float]] = field(default_factory=list)      # t, pool, new value
    canary_sends: list[float] = field(default_factory=list)

    def first_crossing(self, kinds: Iterable[str] | None = None, after: float = -math.inf) -> Crossing | None:
        ks = set(kinds) if kinds else None
        return next((c for c in self.crossings if c.t >= after and (ks is None or c.kind in ks)), None)

    def first_move(self, kind: str, after: float = -math.inf) -> Move | None:
        """The first `kind` move seen in a bin that reaches past `after`, its time no earlier than `after`.

        Bins start at the first send, not at the fault: a gateway that trips 0.2 s after the fault
        drains the bin that began 0.8 s before it, and a filter on the bin's start lost that drain (the
        lab's oom-burst failed "traffic_moved: never" with the canary at 0.9 % while the gateway was open)."""
        m = next((m for m in self.moves if m.kind == kind and m.t + m.bin_s > after), None)
        return None if m is None else replace(m, t=max(m.t, after))

    def peak_error_rate(self, start: float = -math.inf, end: float = math.inf, min_calls: int | None = None) -> float:
        need = self.policy.min_calls if min_calls is None else min_calls
        vals = [e for t, n, e, _ in self.window if start <= t <= end and n >= need]
        return max(vals, default=0.0)

    def evidence(self, start: float = -math.inf, end: float = math.inf) -> dict[str, Any]:
        """A compact dict for SLOViolation.evidence and report attachments."""
        return {"baseline_share": self.baseline_share,
                "crossings": [asdict(c) for c in self.crossings if start <= c.t <= end],
                "moves": [asdict(m) for m in self.moves if start <= m.t <= end],
                "metric_changes": [c for c in self.metric_changes if start <= c[0] <= end],
                "peak_window_error_rate": self.peak_error_rate(start, end)}

    def to_timeline(self, timeline: Timeline) -> None:
        """Add the canary share, window figures, crossings and moves to a chaos.observe Timeline."""
        for t, share in self.share:
            timeline.sample("breaker", "canary_share", share, t=t, pool=self.canary)
        for t, _n, err, p99 in self.window:
            timeline.sample("breaker", "window_error_rate", err, t=t, pool=self.canary)
            if p99 is not None:
                timeline.sample("breaker", "window_p99_s", p99, t=t, pool=self.canary)
        for c in self.crossings:
            timeline.event("threshold", c.kind, t=c.t, value=c.value, calls=c.calls)
        for m in self.moves:
            timeline.event("breaker", m.kind, t=m.t, share=m.share, pool=self.canary)
        for t, pool, v in self.metric_changes:
            timeline.event("state", "pool_state", t=t, pool=pool, value=v)


def _window_series(recs: list[RequestRecord], p: BreakerPolicy, grid: Sequence[float],
                   overload_statuses: Collection[int] = ()) -> list[WindowRow]:
    done = sorted(recs, key=lambda r: r.t_end)
    out: list[WindowRow] = []
    lo, hi = 0, 0
    for t in grid:
        while hi < len(done) and done[hi].t_end <= t:
            hi += 1
        while lo < hi and done[lo].t_end <= t - p.window_s:
            lo += 1
        win = done[lo:hi]
        fails = sum(1 for r in win if counts_as_failure(r, overload_statuses))
        lats = sorted(r.e2e for r in win if r.e2e is not None)
        out.append((t, len(win), fails / len(win) if win else 0.0, nearest_rank(lats, 0.99)))
    return out


def _crossings(window: Sequence[WindowRow], p: BreakerPolicy) -> list[Crossing]:
    rules = [("degrade_error_rate", 2, p.degrade_error_rate), ("rollback_error_rate", 2, p.rollback_error_rate),
             ("degrade_latency", 3, p.degrade_latency_s)]
    out: list[Crossing] = []
    for kind, idx, limit in rules:
        above = False
        for row in window:
            value = row[idx]
            now = row[1] >= p.min_calls and value is not None and value >= limit
            if now and not above:
                assert value is not None  # `now` holds only with a value
                out.append(Crossing(row[0], kind, value, row[1]))
            above = now
    return sorted(out, key=lambda c: c.t)


def _share_bins(attributed: list[tuple[float, bool]], t0: float, t1: float, bin_s: float) -> list[tuple[float, int, int]]:
    """(bin start, calls, canary calls) per bin of sends."""
    nbins = max(1, math.ceil((t1 - t0) / bin_s))
    tot, can = [0] * nbins, [0] * nbins
    for t, is_canary in attributed:
        i = min(nbins - 1, int((t - t0) / bin_s))
        tot[i] += 1
        can[i] += is_canary
    return [(t0 + i * bin_s, tot[i], can[i]) for i in range(nbins)]


def binom_cdf(k: int, n: int, p: float) -> float:
    """P(X <= k) for X ~ Binomial(n, p)."""
    if p <= 0.0:
        return 1.0
    if p >= 1.0:
        return 1.0 if k >= n else 0.0
    return min(1.0, sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(0, min(k, n) + 1)))


# A drain is declared only where so few canary calls would happen by chance with probability
# <= DRAIN_ALPHA at the canary's baseline share (a one-sided binomial test on the calls of the bin,
# merged with up to MAX_MERGE_BINS - 1 earlier bins until it holds enough calls to decide). With
# about 100 bins per scenario the false-alarm rate of a scenario is at most 100 x 1e-5 = 0.1 %
# (Bonferroni). Before, a 1 s bin with 5-20 calls on a busy machine was "drained" by chance: at a
# 20 % share, 1 canary call or none in 20 happens 7 % of the time, and the no-trip scenarios failed
# with the gateway's own state closed throughout.
DRAIN_ALPHA = 1e-5
MAX_MERGE_BINS = 5
DRAINED_SHARE = 0.25  # drained: the canary's share of sends at or below this fraction of its baseline


def drain_sends_needed(baseline_share: float, alpha: float = DRAIN_ALPHA) -> int:
    """The fewest sends with no canary call among them that tell a drain from chance at `baseline_share`."""
    if not 0.0 < baseline_share < 1.0:
        return 1
    return math.ceil(math.log(alpha) / math.log(1.0 - baseline_share) - 1e-9)


def drained_by_more_than_noise(k: int, n: int, baseline: float, alpha: float = DRAIN_ALPHA) -> bool:
    return n > 0 and binom_cdf(k, n, baseline) <= alpha


def analyze(records: Iterable[RequestRecord], policy: BreakerPolicy, *, canary: str = "canary",
            pool_of: Callable[[str | None], str | None] = default_pool_of, step_s: float = 0.5,
            bin_s: float = 1.0, min_bin_calls: int = 5, drained_share: float = DRAINED_SHARE,
            baseline_until: float | None = None, metric_samples: Iterable[Sample] = (),
            alpha: float = DRAIN_ALPHA, overload_statuses: Collection[int] = ()) -> BreakerAnalysis:
    """Compute the canary's window series, crossings and traffic moves from records (an overload status
    counts as a failure: pass the environment's retry.overload_statuses where a code below 500 is one)."""
    recs = sorted(records, key=lambda r: r.t_send)
    attributed = [(r, pool_of(r.served_by)) for r in recs]
    attributed = [(r, pool) for r, pool in attributed if pool is not None]
    can = [r for r, pool in attributed if pool == canary]
    a = BreakerAnalysis(policy, canary, policy.canary_weight, canary_sends=[r.t_send for r in can])
    if not recs:
        return a
    t0, t1 = recs[0].t_send, max(r.t_end for r in recs)
    grid = [t0 + i * step_s for i in range(int((t1 - t0) / step_s) + 2)]
    a.window = _window_series(can, policy, grid, overload_statuses)
    a.crossings = _crossings(a.window, policy)
    bins = _share_bins([(r.t_send, pool == canary) for r, pool in attributed], t0, t1, bin_s)
    a.share = [(t, k / n) for t, n, k in bins if n >= min_bin_calls]
    first = a.crossings[0].t if a.crossings else math.inf
    until = baseline_until if baseline_until is not None else first
    before = [(n, k) for t, n, k in bins if t + bin_s <= until]
    if sum(n for n, _ in before) >= min_bin_calls:  # pooled: a median of 15-call bins moves in steps of 7 %
        a.baseline_share = sum(k for _, k in before) / sum(n for n, _ in before)
    low, high, drained = drained_share * a.baseline_share, 0.5 * a.baseline_share, False
    for i, (t, n, k) in enumerate(bins):
        if n < min_bin_calls:
            continue
        s = k / n
        if not drained and s <= low:
            merged_n, merged_k = n, k
            for j in range(i - 1, max(-1, i - MAX_MERGE_BINS), -1):  # too few calls to decide: look back
                if drained_by_more_than_noise(merged_k, merged_n, a.baseline_share, alpha):
                    break
                merged_n, merged_k = merged_n + bins[j][1], merged_k + bins[j][2]
            if merged_k / merged_n <= low and drained_by_more_than_noise(merged_k, merged_n, a.baseline_share, alpha):
                a.moves.append(Move(t, "drained", s, bin_s))
                drained = True
        elif drained and s >= high:
            a.moves.append(Move(t, "restored", s, bin_s))
            drained = False
    last: dict[str, float] = {}
    for sample in sorted((s for s in metric_samples if s.name == policy.state_metric), key=lambda s: s.t):
        pool = sample.labels.get("pool", "")
        if last.get(pool) != float(sample.value):
            if pool in last:
                a.metric_changes.append((sample.t, pool, float(sample.value)))
            last[pool] = float(sample.value)
    return a


# -- checks (each raises SLOViolation with evidence) ----------------------------------------------
def check_degrade(a: BreakerAnalysis, fault_start: float, *, within_s: float | None = None) -> Move:
    """Traffic left the canary within window_s + reaction_allowance_s of the fault's start."""
    p = a.policy
    limit = within_s if within_s is not None else p.window_s + p.reaction_allowance_s
    move = a.first_move("drained", after=fault_start - 1e-9)
    if move is None or move.t - fault_start > limit:
        measured = None if move is None else move.t - fault_start
        raise SLOViolation(f"breaker: canary traffic did not move within {limit:.1f}s of the fault "
                           f"(moved after {'never' if measured is None else f'{measured:.1f}s'})",
                           limit=limit, measured=measured, window=(fault_start, fault_start + limit),
                           evidence=a.evidence(fault_start))
    return move


ROLLBACK_MIN_CALLS = 50


def degrade_recovery_s(p: BreakerPolicy) -> float:
    """The longest a degrade may keep the canary out after the fault ends (check_recovery's limit).

    A rollback held for less than this cannot be told from a degrade that has not yet recovered
    (nginx's fail_timeout ban, LiteLLM's cooldown): where no operator reset ends the scenario, a
    rollback must be watched this long after the revert."""
    return p.window_s + 8 * p.open_wait_s + p.reaction_allowance_s


def check_rollback(a: BreakerAnalysis, fault_start: float, until: float) -> Move:
    """Drained in time, the window showed >= rollback_error_rate, and after the last drain the canary
    got nothing until `until` (the operator reset)."""
    p = a.policy
    move = check_degrade(a, fault_start)
    # the degrade drains the canary within a few errors, so a window of wall time rarely refills to
    # min_calls before the rollback: judge the rollback rate on a thinner window (the reference gateway
    # keeps the canary's last min_calls calls at least)
    thin = min(p.min_calls, ROLLBACK_MIN_CALLS)
    if a.peak_error_rate(fault_start, until, thin) < p.rollback_error_rate:
        raise SLOViolation(f"breaker: rolled back but the canary window never reached {p.rollback_error_rate:.1%}",
                           limit=p.rollback_error_rate, measured=a.peak_error_rate(fault_start, until, thin),
                           window=(fault_start, until), evidence=a.evidence(fault_start, until))
    final = [m for m in a.moves if m.kind == "drained" and move.t <= m.t < until][-1]
    grace = final.t + p.reaction_allowance_s + 1.0
    late = [t for t in a.canary_sends if grace <= t < until]
    if late:
        raise SLOViolation(f"breaker: forced rollback not held: {len(late)} requests reached the canary "
                           f"before the operator reset or the scenario's end (first at +{late[0] - fault_start:.1f}s)",
                           limit=0, measured=len(late), window=(grace, until), evidence=a.evidence(fault_start, until))
    return final


def check_no_trip(a: BreakerAnalysis, start: float, end: float) -> None:
    """Below the thresholds, traffic must not move and the state metric must stay at 0."""
    moved = [m for m in a.moves if start <= m.t <= end and m.kind == "drained"]
    tripped = [c for c in a.metric_changes if start <= c[0] <= end and c[2] != 0 and c[1] == a.canary]
    if moved or tripped:
        raise SLOViolation(f"breaker: tripped below the thresholds (peak window error rate "
                           f"{a.peak_error_rate(start, end):.2%})", limit="no trip",
                           measured=len(moved) + len(tripped), window=(start, end), evidence=a.evidence(start, end))


def check_recovery(a: BreakerAnalysis, fault_end: float, within_s: float | None = None) -> Move | None:
    """After the fault, the canary's share comes back within the allowance and stays back."""
    p = a.policy
    limit = within_s if within_s is not None else degrade_recovery_s(p)
    # until one window after the fault the breaker's window still holds calls made during it, so
    # a drain then is still the fault's doing; flapping is a drain after the window is clean
    settled = fault_end + p.window_s
    drains = [m for m in a.moves if m.kind == "drained" and m.t < settled]
    if not drains and not a.first_move("drained", after=fault_end):
        return None
    back = a.first_move("restored", after=(drains[-1].t if drains else fault_end))
    if back is None or back.t - fault_end > limit:
        measured = None if back is None else back.t - fault_end
        raise SLOViolation(f"breaker: canary not restored within {limit:.1f}s of the fault's end",
                           limit=limit, measured=measured, window=(fault_end, fault_end + limit),
                           evidence=a.evidence(fault_end - p.window_s))
    again = a.first_move("drained", after=back.t)
    if again is not None:
        raise SLOViolation(f"breaker: flapping: canary drained again {again.t - back.t:.1f}s after recovery",
                           limit="stay closed", measured=again.t - back.t, window=(back.t, again.t),
                           evidence=a.evidence(fault_end))
    return back


def check_no_flapping(a: BreakerAnalysis, max_moves: int) -> None:
    """The number of traffic moves stays bounded."""
    if len(a.moves) > max_moves:
        raise SLOViolation(f"breaker: flapping: {len(a.moves)} traffic moves > {max_moves}",
                           limit=max_moves, measured=len(a.moves), evidence=a.evidence())


def verify_breaker(records: Iterable[RequestRecord], policy: BreakerPolicy, *, expect: str,
                   fault: tuple[float, float], until: float | None = None, recovery_s: float | None = None,
                   max_moves: int | None = None, **analyze_kw: Any) -> BreakerAnalysis:
    """One call for a suite: expect 'none' | 'degrade' | 'rollback' for a fault over (start, end)."""
    if expect not in ("none", "degrade", "rollback"):
        raise ValueError(f"expect must be none, degrade or rollback, got {expect!r}")
    start, end = fault
    a = analyze(records, policy, baseline_until=start, **analyze_kw)
    if expect == "none":
        check_no_trip(a, start, end + policy.window_s)
        return a
    if expect == "rollback":
        check_rollback(a, start, until if until is not None else end)
        return a
    check_degrade(a, start)
    check_recovery(a, end, recovery_s)
    bound = max_moves if max_moves is not None else 2 * (1 + math.ceil((end - start) / max(policy.open_wait_s, 1.0)))
    check_no_flapping(a, bound)
    return a
