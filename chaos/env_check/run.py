"""`chaos env check --probe`: is each part an environment names the thing the file says it is?

Identity, not reachability: any web server answers HTTP, so each part must answer as itself. The
API lists the configured model; a fault proxy answers its health and accepts the configured token;
a replica answers /health and lists a model; a container exists on its engine with the restart
policy the file claims; each DCGM exporter serves DCGM series for the GPUs its host's targets
name; Toxiproxy lists every configured proxy; a replica with the engine plugin on runs a vLLM the
plugin supports (its /version). One line per part, a failure saying what was expected and what came
instead, never a traceback. Parts the environment does not have are not listed. An embedded stack that is not up is
said to be so, not reported as broken hosts.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chaos.env import Environment
from chaos.env_check.docker import check_containers
from chaos.env_check.engine_plugin import check_engine_plugin, plugin_targets
from chaos.env_check.gpu import check_gpu_telemetry
from chaos.env_check.http import Probe, check_api, check_fault_proxy, check_gateway_admin, check_replica, check_toxiproxy
from chaos.env_check.monitoring import check_monitoring


def probe(env: Environment, *, timeout: float = 3.0, docker: Callable[[str | None], Any] | None = None,
          worker: Callable[[str, str | None, float], tuple[bool, str]] | None = None) -> list[Probe]:
    """Check every part of `env` once, in the order a request travels; `docker(host)` makes an engine's
    client (chaos.targets.docker.client_for), `worker` checks a load host (a seam for tests)."""
    if worker is None:
        from chaos.load.placement import check_worker_host

        worker = check_worker_host
    out = [check_api(env, timeout)]
    if env.endpoints.gateway_admin:
        out.append(check_gateway_admin(env, env.endpoints.gateway_admin, timeout))
    if env.endpoints.gateway_metrics:  # a team gateway's own Prometheus page (chaos.verify.gateway_state)
        page = env.endpoints.gateway_metrics
        out.append(check_gateway_admin(env, page, timeout, page=page, what="gateway metrics"))
    if env.toxiproxy is not None:
        out += check_toxiproxy(env, timeout)
    out += [check_fault_proxy(env, fp, timeout) for fp in env.fault_proxies]
    if env.load.workers and env.load.worker_host not in (None, "", "local"):
        ok, detail = worker(env.load.worker_host or "", env.load.worker_python, timeout)
        out.append(Probe("load host", env.load.worker_host or "", ok, detail))
    out += [check_replica(t, timeout) for t in env.targets]
    out += [check_engine_plugin(t, timeout, env.state_dir) for t in plugin_targets(env)]  # its vLLM is one the plugin supports
    out += check_containers(env, timeout, client=docker)
    out += check_gpu_telemetry(env, timeout)  # each exporter, and each target's named GPUs on its page
    out += check_monitoring(env, timeout)  # prometheus, alertmanager, every rule file loads
    return out


def format_probes(env: Environment, probes: list[Probe]) -> list[str]:
    """One line per part; failures say what was expected. An embedded stack that is down is one hint."""
    lines = [f"{'ok' if p.ok else 'FAIL':<4}  {p.what}: {p.address} ({p.detail})" for p in probes]
    down = [p for p in probes if not p.what.startswith("docker engine")]
    if env.embedded != "none" and down and not any(p.ok for p in down):
        lines.append(f"note: {env.name} is an embedded stack and it is not running: `chaos env up --env {env.name}` "
                     "starts it (a pytest run starts it by itself)")
    return lines
