"""Detection across signals (chaos.verify.detection): each signal's first bad observation after a fault, its
false alarms over a no-fault stretch, the engine's heartbeat from its own counters, and the table."""
from __future__ import annotations

from chaos.experiment.detection_control import detection_table, long_prompt_mix
from chaos.observe.timeline import Timeline
from chaos.verify.detection import (
    ALERT,
    Alarms,
    alert_alarms,
    false_alarms,
    first_bad,
    heartbeat,
    observations,
    signals,
)


def _health(tl: Timeline, source: str, statuses: list[tuple[float, object]]) -> None:
    for t, v in statuses:
        tl.sample(source, "status", v, t=t)


def _scrape(tl: Timeline, t: float, generated: float, running: float, ok: bool = True) -> None:
    if ok:
        tl.sample("metrics:r", "vllm:generation_tokens_total", generated, t=t)
        tl.sample("metrics:r", "vllm:num_requests_running", running, t=t)
    tl.sample("metrics:r", "scrape_ok", ok, t=t)


def test_health_is_detected_at_its_first_bad_answer_after_the_fault() -> None:
    tl = Timeline()
    _health(tl, "health", [(0.0, 503), (1.0, 200), (2.0, 200), (2.5, None), (3.0, 503), (4.0, 200)])
    obs = observations(tl, signals("r")[0])
    assert first_bad(obs, 1.5, 10.0) == 1.0  # the timeout (None) at 2.5: before the fault at 0 does not count
    assert first_bad(obs, 3.5, 10.0) is None


def test_a_failed_completion_is_bad_and_is_known_when_it_timed_out() -> None:
    tl = Timeline()
    for t, ok, took in [(0.0, True, 0.1), (1.0, False, 2.0), (2.0, True, 0.2)]:
        tl.sample("completion", "ok", ok, t=t)
        tl.sample("completion", "latency", took, t=t)
    completion = next(s for s in signals("r") if s.key == "completion")
    assert observations(tl, completion) == [(0.1, False), (2.2, False), (3.0, True)]
    assert first_bad(observations(tl, completion), 0.5, 10.0) == 2.5  # sent at 1.0, failed at its 2 s timeout


def test_the_heartbeat_is_bad_where_nothing_decodes_while_requests_run() -> None:
    tl = Timeline()
    _scrape(tl, 0.0, 100, 4)
    _scrape(tl, 0.5, 140, 4)   # 80 tokens/s with 4 running: beating
    _scrape(tl, 1.0, 140, 4)   # none: a stall
    _scrape(tl, 1.5, 140, 0)   # nothing ran at 1.5: nothing was asked of it
    _scrape(tl, 2.0, 0, 0, ok=False)
    _scrape(tl, 2.5, 10, 1)    # a new engine: its counter went back
    assert heartbeat(tl.samples, "metrics:r") == [(0.5, False), (1.0, True), (1.5, False), (2.0, True), (2.5, True)]


def test_a_heartbeat_never_read_is_not_watched_rather_than_always_bad() -> None:
    tl = Timeline()
    for t in (0.0, 0.5, 1.0):
        tl.sample("metrics:r", "scrape_ok", False, t=t)
    assert heartbeat(tl.samples, "metrics:r") == []


def test_false_alarms_count_each_bad_stretch_and_the_longest() -> None:
    obs = [(0.0, False), (1.0, True), (1.5, True), (2.0, False), (5.0, True), (5.2, False), (9.0, True)]
    assert false_alarms(obs, 0.0, 9.0) == Alarms(3, 1.0, 7)
    assert false_alarms(obs, 3.0, 6.0) == Alarms(1, 0.2, 2)
    assert false_alarms([], 0.0, 1.0) == Alarms(0, 0.0, 0)


def test_the_table_says_what_was_not_watched_not_seen_or_unknown() -> None:
    sigs = [*signals("r"), ALERT]
    detected = {"health": 0.31, "models": None, "completion": 0.12, "heartbeat": 0.5, "gateway": None, "alert": None}
    watched = {"health": 90, "models": 20, "completion": 30, "heartbeat": 40, "gateway": 0, "alert": 0}
    control = {"health": Alarms(2, 0.4, 200), "completion": Alarms(0, 0.0, 60)}
    rows = {r[0]: r for r in detection_table("crash", detected, watched, control, sigs, window_s=42.0).rows}
    assert rows["/health"][1:] == ["0.31", "2 in 200 observations", "0.40"]
    assert rows["/v1/models"][1] == "not within 42 s" and rows["/v1/models"][2] == "not watched in the control"
    assert rows["the gateway's /health"][1] == "not watched here"
    assert rows["the team's alert"][1] == "not watched here"
    unknown = detection_table("crash", detected, watched, None, sigs, window_s=42.0).rows
    assert all(r[2] == "unknown: the control did not run in this session" for r in unknown)


def test_the_control_asks_the_two_longest_prompt_classes() -> None:
    assert long_prompt_mix({"short": 512, "long": 8192, "xl": 32768}) == {"long": 1.0, "xl": 1.0}
    assert long_prompt_mix({"only": 100}) == {"only": 1.0}


def test_the_team_s_alerts_that_began_in_the_control_are_its_false_alarms() -> None:
    """A firing left over from before the control is not one of its alarms; one still firing at its end counts to
    the end; observed is the rule evaluations the control held."""
    firings = [(90.0, 130.0), (110.0, 114.5), (150.0, None), (200.0, 201.0)]
    assert alert_alarms(firings, 100.0, 160.0, 2.0) == Alarms(2, 10.0, 30)
    assert alert_alarms([], 100.0, 160.0, 15.0) == Alarms(0, 0.0, 4)
    rows = {r[0]: r for r in detection_table("crash", {"alert": 31.0}, {"alert": 1}, {"alert": Alarms(2, 10.0, 30)},
                                             [ALERT], window_s=60.0).rows}
    assert rows["the team's alert"][1:] == ["31.00", "2 in 30 observations", "10.00"]


def test_the_liveness_row_says_its_restarts_by_phase_and_the_control_s_phases() -> None:
    from chaos.experiment.detection_control import restart_span
    from chaos.verify.detection import LIVENESS
    from chaos.verify.liveness import PHASES, Replay

    every = Replay(tuple(100.0 + 11.0 + i * 0.25 for i in range(PHASES)), 0)
    assert restart_span(every, 100.0, 60.0) == "11.00-15.75 (restart, by phase)"
    some = Replay((112.0,) + (None,) * (PHASES - 1), 0)
    assert restart_span(some, 100.0, 60.0) == f"12.00 at the luckiest phase; no restart within 60 s at {PHASES - 1}"
    assert restart_span(Replay((None,) * PHASES, 0), 100.0, 60.0) == f"no restart within 60 s at any of {PHASES} phases"
    rows = {r[0]: r for r in detection_table("crash", {"liveness": 11.0}, {"liveness": 300},
                                             {"liveness": Alarms(0, 0.0, PHASES)}, [LIVENESS], window_s=60.0,
                                             seen={"liveness": restart_span(every, 100.0, 60.0)}).rows}
    assert rows["the team's liveness probe"][1:] == ["11.00-15.75 (restart, by phase)", f"a restart at 0 of {PHASES} phases",
                                                      ""]
