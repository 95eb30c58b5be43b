"""Backoff compliance rules, judged from the arrivals a Recorder saw (pure functions, no I/O).

An interval is measured at the server: from the moment attempt n was over (answered, reset, cut, or
the client hung up on a held request) to the arrival of attempt n+1 of the same logical request.
So it is the time the client really waited, whatever its own timeout was.

Phases (slots of the recorder): "retry" (N clients, the first K attempts fail), "give_up" (every
attempt fails, one client), "non_retryable" (every attempt gets a 400) and "noise" (the harness's own
fixed-wait control, run beside the retry phase to measure scheduler noise).
"""
from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from chaos.env.model import RetryPolicy
from chaos.verify.backoff_noise import control_groups, deviations, p_noise_alone
from chaos.verify.recorder import Arrival
from chaos.verify.verdict import Verdict

_EPS = 1e-9  # float noise only; real measurement error is ~1 ms and favours the client

RULES = ("retries", "min_interval", "exponential", "jitter", "cap", "gives_up.attempts", "gives_up.deadline",
         "retry_after", "non_retryable", "overload")
# a retry this soon after a busy answer is hammering, whatever the policy's floor (the overload rule's words;
# measured at the server, plus the judge's tolerance for the client's own reconnect time)
HAMMER_S = 0.1


@dataclass
class Gap:
    """The wait between two attempts of one logical request."""

    key: str
    index: int            # 0 = between attempt 1 and 2
    seconds: float
    after: str            # what the recorder did to the attempt before: 503, 429, reset, ...
    retry_after: float | None = None


@dataclass
class ClientRun:
    """How one client copy ended: finished on its own, or stopped at the time limit."""

    slot: str
    finished: bool
    seconds: float
    rc: int | None = None
    output: str = ""


def gaps(arrivals: Iterable[Arrival]) -> list[Gap]:
    """Every interval between consecutive attempts of the same logical request."""
    by_key: dict[str, list[Arrival]] = {}
    for a in arrivals:
        by_key.setdefault(a.key, []).append(a)
    out: list[Gap] = []
    for key, seq in by_key.items():
        seq.sort(key=lambda a: a.t_perf)
        for i, (prev, nxt) in enumerate(zip(seq, seq[1:], strict=False)):
            end = prev.t_end_perf if prev.t_end_perf is not None else prev.t_perf
            out.append(Gap(key, i, nxt.t_perf - end, prev.action, prev.retry_after))
    return out


def default_growth_min(policy: RetryPolicy) -> float:
    """Smallest ratio between successive waits that still counts as exponential under this policy.

    Server-side intervals carry the client's own reconnect time, which shrinks the measured ratio
    (0.5 s -> 1.0 s with 0.2 s of overhead reads as x1.57): hence 0.75 of the policy's worst ratio.
    A fixed-interval client (x1.0) still fails."""
    return max(1.1, 0.75 * policy.multiplier / (1.0 + policy.jitter))


def judge(phases: dict[str, Sequence[Arrival]], policy: RetryPolicy, *, runs: Sequence[ClientRun] = (),
          growth_min: float | None = None, jitter_min_cv: float = 0.02, jitter_alpha: float = 0.001,
          tolerance_s: float = 0.15) -> Verdict:
    """All rules, one row each; a rule without data is n/a (ok=None), never a silent pass.

    phases["noise"] holds the arrivals of the fixed-wait control (chaos.verify.backoff_noise): the
    jitter rule passes only on spread wider than theirs (jitter_alpha: the chance noise alone passes).

    tolerance_s applies to the upper bounds only (cap, deadline): an interval is measured at the
    server, so it also holds the client's own reconnect and request-building time (tens of ms on
    a busy machine); the 500 ms floor gets no tolerance."""
    v = Verdict("backoff compliance")
    retry, give_up = list(phases.get("retry", ())), list(phases.get("give_up", ()))
    g_all = gaps(retry) + gaps(give_up)
    _retries(v, retry + give_up, policy)
    _min_interval(v, g_all, policy)
    _exponential(v, g_all, policy, growth_min or default_growth_min(policy))
    _jitter(v, gaps(retry), policy, jitter_min_cv, gaps(phases.get("noise", ())), jitter_alpha)
    _cap(v, g_all, policy, tolerance_s)
    _gives_up(v, give_up, policy, [r for r in runs if r.slot.startswith("g")], tolerance_s)
    _retry_after(v, g_all, policy)
    _non_retryable(v, phases.get("non_retryable"))
    overload(v, retry + give_up, g_all, policy, tolerance_s)
    v.data = {"gaps": [g.__dict__ for g in g_all], "runs": [r.__dict__ for r in runs]}
    return v


def _retries(v: Verdict, arrivals: list[Arrival], policy: RetryPolicy) -> None:
    """A retryable failure is retried: without this row a client that never retries has every other
    rule n/a, and "nothing measured" would read as compliance (curl --retry 4 on a 503 with a body)."""
    if policy.max_attempts < 2:
        v.add("retries", "all retried", None, None, f"the policy allows {policy.max_attempts} attempt(s): no retry expected")
        return
    attempts = Counter(a.key for a in arrivals)  # every first attempt in these phases failed retryably
    if not attempts:
        v.add("retries", "all retried", None, False, "the client sent no request at all")
        return
    once = sorted(k for k, n in attempts.items() if n < 2)
    v.add("retries", "all retried", f"{len(attempts) - len(once)}/{len(attempts)} retried", not once,
          f"logical requests that failed retryably and were never retried: {', '.join(once[:5]) or 'none'}")


def _min_interval(v: Verdict, gs: list[Gap], policy: RetryPolicy) -> None:
    if not gs:
        v.add("min_interval", policy.min_interval_s, None, None, "the client never retried")
        return
    worst = min(gs, key=lambda g: g.seconds)
    below = sum(1 for g in gs if g.seconds < policy.min_interval_s - _EPS)
    v.add("min_interval", policy.min_interval_s, worst.seconds, below == 0,
          f"{below}/{len(gs)} waits below; shortest {worst.seconds * 1000:.0f} ms in {worst.key} after "
          f"attempt {worst.index + 1} ({worst.after})")


def _own(g: Gap, policy: RetryPolicy) -> bool:
    """A wait the client chose itself (a long Retry-After says nothing about its own growth)."""
    return g.retry_after is None or g.retry_after < policy.min_interval_s


def _medians(gs: list[Gap], policy: RetryPolicy) -> list[tuple[int, float, int]]:
    by_index: dict[int, list[float]] = {}
    for g in gs:
        if _own(g, policy):
            by_index.setdefault(g.index, []).append(g.seconds)
    return [(i, statistics.median(xs), len(xs)) for i, xs in sorted(by_index.items())]


def _exponential(v: Verdict, gs: list[Gap], policy: RetryPolicy, growth_min: float) -> None:
    meds = _medians(gs, policy)
    ratios = [(i, b / a) for (i, a, _), (_, b, _) in pairwise(meds) if a > 0 and a < 0.95 * policy.max_interval_s]
    seq = " -> ".join(f"{m:.3f}" for _, m, _ in meds)
    if not ratios:
        v.add("exponential", growth_min, None, None, f"needs 3+ attempts below the cap; median waits {seq or 'none'}")
        return
    i, worst = min(ratios, key=lambda r: r[1])
    v.add("exponential", round(growth_min, 3), round(worst, 3), worst >= growth_min,
          f"median waits {seq} s; smallest growth x{worst:.2f} from wait {i + 1} to {i + 2}")


def _jitter(v: Verdict, gs: list[Gap], policy: RetryPolicy, min_cv: float, noise: list[Gap], alpha: float) -> None:
    """Clients not in lockstep: their spread must clear min_cv AND be wider than scheduler noise alone.

    Noise only ever widens the spread, so a spread below min_cv is the client's own lockstep (FAIL). A
    spread above it proves jitter only if a fixed-wait control measured at the same time (noise) ranks
    below it (p <= alpha); otherwise the load could have made it, and the rule is not proven."""
    groups: list[list[float]] = []
    pooled: list[float] = []
    for i, med, n in _medians(gs, policy):
        xs = [g.seconds for g in gs if g.index == i and _own(g, policy)]
        if n >= 2 and med > 0 and med < 0.95 * policy.max_interval_s:
            groups.append(xs)
            pooled += [x / med for x in xs]
    if len(pooled) < 3:
        v.add("jitter", min_cv, None, None, "needs 2+ concurrent clients retrying below the cap (--clients N)")
        return
    cv = statistics.pstdev(pooled) / statistics.fmean(pooled)
    what = f"spread (cv) of {len(pooled)} waits over {len(groups)} retry step(s) across clients"
    if cv < min_cv:
        v.add("jitter", min_cv, round(cv, 4), False, f"{what}; clients retry in lockstep")
        return
    ctrl = deviations(control_groups(noise))
    if len(ctrl) < 3:
        v.not_proven("jitter", min_cv, round(cv, 4), f"{what}, but no fixed-wait control measured the scheduler "
                     "noise at the same time: noise alone can spread waits this much")
        return
    p = p_noise_alone(deviations(groups), ctrl)
    vs = f"a fixed-wait control spread by {statistics.median(ctrl) * 1000:.0f} ms (median) vs the clients' " \
            f"{statistics.median(deviations(groups)) * 1000:.0f} ms; p(noise alone) {p:.2g}"
    if p <= alpha:
        v.add("jitter", min_cv, round(cv, 4), True, f"{what}; not in lockstep: {vs}")
    else:
        v.not_proven("jitter", min_cv, round(cv, 4), f"{what}, no wider than scheduler noise: {vs} > {alpha:g}")


def _cap(v: Verdict, gs: list[Gap], policy: RetryPolicy, tol: float) -> None:
    own = [g for g in gs if g.retry_after is None or g.retry_after <= policy.max_interval_s]
    if not own:
        v.add("cap", policy.max_interval_s, None, None, "no waits of the client's own choosing")
        return
    worst = max(own, key=lambda g: g.seconds)
    reached = "cap reached" if worst.seconds >= 0.9 * policy.max_interval_s else "cap not reached"
    v.add("cap", policy.max_interval_s, worst.seconds, worst.seconds <= policy.max_interval_s + tol + _EPS,
          f"longest wait {worst.seconds:.3f} s in {worst.key} ({reached}; tolerance {tol * 1000:.0f} ms)")


def _gives_up(v: Verdict, arrivals: list[Arrival], policy: RetryPolicy, runs: list[ClientRun], tol: float) -> None:
    if not arrivals:
        v.add("gives_up.attempts", policy.max_attempts, None, None, "no give-up phase was run")
        v.add("gives_up.deadline", policy.deadline_s, None, None, "no give-up phase was run")
        return
    by_key: dict[str, list[Arrival]] = {}
    for a in arrivals:
        by_key.setdefault(a.key, []).append(a)
    key, seq = max(by_key.items(), key=lambda kv: len(kv[1]))
    v.add("gives_up.attempts", policy.max_attempts, len(seq), len(seq) <= policy.max_attempts,
          f"{len(seq)} attempts by {key} while every attempt failed")
    span = max(max(a.t_end_perf or a.t_perf for a in s) - min(a.t_perf for a in s) for s in by_key.values())
    stuck = [r for r in runs if not r.finished]
    ok = span <= policy.deadline_s + tol + _EPS and not stuck
    detail = f"first attempt to last over {span:.2f} s"
    if stuck:
        detail += f"; still running when stopped after {max(r.seconds for r in stuck):.1f} s"
    v.add("gives_up.deadline", policy.deadline_s, round(span, 3), ok, detail)


def _retry_after(v: Verdict, gs: list[Gap], policy: RetryPolicy) -> None:
    ra = [g for g in gs if g.retry_after is not None]
    if not ra:
        v.add("retry_after", None, None, None, "no 429 or 529 with Retry-After was sent (--failure 429 --retry-after S)")
        return
    worst = min(ra, key=lambda g: g.seconds - max(g.retry_after or 0.0, policy.min_interval_s))
    need = max(worst.retry_after or 0.0, policy.min_interval_s)
    bad = sum(1 for g in ra if g.seconds < max(g.retry_after or 0.0, policy.min_interval_s) - _EPS)
    v.add("retry_after", need, worst.seconds, bad == 0,
          f"Retry-After {worst.retry_after:g} s, floor {policy.min_interval_s:g} s; {bad}/{len(ra)} waits too short")


def _non_retryable(v: Verdict, arrivals: Sequence[Arrival] | None) -> None:
    if not arrivals:
        v.add("non_retryable", 1, None, None, "no non-retryable phase was run")
        return
    counts: dict[str, int] = {}
    for a in arrivals:
        counts[a.key] = counts.get(a.key, 0) + 1
    worst = max(counts.values())
    statuses = sorted({a.action for a in arrivals})
    v.add("non_retryable", 1, worst, worst <= 1,
          f"{len(counts)} logical request(s) answered {'/'.join(statuses)}; most attempts {worst}")


def _busy(action: str, policy: RetryPolicy) -> bool:
    return action.isdigit() and int(action) in policy.overload_statuses


def overload(v: Verdict, arrivals: Sequence[Arrival], gs: Sequence[Gap], policy: RetryPolicy,
             tolerance_s: float = 0.15) -> None:
    """Busy is not down: an overload answer (the policy's `overload_statuses`, Dynamo's 529) is retried on the
    same service after at least min_interval_s. A logical request never retried after one treats busy as down
    (it failed over or gave up); a retry within HAMMER_S (+ tolerance_s) hammers the busy service. Only the
    words depend on HAMMER_S: any wait below min_interval_s fails."""
    busy = sorted({a.action for a in arrivals if _busy(a.action, policy)})
    if not busy:
        v.add("overload", policy.min_interval_s, None, None, "no overload status was played (--failure 529)")
        return
    codes = "/".join(busy)
    attempts = Counter(a.key for a in arrivals)
    last = {a.key: a.action for a in sorted(arrivals, key=lambda a: a.t_perf)}
    down = sorted(k for k, n in attempts.items() if n < 2 and _busy(last[k], policy) and policy.max_attempts >= 2)
    after = [g for g in gs if _busy(g.after, policy)]
    soon = [g for g in after if g.seconds < policy.min_interval_s - _EPS]
    hammered = [g for g in after if g.seconds <= HAMMER_S + tolerance_s]
    shortest = min((g.seconds for g in after), default=None)
    if down:
        detail = (f"treats {codes} as down: {len(down)}/{len(attempts)} logical requests never retried after it "
                  f"(failed over or gave up): {', '.join(down[:5])}")
    elif hammered:
        detail = (f"hammers on {codes}: {len(hammered)}/{len(after)} retries within {HAMMER_S * 1000:.0f} ms "
                  f"(<= {(HAMMER_S + tolerance_s) * 1000:.0f} ms measured with the reconnect), "
                  f"shortest {min(g.seconds for g in hammered) * 1000:.0f} ms")
    elif soon:
        detail = (f"backs off too little on {codes}: {len(soon)}/{len(after)} waits below "
                  f"{policy.min_interval_s:g} s, shortest {min(g.seconds for g in soon) * 1000:.0f} ms")
    else:
        detail = (f"backs off on {codes}: {len(attempts)}/{len(attempts)} retried, "
                  f"shortest wait {(shortest or 0.0) * 1000:.0f} ms")
    v.add("overload", policy.min_interval_s, shortest, not (down or soon), detail)
