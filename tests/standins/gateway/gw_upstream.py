"""A small controllable OpenAI-style upstream for gateway tests (runs in the test's event loop)."""
from __future__ import annotations

import asyncio
import json
from contextlib import asynccontextmanager

from aiohttp import web

CHUNKS = [b'data: {"choices":[{"index":0,"delta":{"content":"he"},"finish_reason":null}]}\n\n',
          b'data: {"choices":[{"index":0,"delta":{"content":"llo"},"finish_reason":"stop"}]}\n\n',
          b"data: [DONE]\n\n"]
NO_FINISH = b'data: {"choices":[{"index":0,"delta":{"content":"llo"},"finish_reason":null}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}\n\n'
OOM_MSG = "CUDA out of memory. Tried to allocate 2.00 GiB"


class Upstream:
    """Modes: ok, http500, oom500, busy (`busy_status`, 529 unless set: Dynamo's overload answer), oom_chunk,
    cut, reset (the connection closed once the request is read, before any answer), no_finish, duplicate,
    other_answer, aborted (a well-formed 200 whose finish_reason is "abort", as vLLM answers at a SIGTERM),
    slow. Keeps what it received."""

    def __init__(self, name: str, mode: str = "ok") -> None:
        self.name, self.mode = name, mode
        self.received: list[dict] = []
        self.rss = 100_000_000.0
        self.started = 1_800_000_000.0  # process_start_time_seconds: a restart changes it
        self.delay_s = 0.0
        self.set_cookie: str | None = None  # a Set-Cookie header on the non-streamed answers
        self.busy_status = 529

    async def complete(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.received.append({"headers": request.headers.copy(), "body": body, "path": request.path})
        payload = json.loads(body or b"{}")
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        if self.mode == "reset":
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        if self.mode == "http500":
            return web.json_response({"error": {"message": "boom", "type": "InternalServerError", "code": 500}}, status=500)
        if self.mode == "busy":
            return web.json_response({"error": {"message": "busy", "type": "Overloaded", "param": None,
                                                 "code": self.busy_status}}, status=self.busy_status)
        if self.mode == "oom500":
            return web.json_response({"error": {"message": OOM_MSG, "type": "InternalServerError", "code": 500}}, status=500)
        if not payload.get("stream"):
            if self.mode == "aborted":
                return web.json_response({"model": "m", "choices": [{"index": 0, "text": "he",
                                                                     "finish_reason": "abort"}]})
            return web.json_response({"model": "m", "served": self.name, "echo": payload},
                                     headers={"Set-Cookie": self.set_cookie} if self.set_cookie else None)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for i, c in enumerate(CHUNKS):
            if self.mode == "cut" and i == 1:
                request.transport.close()
                return resp
            if self.mode == "oom_chunk" and i == 1:
                c = b"data: " + json.dumps({"error": {"message": OOM_MSG, "code": 500}}).encode() + b"\n\n"
            if self.mode == "no_finish" and i == 1:
                c = NO_FINISH
            if self.mode == "aborted" and i == 1:
                c = c.replace(b'"stop"', b'"abort"')
            if self.mode == "other_answer" and i == 1:  # another model's answer to the same prompt
                c = c.replace(b'"llo"', b'"y there"')
            if self.mode == "duplicate" and i == 0:
                await resp.write(c)
            if i == 2:
                await resp.write(USAGE)
            await resp.write(c)
        await resp.write_eof()
        return resp

    async def metrics(self, request: web.Request) -> web.Response:
        text = (f"# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {self.rss}\n"
                f"# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {self.started}\n")
        return web.Response(text=text)

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")


@asynccontextmanager
async def upstream(name: str, mode: str = "ok"):
    """Start an Upstream on a free port; yields (Upstream, url)."""
    up = Upstream(name, mode)
    app = web.Application()
    app.router.add_post("/v1/{kind:(chat/completions|completions)}", up.complete)
    app.router.add_get("/metrics", up.metrics)
    app.router.add_get("/health", up.health)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    try:
        await site.start()
        host, port = runner.addresses[0][:2]
        yield up, f"http://{host}:{port}"
    finally:
        await runner.cleanup()


STREAM_BODY = CHUNKS[0] + CHUNKS[1] + USAGE + CHUNKS[2]  # what an ok stream sends
