"""`StreamMeter.receive` (a receive's lines, content chunks matched against the stream's proven
template) writes exactly the record that parsing every line as JSON writes, for recorded streams
cut into receives anywhere, and still catches every malformed chunk (bench/loadgen.py prices it)."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from chaos.load import sse
from chaos.load.records import RequestRecord, record_line
from chaos.load.sse import StreamMeter

DATA = Path(__file__).parent / "data"
SIM = (DATA / "sim-completions-16.sse").read_bytes()  # the simulator's `instant` answer, 16 tokens + usage
CHAT = (DATA / "sim-chat-4.sse").read_bytes()  # a chat stream: the empty role chunk first
VLLM = (Path(__file__).parents[2] / "standins/faultproxy/data/vllm-merged-deltas.sse").read_bytes()  # per-chunk counts
LINES = SIM.split(b"\n\n")
HEAD, TAIL = LINES[1].split(b'"text":" answer"')  # a content chunk around its text


def content(text: bytes, i: int = 1) -> bytes:
    """The recorded stream's content chunk with `text` put as the raw bytes between the quotes."""
    head, tail = LINES[i].split(b'"text":"', 1)
    return head + b'"text":"' + text + b'"' + tail.split(b'"', 1)[1]


def splice(i: int, *events: bytes) -> bytes:
    """The recorded stream with `events` in place of its events from the i-th on (as many)."""
    return b"\n\n".join([*LINES[:i], *events, *LINES[i + max(1, len(events)):]])


STREAMS = {
    "sim": SIM,
    "chat": CHAT,
    "vllm-counts": VLLM,
    "crlf": SIM.replace(b"\n", b"\r\n"),
    "error-chunk": splice(5, b'data: {"error": {"message": "boom", "code": 500}}'),
    "cut": SIM[:SIM.index(b"data: [DONE]")],
    "no-finish": splice(15, content(b" end")),  # the finish chunk (16th) without its finish_reason
    "aborted": SIM.replace(b'"finish_reason":"length"', b'"finish_reason":"abort"'),  # vLLM's stream on SIGTERM
    "truncated-chunk": splice(4, LINES[4][:-3]),  # `"finish_reason":null,...` still in it, `}]}` gone
    "not-json": splice(4, b"data: {nonsense"),
    "control-char": splice(4, content(b"a\x01b")),
    "invalid-utf8": splice(4, content(b"\xff\xfe")),
    "quote-injection": splice(4, content(b'x","text":"')),  # parses to an empty text (last key wins)
    "escapes": splice(4, content(b'say \\"hi\\"'), content(b"caf\\u00e9"), content("café 👋".encode())),
    "empty-text": splice(4, content(b"")),
    "other-created": splice(6, content(b" z").replace(b'"created":', b'"created":1')),
    "whitespace": splice(4, b"  " + content(b" pad") + b"  "),
    "second-done": SIM + b"data: [DONE]\n\n",
    "comment-lines": b"\n\n".join([*LINES[:3], b": keep-alive", b"event: message", *LINES[3:]]),
}


def reference(data: bytes, cuts: list[int]) -> RequestRecord:
    """Every line through `feed` (a full JSON parse), each ended line timed by the receive that ended it."""
    meter, tail, t_end = StreamMeter(100.0), b"", None
    for k, piece in enumerate(_pieces(data, cuts)):
        now = 100.0 + 0.001 * (k + 1)
        lines = (tail + piece).split(b"\n")
        tail = lines.pop()
        for line in lines:
            line = line.strip()
            if line and meter.feed(line, now):
                t_end = now
    return _record(meter, t_end)


def received(data: bytes, cuts: list[int]) -> RequestRecord:
    meter, t_end = StreamMeter(100.0), None
    for k, piece in enumerate(_pieces(data, cuts)):
        now = 100.0 + 0.001 * (k + 1)
        if meter.receive(piece, now):
            t_end = now
    return _record(meter, t_end)


def _pieces(data: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *cuts, len(data)]
    return [data[a:b] for a, b in zip(edges, edges[1:], strict=False)]


def _record(meter: StreamMeter, t_end: float | None) -> RequestRecord:
    rec = RequestRecord("r", 1, 1.0)
    meter.fill(rec, t_end if t_end is not None else 200.0)
    rec.error, rec.error_detail = meter.problem() or (None, None)
    rec.stream_order = f"{meter.order.proof()} {meter.order.problem} {meter.order.duplicates} {meter.done}"
    return rec


def _cuts(data: bytes, how: str, rng: random.Random) -> list[int]:
    if how == "one":
        return []
    if how == "events":
        return [i + 2 for i in range(len(data)) if data.startswith(b"\n\n", i)]
    if how == "bytes":
        return list(range(1, len(data)))
    return sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 40))))


@pytest.mark.parametrize("name", sorted(STREAMS))
@pytest.mark.parametrize("how", ["one", "events", "bytes", "random"])
def test_receive_writes_the_record_a_full_parse_writes(name: str, how: str) -> None:
    data = STREAMS[name]
    rng = random.Random(f"{name}-{how}")
    for _ in range(20 if how == "random" else 1):
        cuts = _cuts(data, how, rng)
        assert record_line(received(data, cuts)) == record_line(reference(data, cuts))


def test_the_recorded_stream_takes_the_template_and_reads_right(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[bytes] = []
    feed = StreamMeter.feed

    def counting(self: StreamMeter, line: bytes, now: float) -> bool:
        parsed.append(line)
        return feed(self, line, now)

    monkeypatch.setattr(StreamMeter, "feed", counting)
    meter = StreamMeter(0.0)
    assert meter.receive(SIM, 0.5) is True
    # the first content chunk (it makes the template), the finish chunk, the usage chunk and [DONE]
    assert len(parsed) == 4 and meter.template is not None
    assert (meter.events, meter.order.uncounted, meter.finish_reason, meter.usage_out, meter.usage_prompt,
            meter.model, meter.gaps, meter.first, meter.problem()) == (16, 16, "length", 16, 4, "sim-model",
                                                                       [0.0] * 15, 0.5, None)


@pytest.mark.parametrize(("name", "error"), [
    ("truncated-chunk", "stream_corrupt"), ("not-json", "stream_corrupt"), ("control-char", "stream_corrupt"),
    ("invalid-utf8", "stream_corrupt"), ("error-chunk", "error_chunk"), ("cut", "stream_cut"),
    ("no-finish", "stream_cut"), ("aborted", "aborted"),
])
def test_a_malformed_or_failed_stream_is_caught(name: str, error: str) -> None:
    rec = received(STREAMS[name], [])
    assert rec.error == error, rec.error_detail


def test_texts_the_template_cannot_vouch_for_are_parsed() -> None:
    quoted = received(STREAMS["quote-injection"], [])
    assert quoted.output_tokens == 16 and len(quoted.gaps) == 14  # the injected chunk's text parses empty
    escaped = received(STREAMS["escapes"], [])
    assert escaped.error is None and len(escaped.gaps) == 15  # three of the 16 texts with escapes or non-ASCII


def test_a_template_is_proven_by_its_probe() -> None:
    line = LINES[1]
    chunk = json.loads(line[5:])
    tpl = sse._template(line, chunk, in_text=True)
    assert tpl is not None and tpl[0] == HEAD + b'"text":"' and tpl[1] == b'"' + TAIL
    # a text also spelled elsewhere in the line: only the occurrence in the slot is the template
    twin = line.replace(b'"model":"sim-model"', b'"model":" answer"')
    tpl2 = sse._template(twin, json.loads(twin[5:]), in_text=True)
    assert tpl2 is not None and tpl2[0].endswith(b'"text":"')
    # a text with an escape has no plain spelling: no template
    esc = content(b'a\\"b')
    assert sse._template(esc, json.loads(esc[5:]), in_text=True) is None
