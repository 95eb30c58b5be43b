"""Clients that hang up: N streaming requests whose clients close their TCP connections after the k-th
token, beside `stay` streams that read on (the load that remains) until the harness has judged and closes them:
a slow engine (vLLM on CPU decodes a few dozen tokens a second) need not finish their answers.

Each client is a plain socket speaking HTTP/1.1 (no pool, no keep-alive reuse), so "hang up" is what a
closed browser tab does: shutdown(SHUT_RDWR) and close(), a FIN on the wire, at the moment the k-th token
arrived. Every request carries its own `x-request-id`, which the gateway passes upstream, so the replica
side's log can say when each hop let its request go. Bounded: at most MAX_CLIENTS clients, each given up
(and closed) at `deadline_s`.
"""
from __future__ import annotations

import json
import socket
import ssl
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from chaos.errors import ConfigError

MAX_CLIENTS = 64
STOP_POLL_S = 0.5  # a stream the harness closes ends within this of being told
HANGUP, STAY = "hangup", "stay"


@dataclass(frozen=True)
class HangUp:
    """The step declared: `clients` streams hung up after `after_tokens` tokens, `stay` streams that read on."""

    clients: int
    after_tokens: int
    stay: int = 0
    max_tokens: int = 1000
    prompt: str = "Tell a long story."
    deadline_s: float = 60.0

    def __post_init__(self) -> None:
        checks = (("clients", 1 <= self.clients <= MAX_CLIENTS, f"1..{MAX_CLIENTS}", self.clients),
                  ("stay", 0 <= self.stay <= MAX_CLIENTS - self.clients, f"0..{MAX_CLIENTS} - clients", self.stay),
                  ("after_tokens", 1 <= self.after_tokens < self.max_tokens, "1..max_tokens - 1", self.after_tokens),
                  ("deadline_s", 0 < self.deadline_s <= 3600, "0 < s <= 3600", self.deadline_s))
        for name, ok, want, got in checks:
            if not ok:
                raise ConfigError(f"hang-up step: {name}: expected {want}, got {got!r}")


@dataclass
class StreamClient:
    """What one client did: its request id, role (hangup | stay), tokens seen and when (epoch seconds)."""

    request_id: str
    role: str
    t_sent: float = 0.0
    t_first_token: float | None = None
    t_hangup: float | None = None  # when it closed its connection (hang-up clients only)
    t_end: float | None = None     # when it was done: hung up, read to the end, or failed
    tokens: int = 0
    finish_reason: str | None = None
    status: int | None = None
    error: str | None = None

    @property
    def hung_up(self) -> bool:
        return self.t_hangup is not None


@dataclass
class HangUpRun:
    """Every client of one hang-up step."""

    step: HangUp
    clients: list[StreamClient] = field(default_factory=list)
    baseline: tuple[float, float] | None = None  # the window in which only the staying streams ran
    join_stayers: Callable[[bool], None] = lambda close: None  # ends the staying streams (close: now)

    def finish(self) -> HangUpRun:
        """Close the staying streams now (the verdict no longer needs the load they stood for) and wait for them."""
        self.join_stayers(True)
        return self

    def of(self, role: str) -> list[StreamClient]:
        return [c for c in self.clients if c.role == role]

    @property
    def t_last_hangup(self) -> float | None:
        ts = [c.t_hangup for c in self.clients if c.t_hangup is not None]
        return max(ts) if ts else None


class StreamReader:
    """Fed a response's raw bytes (chunked or not): its status, and the SSE token chunks counted.

    A token chunk is an event whose first choice has non-empty `text` (completions) or `delta.content`
    (chat); the chat stream's opening role chunk is not one."""

    def __init__(self) -> None:
        self.status: int | None = None
        self.tokens = 0
        self.finish_reason: str | None = None
        self.done = False
        self.error: str | None = None
        self._head = b""
        self._chunked = False
        self._raw = b""   # transfer-encoded bytes not yet decoded
        self._body = b""  # decoded bytes not yet split into events

    def feed(self, data: bytes) -> None:
        if self.status is None:
            self._head += data
            end = self._head.find(b"\r\n\r\n")
            if end < 0:
                return
            head, data = self._head[:end].decode("latin-1"), self._head[end + 4:]
            lines = head.split("\r\n")
            parts = lines[0].split(" ", 2)
            self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
            self._chunked = any(l.lower().replace(" ", "") == "transfer-encoding:chunked" for l in lines[1:])
        self._raw += data
        if self._chunked:
            self._dechunk()
        else:
            self._body, self._raw = self._body + self._raw, b""
        self._events()

    def _dechunk(self) -> None:
        while True:
            nl = self._raw.find(b"\r\n")
            if nl < 0:
                return
            size = int(self._raw[:nl].split(b";")[0] or b"0", 16)
            if size == 0:
                self._raw = b""
                return
            if len(self._raw) < nl + 2 + size + 2:
                return
            self._body += self._raw[nl + 2:nl + 2 + size]
            self._raw = self._raw[nl + 2 + size + 2:]

    def _events(self) -> None:
        while True:
            end = self._body.find(b"\n\n")
            if end < 0:
                return
            ev, self._body = self._body[:end], self._body[end + 2:]
            for line in ev.split(b"\n"):
                if line.startswith(b"data:"):
                    self._data(line[5:].strip())

    def _data(self, payload: bytes) -> None:
        if payload == b"[DONE]":
            self.done = True
            return
        try:
            obj = json.loads(payload)
        except ValueError:
            return
        if not isinstance(obj, dict):
            return
        if "error" in obj:
            self.error = str(obj["error"])[:200]
            return
        choices = obj.get("choices") or []
        if not choices or not isinstance(choices[0], dict):
            return
        c: dict[str, Any] = choices[0]
        text = c.get("text") if "text" in c else (c.get("delta") or {}).get("content")
        if text:
            self.tokens += 1
        if c.get("finish_reason"):
            self.finish_reason = c["finish_reason"]


def _request_bytes(parts: urllib.parse.SplitResult, rid: str, step: HangUp, model: str,
                   api_key: str | None) -> bytes:
    body = json.dumps({"model": model, "prompt": step.prompt, "max_tokens": step.max_tokens, "stream": True,
                       "ignore_eos": True, "temperature": 0}).encode()
    path = (parts.path.rstrip("/") or "") + "/v1/completions"
    head = [f"POST {path} HTTP/1.1", f"Host: {parts.netloc}", "Content-Type: application/json",
            f"Content-Length: {len(body)}", f"x-request-id: {rid}", "Accept: text/event-stream"]
    if api_key:
        head.append(f"Authorization: Bearer {api_key}")
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def _one(url: str, client: StreamClient, step: HangUp, model: str, api_key: str | None,
         go: threading.Event, stop: threading.Event, clock: Callable[[], float]) -> None:
    parts = urllib.parse.urlsplit(url)
    reader, deadline = StreamReader(), time.monotonic() + step.deadline_s
    sock: socket.socket | None = None
    try:
        go.wait(step.deadline_s)
        tls = parts.scheme == "https"
        sock = socket.create_connection((parts.hostname or "127.0.0.1", parts.port or (443 if tls else 80)),
                                        timeout=5.0)
        if tls:
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=parts.hostname)
        client.t_sent = clock()
        sock.sendall(_request_bytes(parts, client.request_id, step, model, api_key))
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                client.error = f"given up at the step's deadline ({step.deadline_s:g} s)"
                break
            if stop.is_set():  # the harness is done with this stream: closed, not an error of the server's
                break
            sock.settimeout(min(left, STOP_POLL_S))
            try:
                data = sock.recv(65536)
            except TimeoutError:
                continue
            if not data:
                if not reader.done:
                    client.error = client.error or "the server closed the stream before [DONE]"
                break
            reader.feed(data)
            if reader.tokens and client.t_first_token is None:
                client.t_first_token = clock()
            if client.role == HANGUP and reader.tokens >= step.after_tokens:
                client.t_hangup = clock()
                sock.shutdown(socket.SHUT_RDWR)  # a FIN now, as a closed tab sends
                sock.close()
                sock = None
                break
            if reader.done:
                break
            if reader.status is not None and reader.status != 200:
                client.error = f"answered {reader.status}, not a stream"
                break
    except OSError as e:
        client.error = f"{type(e).__name__}: {e}"
    finally:
        if sock is not None:
            sock.close()
        client.t_end = clock()
        client.tokens, client.status, client.finish_reason = reader.tokens, reader.status, reader.finish_reason
        if reader.error and client.error is None:
            client.error = f"error event: {reader.error}"


def start_streams(url: str, step: HangUp, role: str, *, model: str, api_key: str | None = None,
                  clock: Callable[[], float] = time.time) -> tuple[list[StreamClient], Callable[[bool], None]]:
    """Start the step's clients of `role` against `url` at once (HANGUP: `step.clients` that hang up after
    `step.after_tokens` tokens; STAY: `step.stay` that read on); returns them (filled in as they go) and a
    join(close) that waits for them: close=True tells them to close first; either way each ends by the step's
    deadline at the latest."""
    count = step.clients if role == HANGUP else step.stay
    clients: list[StreamClient] = []
    go, stop, threads = threading.Event(), threading.Event(), list[threading.Thread]()
    for _ in range(count):
        c = StreamClient(request_id=f"chaos-{role}-{uuid.uuid4().hex[:16]}", role=role)
        clients.append(c)
        t = threading.Thread(target=_one, args=(url, c, step, model, api_key, go, stop, clock), daemon=True,
                             name=f"chaos-{role}-{len(threads)}")
        t.start()
        threads.append(t)
    go.set()

    def join(close: bool = False) -> None:
        if close:
            stop.set()
        for t in threads:
            t.join(step.deadline_s + 10.0)

    return clients, join
