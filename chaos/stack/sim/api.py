"""HTTP API (aiohttp): vLLM's OpenAI endpoints, /metrics, health, and the admin fault API."""
from __future__ import annotations

import asyncio
import json
import os
import random
import time
from typing import TYPE_CHECKING, Any, Protocol

from aiohttp import web

from chaos.errors import ConfigError
from chaos.stack.sim import faults as F
from chaos.stack.sim import logpage
from chaos.stack.sim import protocol as P
from chaos.stack.sim.engine import Stream
from chaos.stack.sim.oom import OOM_LINE
from chaos.stack.sim.tokenizer import crashes_tokenizer

# request ids: 128 random bits like vLLM's uuid4().hex, from a PRNG seeded once by the OS (a
# getrandom() syscall per request cost ~6 % of the instant profile's throughput)
_ID_BITS = random.Random(os.urandom(16)).getrandbits


def _hex_id() -> str:
    return f"{_ID_BITS(128):032x}"


if TYPE_CHECKING:
    from chaos.stack.sim.config import SimConfig
    from chaos.stack.sim.engine import Engine
    from chaos.stack.sim.reqlog import RequestLog


class Served(Protocol):
    """What the handlers use of the replica they answer for (chaos.stack.sim.server.SimServer)."""

    cfg: SimConfig
    engine: Engine
    faults: F.FaultSet
    reqlog: RequestLog

    def apply_fault(self, mode: str, params: dict[str, Any]) -> None: ...

    def revert_fault(self, mode: str) -> None: ...

    def leak(self, nbytes: int) -> None: ...

    def render_metrics(self) -> bytes: ...

    def stats(self) -> dict[str, Any]: ...


_JSON = "application/json"
_SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8"}
_UNAUTHORIZED = b'{"error":"Unauthorized"}'
VLLM_VERSION = "0.11.0"


def _json(obj: Any, status: int = 200) -> web.Response:
    return web.Response(body=json.dumps(obj).encode(), status=status, content_type=_JSON)


def _err(status: int, message: str, param: str | None = None) -> web.Response:
    return web.Response(body=P.error_body(status, message, param), status=status, content_type=_JSON)


class Api:
    """Request handlers bound to one SimServer."""

    def __init__(self, srv: Served) -> None:
        self.srv = srv
        self.cfg = srv.cfg
        self.names = (srv.cfg.name,)
        self.created = int(time.time())
        self._bearer = f"Bearer {srv.cfg.api_key}" if srv.cfg.api_key else None

    def routes(self, app: web.Application) -> None:
        r = app.router
        r.add_get("/health", self.health)
        r.add_get("/ping", self.health)
        r.add_post("/ping", self.health)
        r.add_get("/version", self.version)
        r.add_get("/load", self.load)
        r.add_get("/metrics", self.metrics)
        r.add_get("/v1/models", self.models)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/chat/completions", self.chat)
        r.add_get("/admin/faults", self.faults_list)
        r.add_post("/admin/faults", self.faults_post)
        r.add_delete("/admin/faults/{mode}", self.faults_delete)
        r.add_get("/admin/stats", self.stats)
        r.add_get("/admin/log", self.log_page)

    # -- plain endpoints ---------------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        return web.Response(status=503 if self.srv.engine.dead else 200)

    async def version(self, request: web.Request) -> web.Response:
        return _json({"version": VLLM_VERSION})

    async def load(self, request: web.Request) -> web.Response:
        return _json({"server_load": len(self.srv.engine.streams)})

    async def metrics(self, request: web.Request) -> web.Response:
        body = self.srv.render_metrics()
        return web.Response(body=body, headers={"Content-Type": "text/plain; version=0.0.4; charset=utf-8"})

    async def models(self, request: web.Request) -> web.Response:
        if not self._authorized(request):
            return web.Response(body=_UNAUTHORIZED, status=401, content_type=_JSON)
        perm = {"id": f"modelperm-{os.urandom(16).hex()}", "object": "model_permission",
                "created": self.created, "allow_create_engine": False, "allow_sampling": True,
                "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                "allow_fine_tuning": False, "organization": "*", "group": None, "is_blocking": False}
        data = [{"id": self.cfg.name, "object": "model", "created": self.created, "owned_by": "vllm",
                 "root": self.cfg.model, "parent": None, "max_model_len": self.cfg.max_model_len,
                 "permission": [perm]}]
        return _json({"object": "list", "data": data})

    def _authorized(self, request: web.Request) -> bool:
        return self._bearer is None or request.headers.get("Authorization") == self._bearer

    # -- generation --------------------------------------------------------------------------
    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=False)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, chat=True)

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        srv, wall = self.srv, time.time()
        rec: dict[str, Any] = {"request_id": request.headers.get("x-request-id") or _hex_id(),
                               "t_arrival": wall, "t_scheduled": None, "t_first_token": None,
                               "t_finish": None, "prompt_tokens": 0, "output_tokens": 0,
                               "status": 200, "outcome": "rejected", "model": self.cfg.name,
                               "stream": False, "client": request.remote}
        try:
            parsed = await self._parse(request, chat, rec)
        except P.ApiError as e:
            return self._reject(rec, e.status, e.body())
        rec["prompt_tokens"], rec["stream"], rec["model"] = len(parsed.tokens), parsed.stream, parsed.model
        early = self._pre_engine_faults(parsed)
        if early is not None:
            return self._reject(rec, early.status, early.body(), "error")
        rid = ("chatcmpl-" if chat else "cmpl-") + _hex_id()
        fut = asyncio.get_running_loop().create_future()
        s = Stream(parsed, rid, int(wall), request.transport, fut)
        s.on_finish = lambda st, t: self._log_finished(st, t, rec)
        resp: web.StreamResponse | None = None
        if parsed.stream:
            resp = web.StreamResponse(headers=_SSE_HEADERS)
            resp.enable_chunked_encoding()
            await resp.prepare(request)
            resp._payload_writer.send_headers()  # type: ignore[union-attr]  # engine writes raw frames next
        srv.engine.submit(s, wall)
        try:
            outcome = await fut
        except asyncio.CancelledError:
            srv.engine.abort(s)
            raise
        return self._respond(s, resp, outcome, rec)

    async def _parse(self, request: web.Request, chat: bool, rec: dict[str, Any]) -> P.Parsed:
        if not self._authorized(request):
            raise _Unauthorized()
        if self.srv.engine.dead:
            raise P.ApiError(500, P.ENGINE_DEAD_MESSAGE)
        if request.content_type != _JSON:
            raise P.ApiError(400, f"Unsupported content type {request.content_type!r}; expected "
                             "application/json.")
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise P.ApiError(413, "Request body too large.") from None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise P.DetailError(400, "There was an error parsing the body") from None
        try:
            body = json.loads(text)
        except json.JSONDecodeError as e:
            raise P.json_error(e) from None
        except (ValueError, RecursionError):
            raise P.ApiError(400, "Invalid JSON in request body.") from None
        return P.parse_request(body, chat, self.names, self.cfg.max_model_len or 0)

    def _pre_engine_faults(self, parsed: P.Parsed) -> P.ApiError | None:
        srv = self.srv
        if srv.faults.hit("error-rate"):
            status = srv.faults.get("error-rate")["status"]  # type: ignore[index]
            return P.ApiError(status, "Injected error (simulator fault error-rate).")
        if srv.faults.hit("oom-error"):
            return P.ApiError(500, OOM_LINE)
        if srv.faults.get("step-error") is not None:
            srv.engine.die([F.STEP_ERROR_TRACE])
            return P.ApiError(500, P.ENGINE_DEAD_MESSAGE)
        tc = srv.faults.get("tokenizer-crash")
        if tc is not None and crashes_tokenizer(parsed.prompt_text, tc["threshold"]):
            srv.engine.die(["OverflowError: out of range integral type conversion attempted "
                            "(detokenizer, prompt with non-normalized emoji)",
                            "EngineCore encountered a fatal error."])
            return P.ApiError(500, P.ENGINE_DEAD_MESSAGE)
        lk = srv.faults.get("leak")
        if lk is not None:
            srv.leak(lk["bytes_per_request"])
        return None

    def _reject(self, rec: dict[str, Any], status: int, body: bytes, outcome: str = "rejected") -> web.Response:
        rec["status"], rec["outcome"], rec["t_finish"] = status, outcome, time.time()
        self.srv.reqlog.write(rec)
        if status == 401:
            body = _UNAUTHORIZED
        return web.Response(body=body, status=status, content_type=_JSON)

    def _log_finished(self, s: Stream, wall: float, rec: dict[str, Any]) -> None:
        req = s.req
        assert req is not None
        rec.update(t_scheduled=req.t_scheduled, t_first_token=s.t_first_sent or req.t_first_token, t_finish=wall,
                   output_tokens=req.num_output, outcome="error" if s.outcome == "truncated" else s.outcome)
        if s.fmt is not None:  # a stream's status is already on the wire; a JSON answer logs in _respond
            self.srv.reqlog.write(rec)
            rec["logged"] = True

    def _respond(self, s: Stream, resp: web.StreamResponse | None, outcome: str,
                 rec: dict[str, Any]) -> web.StreamResponse:
        if rec.pop("logged", False):
            return resp  # type: ignore[return-value]
        if "t_finish" not in rec or rec["t_finish"] is None:
            self._log_finished(s, time.time(), rec)
        req = s.req
        assert req is not None
        if resp is None:
            if outcome in ("stop", "length"):
                p = s.parsed
                body = P.full_response(p.chat, s.rid, s.created, p.model, "".join(s.parts),
                                       outcome, req.num_prompt, req.num_output)
                resp = web.Response(body=body, content_type=_JSON)
            elif outcome == "error":
                resp = _err(500, P.ENGINE_DEAD_MESSAGE)
            else:
                resp = web.Response(status=499)
            rec["status"] = resp.status
        rec.pop("logged", None)
        self.srv.reqlog.write(rec)
        return resp

    # -- admin -------------------------------------------------------------------------------
    def _admin_denied(self, request: web.Request) -> web.Response | None:
        remote = request.remote or ""
        if not (remote.startswith("127.") or remote == "::1"):
            return _json({"error": "Forbidden: the admin API is loopback-only"}, 403)
        tok = self.cfg.admin_token
        if not tok or request.headers.get("Authorization") != f"Bearer {tok}":
            return web.Response(body=_UNAUTHORIZED, status=401, content_type=_JSON)
        return None

    async def faults_list(self, request: web.Request) -> web.Response:
        return self._admin_denied(request) or _json({"active": self.srv.faults.listing()})

    async def faults_post(self, request: web.Request) -> web.Response:
        denied = self._admin_denied(request)
        if denied is not None:
            return denied
        try:
            body = json.loads(await request.read())
            if not isinstance(body, dict):
                raise ValueError
        except (ValueError, RecursionError):
            return _json({"error": "expected a JSON object {\"mode\": ..., ...params}"}, 400)
        params = dict(body)
        mode, revert = params.pop("mode", None), params.pop("revert", False)
        try:
            if revert:
                F.validate(mode, {})
                self.srv.revert_fault(mode)
            else:
                self.srv.apply_fault(mode, F.validate(mode, params))
        except ConfigError as e:
            return _json({"error": str(e)}, 400)
        return _json({"active": self.srv.faults.listing()})

    async def faults_delete(self, request: web.Request) -> web.Response:
        denied = self._admin_denied(request)
        if denied is not None:
            return denied
        mode = request.match_info["mode"]
        if mode not in F.SPECS:
            return _json({"error": f"unknown fault mode {mode!r}"}, 404)
        self.srv.revert_fault(mode)
        return _json({"active": self.srv.faults.listing()})

    async def stats(self, request: web.Request) -> web.Response:
        return self._admin_denied(request) or _json(self.srv.stats())

    async def log_page(self, request: web.Request) -> web.Response:
        """One page of the request log (GET /admin/log?cursor=&limit=&since=), as the fault proxy's /_chaos/log."""
        denied = self._admin_denied(request)
        if denied is not None:
            return denied
        path = self.cfg.request_log
        if not path:
            return _json({"error": "no request log: this simulator was started without --request-log"}, 404)
        self.srv.reqlog.flush()
        try:
            cursor, limit, since = logpage.parse_query(request.query)
            page = await asyncio.to_thread(logpage.read_page, path, cursor, limit, since)
        except logpage.PageError as e:
            return _json({"error": str(e)}, e.status)
        except OSError as e:
            return _json({"error": f"request log: {e}"}, 500)
        return _json({"name": self.cfg.name, **page})


class _Unauthorized(P.ApiError):
    def __init__(self) -> None:
        super().__init__(401, "Unauthorized")
