"""Progress truth's second source, the fault proxy's log of each stream's pauses: a replica all of whose decoding
streams paused at once made no progress then; one stream getting tokens is progress; pauses the log did not all
list leave it unknown. Either source seeing /health say 200 through such a stall fails the row."""
from __future__ import annotations

import pytest

from chaos.observe.timeline import Timeline
from chaos.verify.progress_truth import GENERATED, RUNNING, progress_truth_rows
from chaos.verify.stream_progress import DecodingStream, decoding_streams, stream_progress
from chaos.verify.verdict import Verdict

T0 = 1000.0


def row(replica: str, first: float, finish: float, pauses: list[tuple[float, float]], dropped: int = 0) -> dict:
    """A fault proxy line as reqlog.go writes it: pauses as [start, seconds]."""
    return {"replica": replica, "t_first_token": first, "t_finish": finish, "stream": True,
            "decode_gaps": {"min_s": 0.5, "spans": [[a, d] for a, d in pauses], "dropped": dropped}}


def test_every_stream_paused_at_once_is_a_stall_and_one_moving_stream_is_progress() -> None:
    a = DecodingStream(0.0, 20.0, ((5.0, 12.0),), True)
    b = DecodingStream(1.0, 15.0, ((4.0, 12.5),), True)
    sp = stream_progress([a, b], 0.0, 20.0)
    assert sp.stalls == [(5.0, 12.0, 2)] and sp.unknown == [] and sp.busy_s == pytest.approx(20.0)
    c = DecodingStream(2.0, 14.0, (), True)  # got a token at least every 0.5 s throughout
    assert stream_progress([a, b, c], 0.0, 20.0).stalls == []
    d = DecodingStream(2.0, 14.0, (), False)  # its pauses were not all listed: it may have paused too
    sp = stream_progress([a, b, d], 0.0, 20.0)
    assert sp.stalls == [] and sp.unknown == [(5.0, 12.0)]


def test_no_decoding_stream_is_idle_not_a_stall() -> None:
    sp = stream_progress([DecodingStream(10.0, 12.0, ((10.0, 12.0),), True)], 0.0, 20.0)
    assert sp.stalls == [(10.0, 12.0, 1)] and sp.busy_s == pytest.approx(2.0)


def test_the_log_lines_become_streams_of_their_replica_only() -> None:
    rows = [row("r1", 10.0, 20.0, [(12.0, 3.0)]), row("r2", 10.0, 20.0, []),
            {"replica": "r1", "t_first_token": None, "t_finish": 11.0},  # never got a token
            {"replica": "r1", "t_first_token": 10.0, "t_finish": 11.0}]  # a proxy that logs no pauses
    assert decoding_streams(rows, "r1") == [DecodingStream(10.0, 20.0, ((12.0, 15.0),), True)]
    assert decoding_streams(rows[2:], "r1") is None
    assert decoding_streams([row("r1", 1.0, 2.0, [], dropped=3)], "r1")[0].complete is False  # type: ignore[index]


def health_200(until: float = 30.0) -> Timeline:
    tl = Timeline(clock=lambda: 0.0)
    for i in range(int((until + 10) * 10) + 1):
        tl.sample("health:r1", "status", 200, t=T0 - 10 + i * 0.1)
    return tl


def judge(tl: Timeline, streams: list[DecodingStream] | None) -> Verdict:
    v = Verdict("progress")
    progress_truth_rows(v, tl, T0, 5.0, ("r1",), fault="decode-stall", streams={"r1": streams})
    return v


def stalled(start: float, length: float, n: int = 3) -> list[DecodingStream]:
    return [DecodingStream(T0 - 5 + i, T0 + 25, ((T0 + start - 0.2 * i, T0 + start + length),), True) for i in range(n)]


def test_no_counters_the_fault_proxy_alone_catches_health_200_through_a_stall() -> None:
    r = judge(health_200(), stalled(2.0, 12.0)).row("progress_truth r1")
    assert r.ok is False and r.measured == pytest.approx(12.0, abs=0.01), r.detail
    assert "fault proxy's streams: /health said 200 for 12.0 s (t+2.0..t+14.0)" in r.detail, r.detail
    assert "every stream it was decoding paused, up to 3 at once" in r.detail, r.detail
    assert "the engine's counters cannot be read" in r.detail
    ok = judge(health_200(), stalled(2.0, 3.0)).row("progress_truth r1")
    assert ok.ok is True and "3 streams decoding" in ok.detail, ok.detail


def test_either_source_seeing_the_lie_fails_the_row() -> None:
    tl = health_200()
    gen = 0.0
    for i in range(80):  # counters that see steady decode at 0.5 s scrapes
        t = T0 - 10 + i * 0.5
        tl.sample("metrics:r1", GENERATED, gen, t=t)
        tl.sample("metrics:r1", RUNNING, 3, t=t)
        gen += 100.0
    assert judge(tl, stalled(2.0, 3.0)).row("progress_truth r1").ok is True
    r = judge(tl, stalled(2.0, 9.0)).row("progress_truth r1")
    assert r.ok is False and r.detail.index("fault proxy") < r.detail.index("engine's counters"), r.detail


def test_no_pauses_logged_and_no_counters_is_not_proven() -> None:
    r = judge(health_200(), None).row("progress_truth r1")
    assert r.unproven and "lists no stream's pauses" in r.detail and "cannot be read" in r.detail


def test_streams_from_before_the_run_are_not_judged() -> None:
    """The log is read from before the run: a stall there (another scenario's fault) is outside /health's probes."""
    earlier = [DecodingStream(T0 - 80, T0 - 50, ((T0 - 75, T0 - 52),), True)]
    r = judge(health_200(), earlier + stalled(2.0, 3.0)).row("progress_truth r1")
    assert r.ok is True and "3 streams decoding over t-10.0..t+30.0" in r.detail, r.detail
