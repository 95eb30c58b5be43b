"""The proxy itself: OpenAI-compatible pass-through (SSE streaming included) over two pools.

Every response carries `Cache-Control: no-store`, `x-served-by: <pool>/<replica>` and the
request's `x-request-id` (the client's, else a new one). What the breaker counts as a failure:
no response (connect error, disconnect), a 5xx, 429 or other overload status (rules.breaker_failure:
busy counts as down does), or a 200 stream that is not a whole
answer (streamcheck: an error chunk, a cut, `[DONE]` with no finish_reason, finish_reason abort or error,
duplicated chunks), and a whole 200 answer whose finish_reason is abort or error. An error
is an OOM when its text says so
(vLLM: "CUDA out of memory"; see policy.is_oom). Retry rule: a connection error before any
byte came back is retried ONCE on another replica of the same pool; the failed attempt is still
counted in the pool's window so the breaker sees it.
"""
from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from chaos.errors import ConfigError
from chaos.shared.signing import NonceCache, SignatureError, verify
from chaos.stack.gateway.defects import UPSTREAM_HELD_AFTER_DISCONNECT
from chaos.stack.gateway.ejection import Ejection
from chaos.stack.gateway.normalize import normalize_body
from chaos.stack.gateway.policy import CANARY, POOLS, STABLE, GatewayPolicy, is_oom
from chaos.stack.gateway.release import MIRROR_HEADER, TEXT_LIMIT, answer_text
from chaos.stack.gateway.rules import OVERLOAD_STATUSES, breaker_failure
from chaos.stack.gateway.streamcheck import StreamCheck, aborted_answer

if TYPE_CHECKING:
    from chaos.stack.gateway.admin import GatewayMetrics

log = logging.getLogger("chaos.gateway")

PROMPT_BYTES = web.RequestKey("chaos.prompt_bytes", int)  # the body's size, kept on the request for the metrics
INFERENCE_PATHS = frozenset({"/v1/completions", "/v1/chat/completions"})
HOP_BY_HOP = frozenset({"connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
                        "transfer-encoding", "upgrade", "content-length", "host"})
SIGNING_HEADERS = frozenset({"x-chaos-timestamp", "x-chaos-nonce", "x-chaos-signature"})
_NOT_UPSTREAM = HOP_BY_HOP | SIGNING_HEADERS
# a new request id: 32 hex digits like uuid4().hex, a per-process random half and a counter (unique,
# and a third of uuid4's cost per request)
_RID_PREFIX = uuid.uuid4().hex[:16]
_RID_N = itertools.count()
# Only a connection that was never made is tried on the next replica: a reset or disconnect after the
# request went out may come after the replica took it, and a retry behind the client's back runs the
# generation twice (nginx does not pass a non-idempotent request on once sent, either). chaos explore
# found it: a reset-peer toxic on a replica's link, 0.8 s, gave two server-side attempts for one client
# attempt (suites/regressions/schedule-16f9767b3d36.yaml).
RETRYABLE = (aiohttp.ClientConnectorError,)
SENT_THEN_LOST = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)


@dataclass(frozen=True)
class Replica:
    """One upstream replica: a name for x-served-by, its base URL and its pool."""

    name: str
    url: str
    pool: str = STABLE


def parse_replica(spec: str, pool: str, i: int) -> Replica:
    """The replica a `[NAME=]URL` flag names (the i-th of its pool: `POOL-i` when it has no name)."""
    name, sep, url = spec.partition("=")
    if not sep:
        name, url = f"{pool}-{i}", spec
    if "://" not in url:
        url = "http://" + url
    if not url.startswith(("http://", "https://")) or url.endswith("://"):
        raise ConfigError(f"--{pool}: expected [NAME=]http://HOST:PORT, got {spec!r}")
    return Replica(name, url.rstrip("/"), pool)


def error_json(status: int, message: str, kind: str) -> bytes:
    """A vLLM-shaped error body."""
    return json.dumps({"error": {"message": message, "type": kind, "param": None, "code": status}}).encode()


class Proxy:
    """Routes, forwards and accounts for one request at a time (state lives in GatewayPolicy)."""

    def __init__(self, replicas: list[Replica], policy: GatewayPolicy, *, hmac_key: bytes | None = None,
                 hmac_window_s: float = 300.0, normalize: bool = True, metrics: GatewayMetrics | None = None,
                 ejection: Ejection | None = None, overload_statuses: Collection[int] = OVERLOAD_STATUSES) -> None:
        self.pools = {p: [r for r in replicas if r.pool == p] for p in POOLS}
        self.present = {p for p, rs in self.pools.items() if rs}
        self._rr = {p: itertools.count() for p in POOLS}
        self.policy = policy
        self._key = hmac_key
        self.hmac_window_s = hmac_window_s
        self.nonces = NonceCache(hmac_window_s)
        self.normalize = normalize
        self.metrics = metrics
        self.ejection = ejection or Ejection()  # off unless configured
        self.overload_statuses = frozenset(overload_statuses)
        self.session: aiohttp.ClientSession | None = None
        self._shadows: set[asyncio.Task[None]] = set()  # mirrored calls in flight (a task needs a reference)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        rid = request.headers.get("x-request-id") or f"{_RID_PREFIX}{next(_RID_N):016x}"
        if self._key is not None:
            try:
                verify(self._key, request.method, request.raw_path, body, request.headers,
                       window_s=self.hmac_window_s, nonces=self.nonces)
            except SignatureError as e:
                if self.metrics:
                    self.metrics.rejected(str(e))
                return self._plain(401, error_json(401, f"gateway: {e}", "Unauthorized"), rid, "gateway/hmac")
        inference = request.method == "POST" and request.path in INFERENCE_PATHS
        if inference:
            request[PROMPT_BYTES] = len(body)  # the prompt-length class of its outcome (GatewayMetrics)
        if inference and self.normalize:
            body = normalize_body(body)
        if inference:
            pool, permit = self.policy.route(self.present, canary_ok=self.policy.release.admits(request.headers))
        else:
            pool, permit = (STABLE if STABLE in self.present else next(iter(self.present))), None
        shadow = inference and pool == STABLE and CANARY in self.present and self.policy.mirror_this()
        if not shadow:
            return await self._forward(request, body, rid, pool, permit)
        answer, t0 = bytearray(), time.monotonic()
        resp = await self._forward(request, body, rid, pool, permit, answer)
        # after the user's answer is complete: the shadow call never delays or changes it
        task = asyncio.get_running_loop().create_task(self._mirror(
            request, body, rid, {"status": resp.status, "latency_s": round(time.monotonic() - t0, 4),
                                 "replica": resp.headers.get("x-served-by", ""), "answer": bytes(answer)}))
        self._shadows.add(task)
        task.add_done_callback(self._shadows.discard)
        return resp

    async def _mirror(self, request: web.Request, body: bytes, rid: str, stable: dict[str, Any]) -> None:
        """Send the same request to the canary, keep both answers' texts, discard the canary's."""
        assert self.session is not None
        replica = self._pick(CANARY)
        if replica is None:
            return
        headers = self._upstream_headers(request, rid)
        headers[MIRROR_HEADER] = "1"
        raw = stable.pop("answer")
        stable["text"] = answer_text(raw, sse=raw.lstrip().startswith(b"data:"))
        pair = {"t": time.time(), "request_id": rid, "path": request.path, "attrs": {
            h: request.headers[h] for h in (self.policy.release.admit or {}) if h in request.headers},
            "stable": stable}
        canary: dict[str, Any] = {"replica": f"{CANARY}/{replica.name}", "status": None, "text": ""}
        t0 = time.monotonic()
        try:
            async with self.session.request(request.method, replica.url + request.raw_path, data=body,
                                            headers=headers) as up:
                data = await up.read()
                canary.update(status=up.status, text=answer_text(
                    data[:TEXT_LIMIT], sse=up.content_type.startswith("text/event-stream")))
        except (TimeoutError, aiohttp.ClientError) as e:
            canary["error"] = type(e).__name__
        canary["latency_s"] = round(time.monotonic() - t0, 4)
        pair["canary"] = canary
        self.policy.mirrors.add(pair)

    def _pick(self, pool: str, exclude: Replica | None = None) -> Replica | None:
        reps = self.ejection.rotation([r for r in self.pools[pool] if r is not exclude], lambda r: r.name)
        return reps[next(self._rr[pool]) % len(reps)] if reps else None

    def _upstream_headers(self, request: web.Request, rid: str) -> CIMultiDict[str]:
        h = CIMultiDict((k, v) for k, v in request.headers.items() if k.lower() not in _NOT_UPSTREAM)
        h["x-request-id"] = rid
        return h

    def _plain(self, status: int, body: bytes, rid: str, served_by: str) -> web.Response:
        return web.Response(status=status, body=body, content_type="application/json",
                            headers={"Cache-Control": "no-store", "x-served-by": served_by, "x-request-id": rid})

    def _account(self, request: web.Request, pool: str, replica: Replica, ok: bool, t0: float, permit: str | None,
                 oom: bool = False) -> None:
        latency = time.monotonic() - t0
        self.policy.record(pool, ok, latency, permit, oom=oom)
        self.ejection.record(replica.name, ok)
        if self.metrics:
            self.metrics.request(pool, replica.name, ok, latency, oom, prompt_bytes=request.get(PROMPT_BYTES))

    async def _forward(self, request: web.Request, body: bytes, rid: str, pool: str,
                       permit: str | None, answer: bytearray | None = None) -> web.StreamResponse:
        assert self.session is not None, "Proxy.session is set by the app on startup"
        replica, tried = self._pick(pool), None
        headers = self._upstream_headers(request, rid)
        while replica is not None:
            t0 = time.monotonic()
            try:
                async with self.session.request(request.method, replica.url + request.raw_path,
                                                data=body, headers=headers) as up:
                    return await self._relay(request, up, rid, pool, replica, t0, permit, answer)
            except RETRYABLE as e:
                self._account(request, pool, replica, False, t0, permit)
                log.warning("upstream %s/%s unreachable: %s", pool, replica.name, type(e).__name__)
                tried, replica = replica, (self._pick(pool, exclude=replica) if tried is None else None)
                last = e
            except SENT_THEN_LOST as e:
                self._account(request, pool, replica, False, t0, permit)
                log.warning("upstream %s/%s lost the connection after the request: %s", pool, replica.name,
                            type(e).__name__)
                return self._plain(502, error_json(502, f"gateway: upstream {pool}/{replica.name} closed the "
                                                        f"connection ({type(e).__name__})", "BadGateway"),
                                   rid, f"{pool}/{replica.name}")
            except TimeoutError:
                self._account(request, pool, replica, False, t0, permit)
                return self._plain(504, error_json(504, "gateway: upstream timed out", "GatewayTimeout"),
                                   rid, f"{pool}/{replica.name}")
        name = tried.name if tried else "none"
        msg = (f"gateway: upstream {pool}/{name} unreachable ({type(last).__name__})" if tried
               else f"gateway: pool {pool} has no replicas")
        return self._plain(502, error_json(502, msg, "BadGateway"), rid, f"{pool}/{name}")

    def _response_headers(self, up: aiohttp.ClientResponse, rid: str, served_by: str) -> CIMultiDict[str]:
        h = CIMultiDict((k, v) for k, v in up.headers.items() if k.lower() not in HOP_BY_HOP)
        h.update({"Cache-Control": "no-store", "x-served-by": served_by, "x-request-id": rid})
        return h

    async def _relay(self, request: web.Request, up: aiohttp.ClientResponse, rid: str, pool: str,
                     replica: Replica, t0: float, permit: str | None,
                     answer: bytearray | None = None) -> web.StreamResponse:
        """Pass the answer on (a copy of its first TEXT_LIMIT bytes into `answer`, for a shadow pair)."""
        headers = self._response_headers(up, rid, f"{pool}/{replica.name}")
        failed_status = breaker_failure(up.status, self.overload_statuses)
        if not up.content_type.startswith("text/event-stream"):
            try:
                data = await up.read()
            except (TimeoutError, aiohttp.ClientError) as e:
                self._account(request, pool, replica, False, t0, permit)
                return self._plain(502, error_json(502, f"gateway: upstream cut the response ({type(e).__name__})",
                                                   "BadGateway"), rid, f"{pool}/{replica.name}")
            cut_short = up.status == 200 and aborted_answer(data) is not None
            self._account(request, pool, replica, not (failed_status or cut_short), t0, permit,
                          oom=failed_status and is_oom(data))
            if answer is not None:
                answer += data[:TEXT_LIMIT]
            return web.Response(status=up.status, body=data, headers=headers)
        resp = web.StreamResponse(status=up.status, headers=headers)
        await resp.prepare(request)
        check, last = StreamCheck(), b""
        try:
            async for chunk in up.content.iter_any():
                check.feed(chunk)
                if answer is not None and len(answer) < TEXT_LIMIT:
                    answer += chunk
                if up.content.at_eof():
                    # the upstream's answer is complete: this piece goes out with the end of the
                    # stream in one send (a send on loopback costs as much as the rest of the relay)
                    last = chunk
                    break
                try:
                    await resp.write(chunk)
                except ConnectionResetError:
                    # the client went away: not the upstream's failure; leaving the `async with` closes
                    # the upstream connection mid-answer, which is how the replica learns to abort
                    if self.policy.planted_defect == UPSTREAM_HELD_AFTER_DISCONNECT:
                        async for _ in up.content.iter_any():  # defects.py: read on for nobody
                            pass
                    return resp
        except (TimeoutError, aiohttp.ClientError) as e:
            self._account(request, pool, replica, False, t0, permit)
            log.warning("upstream %s/%s cut the stream: %s", pool, replica.name, type(e).__name__)
            if request.transport is not None:
                request.transport.close()  # the client must see a cut, not a clean end
            return resp
        bad = check.failure() if up.status == 200 else None
        if bad:
            log.warning("upstream %s/%s stream failed: %s", pool, replica.name, bad)
        self._account(request, pool, replica, not (failed_status or bad), t0, permit,
                      oom=check.error_chunk and is_oom(check.oom_text))
        await resp.write_eof(last)
        return resp
