"""`chaos env check --probe`: connect to everything an environment names, one line per failure.

Every endpoint, gateway admin, Toxiproxy (and each proxy the file names), fault proxy, load host
(an ssh:// one logs in and imports the worker), replica and Docker engine is tried once with a short
timeout; a failure says which host and what failed, never
a traceback. An embedded stack that is not up is said to be so, not reported as broken hosts.
"""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

from chaos.env import Environment


@dataclass(frozen=True)
class Probe:
    what: str
    address: str
    ok: bool
    detail: str


def _http(url: str, timeout: float) -> tuple[bool, str, bytes]:
    """(answered, detail, body): any HTTP answer counts as reachable; the status is the detail."""
    try:
        with urllib.request.urlopen(urllib.request.Request(url, method="GET"), timeout=timeout) as r:
            return True, f"HTTP {r.status}", r.read(65536)
    except urllib.error.HTTPError as e:
        return True, f"HTTP {e.code}", b""
    except (urllib.error.URLError, OSError, ValueError) as e:
        reason = getattr(e, "reason", e)
        return False, f"{type(reason).__name__}: {reason}".replace("\n", " "), b""


def _docker(host: str | None, timeout: float) -> tuple[bool, str]:
    from chaos.errors import ChaosError
    from chaos.targets.docker import client_for

    try:
        client = client_for(host)
        client.api.timeout = timeout
        client.ping()
        return True, f"engine {client.version().get('Version', '?')}"
    except ChaosError as e:
        return False, str(e).splitlines()[0]
    except Exception as e:  # the SDK raises many kinds (ssh, socket, API); each is one line here
        return False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def probe(env: Environment, *, timeout: float = 3.0,
          docker: Callable[[str | None, float], tuple[bool, str]] = _docker,
          worker: Callable[[str, str | None, float], tuple[bool, str]] | None = None) -> list[Probe]:
    """Try every part of `env` once; the results in the order a request travels."""
    out: list[Probe] = []
    if worker is None:
        from chaos.load.placement import check_worker_host

        worker = check_worker_host

    def http(what: str, url: str, path: str = "") -> bytes:
        ok, detail, body = _http(url.rstrip("/") + path, timeout)
        out.append(Probe(what, url, ok, detail))
        return body

    http("api endpoint", env.endpoints.api, "/v1/models")
    if env.endpoints.gateway_admin:
        http("gateway admin", env.endpoints.gateway_admin, "/metrics")
    if env.toxiproxy is not None:
        body = http("toxiproxy", env.toxiproxy.api, "/proxies")
        if out[-1].ok:
            try:
                have = set(json.loads(body or b"{}"))
            except ValueError:
                have = set()
            for p in env.toxiproxy.proxies:
                out.append(Probe(f"toxiproxy proxy {p.name}", p.listen, p.name in have,
                                 "present" if p.name in have else f"missing on {env.toxiproxy.api}"))
    for fp in env.fault_proxies:
        http(f"fault proxy {fp.name}", fp.admin_url, "/_chaos/health")
    if env.load.workers and env.load.worker_host not in (None, "", "local"):
        ok, detail = worker(env.load.worker_host, env.load.worker_python, timeout)
        out.append(Probe("load host", env.load.worker_host or "", ok, detail))
    engines: set[str | None] = set()  # each engine once, however many targets it runs
    for t in env.targets:
        http(f"replica {t.name}", f"http://{t.host}:{t.port}", "/health")
        if t.kind == "docker" and t.docker_host not in engines:
            engines.add(t.docker_host)
            ok, detail = docker(t.docker_host, timeout)
            out.append(Probe("docker engine", t.docker_host or "local", ok, detail))
    return out


def format_probes(env: Environment, probes: list[Probe]) -> list[str]:
    """One line per part; failures say host and cause. An embedded stack that is down is one hint."""
    lines = [f"{'ok' if p.ok else 'FAIL':<4}  {p.what}: {p.address} ({p.detail})" for p in probes]
    if env.embedded != "none" and probes and not any(p.ok for p in probes if p.what != "docker engine"):
        lines.append(f"note: {env.name} is an embedded stack and it is not running: `chaos env up --env {env.name}` "
                     "starts it (a pytest run starts it by itself)")
    return lines
