"""Locust users for OpenAI-compatible streaming chat and completions; one RequestRecord per attempt.

A logical request keeps one `x-request-id` over all its attempts; retries follow
`chaos.load.backoff.Backoff` and sleep with gevent. The last attempt carries `final=True`
and `outcome`: succeeded, rejected (the last answer was a 4xx: the server refused it) or failed.
"""
from __future__ import annotations

import itertools
import json
import random
import socket
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import gevent
from geventhttpclient.response import HTTPConnectionClosed, HTTPSocketResponse
from geventhttpclient.useragent import RetriesExceeded
from locust import FastHttpUser, constant, task
from locust.contrib.fasthttp import ResponseContextManager
from locust.exception import StopUser

from chaos.load import kstamp
from chaos.load.records import RequestRecord, answer_digest
from chaos.load.sse import StreamMeter, aborted, answer_text
from chaos.load.workloads import Prompt, body_maker

if TYPE_CHECKING:
    from chaos.load.context import Context

_perf = time.perf_counter
_wall = time.time
_RID_PREFIX = uuid.uuid4().hex[:16]  # per process; + a counter = unique and cheaper than uuid4 per request
_RID_N = itertools.count()
PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


def classify(exc: BaseException, in_body: bool) -> str:
    """Error class of a transport exception; `in_body` once the response status was read."""
    orig = getattr(exc, "original", None)
    if isinstance(exc, RetriesExceeded) and isinstance(orig, BaseException):
        exc = orig
    if isinstance(exc, (socket.timeout, TimeoutError, gevent.Timeout)):
        return "timeout"
    if in_body:
        return "stream_cut"
    if isinstance(exc, (ConnectionError, HTTPConnectionClosed, OSError)) or "closed" in str(exc).lower():
        return "reset"
    return "other"


def _retry_after(headers: Mapping[str, Any] | None) -> float | None:
    raw = headers.get("retry-after") if headers is not None else None
    try:
        return float(raw) if raw is not None else None
    except (TypeError, ValueError):
        return None


def _received(raw: HTTPSocketResponse) -> bytes:
    """The body bytes the response holds now, after one receive when it holds none; b"" at its end.

    geventhttpclient offers readline (a Python loop per line) and read(n) (waits for n bytes or the
    end: a stream's events would be timed late), so this takes its parser's buffer as they do."""
    buf = raw._body_buffer
    while not buf:
        if raw.message_complete:
            return b""
        sock = raw._sock
        if sock is None:
            raise HTTPConnectionClosed("connection closed.")
        try:
            data = sock.recv(raw.block_size)
            raw.feed(data)
        except BaseException:
            raw.release()
            raise
        if not data and not raw.message_complete:
            raise HTTPConnectionClosed("connection closed before the end of the message")
    out = bytes(buf)
    del buf[:]
    return out


class LLMUser(FastHttpUser):
    """Sends prompts from the process's workload; configured by `chaos.load.locustfile`."""

    abstract = True
    wait_time = constant(0)
    max_retries = 0
    ctx: Context | None = None  # a chaos.load.context.Context, set by the locustfile's init hook

    def on_start(self) -> None:
        c = self.ctx
        assert c is not None, "LLMUser.ctx is set by the locustfile's init hook"
        self.cfg = c.cfg
        self.path = PATHS[c.cfg.api]
        self.backoff = c.backoff(random.Random(f"{c.cfg.seed}-{id(self)}"))
        self.rng = random.Random(f"{c.cfg.seed}-attrs-{id(self)}")
        greedy = c.cfg.answers > 0  # the answers verdict: one right answer per prompt (temperature 0, a fixed seed)
        self.make_body = body_maker(api=c.cfg.api, model=c.cfg.model, max_tokens=c.cfg.max_tokens, stream=c.cfg.stream,
                                    ignore_eos=c.cfg.ignore_eos, temperature=0.0 if greedy else c.cfg.temperature,
                                    seed=c.cfg.seed if greedy else None)
        self.base_headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if c.cfg.api_key:
            self.base_headers["authorization"] = f"Bearer {c.cfg.api_key}"

    @task
    def one_logical_request(self) -> None:
        c = self.ctx
        assert c is not None, "LLMUser.ctx is set by the locustfile's init hook"
        delay = c.pace()
        if delay is None:
            raise StopUser()
        if delay > 0:
            gevent.sleep(delay)
        prompt = c.next_prompt()
        if prompt is None:
            c.exhausted()
            raise StopUser()
        c.inflight += 1
        try:
            self.logical(prompt)
        finally:
            c.inflight -= 1

    def logical(self, prompt: Prompt) -> None:
        """All attempts of one logical request, each leaving a record."""
        ctx = self.ctx
        assert ctx is not None, "LLMUser.ctx is set by the locustfile's init hook"
        rid = f"{_RID_PREFIX}{next(_RID_N):08x}"
        started = _perf()
        attempt = 1
        payload = self.make_body(prompt)
        attrs = self.draw_attributes()
        while True:
            try:
                rec, retry_after = self.attempt(rid, attempt, prompt, payload, attrs)
            except gevent.GreenletExit:
                if attempt > 1:  # its earlier attempts are recorded: the logical request still ends exactly once
                    ctx.emit(RequestRecord(
                        request_id=rid, attempt=attempt, t_send=_wall(), prompt_tokens=prompt.tokens,
                        model_asked=self.cfg.model, prompt_class=prompt.prompt_class, error="other",
                        error_detail="load stopped while this retry was in flight", outcome="abandoned"))
                raise
            if rec.ok:
                rec.outcome = "succeeded"
                ctx.emit(rec)
                return
            bo = self.backoff
            wait = bo.wait_for(attempt, retry_after) if bo else 0.0
            if bo is None or not bo.should_retry(rec.status, rec.error, streamed=rec.ttft is not None) \
                    or bo.give_up(attempt, _perf() - started, wait):
                rec.outcome = "rejected" if rec.status is not None and 400 <= rec.status < 500 else "failed"
                ctx.emit(rec)
                return
            rec.final = False
            try:
                gevent.sleep(wait)
            except gevent.GreenletExit:
                # the harness ended it, not the system: neither a success nor a loss
                rec.final, rec.outcome = True, "abandoned"
                rec.error_detail = f"{rec.error_detail or ''} (load stopped during backoff)".strip()
                raise
            finally:
                ctx.emit(rec)
            attempt += 1

    def draw_attributes(self) -> dict[str, str] | None:
        """One value per attribute header, drawn by weight (each user its own random stream)."""
        if not self.cfg.attributes:
            return None
        return {h: self.rng.choices(list(vals), weights=list(vals.values()))[0]
                for h, vals in self.cfg.attributes.items()}

    def attempt(self, rid: str, attempt: int, prompt: Prompt, payload: bytes,
                attrs: dict[str, str] | None = None) -> tuple[RequestRecord, float | None]:
        """One HTTP attempt; returns its record and any Retry-After seconds."""
        cfg = self.cfg
        rec = RequestRecord(request_id=rid, attempt=attempt, t_send=0.0, prompt_tokens=prompt.tokens,
                            model_asked=cfg.model, prompt_class=prompt.prompt_class, attrs=attrs)
        headers = dict(self.base_headers)
        headers["x-request-id"] = rid
        if attrs:
            headers.update(attrs)
        rec.t_send = _wall()
        t0 = _perf()
        # locust annotates `data` as str | dict; it passes bytes through to geventhttpclient as they are
        resp = self.client.request("POST", self.path, data=payload, headers=headers,  # type: ignore[arg-type]
                                   stream=True, catch_response=True, name=f"{cfg.api}:{prompt.prompt_class}")
        retry_after = None
        with resp:
            err = getattr(resp, "error", None)
            raw = getattr(resp, "_response", None)
            if raw is None:  # no response at all
                rec.e2e = _perf() - t0
                rec.error = classify(err, False) if err else "other"
                rec.error_detail = f"{type(err).__name__}: {err}"[:300] if err else "no response"
            else:
                rec.status = resp.status_code
                assert resp.headers is not None  # a response was read
                # a str, unless the header came more than once (then geventhttpclient gives a list)
                rec.served_by = cast("str | None", resp.headers.get(cfg.served_by_header))
                if rec.status >= 300:
                    retry_after = _retry_after(resp.headers)
                    self._http_error(rec, resp, t0)
                elif cfg.stream:
                    self._read_stream(rec, raw, t0)
                else:
                    self._read_body(rec, resp, t0)
                if rec.error is None and rec.model_answered and rec.model_answered != cfg.model:
                    rec.error = "wrong_model"
                    rec.error_detail = f"asked {cfg.model!r}, answered by {rec.model_answered!r}"
                if rec.error is not None:
                    rec.answer = None  # a broken answer is no answer to compare
                elif cfg.answers:
                    rec.prompt_key = prompt.key or answer_digest(prompt.text)
            resp.request_meta["response_time"] = (rec.e2e or 0.0) * 1000
            if rec.error is None:
                resp.success()  # type: ignore[no-untyped-call]  # untyped in locust
            else:
                resp.failure(f"{rec.error}: {rec.error_detail or rec.status}")  # type: ignore[no-untyped-call]
        return rec, retry_after

    def _http_error(self, rec: RequestRecord, resp: ResponseContextManager, t0: float) -> None:
        rec.error = "http"
        try:
            text = (resp.content or b"")[:300]
            rec.error_detail = text.decode("utf-8", "replace") if isinstance(text, bytes) else str(text)
        except Exception as e:  # the body of an error answer is best effort
            rec.error_detail = f"status {rec.status} ({type(e).__name__} reading body)"
        rec.e2e = _perf() - t0

    def _read_stream(self, rec: RequestRecord, raw: HTTPSocketResponse, t0: float) -> None:
        """Read SSE events; each is timed by the kernel's receive stamp when the socket has one
        (chaos.load.kstamp: exact while the client keeps up, never later than the clock).

        The body is taken a receive at a time and the meter splits it into lines (`receive`): a
        readline per line cost more than the rest of the meter (bench/loadgen.py). Every line of one
        receive gets that receive's time, as the readline loop gave it (the stamp is per receive)."""
        meter = StreamMeter(t0, digest=self.cfg.answers > 0)
        t_end = None
        wall_minus_perf = rec.t_send - t0  # kernel stamps are wall clock; the meter runs on perf_counter
        try:
            while True:
                data = _received(raw)
                if not data:
                    break
                now = _perf()
                stamp = kstamp.arrival(not_before=rec.t_send)
                if stamp is not None and stamp - wall_minus_perf < now:
                    now = stamp - wall_minus_perf
                if meter.receive(data, now):
                    t_end = now
            if raw.message_complete is False and not meter.done:
                raise HTTPConnectionClosed("stream ended before the message was complete")
        except Exception as e:
            rec.error = classify(e, True)
            rec.error_detail = f"{type(e).__name__}: {e}"[:300]
        meter.fill(rec, t_end if t_end is not None else _perf())
        rec.answer = meter.answer()
        if rec.error is None:
            problem = meter.problem()
            if problem is not None:
                rec.error, rec.error_detail = problem

    def _read_body(self, rec: RequestRecord, resp: ResponseContextManager, t0: float) -> None:
        try:
            data = json.loads(resp.content or b"{}")
        except Exception as e:
            rec.e2e = _perf() - t0
            rec.error = "stream_cut" if not isinstance(e, ValueError) else "other"
            rec.error_detail = f"{type(e).__name__}: {e}"[:300]
            return
        rec.e2e = rec.ttft = _perf() - t0
        if "error" in data:
            rec.error, rec.error_detail = "error_chunk", json.dumps(data["error"])[:300]
        choices = data.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            rec.finish_reason = choices[0].get("finish_reason")
        if rec.error is None and (why := aborted(rec.finish_reason)) is not None:
            rec.error, rec.error_detail = why
        rec.model_answered = data.get("model")
        if self.cfg.answers:
            rec.answer = answer_digest(answer_text(data))
        usage = data.get("usage") or {}
        rec.output_tokens = usage.get("completion_tokens")
        rec.prompt_tokens = usage.get("prompt_tokens", rec.prompt_tokens)


class PlainStreamUser(FastHttpUser):
    """Baseline for the benchmark: streams a completion and only reads the bytes.

    A subclass changes what it sends by overriding `body()`, not the task: a second `@task` named
    `stream` would be a second task beside this one (locust collects the bases' tasks too), and
    half the requests would send this class's payload instead."""

    abstract = True
    wait_time = constant(0)
    payload = b"{}"
    path = "/v1/completions"

    def body(self) -> bytes:
        return self.payload

    @task
    def stream(self) -> None:
        with self.client.request("POST", self.path, data=self.body(),  # type: ignore[arg-type]  # bytes pass through
                                 stream=True, catch_response=True, headers={"content-type": "application/json"}) as resp:
            for _ in resp.iter_content(4096):
                pass
