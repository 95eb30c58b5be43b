"""The reference resilient client: what the load users run, and a model for users' own clients.

Retries with tenacity under a RetryPolicy: first retry no sooner than min_interval_s, exponential
growth, jitter, a cap, a total deadline, Retry-After honoured but never below the minimum, no retry
on non-retryable statuses (400, 401, 403, 404, 422), one `x-request-id` kept across attempts, and
optional HMAC-SHA256 signing with a key read from an environment variable.

    client = ResilientClient("http://127.0.0.1:18000", env.retry, model="sim-model")
    result = client.chat("hello", stream=True)
    result.ok, result.outcome, result.records
"""
from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tenacity import RetryCallState, Retrying, retry_if_result

from chaos.env.model import RetryPolicy
from chaos.load.backoff import Backoff
from chaos.load.records import RequestRecord
from chaos.load.sse import STREAM_OPTIONS
from chaos.resilience._attempt import Attempt, Endpoint, parse_retry_after, send_once
from chaos.shared.signing import key_from_env, sign

__all__ = ["ResilientClient", "Result", "parse_retry_after"]

OUTCOMES = ("succeeded", "failed", "rejected")


@dataclass
class Result:
    """The end of one logical request: its outcome, the answer text and every attempt's record."""

    request_id: str
    outcome: str
    text: str = ""
    records: list[RequestRecord] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.outcome == "succeeded"

    @property
    def attempts(self) -> int:
        return len(self.records)

    @property
    def final(self) -> RequestRecord:
        return self.records[-1]

    @property
    def status(self) -> int | None:
        return self.final.status


class ResilientClient:
    """OpenAI-compatible client with policy-driven retries; thread-safe, one connection per attempt."""

    def __init__(self, base_url: str, policy: RetryPolicy | None = None, *, model: str = "sim-model",
                 timeout_s: float = 30.0, api_key: str | None = None, hmac_key_env: str | None = None,
                 headers: dict[str, str] | None = None, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.perf_counter, rng: random.Random | None = None,
                 on_record: Callable[[RequestRecord], None] | None = None, keep_records: bool = True,
                 served_by_header: str = "x-served-by") -> None:
        self.endpoint = Endpoint.parse(base_url)
        self.policy = policy or RetryPolicy()
        self.model = model
        self.timeout_s = timeout_s
        self.headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
                        **(headers or {})}
        if api_key:
            self.headers["Authorization"] = f"Bearer {api_key}"
        self._key = key_from_env(hmac_key_env) if hmac_key_env else None
        self.sleep, self.clock = sleep, clock
        self.backoff = Backoff(self.policy, rng)
        self.on_record = on_record
        self.keep_records = keep_records
        self.served_by_header = served_by_header
        self.records: list[RequestRecord] = []
        self._lock = threading.Lock()

    # -- public calls ----------------------------------------------------------------------
    def chat(self, prompt: str | list[dict[str, Any]], *, model: str | None = None, max_tokens: int = 16,
             stream: bool = False, request_id: str | None = None, prompt_class: str | None = None,
             **extra: Any) -> Result:
        """POST /v1/chat/completions; `prompt` is a user message or a full messages list."""
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        payload = {"model": model or self.model, "messages": messages, "max_tokens": max_tokens, **extra}
        return self.post("/chat/completions", payload, stream=stream, request_id=request_id,
                         prompt_class=prompt_class)

    def completion(self, prompt: str, *, model: str | None = None, max_tokens: int = 16, stream: bool = False,
                   request_id: str | None = None, prompt_class: str | None = None, **extra: Any) -> Result:
        """POST /v1/completions."""
        payload = {"model": model or self.model, "prompt": prompt, "max_tokens": max_tokens, **extra}
        return self.post("/completions", payload, stream=stream, request_id=request_id, prompt_class=prompt_class)

    def post(self, tail: str, payload: dict[str, Any], *, stream: bool = False, request_id: str | None = None,
             prompt_class: str | None = None) -> Result:
        """Send one logical request with retries; never raises for server or network failures."""
        rid = request_id or uuid.uuid4().hex
        if stream:
            payload = {**payload, "stream": True, "stream_options": dict(STREAM_OPTIONS)}
        body = json.dumps(payload).encode()
        path = self.endpoint.api_path(tail)
        start = self.clock()
        attempts: list[Attempt] = []

        def one() -> Attempt:
            remaining = self.policy.deadline_s - (self.clock() - start)
            rec = RequestRecord(request_id=rid, attempt=len(attempts) + 1, t_send=0.0,
                                model_asked=str(payload.get("model")), prompt_class=prompt_class)
            headers = {**self.headers, "x-request-id": rid, "Content-Length": str(len(body))}
            if self._key is not None:
                headers.update(sign(self._key, "POST", path, body))
            a = send_once(self.endpoint, path, body, headers, rec, stream=stream,
                          timeout_s=max(0.05, min(self.timeout_s, remaining)), clock=self.clock,
                          served_by_header=self.served_by_header)
            attempts.append(a)
            return a

        retrying = Retrying(
            retry=retry_if_result(self._retryable),
            wait=self._wait,
            stop=lambda rs: self.backoff.give_up(rs.attempt_number, self.clock() - start, rs.upcoming_sleep),
            sleep=self.sleep,
            retry_error_callback=lambda rs: rs.outcome.result() if rs.outcome else None,
        )
        last: Attempt = retrying(one)
        return self._close(rid, attempts, last)

    # -- tenacity strategies ---------------------------------------------------------------
    def _retryable(self, a: Attempt) -> bool:
        return not a.record.ok and self.backoff.should_retry(a.record.status, a.record.error,
                                                             streamed=a.record.ttft is not None)

    def _wait(self, rs: RetryCallState) -> float:
        a: Attempt = rs.outcome.result()  # type: ignore[union-attr]
        return self.backoff.wait_for(rs.attempt_number, a.retry_after)

    def _close(self, rid: str, attempts: list[Attempt], last: Attempt) -> Result:
        recs = [a.record for a in attempts]
        final = recs[-1]
        if final.ok:
            outcome = "succeeded"
        elif final.error == "http" and not self.backoff.should_retry(final.status, final.error):
            outcome = "rejected"
        else:
            outcome = "failed"
        for r in recs:
            r.final = r is final
            r.outcome = outcome if r is final else None
        with self._lock:
            if self.keep_records:
                self.records.extend(recs)
        if self.on_record is not None:
            for r in recs:
                self.on_record(r)
        return Result(rid, outcome, last.text if final.ok else "", recs)
