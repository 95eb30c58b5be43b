"""Progress truth on constructed timelines: a replica whose /health said 200 while it decoded nothing for the
requests it held fails past the SLA, in words that name the seconds; unreadable counters and blind gaps are
"not proven", never a pass."""
from __future__ import annotations

from collections.abc import Callable

import pytest

from chaos.observe.timeline import Timeline
from chaos.verify.progress_truth import FIRST_TOKENS, GENERATED, RUNNING, compare, progress_truth_rows, scrapes
from chaos.verify.verdict import Verdict

T0 = 1000.0  # the fault's injection
Rate = Callable[[float], float]


def timeline(rate: Rate, running: Callable[[float], float], health: Callable[[float], int | None] = lambda d: 200,
             *, until: float = 30.0, every_s: float = 0.5, skip: Callable[[float], bool] = lambda d: False,
             rep: str = "r1") -> Timeline:
    """Scrapes of `rep` every `every_s` and /health at 10 Hz from t-10 to t+until; `rate(d)` tokens/s, running(d)."""
    tl = Timeline(clock=lambda: 0.0)
    generated, d = 0.0, -10.0
    while d <= until:
        if not skip(d):
            tl.sample(f"metrics:{rep}", GENERATED, generated, t=T0 + d, engine="0")
            tl.sample(f"metrics:{rep}", RUNNING, running(d), t=T0 + d, engine="0")
        generated += rate(d) * every_s
        d = round(d + every_s, 3)
    for i in range(int((until + 10) * 10) + 1):
        d = round(-10 + i * 0.1, 3)
        tl.sample(f"health:{rep}", "status", health(d), t=T0 + d)
    return tl


def judge(tl: Timeline, limit_s: float = 5.0, reps: tuple[str, ...] = ("r1",)) -> Verdict:
    v = Verdict("recovery")
    progress_truth_rows(v, tl, T0, limit_s, reps, fault="decode-stall")
    return v


def stall_from(t: float, until: float = 1e9) -> Rate:
    return lambda d: 0.0 if t <= d < until else 200.0


def test_a_decode_stall_under_health_200_fails_naming_the_seconds() -> None:
    row = judge(timeline(stall_from(0.0, 12.0), lambda d: 4)).row("progress_truth r1")
    assert row.ok is False and row.measured == pytest.approx(12.0, abs=0.6)
    assert "/health said 200 for 12" in row.detail and "(t+0.0..t+12" in row.detail, row.detail
    assert "while nothing decoded" in row.detail and "4 request(s) running" in row.detail


def test_new_requests_first_tokens_are_not_progress() -> None:
    """A stalled engine still prefills arrivals: one first token a second with 4-12 running is no decode."""
    row = judge(timeline(lambda d: 1.0 if d >= 0 else 200.0, lambda d: 4 + max(0.0, min(d, 8.0)))).row("progress_truth r1")
    assert row.ok is False and row.measured > 25


def test_first_tokens_that_outpace_the_floor_are_still_no_decode_where_the_replica_counts_them() -> None:
    """Real vLLM on CPU under a churning load: 2 requests running, 3 arrivals' first tokens a second (above the
    floor of 1 per running request), nothing decoded. With the TTFT count scraped, that is a stall."""
    def tl(count_first: bool) -> Timeline:
        t = Timeline(clock=lambda: 0.0)
        generated = first = 0.0
        d = -10.0
        while d <= 20.0:
            t.sample("metrics:r1", GENERATED, generated, t=T0 + d, engine="0")
            t.sample("metrics:r1", RUNNING, 2, t=T0 + d, engine="0")
            if count_first:
                t.sample("metrics:r1", FIRST_TOKENS, first, t=T0 + d, engine="0")
            arrivals = 3.0 * 0.5
            generated += arrivals + (0.0 if d >= 0 else 100.0)  # after the fault: first tokens only
            first += arrivals
            d = round(d + 0.5, 3)
        for i in range(301):
            t.sample("health:r1", "status", 200, t=T0 - 10 + i * 0.1)
        return t

    assert judge(tl(count_first=False)).row("progress_truth r1").ok is True  # what the floor alone reads
    row = judge(tl(count_first=True)).row("progress_truth r1")
    assert row.ok is False and row.measured > 15, row.detail


def test_health_that_says_503_during_the_stall_tells_the_truth() -> None:
    row = judge(timeline(stall_from(0.0), lambda d: 4, lambda d: 200 if d < 1.0 else 503)).row("progress_truth r1")
    assert row.ok is True and row.measured <= 1.5


def test_a_short_stall_or_a_long_prefill_is_within_the_sla_and_slow_decode_is_progress() -> None:
    assert judge(timeline(stall_from(0.0, 3.0), lambda d: 2)).row("progress_truth r1").ok is True
    slow = judge(timeline(lambda d: 3.0, lambda d: 2)).row("progress_truth r1")  # 1.5 tokens/s per sequence
    assert slow.ok is True and slow.measured == 0.0 and "requests ran for" in slow.detail
    assert judge(timeline(lambda d: 1.0, lambda d: 2)).row("progress_truth r1").ok is False  # 0.5 per sequence
    assert judge(timeline(stall_from(0.0, 3.0), lambda d: 2), limit_s=2.0).row("progress_truth r1").ok is False


def test_a_restart_resets_the_counter_and_is_not_a_stall() -> None:
    tl = timeline(lambda d: 200.0, lambda d: 4)
    for s in tl.samples:  # the new engine's counter starts again from 0 at t+5
        if s.name == GENERATED and s.t >= T0 + 5:
            s.value -= 2000.0 + 200.0 * 15
    assert judge(tl).row("progress_truth r1").ok is True


def test_unreadable_counters_are_not_proven_never_a_pass() -> None:
    tl = timeline(stall_from(0.0), lambda d: 4)
    tl.samples = [s for s in tl.samples if s.source != "metrics:r1"]
    row = judge(tl).row("progress_truth r1")
    assert row.ok is None and row.unproven and "not scraped" in row.detail
    for t in (T0, T0 + 1):
        tl.sample("metrics:r1", "scrape_ok", False, t=t)
    row = judge(tl).row("progress_truth r1")
    assert row.unproven and "2 scrape(s) of its /metrics failed" in row.detail
    missing = judge(timeline(stall_from(0.0), lambda d: 4), reps=("r2",)).row("progress_truth r2")
    assert missing.unproven and "cannot be read" in missing.detail


def test_no_health_probes_an_idle_replica_and_a_blind_gap_are_not_proven() -> None:
    tl = timeline(stall_from(0.0), lambda d: 4)
    tl.samples = [s for s in tl.samples if s.source != "health:r1"]
    assert "no /health probes" in judge(tl).row("progress_truth r1").unproven
    idle = judge(timeline(lambda d: 0.0, lambda d: 0)).row("progress_truth r1")
    assert idle.unproven and "never asked" in idle.detail
    gap = judge(timeline(stall_from(0.0), lambda d: 4, skip=lambda d: 2.0 < d < 9.0, until=12.0)).row("progress_truth r1")
    assert gap.ok is None and "a stall could hide there" in gap.unproven
    blind = timeline(stall_from(0.0, 20.0), lambda d: 4)
    blind.samples = [s for s in blind.samples if not (s.source == "health:r1" and T0 <= s.t < T0 + 20)]
    assert judge(blind).row("progress_truth r1").unproven  # no health probe through the stall: unknown
    refused = timeline(stall_from(0.0, 20.0), lambda d: 4, lambda d: None if 0 <= d < 20 else 200)
    assert judge(refused).row("progress_truth r1").ok is True  # a probe refused or timed out said "not healthy"


def test_scrapes_sum_engines_and_need_both_counters() -> None:
    tl = Timeline(clock=lambda: 0.0)
    tl.sample("m", GENERATED, 5.0, t=1.0, engine="0")
    tl.sample("m", GENERATED, 7.0, t=1.0, engine="1")
    tl.sample("m", RUNNING, 2.0, t=1.0, engine="0")
    tl.sample("m", GENERATED, 9.0, t=2.0)
    (only,) = scrapes(tl.samples)
    assert (only.t, only.generated, only.running) == (1.0, 12.0, 2.0)
    assert compare([only], tl.samples) is None


def test_the_health_source_can_be_named_per_replica() -> None:
    tl = timeline(stall_from(0.0, 12.0), lambda d: 4)
    for s in tl.samples:
        if s.source == "health:r1":
            s.source = "health"  # the hurt replica's own probes, as a recovery run names them
    v = Verdict("recovery")
    progress_truth_rows(v, tl, T0, 5.0, {"r1": "health"}, fault="decode-stall")
    assert v.row("progress_truth r1").ok is False
    assert judge(tl).row("progress_truth r1").unproven  # under the default name there are no probes


def test_the_steady_windows_leave_the_fault_out_and_still_catch_a_restart_that_never_decodes() -> None:
    """A recovery run judges the steady state before the fault and the time from recovery on: a stall inside the
    fault's window is recovery's to judge; one after the replica answered again (a restart that is no reset) fails."""
    def rows(tl: Timeline, windows: list[tuple[float, float]]) -> Verdict:
        v = Verdict("recovery")
        progress_truth_rows(v, tl, T0, 5.0, ("r1",), fault="rank-freeze", windows=windows, items=("progress-truth",))
        return v

    steady = [(T0 - 10, T0), (T0 + 15, T0 + 30)]
    during = rows(timeline(stall_from(0.0, 14.0), lambda d: 4), steady).row("progress_truth r1")
    assert during.ok is True and "(the steady states: t-10.0..t+0.0, t+15.0..t+30.0)" in during.detail, during.detail
    after = rows(timeline(stall_from(0.0), lambda d: 4), steady).row("progress_truth r1")
    assert after.ok is False and after.measured == pytest.approx(15.0, abs=0.6), after.detail
    assert "t+15.0..t+30.0" in after.detail and "/health said 200 for 15" in after.detail
    unread = rows(timeline(lambda d: 200.0, lambda d: 4, skip=lambda d: d > 0), steady).row("progress_truth r1")
    assert unread.unproven and "unknown for 15.0 s (t+15.0..t+30.0)" in unread.detail  # the first window says nothing of it
    blind = rows(timeline(lambda d: 200.0, lambda d: 4, skip=lambda d: True), steady).row("progress_truth r1")
    assert blind.unproven and blind.items == ("progress-truth",)  # only that item, never the recovery's own
    none = rows(timeline(lambda d: 200.0, lambda d: 4, until=10.0), [(T0 + 20, T0 + 30)]).row("progress_truth r1")
    assert none.unproven and "fewer than two scrapes of its counters in t+20.0..t+30.0" in none.detail
