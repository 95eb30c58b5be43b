"""Assemble and run the gateway: settings, the aiohttp app, the RSS scraper, start/stop."""
from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

from chaos.errors import ConfigError
from chaos.stack.gateway.admin import Admin, GatewayMetrics
from chaos.stack.gateway.defects import planted_from_env
from chaos.stack.gateway.ejection import Ejection
from chaos.stack.gateway.policy import GatewayPolicy
from chaos.stack.gateway.progress import ProgressWatch, parse_progress
from chaos.stack.gateway.proxy import Proxy, Replica
from chaos.stack.gateway.rules import OVERLOAD_STATUSES, BreakerRules

log = logging.getLogger("chaos.gateway")
SETTINGS = web.AppKey("settings", object)
POLICY = web.AppKey("policy", GatewayPolicy)
PROXY = web.AppKey("proxy", Proxy)
PROGRESS = web.AppKey("progress", ProgressWatch)
METRICS = web.AppKey("metrics", GatewayMetrics)
_RSS = rb"process_resident_memory_bytes"
_STARTED = rb"process_start_time_seconds"


@dataclass
class GatewaySettings:
    """Everything one gateway needs; built from an Environment or from flags (chaos.commands.gateway)."""

    replicas: list[Replica]
    policy: BreakerRules  # an environment's breaker: block (chaos.env.model.BreakerPolicy)
    listen: str = "127.0.0.1:18100"
    admin_token: str | None = field(default=None, repr=False)
    hmac_key: bytes | None = field(default=None, repr=False)
    hmac_window_s: float = 300.0
    leak_hour_s: float = 3600.0
    scrape_interval_s: float | None = None
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 600.0
    eject_after: int = 0  # failed attempts in a row that take a replica out of rotation (0: never)
    eject_s: float = 10.0  # for this long (chaos.stack.gateway.ejection)
    progress_eject_s: float = 0.0  # running requests and no decode for this long ejects it (0: never; .progress)
    # what the team's policy calls "busy: back off" (retry.overload_statuses): the breaker counts each as a failure
    overload_statuses: frozenset[int] = OVERLOAD_STATUSES

    def __post_init__(self) -> None:
        if not self.replicas:
            raise ConfigError("gateway: no replicas (give --stable/--canary URLs or targets in the environment)")
        host, _, port = self.listen.rpartition(":")
        if not host or not port.isdigit():
            raise ConfigError(f"gateway listen address: expected HOST:PORT, got {self.listen!r}")

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        return host, int(port)

    @property
    def scrape_every_s(self) -> float:
        if self.scrape_interval_s:
            return self.scrape_interval_s
        return max(0.5, min(5.0, self.policy.leak_window_s / 10))


def _gauge(text: bytes, name: bytes) -> float | None:
    """One unlabelled-or-labelled sample of `name` from a Prometheus text page, None when absent (a
    regex, not the full parser: vLLM's page is large and the scraper reads it every few seconds)."""
    m = re.search(rb"^" + name + rb"(?:\{[^}]*\})?\s+([0-9.eE+-]+)", text, re.M)
    return float(m.group(1)) if m else None


def parse_rss(text: bytes) -> float | None:
    """process_resident_memory_bytes from a Prometheus text page, None when absent."""
    return _gauge(text, _RSS)


def parse_started(text: bytes) -> float | None:
    """process_start_time_seconds from a Prometheus text page (a restart changes it), None when absent."""
    return _gauge(text, _STARTED)


async def _background(app: web.Application) -> None:
    """Every scrape interval: read each replica's RSS and start time (a new one is a restart), and let
    the rollback window age."""
    settings: GatewaySettings = app[SETTINGS]  # type: ignore[assignment]
    policy = app[POLICY]
    session = app[PROXY].session
    assert session is not None
    timeout = aiohttp.ClientTimeout(total=min(2.0, settings.scrape_every_s))
    started: dict[str, float] = {}
    while True:
        policy.tick()
        for r in settings.replicas:
            try:
                async with session.get(r.url + "/metrics", timeout=timeout) as resp:
                    page = await resp.read() if resp.status == 200 else b""
            except (TimeoutError, aiohttp.ClientError):
                page = b""
            rss, since = parse_rss(page), parse_started(page)
            if since is not None:
                if r.name in started and abs(since - started[r.name]) > 0.5:
                    log.info("replica %s restarted (process started %.1f s after the last one)", r.name,
                             since - started[r.name])
                    policy.replica_restarted(r.pool, r.name)
                started[r.name] = since
            if rss:
                policy.observe_rss(r.pool, r.name, rss)
        await asyncio.sleep(settings.scrape_every_s)


async def _watch_progress(app: web.Application) -> None:
    """Every few tenths of a second: each replica's decode counters, for progress ejection."""
    settings: GatewaySettings = app[SETTINGS]  # type: ignore[assignment]
    watch, session = app[PROGRESS], app[PROXY].session
    assert session is not None
    while True:
        if watch.stall_s <= 0:  # off (an operator may turn it on: POST /admin/config)
            await asyncio.sleep(0.5)
            continue
        timeout = aiohttp.ClientTimeout(total=watch.every_s)
        for r in settings.replicas:
            try:
                async with session.get(r.url + "/metrics", timeout=timeout) as resp:
                    page = await resp.read() if resp.status == 200 else b""
            except (TimeoutError, aiohttp.ClientError):
                page = b""
            watch.observe(r.name, parse_progress(page))
        await asyncio.sleep(watch.every_s)


def build_app(settings: GatewaySettings, policy: GatewayPolicy | None = None) -> web.Application:
    """The aiohttp application: admin + metrics routes, then everything else proxied."""
    policy = policy or GatewayPolicy(settings.policy, leak_hour_s=settings.leak_hour_s,
                                     planted_defect=planted_from_env())
    if policy.planted_defect:
        log.warning("PLANTED DEFECT %s is on (chaos/stack/gateway/defects.py): not for real use",
                    policy.planted_defect)
    metrics = GatewayMetrics(policy)
    ejection = Ejection(settings.eject_after, settings.eject_s)
    proxy = Proxy(settings.replicas, policy, hmac_key=settings.hmac_key, hmac_window_s=settings.hmac_window_s,
                  normalize=settings.policy.normalize_unicode, metrics=metrics, ejection=ejection,
                  overload_statuses=settings.overload_statuses)
    app = web.Application(client_max_size=64 * 1024 * 1024)
    app[SETTINGS], app[POLICY], app[PROXY], app[METRICS] = settings, policy, proxy, metrics
    app[PROGRESS] = progress = ProgressWatch(ejection, settings.progress_eject_s)
    app.add_routes(Admin(policy, metrics, settings.admin_token, ejection, progress).routes())
    app.router.add_route("*", "/{tail:.*}", proxy.handle)
    policy.listeners.append(lambda tr: log.info("pool %s: %s -> %s (%s)", tr.name, tr.src.value, tr.dst.value, tr.reason))

    async def lifecycle(app: web.Application) -> AsyncIterator[None]:
        timeout = aiohttp.ClientTimeout(total=None, connect=settings.connect_timeout_s,
                                        sock_read=settings.read_timeout_s)
        # no cookie jar: one session serves every client, and a Set-Cookie from one client's answer must
        # not ride along on the next client's request (the client's own Cookie header is forwarded as is)
        proxy.session = aiohttp.ClientSession(timeout=timeout, auto_decompress=False,
                                              connector=aiohttp.TCPConnector(limit=0),
                                              cookie_jar=aiohttp.DummyCookieJar())
        tasks = [asyncio.create_task(_background(app)), asyncio.create_task(_watch_progress(app))]
        yield
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await proxy.session.close()

    app.cleanup_ctx.append(lifecycle)
    return app


@contextlib.asynccontextmanager
async def serve(settings: GatewaySettings, policy: GatewayPolicy | None = None) -> AsyncIterator[str]:
    """Run the gateway inside the current event loop; yields its base URL (port 0 = any free port)."""
    app = build_app(settings, policy)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    host, port = settings.host_port
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
        addr = runner.addresses[0]
        yield f"http://{addr[0]}:{addr[1]}"
    finally:
        await runner.cleanup()


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop where installed (a dependency off Windows): its C transports and scheduler take about
    a third off the gateway's CPU per proxied request (bench/gateway.py); else the default loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def run(settings: GatewaySettings) -> None:
    """Serve until interrupted (the `chaos gateway` command)."""
    host, port = settings.host_port
    pools = ", ".join(f"{r.pool}/{r.name}={r.url}" for r in settings.replicas)
    log.info("gateway on %s:%d over %s (hmac %s)", host, port, pools, "on" if settings.hmac_key else "off")
    try:
        web.run_app(build_app(settings), host=host, port=port, access_log=None, print=None,
                    handle_signals=True, loop=_new_loop())
    except OSError as e:
        raise ConfigError(f"gateway listen address {settings.listen}: {e.strerror or e}") from None
