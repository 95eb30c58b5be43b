"""The load client's cheaper paths record exactly what the plain ones do: a receive's lines metered
in one call (`StreamMeter.receive`) as line by line, a body from `body_maker` as from `body`, a
record line from `record_line` as from `to_json` (bench/loadgen.py measures what they save)."""
from __future__ import annotations

import json
import random

import pytest

from chaos.load.records import RequestRecord, record_line
from chaos.load.sse import StreamMeter
from chaos.load.workloads import MixWorkload, Prompt, body, body_maker, special_corpus


def _chunk(rng: random.Random, api: str, i: int) -> bytes:
    """One SSE line of many shapes: content, empty, usage on the chunk, error, garbage, comments."""
    kind = rng.choice(["text"] * 6 + ["empty", "usage_text", "usage_end", "finish", "error", "bad", "comment", "blank"])
    text = rng.choice(["a", ' "usage": 1', 'say "error"', "é👋", "null", "\\n", "data: x"])
    piece = {"delta": {"content": text}} if api == "chat" else {"text": text}
    if kind == "comment":
        return b": keep-alive"
    if kind == "blank":
        return b""
    if kind == "bad":
        return b'data: {"model": "m", "choices": [{"text": "x"'
    if kind == "error":
        return b"data: " + json.dumps({"error": {"message": "boom", "code": 500}}).encode()
    chunk: dict[str, object] = {"model": "m", "choices": [{"index": 0, **piece, "finish_reason": None}]}
    if kind == "empty":
        chunk["choices"] = [{"index": 0, "text": "", "delta": {"content": ""}, "finish_reason": None}]
    elif kind == "usage_text":  # continuous usage stats: a count on a content chunk
        chunk["usage"] = {"prompt_tokens": 3, "completion_tokens": i}
    elif kind == "usage_end":
        chunk = {"model": "m", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": i}}
    elif kind == "finish":
        chunk["choices"] = [{"index": 0, **piece, "finish_reason": "length"}]
    sep = (", ", ": ") if i % 2 else (",", ":")
    return b"data: " + json.dumps(chunk, separators=sep).encode()


def _state(m: StreamMeter) -> tuple[object, ...]:
    o = m.order
    return (m.first, m.last, list(m.gaps), m.events, m.done, m.done_at, m.error, m.model, m.usage_out,
            m.usage_prompt, m.finish_reason, m.bad_json, o.last, o.duplicates, o.problem, o.counted, o.uncounted)


@pytest.mark.parametrize("api", ["chat", "completions"])
@pytest.mark.parametrize("seed", range(40))
def test_a_receive_metered_at_once_is_metered_as_line_by_line(api, seed):
    rng = random.Random(seed)
    lines = [_chunk(rng, api, i) for i in range(rng.randint(1, 40))]
    if rng.random() < 0.8:
        lines.append(b"data: [DONE]")
    stream = b"".join(line + (b"\r\n" if rng.random() < 0.2 else b"\n") for line in lines)
    # reference: one line at a time, each line alone (so the error/usage checks are per line)
    by_line = StreamMeter(0.0)
    cuts = sorted(rng.sample(range(1, len(stream)), min(len(stream) - 1, rng.randint(0, 12))))
    receives = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    tail, times = b"", []
    for k, data in enumerate(receives):  # what LLMUser._read_stream does with each receive
        whole = (tail + data).split(b"\n")
        tail = whole.pop()
        times.append(float(k + 1))
        for line in whole:
            if line.strip():
                by_line.feed(line.strip(), float(k + 1))
    at_once = StreamMeter(0.0)
    for k, data in enumerate(receives):  # what LLMUser._read_stream does now
        at_once.receive(data, times[k])
    assert _state(at_once) == _state(by_line)
    assert (by_line.done_at is not None) == by_line.done


def test_the_error_and_usage_checks_see_a_key_split_over_two_receives():
    # `"usage"` arrives cut in two: the second receive alone holds no `"usage"`, the line does
    line = b'data: {"model":"m","choices":[{"index":0,"text":"x","finish_reason":null}],"usage":{"completion_tokens":2}}\n'
    first = b'data: {"model":"m","choices":[{"index":0,"text":"a","finish_reason":null}]}\n'
    cut = line.index(b'"usage"') + 3
    m = StreamMeter(0.0)
    for k, data in enumerate([first + line[:cut], line[cut:]]):
        m.receive(data, float(k))
    assert m.usage_out == 2 and m.order.counted == 1 and m.order.uncounted == 1 and m.events == 2


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_body_maker_writes_the_bytes_body_writes(api):
    texts = [MixWorkload(seed=1).next().text, 'say "hi"\n\t\\ é👋 \x00prompt\x00', ""]
    texts += [str(r["text"]) for r in special_corpus()]
    for stream in (True, False):
        for ignore_eos in (True, False):
            for temperature in (None, 0.0, 0.7):
                for model in ("m", 'x"y', "é", "\x00prompt\x00"):
                    kw = dict(api=api, model=model, max_tokens=7, stream=stream, ignore_eos=ignore_eos,
                              temperature=temperature)
                    make = body_maker(**kw)
                    for text in texts:
                        p = Prompt("c", text, 3)
                        assert make(p) == body(p, **kw)


def test_record_line_is_to_json():
    recs = [RequestRecord("r", 1, 1.5),
            RequestRecord("r", 2, 1.5, ttft=0.1, e2e=0.3, tpot=0.01, gaps=[0.01, 1e-9], prompt_tokens=3,
                          output_tokens=16, status=200, error="http", error_detail='a "quoted" é\n',
                          model_asked="m", model_answered="n", served_by="b", prompt_class="short",
                          final=False, outcome="failed", finish_reason="length", attrs={"x-region": "eu"},
                          stream_order="proven")]
    for r in recs:
        assert record_line(r) == r.to_json()
