"""The breaker's anomaly tier: a trip on an OOM burst (N OOM answers within a few seconds) or on a
memory-leak trend, told apart from the error-rate tier (the canary's window must stay under it)."""
from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from chaos.env.model import BreakerPolicy
from chaos.load.records import RequestRecord
from chaos.verify.breaker import DRAINED_SHARE, BreakerAnalysis, analyze, binom_cdf, default_pool_of, drained_by_more_than_noise
from chaos.verify.upstream import attempts_source
from chaos.verify.verdict import Verdict

if TYPE_CHECKING:
    from chaos.observe.timeline import Sample


def is_oom(r: RequestRecord) -> bool:
    """An answer that says the replica ran out of memory."""
    detail = (r.error_detail or "").lower()
    return r.status == 500 and ("out of memory" in detail or "-oom-" in detail)


def first_state_change(samples: Iterable[Sample], pool: str, since: float, until: float) -> float | None:
    """When the gateway's own state for `pool` first left 'closed' in [since, until] (admin API samples)."""
    for s in sorted(samples, key=lambda s: s.t):
        if s.labels.get("pool") == pool and since <= s.t <= until and s.value not in ("closed", None):
            return float(s.t)
    return None


OPEN_STATES = ("open", "forced_open")
# Where the gateway reports its own state, traffic_moved asks the direct question: while it said the
# canary was open, did the canary's share of sends fall? One pre-set binomial test on that interval:
# the scenario's false-alarm rate is this alpha, the same 0.1 % the scan over ~100 bins at
# DRAIN_ALPHA gives. (The scan answers where no state is reported.)
OPEN_DRAIN_ALPHA = 1e-3


def open_interval(samples: Iterable[Sample], pool: str, since: float, until: float) -> tuple[float, float] | None:
    """When the gateway's state for `pool` first went open in [since, until], and when it next left open
    (half-open or closed; `until` where the samples end before)."""
    start = None
    for s in sorted(samples, key=lambda s: s.t):
        if s.labels.get("pool") != pool or s.t < since:
            continue
        if start is None and s.value in OPEN_STATES and s.t <= until:
            start = float(s.t)
        elif start is not None and s.value not in OPEN_STATES:
            return start, float(s.t)
    return None if start is None else (start, max(until, start))


def _moved_while_open(v: Verdict, a: BreakerAnalysis, attempts: Sequence[RequestRecord], span: tuple[float, float],
                      canary: str) -> None:
    """traffic_moved judged on the calls sent while the gateway said the canary was open: its share must
    fall to a quarter of its baseline, by more than chance (one binomial test); too few calls to tell
    a drain from chance even with none to the canary is "not proven", never a pass."""
    start, end = span
    sent = [r for r in attempts if start <= r.t_send < end and r.served_by]
    n = len(sent)
    k = sum(1 for r in sent if default_pool_of(r.served_by) == canary)
    base, low = a.baseline_share, DRAINED_SHARE * a.baseline_share
    limit = f"<= {low:.1%} of calls (a quarter of the baseline {base:.1%}), p <= {OPEN_DRAIN_ALPHA:g}"
    measured = None if n == 0 else round(k / n, 4)
    detail = f"{k} of {n} calls sent in the {end - start:.1f} s the gateway held the canary open"
    if n == 0 or binom_cdf(0, n, base) > OPEN_DRAIN_ALPHA:
        v.not_proven("traffic_moved", limit, measured, f"{detail}: too few to tell a drain from chance")
        return
    v.add("traffic_moved", limit, measured, k / n <= low and drained_by_more_than_noise(k, n, base, OPEN_DRAIN_ALPHA),
          detail)


def anomaly_verdict(attempts: Sequence[RequestRecord], policy: BreakerPolicy, t0: float, t1: float, kind: str, *,
                    state_samples: Iterable[Sample] | None = None, canary: str = "canary") -> Verdict:
    """The trip: the gateway's state leaving 'closed' where its samples are given (an admin API), else
    the canary drained; it must come within the reaction allowance of the burst's third OOM (or of the
    fault, plus the leak window, for a leak), and not from the error-rate tier."""
    v = Verdict(f"anomaly trip ({kind})", window=(t0, t1))
    state_samples = None if state_samples is None else list(state_samples)
    a = analyze(attempts, policy, baseline_until=t0)
    drained = a.first_move("drained", after=t0)
    if state_samples is not None:
        tripped = first_state_change(state_samples, canary, t0, t1 + policy.reaction_allowance_s)
    else:
        tripped = drained.t if drained is not None else None
    peak = a.peak_error_rate(t0, tripped or t1)  # before the trip: after it the canary's window thins out
    ref = t0
    if kind == "oom-burst":
        ooms = sorted(r.t_end for r in attempts if is_oom(r))
        n = policy.oom_burst_count
        burst = next((t for i, t in enumerate(ooms[n - 1:], n - 1) if t - ooms[i - n + 1] <= policy.oom_burst_window_s),
                     None)
        v.add("oom_burst_seen", f"{n} in {policy.oom_burst_window_s:g} s", len(ooms), burst is not None,
              "OOM answers served by the canary during the fault")
        ref = burst or t0
    limit = policy.reaction_allowance_s + (policy.leak_window_s if kind == "leak-trend" else 0)
    v.add("tripped_after_s", limit, None if tripped is None else round(tripped - ref, 2),
          tripped is not None and tripped - ref <= limit + 1.0,
          "canary breaker left 'closed' (gateway admin state)" if state_samples is not None
          else "canary drained (fault proxy logs)")
    span = open_interval(state_samples, canary, t0, t1 + policy.reaction_allowance_s) if state_samples is not None else None
    if span is not None:
        _moved_while_open(v, a, attempts, span, canary)
    else:
        v.add("traffic_moved", "canary drained", None if drained is None else round(drained.t - t0, 2),
              drained is not None, "canary share of upstream attempts fell")
    v.add("error_rate_below_degrade", policy.degrade_error_rate, round(peak, 4), peak < policy.degrade_error_rate,
          "the trip came from the anomaly rule, not the error-rate tier")
    v.add("attempts_from", "replica side (fault proxies)", attempts_source(attempts), None,
          "the upstream attempts the OOM answers, the drain and the error rate are counted from")
    return v


def observed_anomaly(v: Verdict) -> str:
    """What the gateway did in an anomaly scenario, read from its verdict: none (no trip), anomaly (the
    rule tripped it in time), or a trip the rule does not explain (the failed checks named)."""
    if v.row("tripped_after_s").measured is None:
        return "none"
    return "anomaly" if v.ok else "trip (" + ", ".join(r.check for r in v.failures) + " failed)"
