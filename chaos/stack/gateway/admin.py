"""The gateway's admin API (Bearer token) and its Prometheus /metrics.

Admin (JSON; `Authorization: Bearer <token>` when a token is configured):
    GET  /admin/state                      pools, windows, weights, recent transitions
    POST /admin/reset     {"pool": P?}     close P (or every pool): ends a degrade or a forced rollback
    POST /admin/force     {"pool": P, "state": "open"|"forced_open"}
    POST /admin/config    {"canary_weight": w?, "misroute_fraction": f?, "progress_eject_s": s?}
    GET  /admin/release                    the gray-release stage: canary_weight, mirror, admit
    POST /admin/release   {"canary_weight": w?, "mirror": m?, "admit": {header: [values]} | null?}
    GET  /admin/mirror?since=EPOCH         shadow pairs (stable's and canary's answers) since then
    GET  /gateway/health                   200 while the gateway runs (no token)
Metrics: chaos_gateway_pool_state{pool} = 0 closed, 1 half-open, 2 open (degraded),
3 forced open (rolled back); chaos_gateway_transitions_total{pool,from,to};
chaos_gateway_window_error_rate{pool}; chaos_gateway_window_p99_seconds{pool};
chaos_gateway_window_calls{pool}; chaos_gateway_canary_share; chaos_gateway_requests_total
{pool,replica,outcome}; chaos_gateway_prompt_class_requests_total{pool,prompt_class,outcome} (the
prompt-length class, by body size: PROMPT_CLASSES); chaos_gateway_oom_total{pool,replica};
chaos_gateway_rejected_total{reason}; chaos_gateway_rss_growth_per_hour{pool,replica}.
"""
from __future__ import annotations

import hmac
import json
from collections.abc import Iterator
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from chaos.stack.gateway.breaker import Transition
from chaos.stack.gateway.ejection import Ejection
from chaos.stack.gateway.policy import POOLS, GatewayPolicy
from chaos.stack.gateway.progress import ProgressWatch
from chaos.stack.gateway.release import Release, ReleaseError

STATE_METRIC = "chaos_gateway_pool_state"
# The seed's prompt-length classes (512 / 8k / 32k tokens), told apart by the request body's size: the
# gateway has no tokenizer, and about 4 bytes a token (English text; the load's generated prompts are
# exactly that) puts each boundary at the geometric middle between two classes (2k and 16k tokens), so
# an estimate off by a factor of 2 still lands in the right class. vLLM cannot give this split: it counts
# finish reasons and prompt lengths in separate series, and a request it refused or lost counts in neither.
PROMPT_CLASSES = (("short", 8 * 1024), ("long", 64 * 1024), ("xl", None))  # (class, body bytes below)


def prompt_class(body_bytes: int) -> str:
    """The prompt-length class of a request body of `body_bytes` bytes (PROMPT_CLASSES)."""
    return next(name for name, below in PROMPT_CLASSES if below is None or body_bytes < below)


class _PolicyCollector:
    """Gauges read from the policy at scrape time."""

    def __init__(self, policy: GatewayPolicy) -> None:
        self.policy = policy

    def collect(self) -> Iterator[GaugeMetricFamily]:
        snap = self.policy.snapshot()
        state = GaugeMetricFamily(STATE_METRIC, "breaker state per pool: 0 closed, 1 half-open, 2 open, 3 forced open",
                                  labels=["pool"])
        err = GaugeMetricFamily("chaos_gateway_window_error_rate", "error rate over the breaker window", labels=["pool"])
        p99 = GaugeMetricFamily("chaos_gateway_window_p99_seconds", "P99 latency over the breaker window", labels=["pool"])
        calls = GaugeMetricFamily("chaos_gateway_window_calls", "calls in the breaker window", labels=["pool"])
        rss = GaugeMetricFamily("chaos_gateway_rss_growth_per_hour", "replica RSS growth, fraction per hour",
                                labels=["pool", "replica"])
        for pool, e in snap["pools"].items():
            state.add_metric([pool], e["state_code"])
            err.add_metric([pool], e["window"]["error_rate"])
            p99.add_metric([pool], e["window"]["p99_s"] or 0.0)
            calls.add_metric([pool], e["window"]["calls"])
            for rep, rate in e["rss_growth_per_hour"].items():
                if rate is not None:
                    rss.add_metric([pool, rep], rate)
        share = GaugeMetricFamily("chaos_gateway_canary_share", "share of new traffic the canary gets now")
        share.add_metric([], snap["canary_share"])
        yield from (state, err, p99, calls, rss, share)


class GatewayMetrics:
    """The gateway's own registry (not the process-global one, so several gateways can share a process)."""

    def __init__(self, policy: GatewayPolicy) -> None:
        self.registry = CollectorRegistry()
        self.registry.register(_PolicyCollector(policy))
        self._transitions = Counter("chaos_gateway_transitions", "breaker state transitions",
                                    ["pool", "from", "to"], registry=self.registry)
        self._requests = Counter("chaos_gateway_requests", "proxied inference requests",
                                 ["pool", "replica", "outcome"], registry=self.registry)
        self._classes = Counter("chaos_gateway_prompt_class_requests", "proxied inference requests by prompt-length "
                                "class (short < 2k, long < 16k, xl >= 16k tokens, estimated from the body's size)",
                                ["pool", "prompt_class", "outcome"], registry=self.registry)
        self._class_children: dict[tuple[str, str, bool], Any] = {}
        self._ooms = Counter("chaos_gateway_oom", "answers carrying a CUDA out-of-memory error (also counted as errors)",
                             ["pool", "replica"], registry=self.registry)
        self._rejected = Counter("chaos_gateway_rejected", "requests refused before routing", ["reason"],
                                 registry=self.registry)
        self._request_children: dict[tuple[str, str, bool], Any] = {}
        for pool in POOLS:
            self._transitions.labels(pool, "closed", "open")
        policy.listeners.append(self.transition)

    def transition(self, tr: Transition) -> None:
        self._transitions.labels(tr.name, tr.src.value, tr.dst.value).inc()

    def request(self, pool: str, replica: str, ok: bool, latency_s: float, oom: bool = False,
                prompt_bytes: int | None = None) -> None:
        key = (pool, replica, ok)
        child = self._request_children.get(key)
        if child is None:  # labels() parses and locks on every call: look each series up once
            child = self._request_children[key] = self._requests.labels(pool, replica, "ok" if ok else "error")
        child.inc()
        if prompt_bytes is not None:
            ckey = (pool, prompt_class(prompt_bytes), ok)
            cchild = self._class_children.get(ckey)
            if cchild is None:
                cchild = self._class_children[ckey] = self._classes.labels(ckey[0], ckey[1], "ok" if ok else "error")
            cchild.inc()
        if oom:
            self._ooms.labels(pool, replica).inc()

    def rejected(self, reason: str) -> None:
        self._rejected.labels(reason.split(":")[0][:40]).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class Admin:
    """aiohttp handlers for the admin API and /metrics."""

    def __init__(self, policy: GatewayPolicy, metrics: GatewayMetrics, token: str | None,
                 ejection: Ejection | None = None, progress: ProgressWatch | None = None) -> None:
        self.policy, self.metrics, self._token = policy, metrics, token
        self.ejection, self.progress = ejection, progress

    def routes(self) -> list[web.RouteDef]:
        return [web.get("/admin/state", self.state), web.post("/admin/reset", self.reset),
                web.post("/admin/force", self.force), web.post("/admin/config", self.config),
                web.get("/admin/release", self.release), web.post("/admin/release", self.release),
                web.get("/admin/mirror", self.mirror),
                web.get("/gateway/health", self.health), web.get("/metrics", self.prometheus)]

    def _authorized(self, request: web.Request) -> bool:
        if not self._token:
            return True
        got = request.headers.get("Authorization", "")
        return hmac.compare_digest(got.encode(), f"Bearer {self._token}".encode())

    async def _json(self, request: web.Request) -> dict[str, Any]:
        if not self._authorized(request):
            raise web.HTTPUnauthorized(text='{"error": "Unauthorized"}', content_type="application/json")
        if request.method != "POST" or not request.can_read_body:
            return {}
        try:
            data = json.loads(await request.read() or b"{}")
        except ValueError:
            raise web.HTTPBadRequest(text='{"error": "body must be JSON"}', content_type="application/json") from None
        if not isinstance(data, dict):
            raise web.HTTPBadRequest(text='{"error": "body must be a JSON object"}', content_type="application/json")
        return data

    def _pool(self, data: dict[str, Any], required: bool = False) -> str | None:
        pool = data.get("pool")
        if (pool is None and required) or (pool is not None and pool not in POOLS):
            raise web.HTTPBadRequest(text=json.dumps({"error": f"pool must be one of {list(POOLS)}"}),
                                     content_type="application/json")
        return pool

    @staticmethod
    def _ok(data: dict[str, Any]) -> web.Response:
        return web.json_response(data, headers={"Cache-Control": "no-store"})

    async def state(self, request: web.Request) -> web.Response:
        await self._json(request)
        snap = self.policy.snapshot()
        if self.ejection is not None:  # which replicas are out of rotation, and for how much longer
            snap["ejection"] = self.ejection.state()
        if self.progress is not None:  # top level, as /admin/config takes it (chaos.faults.gateway reads it back)
            snap["progress_eject_s"] = self.progress.stall_s
        return self._ok(snap)

    async def reset(self, request: web.Request) -> web.Response:
        data = await self._json(request)
        names = self.policy.reset(self._pool(data), reason="operator reset")
        return self._ok({"reset": names, "state": self.policy.snapshot()["pools"]})

    async def force(self, request: web.Request) -> web.Response:
        data = await self._json(request)
        pool = self._pool(data, required=True)
        try:
            self.policy.force(pool, str(data.get("state", "forced_open")), reason="operator force")  # type: ignore[arg-type]
        except ValueError as e:
            raise web.HTTPBadRequest(text=json.dumps({"error": str(e)}), content_type="application/json") from None
        return self._ok(self.policy.snapshot())

    async def config(self, request: web.Request) -> web.Response:
        data = await self._json(request)
        for key in ("canary_weight", "misroute_fraction"):
            if key in data:
                value = data[key]
                if not isinstance(value, (int, float)) or not 0 <= value <= 1:
                    raise web.HTTPBadRequest(text=json.dumps({"error": f"{key} must be a number in [0, 1]"}),
                                             content_type="application/json")
                setattr(self.policy, key, float(value))
        if "progress_eject_s" in data and self.progress is not None:
            value = data["progress_eject_s"]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                raise web.HTTPBadRequest(text=json.dumps({"error": "progress_eject_s must be seconds >= 0 (0: off)"}),
                                         content_type="application/json")
            self.progress.configure(float(value))
        return self._ok(self.policy.snapshot())

    def _release_view(self) -> dict[str, Any]:
        return {"canary_weight": self.policy.canary_weight, **self.policy.release.to_json()}

    async def release(self, request: web.Request) -> web.Response:
        data = await self._json(request)
        if request.method == "POST":
            weight = data.get("canary_weight", self.policy.canary_weight)
            try:
                if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0 <= weight <= 1:
                    raise ReleaseError("canary_weight must be a number in [0, 1]")
                unknown = sorted(set(data) - {"canary_weight", "mirror", "admit"})
                if unknown:
                    raise ReleaseError(f"unknown field(s) {unknown}; expected canary_weight, mirror, admit")
                release = Release.from_json(data, self.policy.release)
            except ReleaseError as e:
                raise web.HTTPBadRequest(text=json.dumps({"error": str(e)}), content_type="application/json") from None
            self.policy.release, self.policy.canary_weight = release, float(weight)
        return self._ok(self._release_view())

    async def mirror(self, request: web.Request) -> web.Response:
        await self._json(request)
        try:
            since = float(request.query.get("since", "0"))
        except ValueError:
            raise web.HTTPBadRequest(text='{"error": "since must be epoch seconds"}',
                                     content_type="application/json") from None
        return self._ok({"pairs": self.policy.mirrors.since(since)})

    async def health(self, request: web.Request) -> web.Response:
        return self._ok({"status": "ok"})

    async def prometheus(self, request: web.Request) -> web.Response:
        return web.Response(body=self.metrics.render(), headers={"Content-Type": CONTENT_TYPE_LATEST})
