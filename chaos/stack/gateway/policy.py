"""The gateway's policy: the two breaker tiers and the anomaly rules per pool, and weighted routing.

- primary tier (each pool): a RateBreaker at degrade_error_rate / degrade_latency_s (window P99);
  an OPEN canary gets no traffic (its share goes to stable) until half-open probes succeed.
- advanced tier (canary only): a second window of every canary outcome, never cleared by the
  primary tier's transitions, so it keeps ageing while the canary is degraded: the last window_s,
  or the last min_calls outcomes where that holds fewer (each degrade is an open wait with no canary
  traffic, doubled after a failed probe: a window of wall time alone never refilled on a canary with
  barely min_calls per window); error rate >= rollback_error_rate with >= min_calls -> FORCED_OPEN
  (rolled back) until an operator reset.
- anomaly rules: oom_burst_count OOM errors within oom_burst_window_s from one pool -> trip; a
  replica's resident memory growing faster than leak_rate_per_hour -> trip (held open while the
  trend lasts). `leak_hour_s` is how many real seconds count as an hour, to compress time.
- the stable pool is the last resort: it is never drained; its breaker state is still tracked and
  shown, and its calls serve as its half-open probes.
"""
from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict
from typing import Any

from chaos.stack.gateway.breaker import NORMAL, PROBE, STATE_CODES, RateBreaker, SlidingWindow, State, Transition, WindowStats
from chaos.stack.gateway.defects import ROLLBACK_FORGOTTEN_ON_RESTART
from chaos.stack.gateway.release import MirrorLog, Release
from chaos.stack.gateway.rules import BreakerRules

STABLE, CANARY = "stable", "canary"
POOLS = (STABLE, CANARY)
# vLLM's CUDA OOM text ("CUDA out of memory. Tried to allocate ...") and torch's exception name
OOM_MARKERS = ("out of memory", "outofmemoryerror")


def is_oom(text: str | bytes) -> bool:
    """True when an error body or stream chunk reports an out-of-memory failure."""
    s = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    s = s.lower()
    return any(m in s for m in OOM_MARKERS)


class LeakTrend:
    """RSS samples of one replica over the leak window; growth as a fraction per 'hour'."""

    def __init__(self, window_s: float, hour_s: float = 3600.0, min_growth: float = 0.0) -> None:
        self.window_s, self.hour_s, self.min_growth = window_s, hour_s, min_growth
        self.growth = 0.0
        self.samples: deque[tuple[float, float]] = deque()

    def add(self, t: float, rss: float) -> None:
        self.samples.append((t, rss))
        while self.samples and self.samples[0][0] < t - self.window_s:
            self.samples.popleft()

    def rate_per_hour(self) -> float | None:
        """Least-squares slope over the mean, per hour; None until most of a window is covered."""
        pts = list(self.samples)
        if len(pts) < 3 or pts[-1][0] - pts[0][0] < 0.8 * self.window_s:
            return None
        fit = _fit(pts)
        if fit is None:
            return None
        slope, mean = fit
        self.growth = slope * (pts[-1][0] - pts[0][0]) / mean
        return slope * self.hour_s / mean

    def leaking(self, rate_limit: float) -> bool:
        """Over the rate limit over the whole window AND in each half of it, with real growth.

        With time compressed, a fresh process's warm-up is a steep 'rate' too; but warm-up is a
        step that ends, while a leak keeps growing through both halves of the window."""
        rate = self.rate_per_hour()
        if rate is None or rate <= rate_limit or self.growth < self.min_growth:
            return False
        pts = list(self.samples)
        mid = pts[0][0] + (pts[-1][0] - pts[0][0]) / 2
        for half in ([p for p in pts if p[0] <= mid], [p for p in pts if p[0] >= mid]):
            fit = _fit(half) if len(half) >= 3 else None
            if fit is None or fit[0] * self.hour_s / fit[1] <= rate_limit:
                return False
        return True


def _fit(pts: list[tuple[float, float]]) -> tuple[float, float] | None:
    """(least-squares slope, mean value) of (t, value) points; None when undefined."""
    n = len(pts)
    mt, mv = sum(t for t, _ in pts) / n, sum(v for _, v in pts) / n
    var = sum((t - mt) ** 2 for t, _ in pts)
    if var == 0 or mv <= 0:
        return None
    return sum((t - mt) * (v - mv) for t, v in pts) / var, mv


class PoolGuard:
    """One pool's breaker, OOM burst memory and (canary only) rollback window."""

    def __init__(self, name: str, p: BreakerRules, clock: Callable[[], float], wall: Callable[[], float],
                 on_transition: Callable[[Transition], None]) -> None:
        self.name = name
        self.breaker = RateBreaker(
            name, failure_rate=p.degrade_error_rate, slow_p99_s=p.degrade_latency_s, window_s=p.window_s,
            min_calls=p.min_calls, open_wait_s=p.open_wait_s, half_open_calls=p.half_open_calls,
            clock=clock, wall=wall, on_transition=on_transition)
        self.ooms: deque[float] = deque()
        # never fewer than the last min_calls outcomes (no older than the longest open wait allows): each degrade
        # holds the canary out, so a window of wall time alone starves on a canary that barely fills it
        self.rollback = SlidingWindow(p.window_s, at_least=p.min_calls,
                                      max_age_s=p.window_s + RateBreaker.MAX_WAIT_FACTOR * p.open_wait_s
                                      ) if name == CANARY else None
        self.leaks: dict[str, LeakTrend] = {}
        self.leak_rates: dict[str, float | None] = {}


class GatewayPolicy:
    """Routes each request to a pool and turns outcomes into breaker transitions."""

    def __init__(self, policy: BreakerRules, *, canary_weight: float | None = None, leak_hour_s: float = 3600.0,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
                 rng: random.Random | None = None, planted_defect: str | None = None) -> None:
        self.p = policy
        self.planted_defect = planted_defect  # chaos/stack/gateway/defects.py; None in every real use
        self.restarts: dict[str, int] = {}    # replica -> restarts seen by the scraper
        self._restarted_at: tuple[float, str] | None = None
        self.canary_weight = policy.canary_weight if canary_weight is None else canary_weight
        self.leak_hour_s = leak_hour_s
        self.misroute_fraction = 0.0
        self.clock, self.rng = clock, rng or random.Random()
        self.transitions: deque[Transition] = deque(maxlen=1000)
        self.listeners: list[Callable[[Transition], None]] = []
        self.pools = {n: PoolGuard(n, policy, clock, wall, self._on_transition) for n in POOLS}
        self.release = Release()  # gray release: who the canary may serve, and the shadow share
        self.mirrors = MirrorLog()
        self._lock = threading.RLock()

    def _on_transition(self, tr: Transition) -> None:
        self.transitions.append(tr)
        for fn in self.listeners:
            fn(tr)

    def state(self, pool: str) -> State:
        return self.pools[pool].breaker.state

    # -- routing -----------------------------------------------------------------------------
    def route(self, present: Iterable[str] = POOLS, *, canary_ok: bool = True) -> tuple[str, str | None]:
        """Pick the pool for one request and the breaker permit it carries (None: not counted);
        `canary_ok` False: the release does not admit this request to the canary."""
        have = set(present)
        with self._lock:
            if have == {CANARY}:
                return CANARY, self._observe_permit(CANARY)
            pool, permit = STABLE, self._observe_permit(STABLE)
            if CANARY in have and canary_ok and self.rng.random() < self.canary_weight:
                got = self.pools[CANARY].breaker.acquire()
                if got is not None:
                    pool, permit = CANARY, got
            if self.misroute_fraction and len(have) == 2 and self.rng.random() < self.misroute_fraction:
                return (CANARY if pool == STABLE else STABLE), None
            return pool, permit

    def mirror_this(self) -> bool:
        """Whether to copy one stable-served request to the canary (the release's shadow share)."""
        with self._lock:
            return self.release.mirror > 0 and self.rng.random() < self.release.mirror

    def _observe_permit(self, pool: str) -> str:
        return PROBE if self.pools[pool].breaker.state is State.HALF_OPEN else NORMAL

    def effective_canary_share(self) -> float:
        """The share of new traffic the canary gets right now (0 while degraded or rolled back)."""
        st = self.state(CANARY)
        if st is State.CLOSED:
            return self.canary_weight
        return self.canary_weight if st is State.HALF_OPEN else 0.0

    # -- outcomes ----------------------------------------------------------------------------
    def record(self, pool: str, ok: bool, latency_s: float, permit: str | None = NORMAL, *, oom: bool = False) -> None:
        """Count one finished call of `pool`, then apply the tiers and the OOM rule."""
        g = self.pools[pool]
        with self._lock:
            now = self.clock()
            if g.rollback is not None and permit is not None:
                g.rollback.add(now, ok, latency_s)
                self._check_rollback(g, now)
            if permit is not None:
                g.breaker.record(ok, latency_s, permit)
            if oom:
                g.ooms.append(now)
                while g.ooms and g.ooms[0] <= now - self.p.oom_burst_window_s:
                    g.ooms.popleft()
                if len(g.ooms) >= self.p.oom_burst_count:
                    g.breaker.trip(f"oom burst: {len(g.ooms)} OOMs within {self.p.oom_burst_window_s}s")

    def _check_rollback(self, g: PoolGuard, now: float) -> None:
        st = g.rollback.stats(now)  # type: ignore[union-attr]
        if st.calls >= self.p.min_calls and st.error_rate >= self.p.rollback_error_rate:
            if g.breaker.force_open(f"rollback: error rate {st.error_rate:.4f} >= {self.p.rollback_error_rate}"):
                self._planted_fresh_start(now)

    def observe_rss(self, pool: str, replica: str, rss_bytes: float) -> float | None:
        """Feed one RSS scrape of a replica; trips its pool on a leak trend. Returns the rate."""
        g = self.pools[pool]
        with self._lock:
            trend = g.leaks.setdefault(replica, LeakTrend(self.p.leak_window_s, self.leak_hour_s,
                                                                     self.p.leak_min_growth))
            trend.add(self.clock(), rss_bytes)
            rate = g.leak_rates[replica] = trend.rate_per_hour()
            if trend.leaking(self.p.leak_rate_per_hour):
                g.breaker.trip(f"leak: {replica} RSS +{rate:.1%}/h > {self.p.leak_rate_per_hour:.1%}/h")
            return rate

    def replica_restarted(self, pool: str, replica: str) -> None:
        """The scraper saw `replica` come back as a new process. The breakers keep their state: a
        restart is no operator's decision, and a rolled-back canary stays rolled back."""
        with self._lock:
            self.restarts[replica] = self.restarts.get(replica, 0) + 1
            self._restarted_at = (self.clock(), replica)
            self._planted_fresh_start(self.clock())

    def _planted_fresh_start(self, now: float) -> None:
        """The planted defect (defects.py), off unless named: within a window of a replica's restart,
        in either order, a rollback is taken for the old process's doing and every pool starts afresh."""
        if self.planted_defect != ROLLBACK_FORGOTTEN_ON_RESTART or self._restarted_at is None:
            return
        at, replica = self._restarted_at
        if now - at <= self.p.window_s and any(g.breaker.state is State.FORCED_OPEN for g in self.pools.values()):
            for g in self.pools.values():
                g.breaker.reset(f"replica {replica} restarted: pools rebuilt")
                if g.rollback is not None:
                    g.rollback.clear()

    def tick(self) -> None:
        """Periodic work: let the rollback window age while the canary gets no traffic."""
        with self._lock:
            g = self.pools[CANARY]
            if g.breaker.state is not State.FORCED_OPEN:
                self._check_rollback(g, self.clock())

    # -- operator ----------------------------------------------------------------------------
    def reset(self, pool: str | None = None, reason: str = "operator reset") -> list[str]:
        """Close the named pool (or all), clearing windows, OOM counts and leak history."""
        names = [pool] if pool else list(POOLS)
        with self._lock:
            for n in names:
                g = self.pools[n]
                g.breaker.reset(reason)
                g.ooms.clear()
                g.leaks.clear()
                g.leak_rates.clear()
                if g.rollback is not None:
                    g.rollback.clear()
        return names

    def force(self, pool: str, state: str, reason: str = "operator") -> None:
        """Operator override: 'forced_open' (hold open) or 'open' (trip, then the usual half-open)."""
        br = self.pools[pool].breaker
        if state == State.FORCED_OPEN.value:
            br.force_open(reason)
        elif state == State.OPEN.value:
            br.trip(reason)
        else:
            raise ValueError(f"state must be 'open' or 'forced_open', got {state!r}")

    def snapshot(self) -> dict[str, Any]:
        """Everything the admin API and /metrics show."""
        with self._lock:
            pools = {}
            for n, g in self.pools.items():
                st, win = g.breaker.state, g.breaker.stats()
                entry = {"state": st.value, "state_code": STATE_CODES[st], "open_wait_s": g.breaker.current_wait_s,
                         "window": _stats(win), "ooms_in_window": len(g.ooms),
                         "rss_growth_per_hour": dict(g.leak_rates)}
                if g.rollback is not None:
                    entry["rollback_window"] = _stats(g.rollback.stats(self.clock()))
                pools[n] = entry
            trs = [{**asdict(t), "src": t.src.value, "dst": t.dst.value} for t in list(self.transitions)[-100:]]
            return {"pools": pools, "canary_weight": self.canary_weight, "release": self.release.to_json(),
                    "canary_share": self.effective_canary_share(), "misroute_fraction": self.misroute_fraction,
                    "replica_restarts": dict(self.restarts),
                    "transitions": trs}


def _stats(w: WindowStats) -> dict[str, Any]:
    return {"calls": w.calls, "failures": w.failures, "error_rate": w.error_rate, "p99_s": w.p99_s}
