"""One HTTP attempt over http.client: send, read JSON or SSE, measure, classify into a RequestRecord.

TTFT counts the first SSE event whose choice carries NON-EMPTY text (vLLM's chat stream opens with
an empty role chunk, which is not a token). Durations use the injected perf clock; t_send is wall time.
"""
from __future__ import annotations

import email.utils
import http.client
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from chaos.load.records import RequestRecord
from chaos.load.sse import ChunkOrder, aborted, chunk_count, stream_problem


@dataclass
class Attempt:
    """What one attempt produced: its record, the server's Retry-After (seconds) and the text."""

    record: RequestRecord
    retry_after: float | None = None
    text: str = ""


@dataclass
class Endpoint:
    """Scheme, host, port and path prefix of a base URL."""

    scheme: str
    host: str
    port: int
    prefix: str

    @classmethod
    def parse(cls, base_url: str) -> Endpoint:
        u = urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            from chaos.errors import ConfigError

            raise ConfigError(f"base_url: expected http(s)://host[:port][/prefix], got {base_url!r}")
        return cls(u.scheme, u.hostname, u.port or (443 if u.scheme == "https" else 80), u.path.rstrip("/"))

    def api_path(self, tail: str) -> str:
        """`/chat/completions` -> the full path, adding /v1 unless the base URL already ends with it."""
        return self.prefix + (tail if self.prefix.endswith("/v1") else "/v1" + tail)

    def connect(self, timeout_s: float) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.scheme == "https" else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=timeout_s)


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Retry-After as seconds: a number (fractions allowed) or an HTTP date; None when absent or bad."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError):
        return None
    return max(0.0, when - (time.time() if now is None else now))


def send_once(ep: Endpoint, path: str, body: bytes, headers: dict[str, str], rec: RequestRecord, *,
              stream: bool, timeout_s: float, clock: Callable[[], float], served_by_header: str) -> Attempt:
    """Make one attempt; never raises for network trouble, it is classified into the record."""
    rec.t_send = time.time()
    t0 = clock()
    conn = ep.connect(timeout_s)
    resp: http.client.HTTPResponse | None = None
    try:
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        rec.status = resp.status
        rec.served_by = resp.getheader(served_by_header)
        if resp.status != 200:
            detail = resp.read(2048).decode("utf-8", "replace")
            rec.e2e = clock() - t0
            rec.error, rec.error_detail = "http", detail[:300]
            return Attempt(rec, parse_retry_after(resp.getheader("Retry-After")))
        if stream and "text/event-stream" in (resp.getheader("Content-Type") or ""):
            return _read_sse(resp, rec, t0, timeout_s, clock)
        return _read_json(resp, rec, t0, clock)
    except TimeoutError as e:
        rec.error, rec.error_detail = "timeout", f"no answer within {timeout_s:.3f} s ({type(e).__name__})"
    except http.client.IncompleteRead as e:
        rec.error, rec.error_detail = "stream_cut", f"body cut after {len(e.partial)} bytes"
    except ValueError as e:
        rec.error, rec.error_detail = "other", f"unreadable stream event: {e}"[:300]
    except (ConnectionError, http.client.HTTPException, OSError) as e:
        cut = rec.status == 200
        rec.error, rec.error_detail = ("stream_cut" if cut else "reset"), f"{type(e).__name__}: {e}"[:300]
    finally:
        conn.close()
    rec.e2e = clock() - t0
    return Attempt(rec)


def _finish(rec: RequestRecord, text: str, model: str | None) -> Attempt:
    rec.model_answered = model
    if rec.error is None and model and rec.model_asked and model != rec.model_asked:
        rec.error, rec.error_detail = "wrong_model", f"asked {rec.model_asked}, answered by {model}"
    return Attempt(rec, None, text)


def _read_json(resp: http.client.HTTPResponse, rec: RequestRecord, t0: float, clock: Callable[[], float]) -> Attempt:
    raw = resp.read()
    rec.e2e = clock() - t0
    try:
        doc = json.loads(raw)
        choice = doc["choices"][0]
        text = (choice.get("message") or {}).get("content") or choice.get("text") or ""
        rec.finish_reason = choice.get("finish_reason")
    except (ValueError, KeyError, IndexError, TypeError):
        rec.error, rec.error_detail = "other", f"unreadable 200 body: {raw[:120]!r}"
        return Attempt(rec)
    usage = doc.get("usage") or {}
    rec.prompt_tokens = usage.get("prompt_tokens")
    rec.output_tokens = usage.get("completion_tokens")
    if (why := aborted(rec.finish_reason)) is not None:
        rec.error, rec.error_detail = why
    return _finish(rec, text, doc.get("model"))


def _read_sse(resp: http.client.HTTPResponse, rec: RequestRecord, t0: float, timeout_s: float,
              clock: Callable[[], float]) -> Attempt:
    parts: list[str] = []
    model: str | None = None
    last: float | None = None
    events, bad, done, usage_out = 0, 0, False, None
    order = ChunkOrder()  # of the first choice (the client asks for one)
    while True:
        line = resp.readline()
        if not line:
            break
        if clock() - t0 > timeout_s:
            raise TimeoutError("stream slower than the attempt timeout")
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            done = True
            break
        try:
            ev: dict[str, Any] = json.loads(data)
        except ValueError:
            bad += 1  # an unreadable event: the answer is not whole, but later events may still be read
            continue
        if "error" in ev:
            rec.e2e = clock() - t0
            rec.error, rec.error_detail = "error_chunk", json.dumps(ev["error"])[:300]
            return _finish(rec, "".join(parts), model)
        model = ev.get("model") or model
        if ev.get("usage"):
            usage_out = ev["usage"].get("completion_tokens")
            rec.prompt_tokens = ev["usage"].get("prompt_tokens")
        for ch in ev.get("choices") or []:
            rec.finish_reason = ch.get("finish_reason") or rec.finish_reason
            piece = (ch.get("delta") or {}).get("content") or ch.get("text") or ""
            if not piece or (ch.get("index", 0) == 0 and not order.see(chunk_count(ev), piece)):
                continue  # nothing, or a repeat of what was shown (dropped) or out of order (judged below)
            now = clock() - t0
            if last is None:
                rec.ttft = now
            else:
                rec.gaps.append(now - last)
            last = now
            events += 1
            parts.append(piece)
    rec.e2e = clock() - t0
    rec.output_tokens = usage_out if usage_out is not None else events
    rec.stream_order = order.proof() + (f"; {order.duplicates} repeated chunk(s) dropped" if order.duplicates else "")
    problem = stream_problem(done=done, finish_reason=rec.finish_reason, events=events, usage_out=usage_out,
                             bad_json=bad, order=order.problem)
    if problem is not None:
        rec.error, rec.error_detail = problem
    elif rec.ttft is not None and rec.output_tokens and rec.output_tokens > 1:
        rec.tpot = (rec.e2e - rec.ttft) / (rec.output_tokens - 1)
    return _finish(rec, "".join(parts), model)
