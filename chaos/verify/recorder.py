"""Recorder: an OpenAI-compatible server on 127.0.0.1 that fails the first K attempts of each
logical request in a chosen way, then answers properly, and records every attempt's arrival.

Logical requests are keyed by (slot, x-request-id). The slot is the path prefix `/c/<slot>` of the
base URL handed to each client copy (`recorder.slot_url(i)`); a client that sends no
`x-request-id` has all its attempts in that slot counted as ONE logical request.

Failure modes: 503, 500, 429 and 529 (NVIDIA Dynamo's "busy: back off"; both with `Retry-After` of any
value when given, even below 0.5 s), reset (the TCP
connection is aborted with RST), timeout (held without an answer until the client hangs up or
`hold_s` passes), stream-cut (a 200 SSE stream closed without `[DONE]`), abort-finish (a whole 200
answer, stream or not, that ends with no token and `finish_reason: "abort"`: vLLM's answer when it
shuts down on SIGTERM), and 400/401/404 (every attempt fails: non-retryable).
"""
from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from chaos.errors import ConfigError, StackError

RETRYABLE_FAILURES = ("503", "500", "429", "529", "reset", "timeout", "stream-cut", "abort-finish")
WITH_RETRY_AFTER = ("429", "529")
NON_RETRYABLE_FAILURES = ("400", "401", "404")
FAILURES = RETRYABLE_FAILURES + NON_RETRYABLE_FAILURES
_CHAT_PATHS = ("/v1/chat/completions", "/chat/completions")
_COMPLETION_PATHS = ("/v1/completions", "/completions")


@dataclass
class Arrival:
    """One attempt as the recorder saw it; perf times are the recorder's time.perf_counter()."""

    key: str
    slot: str
    request_id: str | None
    attempt: int
    t_perf: float
    t_wall: float
    path: str
    action: str                      # what the recorder did: ok | 503 | 429 | reset | timeout | ...
    stream: bool = False
    retry_after: float | None = None
    t_end_perf: float | None = None  # when this attempt was over: answered, cut, reset, or hung up
    signed: bool = False
    headers: dict[str, str] = field(default_factory=dict)


class Recorder:
    """Background-thread aiohttp server; use as a context manager or start()/stop()."""

    def __init__(self, failure: str = "503", fail_first: int | None = 3, *, retry_after: float | None = None,
                 hold_s: float = 30.0, model: str = "sim-model", port: int = 0, answer_model: str | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self._slot_modes: dict[str, tuple[str, int | None, float | None]] = {}
        self.configure(failure, fail_first, retry_after=retry_after)
        self.hold_s = hold_s
        self.model = model
        self.answer_model = answer_model  # answer as this model whatever was asked (wrong-model case)
        self.port = port
        self.clock = clock
        self._arrivals: list[Arrival] = []
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None

    def configure(self, failure: str, fail_first: int | None, *, retry_after: float | None = None,
                  slot: str | None = None) -> None:
        """Set the failure mode for every slot, or for one slot only (phases can then run at once)."""
        if failure not in FAILURES:
            raise ConfigError(f"--failure: expected one of {', '.join(FAILURES)}, got {failure!r}")
        if fail_first is not None and fail_first < 0:
            raise ConfigError(f"--fail-first: expected a count >= 0, got {fail_first}")
        if retry_after is not None and retry_after < 0:
            raise ConfigError(f"--retry-after: expected seconds >= 0, got {retry_after}")
        mode = (failure, None if failure in NON_RETRYABLE_FAILURES else fail_first, retry_after)
        if slot is None:
            self.failure, self.fail_first, self.retry_after = mode
            self._slot_modes = {}
        else:
            self._slot_modes[str(slot)] = mode

    # -- lifecycle -------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def slot_url(self, slot: int | str) -> str:
        return f"{self.base_url}/c/{slot}"

    def start(self) -> Recorder:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve())
            except BaseException as e:  # reported to start() below
                errors.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup() if self._runner else asyncio.sleep(0))
            loop.close()

        self._thread = threading.Thread(target=run, name="chaos-recorder", daemon=True)
        self._thread.start()
        if not ready.wait(10) or errors:
            raise StackError(f"recorder: could not listen on 127.0.0.1:{self.port}: {errors[0] if errors else 'timeout'}")
        return self

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]

    def stop(self) -> None:
        if self._loop and self._thread and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._thread = None

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what was recorded -----------------------------------------------------------------
    def arrivals(self) -> list[Arrival]:
        with self._lock:
            return list(self._arrivals)

    def by_key(self) -> dict[str, list[Arrival]]:
        out: dict[str, list[Arrival]] = {}
        for a in self.arrivals():
            out.setdefault(a.key, []).append(a)
        return out

    def clear(self) -> None:
        with self._lock:
            self._arrivals.clear()
            self._counts.clear()

    # -- the server ------------------------------------------------------------------------
    def _arrive(self, request: web.Request) -> tuple[Arrival, str]:
        path = request.path
        slot = "0"
        if path.startswith("/c/"):
            parts = path.split("/", 3)
            slot, path = parts[2], "/" + (parts[3] if len(parts) > 3 else "")
        rid = request.headers.get("x-request-id")
        key = f"{slot}/{rid or '-'}"
        with self._lock:
            n = self._counts.get(key, 0) + 1
            self._counts[key] = n
            failure, fail_first, retry_after = self._slot_modes.get(slot, (self.failure, self.fail_first,
                                                                           self.retry_after))
            fails = fail_first is None or n <= fail_first
            action = failure if fails else "ok"
            a = Arrival(key, slot, rid, n, self.clock(), time.time(), path, action,
                        retry_after=retry_after if action in WITH_RETRY_AFTER else None,
                        signed="x-chaos-signature" in {h.lower() for h in request.headers},
                        headers={k: v for k, v in request.headers.items() if k.lower().startswith("x-")})
            self._arrivals.append(a)
        return a, path

    def _done(self, a: Arrival) -> None:
        if a.t_end_perf is None or a.action != "timeout":
            a.t_end_perf = self.clock()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        a, path = self._arrive(request)
        if path in ("/health", "/ping"):
            a.action = "health"
            self._done(a)
            return web.Response(status=200)
        if path == "/v1/models":
            a.action = "models"
            self._done(a)
            return web.json_response({"object": "list", "data": [{"id": self.model, "object": "model"}]})
        try:
            body = await request.json() if request.can_read_body else {}
        except (ValueError, UnicodeDecodeError):
            body = {}
        if not isinstance(body, dict):
            body = {}
        a.stream = bool(body.get("stream"))
        try:
            if a.action != "ok":
                return await self._fail(request, a, str(body.get("model") or self.model))
            return await self._answer(request, a, body, chat=path not in _COMPLETION_PATHS)
        finally:
            self._done(a)

    async def _fail(self, request: web.Request, a: Arrival, model: str) -> web.StreamResponse:
        mode = a.action
        if mode in ("503", "500", "400", "401", "404"):
            code = int(mode)
            kind = {503: "ServiceUnavailableError", 500: "InternalServerError", 400: "BadRequestError",
                    401: "AuthenticationError", 404: "NotFoundError"}[code]
            return web.json_response({"error": {"message": f"recorder: injected {code}", "type": kind,
                                                 "param": None, "code": code}}, status=code)
        if mode in WITH_RETRY_AFTER:
            headers = {} if a.retry_after is None else {"Retry-After": f"{a.retry_after:g}"}
            code = int(mode)
            # 529: the OpenAI-shaped body NVIDIA Dynamo's frontend sends when it sheds overload
            message, kind = (("recorder: rate limited", "RateLimitError") if code == 429
                             else ("recorder: overloaded, busy: back off", "Overloaded"))
            return web.json_response({"error": {"message": message, "type": kind, "param": None, "code": code}},
                                     status=code, headers=headers)
        if mode == "reset":
            _abort(request)
            raise asyncio.CancelledError()
        if mode == "timeout":
            # t_end = the last moment the connection was seen open: errs for the client by <= one step
            end = self.clock() + self.hold_s
            while self.clock() < end and request.transport is not None and not request.transport.is_closing():
                a.t_end_perf = self.clock()
                await asyncio.sleep(0.002)
            _abort(request)
            raise asyncio.CancelledError()
        if mode == "abort-finish":
            return await self._aborted(request, a, model)
        # stream-cut: a 200 that opens (vLLM's empty role chunk) and stops before its first token and
        # without [DONE]; a cut after a token must not be retried, so it cannot test backoff
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        if not a.stream:
            resp.content_length = 4096
            resp.content_type = "application/json"
        await resp.prepare(request)
        await resp.write(b"data: " + json.dumps(_chunk(model, "", None, role=True)).encode() + b"\n\n"
                         if a.stream else b'{"id": "chatcmpl-cut", "choices": [')
        await asyncio.sleep(0.02)
        _abort(request)
        raise asyncio.CancelledError()

    async def _aborted(self, request: web.Request, a: Arrival, model: str) -> web.StreamResponse:
        """A well-formed 200 that carries no token and ends with finish_reason "abort" (vLLM on SIGTERM)."""
        if not a.stream:
            choice = {"index": 0, "message": {"role": "assistant", "content": ""}, "finish_reason": "abort"}
            return web.json_response({"id": "chatcmpl-aborted", "object": "chat.completion", "created": int(time.time()),
                                      "model": model, "choices": [choice]})
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for ev in (_chunk(model, "", None, role=True), _chunk(model, "", "abort")):
            await resp.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _answer(self, request: web.Request, a: Arrival, body: dict[str, Any], chat: bool) -> web.StreamResponse:
        model = self.answer_model or str(body.get("model") or self.model)
        words = ["ok", " from", " the", " recorder"]
        usage = {"prompt_tokens": 4, "completion_tokens": len(words), "total_tokens": 4 + len(words)}
        if not a.stream:
            rid = f"chatcmpl-{uuid.uuid4().hex[:12]}" if chat else f"cmpl-{uuid.uuid4().hex[:12]}"
            text = "".join(words)
            choice = ({"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
                      if chat else {"index": 0, "text": text, "finish_reason": "stop"})
            return web.json_response({"id": rid, "object": "chat.completion" if chat else "text_completion",
                                      "created": int(time.time()), "model": model, "choices": [choice],
                                      "usage": usage})
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-store"})
        await resp.prepare(request)
        events = ([_chunk(model, "", None, role=True)] if chat else []) + \
                 [_chunk(model, w, "stop" if i == len(words) - 1 else None, chat=chat) for i, w in enumerate(words)]
        if (body.get("stream_options") or {}).get("include_usage"):
            events.append({"id": "chatcmpl-rec", "object": "chat.completion.chunk", "model": model,
                           "choices": [], "usage": usage})
        for ev in events:
            await resp.write(b"data: " + json.dumps(ev).encode() + b"\n\n")
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def _chunk(model: str, text: str, finish: str | None, *, role: bool = False, chat: bool = True) -> dict[str, Any]:
    if not chat:
        return {"id": "cmpl-rec", "object": "text_completion", "model": model,
                "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    delta: dict[str, Any] = {"role": "assistant", "content": ""} if role else {"content": text}
    return {"id": "chatcmpl-rec", "object": "chat.completion.chunk", "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def _abort(request: web.Request) -> None:
    """Close the connection with a TCP RST (SO_LINGER 0), as a crashed server would."""
    transport = request.transport
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except OSError:
            pass
    transport.abort()
