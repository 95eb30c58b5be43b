"""The harness's side of monitoring: a webhook receiver an Alertmanager pages (on 127.0.0.1) and a
reader of Prometheus's alert state (`/api/v1/alerts`, the `ALERTS` series over a range)."""
from __future__ import annotations

import http.client
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chaos.errors import TargetError


@dataclass(frozen=True)
class Notification:
    """One alert as a webhook call carried it: when it arrived, its name, and firing or resolved."""

    received: float
    alertname: str
    status: str  # firing | resolved
    labels: dict[str, str]


class WebhookReceiver:
    """An HTTP server on 127.0.0.1 that records every Alertmanager webhook call (a page, end to end)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.notifications: list[Notification] = []
        self._lock = threading.Lock()
        self._clock = clock
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.record(body)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/alerts"

    def record(self, body: bytes) -> None:
        now = self._clock()
        try:
            alerts = json.loads(body).get("alerts", [])
        except (ValueError, AttributeError):
            return
        with self._lock:
            for a in alerts:
                labels = {str(k): str(v) for k, v in (a.get("labels") or {}).items()}
                self.notifications.append(Notification(now, labels.get("alertname", "?"), str(a.get("status")),
                                                       labels))

    def first(self, alertname: str, status: str, since: float) -> float | None:
        """When the first `status` notification of `alertname` arrived at or after `since`."""
        with self._lock:
            return next((n.received for n in self.notifications
                         if n.alertname == alertname and n.status == status and n.received >= since), None)

    def start(self) -> WebhookReceiver:
        self._thread = threading.Thread(target=self._server.serve_forever, name="alert-webhook", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@dataclass(frozen=True)
class Firing:
    """One stretch of an alert in state firing, from Prometheus's ALERTS series (end None: still firing)."""

    alertname: str
    start: float
    end: float | None


class PrometheusAlerts:
    """Reads alert state from a Prometheus HTTP API."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url, self.timeout = url.rstrip("/"), timeout

    def _get(self, path: str, **params: Any) -> Any:
        q = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{q}", timeout=self.timeout) as r:
                body = json.loads(r.read())
        except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as e:
            raise TargetError(f"prometheus {self.url}{path}: {getattr(e, 'reason', e)}") from None
        if body.get("status") != "success":
            raise TargetError(f"prometheus {self.url}{path}: {body.get('error', body)}")
        return body["data"]

    def rule_alerts(self) -> set[str]:
        """The alert names of every loaded rule."""
        groups = self._get("/api/v1/rules", type="alert")["groups"]
        return {r["name"] for g in groups for r in g["rules"]}

    def firing_now(self) -> set[str]:
        return {a["labels"]["alertname"] for a in self._get("/api/v1/alerts")["alerts"] if a["state"] == "firing"}

    def firings(self, start: float, end: float, step: float = 1.0) -> list[Firing]:
        """Every stretch of each alert firing over [start, end], from the ALERTS series at `step`."""
        data = self._get("/api/v1/query_range", query='ALERTS{alertstate="firing"}', start=f"{start:.3f}",
                         end=f"{end:.3f}", step=f"{step:g}")
        out: list[Firing] = []
        # the last evaluation may not be in the range yet: what fires now is still firing
        now = self.firing_now() if data["result"] else set()
        for series in data["result"]:
            name = series["metric"].get("alertname", "?")
            times = [float(t) for t, _ in series["values"]]
            run_start = prev = times[0] if times else None
            for t in times[1:]:
                if prev is not None and t - prev > 1.5 * step:  # a gap: the alert resolved and fired again
                    out.append(Firing(name, run_start or prev, prev + step))
                    run_start = t
                prev = t
            if run_start is not None and prev is not None:
                still = name in now or end - prev <= 1.5 * step
                out.append(Firing(name, run_start, None if still else prev + step))
        return sorted(out, key=lambda f: f.start)

    def ready(self) -> str | None:
        """None when the API answers, else why not."""
        try:
            self._get("/api/v1/status/buildinfo")
        except TargetError as e:
            return str(e)
        return None
