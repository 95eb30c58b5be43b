"""The stream verdicts on hand-made answers and logs, and what makes a stream whole (client and gateway)."""
from __future__ import annotations

import pytest

from chaos.load.sse import NO_COUNT, ChunkOrder, chunk_count, stream_problem
from chaos.stack.gateway.streamcheck import StreamCheck, aborted_answer
from chaos.verify.client_cmd import what_it_did
from chaos.verify.streams import Attempts, ClientAnswer, attempts_for, client_verdict, gateway_verdict

TRUTH = " a b c d"


def _answer(ok: bool, shown: str, rid: str | None = "r1", window=(10.0, 11.0), finish="length") -> ClientAnswer:
    return ClientAnswer("c", ok, shown, finish_reason=finish if ok else None, request_id=rid, window=window)


def test_whole_answer_and_prefix_pass_duplicates_and_reorders_fail():
    ok = client_verdict("c", [_answer(True, TRUTH)], [], truth=TRUTH, truth_finish="length", expect_whole=True)
    assert ok.ok
    prefix = client_verdict("c", [_answer(False, " a b")], [], truth=TRUTH, truth_finish="length", expect_whole=False)
    assert prefix.ok
    dup = client_verdict("c", [_answer(True, " a b b c d")], [], truth=TRUTH, truth_finish="length", expect_whole=True)
    assert not dup.row("shown_in_order").ok and "char" in dup.row("shown_in_order").detail
    swapped = client_verdict("c", [_answer(False, " b a")], [], truth=TRUTH, truth_finish="length", expect_whole=False)
    assert not swapped.row("shown_in_order").ok
    # a broken stream reported as whole, and a wrong finish_reason
    lied = client_verdict("c", [_answer(True, TRUTH)], [], truth=TRUTH, truth_finish="length", expect_whole=False)
    assert not lied.row("reported_right").ok
    fin = client_verdict("c", [_answer(True, TRUTH, finish="stop")], [], truth=TRUTH, truth_finish="length",
                         expect_whole=True)
    assert not fin.row("finish_reason").ok


def test_a_stream_the_fault_never_touched_must_be_whole_and_one_it_hit_an_error():
    # real vLLM sent a whole 12-token answer in one event: a rule "after 3 tokens" never fired on it
    hit = {"request_id": "r1", "t_arrival": 10.1, "output_tokens": 13, "rule": "chaos-duplicate-chunk-1"}
    missed = {"request_id": "r2", "t_arrival": 11.1, "output_tokens": 1, "rule": None}
    answers = [_answer(False, ""), _answer(True, TRUTH, rid="r2", window=(11.0, 12.0))]
    log = [hit, missed]
    ats = [attempts_for(a, log) for a in answers]
    assert ats[0].hit and not ats[1].hit
    v = client_verdict("c", answers, ats, truth=TRUTH, truth_finish="length", expect_whole=False)
    assert v.row("reported_right").ok and v.row("reported_right").limit == "an error (1 not hit: whole)"
    # the untouched one reported as an error, or the hit one as whole: both wrong
    flipped = [_answer(False, ""), _answer(False, "", rid="r2", window=(11.0, 12.0))]
    assert not client_verdict("c", flipped, ats, truth=TRUTH, truth_finish="length", expect_whole=False).ok
    lied = [_answer(True, TRUTH), answers[1]]
    assert not client_verdict("c", lied, ats, truth=TRUTH, truth_finish="length", expect_whole=False).ok
    # a log that does not name hits (no `rule` field) cannot excuse anything
    blind = [attempts_for(a, [{k: v for k, v in line.items() if k != "rule"} for line in log]) for a in answers]
    assert not client_verdict("c", answers, blind, truth=TRUTH, truth_finish="length", expect_whole=False).ok


def test_retry_of_a_started_stream_is_caught_unless_it_resumes():
    log = [{"request_id": "r1", "t_arrival": 10.1, "output_tokens": 3},
           {"request_id": "r1", "t_arrival": 10.6, "output_tokens": 4},
           {"request_id": "other", "t_arrival": 10.2, "output_tokens": 0}]
    at = attempts_for(_answer(False, ""), log)
    assert [l["t_arrival"] for l in at.lines] == [10.1, 10.6] and at.retried_after_first_token()
    v = client_verdict("c", [_answer(False, "")], [at], truth=TRUTH, truth_finish=None, expect_whole=False)
    assert not v.row("no_retry_of_started_stream").ok
    assert not Attempts([{"output_tokens": 0}, {"output_tokens": 5}]).retried_after_first_token()  # none shown yet
    assert not Attempts([{"output_tokens": 2}, {"output_tokens": 2, "resumed": True}]).retried_after_first_token()
    # without a request id, the window counts, and nothing before the client started
    by_window = attempts_for(_answer(False, "", rid=None, window=(10.15, 10.7)), log)
    assert [l["t_arrival"] for l in by_window.lines] == [10.2, 10.6]
    assert client_verdict("c", [_answer(False, "")], [Attempts()], truth=TRUTH, truth_finish=None,
                          expect_whole=False).row("no_retry_of_started_stream").ok is None


def test_gateway_verdict_counts_exactly_the_broken_streams():
    assert gateway_verdict(5, 11, 6, expect_failures=True).ok
    assert not gateway_verdict(5, 8, 6, expect_failures=True).ok
    assert not gateway_verdict(5, 6, 6, expect_failures=False).ok
    assert gateway_verdict(None, None, 6, expect_failures=True).row("gateway_failures").ok is None


@pytest.mark.parametrize("kw, expect", [
    ({"done": True, "finish_reason": "stop", "events": 3, "usage_out": 3}, None),
    ({"done": False, "finish_reason": None, "events": 3, "usage_out": None}, "stream_cut"),
    ({"done": True, "finish_reason": None, "events": 3, "usage_out": None}, "stream_cut"),
    ({"done": True, "finish_reason": "length", "events": 4, "usage_out": 3}, "stream_corrupt"),
    ({"done": True, "finish_reason": "length", "events": 3, "usage_out": 3, "bad_json": 1}, "stream_corrupt"),
    ({"done": True, "finish_reason": "abort", "events": 4, "usage_out": 4}, "aborted"),  # vLLM on SIGTERM
    ({"done": True, "finish_reason": "error", "events": 0, "usage_out": 0}, "aborted"),
])
def test_stream_problem(kw, expect):
    got = stream_problem(**kw)
    assert (got[0] if got else None) == expect


def _sse(*events: str) -> list[bytes]:
    return [f"data: {e}\n\n".encode() for e in events]


C1 = '{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}]}'
C2 = '{"choices":[{"index":0,"delta":{"content":"b"},"finish_reason":"length"}]}'
USAGE = '{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}'


@pytest.mark.parametrize("events, failure", [
    ((C1, C2, USAGE, "[DONE]"), None),
    ((C1, C2), "ended without [DONE]"),
    ((C1, "[DONE]"), "[DONE] without a finish_reason"),
    ((C1, C1, C2, USAGE, "[DONE]"), "duplicated"),
    ((C1, '{"error": {"message": "CUDA out of memory", "code": 500}}', "[DONE]"), "error chunk"),
    # vLLM at a SIGTERM: a well-formed stream whose last chunk says the server aborted it
    ((C1, C2.replace('"length"', '"abort"'), USAGE, "[DONE]"), "finish_reason 'abort'"),
    ((C1, C2.replace('"length"', '"error"'), USAGE, "[DONE]"), "finish_reason 'error'"),
    # the words inside an answer's text are escaped: not the answer's own finish_reason
    ((C1.replace('"a"', '"\\"finish_reason\\": \\"abort\\""'), C2, USAGE, "[DONE]"), None),
])
def test_gateway_stream_check(events, failure):
    check = StreamCheck()
    raw = b"".join(_sse(*events))
    for i in range(0, len(raw), 7):  # arbitrary chunk boundaries, as a socket delivers them
        check.feed(raw[i:i + 7])
    got = check.failure()
    assert (got is None) if failure is None else (failure in got), got


def test_gateway_counts_a_whole_200_answer_the_server_aborted_as_failed():
    body = b'{"choices":[{"index":0,"text":" a b","finish_reason":"abort"}],"usage":{"completion_tokens":2}}'
    assert aborted_answer(body) == "abort"
    assert aborted_answer(body.replace(b'"abort"', b'"stop"')) is None
    assert aborted_answer(b'{"choices":[{"text":"\\"finish_reason\\": \\"error\\"","finish_reason":"length"}]}') is None


def _chunk(text: str, count: int | None) -> dict:
    c: dict = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": None}]}
    if count is not None:
        c["usage"] = {"prompt_tokens": 5, "completion_tokens": count, "total_tokens": 5 + count}
    return c


def test_chunk_order_reads_the_stated_count_not_the_number_of_events():
    # merged deltas: 3 events for 6 tokens, and the 2nd repeated verbatim. Counting events (4 <= 6)
    # cannot see it; the count that does not advance can
    order = ChunkOrder()
    seen = [order.see(chunk_count(c), c["choices"][0]["delta"]["content"])
            for c in (_chunk(" a b", 2), _chunk(" c d", 4), _chunk(" c d", 4), _chunk(" e f", 6))]
    assert seen == [True, True, False, True] and order.duplicates == 1 and order.problem is None
    assert order.proof() == "proven"
    assert stream_problem(done=True, finish_reason="length", events=4, usage_out=6) is None  # the old check misses it
    back = ChunkOrder()
    assert [back.see(n, t) for n, t in ((2, " a b"), (4, " c d"), (3, " x"))] == [True, True, False]
    assert "reordered" in back.problem
    clash = ChunkOrder()
    clash.see(2, " a b")
    assert not clash.see(2, " a c") and "both state 2" in clash.problem
    got = stream_problem(done=True, finish_reason="length", events=2, usage_out=6, order=clash.problem)
    assert got is not None and got[0] == "stream_corrupt"
    blind = ChunkOrder()
    assert blind.see(None, " a") and blind.see(None, " a") and blind.proof() == NO_COUNT


def test_gateway_stream_check_reads_the_stated_count():
    a = '{"choices":[{"index":0,"delta":{"content":" a b"},"finish_reason":null}],"usage":{"completion_tokens":2}}'
    b = '{"choices":[{"index":0,"delta":{"content":" c d"},"finish_reason":"length"}],"usage":{"completion_tokens":4}}'
    end = '{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":4}}'
    for events, failure in (((a, b, end, "[DONE]"), None), ((a, a, b, end, "[DONE]"), "did not advance")):
        check = StreamCheck()
        for raw in _sse(*events):
            check.feed(raw)
        got = check.failure()
        assert (got is None) if failure is None else (failure in (got or "")), got


def test_a_dropped_repeat_is_a_whole_answer_when_either_is_allowed():
    either = dict(truth=TRUTH, truth_finish="length", expect_whole=None)
    assert client_verdict("c", [_answer(True, TRUTH), _answer(False, " a b")], [], **either).ok
    shown_dup = client_verdict("c", [_answer(True, " a b b c d")], [], **either)
    assert not shown_dup.row("reported_right").ok and not shown_dup.row("shown_in_order").ok


def test_order_stated_is_not_proven_where_the_server_states_no_count():
    told = [_answer(True, TRUTH), _answer(True, TRUTH)]
    told[0].order, told[1].order = "proven", "proven; 1 repeated chunk(s) dropped"
    v = client_verdict("c", told, [], truth=TRUTH, truth_finish="length", expect_whole=None)
    assert v.row("order_stated").ok and "1 answer(s)" in v.row("order_stated").detail
    told[1].order = NO_COUNT
    v = client_verdict("c", told, [], truth=TRUTH, truth_finish="length", expect_whole=None)
    assert v.row("order_stated").ok is None and "per-chunk token count" in v.row("order_stated").detail
    # a client that does not say how it judged order (a command) gets no such row
    with pytest.raises(KeyError):
        client_verdict("c", [_answer(True, TRUTH)], [], truth=TRUTH, truth_finish="length", expect_whole=True).row(
            "order_stated")


def test_a_timed_out_client_is_told_from_its_output_and_the_replica_log():
    late = ClientAnswer("c", False, " a", error="no exit within 3.0 s", window=(100.0, 103.0), timed_out=True)
    served = {"request_id": "x", "t_arrival": 100.8, "t_finish": 101.2, "outcome": "length", "output_tokens": 12}
    v = client_verdict("c", [late], [Attempts([served])], truth=TRUTH, truth_finish="length", expect_whole=True)
    row = v.row("exited_in_time")
    assert not row.ok and "partial output ' a'" in row.detail and "answered by +1.2 s" in row.detail
    assert "did not exit for 1.8 s" in row.detail
    retrying = Attempts([{**served, "t_arrival": 100.5, "t_finish": 100.6}, {**served, "t_arrival": 101.5}])
    assert "retrying: 2 attempts" in what_it_did("", 100.0, 103.0, retrying.lines)
    assert "no output; no request of it reached the replicas" in what_it_did("", 100.0, 103.0, [])


def test_the_reference_client_command_asks_what_the_streams_suite_asks():
    import importlib.util
    from pathlib import Path

    from chaos.verify.streams import MAX_TOKENS, PROMPT
    path = Path(__file__).resolve().parents[3] / "examples" / "clients" / "reference_client.py"
    spec = importlib.util.spec_from_file_location("reference_client", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert (mod.PROMPT, mod.MAX_TOKENS) == (PROMPT, MAX_TOKENS)
