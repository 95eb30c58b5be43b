"""A tiny vLLM-like SSE server for tests, with purpose-built misbehaviours selected by URL prefix.

`http://127.0.0.1:P/<mode>/v1/chat/completions`: modes ok, reset, timeout, cut, error_chunk,
http500, http429, wrong_model, flaky (503 on the first attempt of each x-request-id), slow, aborted (a
whole 200 whose last chunk says finish_reason "abort", as vLLM ends its streams on SIGTERM).
Keeps a ground-truth log like the simulator's: request_id, t_arrival, t_first_token, t_finish.
"""
from __future__ import annotations

import asyncio
import json
import threading
import time

from aiohttp import web

MODES = ("ok", "reset", "timeout", "cut", "error_chunk", "http500", "http429", "wrong_model", "flaky", "slow", "aborted")
# `rotate` cycles through these, one per request, so one run meets every error class
SMALL_CLASSES = {"short": 32, "long": 128, "xl": 512}  # prompt classes small enough for tests
ROTATION = ("ok", "reset", "timeout", "cut", "error_chunk", "http500", "wrong_model", "aborted")


def _chunk(api: str, model: str, text: str | None, finish: str | None = None, role: bool = False) -> bytes:
    if api == "chat":
        delta = {"role": "assistant", "content": ""} if role else {"content": text}
        c = {"id": "chatcmpl-x", "object": "chat.completion.chunk", "model": model,
             "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    else:
        c = {"id": "cmpl-x", "object": "text_completion", "model": model,
             "choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    return b"data: " + json.dumps(c).encode() + b"\n\n"


class SSEServer:
    """Runs the app on a background thread; `url`, `log`, `stop()`."""

    def __init__(self, tokens: int = 4, token_delay_s: float = 0.0) -> None:
        self.tokens = tokens
        self.token_delay_s = token_delay_s
        self.log: list[dict] = []
        self.attempts: dict[str, int] = {}
        self.metrics_text = "vllm:num_requests_running{model_name=\"m\"} 0.0\n"
        self.health_status = 200
        self._n = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("test SSE server did not start")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/{mode}/v1/{kind:(chat/completions|completions)}", self._complete)
        app.router.add_post("/v1/{kind:(chat/completions|completions)}", self._complete)
        app.router.add_get("/health", self._health)
        app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def stop(self) -> None:
        async def _down() -> None:
            await self._runner.cleanup()
        asyncio.run_coroutine_threadsafe(_down(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    async def _health(self, request: web.Request) -> web.Response:
        return web.Response(status=self.health_status)

    async def _metrics(self, request: web.Request) -> web.Response:
        return web.Response(text=self.metrics_text, content_type="text/plain")

    async def _complete(self, request: web.Request) -> web.StreamResponse:
        entry = {"request_id": request.headers.get("x-request-id"), "t_arrival": time.time(),
                 "t_first_token": None, "t_finish": None, "status": 200}
        self.log.append(entry)
        mode = request.match_info.get("mode", "ok")
        if mode == "rotate":
            mode = ROTATION[self._n % len(ROTATION)]
            self._n += 1
        entry["mode"] = mode
        api = "chat" if request.match_info["kind"].startswith("chat") else "completions"
        body = await request.json()
        model = body.get("model", "m")
        rid = entry["request_id"] or ""
        self.attempts[rid] = self.attempts.get(rid, 0) + 1
        if mode == "reset":
            request.transport.close()
            return web.Response()
        if mode == "timeout":
            await asyncio.sleep(3)
        if mode in ("http500", "http429") or (mode == "flaky" and self.attempts[rid] == 1):
            status = {"http500": 500, "http429": 429, "flaky": 503}[mode]
            entry["status"] = status
            err = {"error": {"message": "nope", "type": "InternalServerError", "param": None, "code": status}}
            return web.json_response(err, status=status, headers={"retry-after": "0"} if status == 429 else None)
        if not body.get("stream"):
            text = "x" * self.tokens
            entry["t_first_token"] = entry["t_finish"] = time.time()
            fin = "abort" if mode == "aborted" else "length"
            return web.json_response({"model": model, "choices": [{"text": text, "finish_reason": fin}],
                                      "usage": {"prompt_tokens": 3, "completion_tokens": self.tokens}})
        answered = "other-model" if mode == "wrong_model" else model
        resp = web.StreamResponse(headers={"content-type": "text/event-stream", "x-served-by": "test-a"})
        await resp.prepare(request)
        if api == "chat":
            await resp.write(_chunk(api, answered, None, role=True))
        for i in range(self.tokens):
            if self.token_delay_s or mode == "slow":
                await asyncio.sleep(self.token_delay_s or 0.05)
            if i == 0:
                entry["t_first_token"] = time.time()
            last = "abort" if mode == "aborted" else "length"
            await resp.write(_chunk(api, answered, f"t{i} ", last if i == self.tokens - 1 else None))
            if mode == "cut" and i == 1:
                request.transport.close()
                return resp
        if mode == "error_chunk":
            await resp.write(b'data: {"error": {"message": "engine died", "type": "InternalServerError", "code": 500}}\n\n')
        else:
            usage = {"prompt_tokens": 7, "completion_tokens": self.tokens, "total_tokens": 7 + self.tokens}
            await resp.write(b"data: " + json.dumps({"model": answered, "choices": [], "usage": usage}).encode() + b"\n\n")
        entry["t_finish"] = time.time()
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


def main() -> None:
    """`python tests/integration/load/sse_server.py --tokens N --log PATH`: prints its URL, runs until SIGTERM."""
    import argparse
    import signal

    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=16)
    ap.add_argument("--log", default=None)
    ap.add_argument("--token-delay", type=float, default=0.0, help="seconds between tokens")
    args = ap.parse_args()
    srv = SSEServer(tokens=args.tokens, token_delay_s=args.token_delay)
    print(srv.url, flush=True)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    done.wait()
    srv.stop()
    if args.log:
        with open(args.log, "w", encoding="utf-8") as f:
            for e in srv.log:
                f.write(json.dumps(e) + "\n")


if __name__ == "__main__":
    main()
