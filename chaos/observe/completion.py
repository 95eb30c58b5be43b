"""Completion prober: a tiny real completion every ~300 ms, the truth about health."""
from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from typing import Any

from chaos.observe._http import HttpGetter, error_class
from chaos.observe.base import PollingObserver
from chaos.observe.timeline import Sample, Timeline


class CompletionProber(PollingObserver):
    """Samples `completion/ok` (bool, labels: error, status) and `completion/latency` (seconds)."""

    source = "completion"

    def __init__(self, base_url: str, timeline: Timeline | None = None, *, model: str = "sim-model",
                 interval_s: float = 0.3, timeout_s: float = 2.0, api_key: str | None = None,
                 prompt: str = "ping", max_tokens: int = 1, **kw: Any) -> None:
        super().__init__(timeline, interval_s=interval_s, **kw)
        self.http = HttpGetter(base_url, timeout_s)
        self.model = model
        self.body = json.dumps({"model": model, "prompt": prompt, "max_tokens": max_tokens,
                                "stream": False}).encode()
        self.headers = {"content-type": "application/json"}
        if api_key:
            self.headers["authorization"] = f"Bearer {api_key}"
        self.state: str | None = None

    def probe_once(self) -> tuple[bool, float, str | None, int | None]:
        """One completion: (ok, latency_s, error class, status)."""
        headers = dict(self.headers, **{"x-request-id": f"probe-{uuid.uuid4().hex[:16]}"})
        t0 = time.perf_counter()
        try:
            status, _, data = self.http.request("POST", "/v1/completions", self.body, headers)
        except Exception as e:
            return False, time.perf_counter() - t0, error_class(e), None
        latency = time.perf_counter() - t0
        if status != 200:
            return False, latency, "http", status
        try:
            doc = json.loads(data)
            ok = "error" not in doc and bool(doc.get("choices"))
        except ValueError:
            return False, latency, "other", status
        return ok, latency, None if ok else "error_chunk", status

    def poll(self) -> None:
        t = self.timeline.clock()
        ok, latency, err, status = self.probe_once()
        labels = {"error": err or "", "status": str(status or "")}
        self.timeline.sample(self.source, "ok", ok, t=t, **labels)
        self.timeline.sample(self.source, "latency", latency, t=t, **labels)
        state = "ok" if ok else "failing"
        if state != self.state:
            self.timeline.event("state", self.source, t=t, **{"from": self.state, "to": state, "error": err})
            self.state = state

    def close(self) -> None:
        self.http.close()


def first_ok_after(timeline: Timeline, t: float, source: str = "completion") -> Sample | None:
    """The first successful probe sent at or after `t` (recovery is judged by this)."""
    for s in sorted(timeline.series(source, "ok"), key=lambda s: s.t):
        if s.t >= t and s.value is True:
            return s
    return None


def completion_ok(api: str, model: str, timeout: float = 5.0, api_key: str | None = None,
                  prompt: str = "ping") -> bool:
    """True when a tiny real completion succeeds through `api` (the truth about readiness)."""
    body = json.dumps({"model": model, "prompt": prompt, "max_tokens": 2}).encode()
    headers = {"Content-Type": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    req = urllib.request.Request(f"{api.rstrip('/')}/v1/completions", data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status == 200 and bool(json.loads(r.read()).get("choices"))
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
        return False


def wait_completion(api: str, model: str, timeout: float, *, api_key: str | None = None,
                    interval: float = 0.1, request_timeout: float = 5.0,
                    check: Callable[[], object] | None = None) -> float | None:
    """Poll until a real completion succeeds through `api`; seconds waited, or None after `timeout`.

    `check` runs after each failed attempt and may raise to end the wait early (a replica that cannot start)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if completion_ok(api, model, timeout=request_timeout, api_key=api_key):
            return time.monotonic() - t0
        if check is not None:
            check()
        time.sleep(interval)
    return None
