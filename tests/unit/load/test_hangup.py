"""The hang-up step's declaration and its stream reader, on fed bytes."""
from __future__ import annotations

import json

import pytest

from chaos.errors import ConfigError
from chaos.load.hangup import HangUp, StreamReader


def _chunked(*payloads: bytes) -> bytes:
    return b"".join(b"%x\r\n%b\r\n" % (len(p), p) for p in payloads) + b"0\r\n\r\n"


def _event(text: str, finish: str | None = None) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": finish}]}).encode() + b"\n\n"


HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def test_counts_token_chunks_across_any_split() -> None:
    raw = HEAD + _chunked(_event(" a"), _event(" b") + _event(" c", "length"), b"data: [DONE]\n\n")
    for cut in (1, 7, len(HEAD) + 3, len(raw) - 4):
        r = StreamReader()
        r.feed(raw[:cut])
        r.feed(raw[cut:])
        assert (r.status, r.tokens, r.finish_reason, r.done) == (200, 3, "length", True), cut


def test_chat_role_chunk_is_no_token_and_an_error_event_is_kept() -> None:
    role = b'data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}\n\n'
    tok = b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
    err = b'data: {"error": {"message": "EngineCore encountered an issue.", "code": 500}}\n\n'
    r = StreamReader()
    r.feed(HEAD + _chunked(role, tok, err))
    assert r.tokens == 1 and r.error is not None and "EngineCore" in r.error and not r.done


def test_a_plain_error_answer_has_its_status() -> None:
    r = StreamReader()
    r.feed(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 2\r\n\r\n{}")
    assert (r.status, r.tokens) == (503, 0)


@pytest.mark.parametrize("kw, field", [({"clients": 0}, "clients"), ({"clients": 65}, "clients"),
                                      ({"after_tokens": 0}, "after_tokens"),
                                      ({"after_tokens": 1000, "max_tokens": 1000}, "after_tokens"),
                                      ({"stay": 64}, "stay"), ({"deadline_s": 0}, "deadline_s")])
def test_bad_declaration_names_its_field(kw: dict, field: str) -> None:
    args = {"clients": 2, "after_tokens": 3, **kw}
    with pytest.raises(ConfigError, match=f"hang-up step: {field}: expected"):
        HangUp(**args)
