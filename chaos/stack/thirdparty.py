"""Third-party gateways in the embedded stack: nginx and HAProxy from their Debian packages, the
LiteLLM proxy from PyPI (`make setup-litellm`).

The environment's `gateway.kind` picks one; its config is rendered here from the environment (the
replicas' addresses, the canary's share from `breaker.canary_weight`, the gateway's own ejection
settings), written to the state dir and checked by the gateway itself (`nginx -t`, `haproxy -c`)
before it starts (LiteLLM has no such check: its start is). None has an admin API: the breaker verdict
judges them black-box, from the
replica-side fault proxies' logs. Their ejection semantics, which the tests hold them to, are in
shared/reference/gateways.md.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from chaos.errors import StackError

# An environment as the bridge hands it in (chaos.env.Environment): the renderers read its targets, toxiproxy,
# gateway, breaker and endpoints fields, and the stand-ins do not import the harness's schema to name its type.
Environment = Any

# weights are integers in both: the canary's share is canary_weight to within 1 %
WEIGHT_SCALE = 100


@dataclass(frozen=True)
class Upstream:
    name: str
    pool: str
    address: str     # HOST:PORT the gateway connects to (the replica's serve proxy when it has one)
    weight: int


def upstreams(env: Environment) -> list[Upstream]:
    """One upstream per target, weighted so the canary pool gets `breaker.canary_weight` of the traffic."""
    proxies = {p.name: p.listen for p in (env.toxiproxy.proxies if env.toxiproxy else [])}
    canaries = [t for t in env.targets if t.pool == "canary"]
    others = [t for t in env.targets if t.pool != "canary"]
    share = env.breaker.canary_weight if canaries and others else (1.0 if canaries else 0.0)
    out = []
    for t in env.targets:
        group, part = (canaries, share) if t.pool == "canary" else (others, 1.0 - share)
        weight = max(1, round(WEIGHT_SCALE * part / len(group)))
        out.append(Upstream(t.name, t.pool, proxies[t.serve_proxy] if t.serve_proxy else f"{t.host}:{t.port}", weight))
    return out


REPO = Path(__file__).resolve().parents[2]
LITELLM_VERSION = "1.108.7"  # the newest whose pinned proxy extras PyPI serves here (gateways.md names 1.110.2)


@dataclass(frozen=True)
class GatewayProcess:
    """How to run the gateway: its command line, extra environment and an unauthenticated health path."""
    command: list[str]
    environ: dict[str, str] = field(default_factory=dict)
    health_path: str = "/health"


def litellm_binary() -> str | None:
    """$CHAOS_LITELLM, else the venv `make setup-litellm` makes, else `litellm` on PATH."""
    for candidate in (os.environ.get("CHAOS_LITELLM"), str(REPO / ".tools" / "litellm" / "venv" / "bin" / "litellm")):
        if candidate and Path(candidate).is_file() and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("litellm")


def _binary(name: str) -> str:
    found = shutil.which(name) or next((p for p in (f"/usr/sbin/{name}",) if Path(p).exists()), None)
    if not found:
        raise StackError(f"gateway.kind {name}: no `{name}` binary on PATH or in /usr/sbin "
                         f"(Debian: apt-get install {name})")
    return found


def render_nginx(env: Environment, state_dir: Path) -> str:
    gw = env.gateway
    assert gw is not None
    s = gw.nginx
    tmp = state_dir / "nginx"
    servers = "\n".join(f"    server {u.address} weight={u.weight} max_fails={s.max_fails} "
                        f"fail_timeout={s.fail_timeout_s}s;  # {u.name}" for u in upstreams(env))
    # the pool header the env's breaker policy names: the LAST server tried ($upstream_addr lists each)
    named = "\n".join(f'    "~(^|, ){re.escape(u.address)}$" "{u.pool}/{u.name}";' for u in upstreams(env))
    temp = "\n".join(f"  {k}_temp_path {tmp}/{k};" for k in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
    return f"""# rendered by llm-chaos from environment {env.name}: do not edit
user root;
worker_processes 1;          # one worker: one failure count per server (no zone sharing needed)
daemon off;
pid {tmp}/nginx.pid;
error_log stderr notice;
events {{ worker_connections 1024; }}
http {{
  log_format chaos '$msec $request_id "$request" $status up=$upstream_addr up_status=$upstream_status';
  access_log {tmp}/access.log chaos;
{temp}
  map $upstream_addr $served_by {{
    default "";
{named}
  }}
  upstream llm {{
    zone llm 64k;
{servers}
    keepalive 32;
  }}
  server {{
    listen {gw.listen};
    location / {{
      proxy_pass http://llm;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_read_timeout 300s;
      proxy_next_upstream {" ".join(s.next_upstream) or "off"};
      add_header {env.breaker.pool_header} $served_by always;
      add_header Cache-Control no-store always;   # the seed's rule: no answer is cached
    }}
  }}
}}
"""


def render_haproxy(env: Environment, state_dir: Path) -> str:
    gw = env.gateway
    assert gw is not None
    s = gw.haproxy
    inter_ms = int(s.check_inter_s * 1000)
    ups = upstreams(env)
    servers = "\n".join(f"  server {u.name} {u.address} id {i} weight {u.weight}" for i, u in enumerate(ups, 1))
    named = "\n".join(f"  http-response set-header {env.breaker.pool_header} {u.pool}/{u.name} if {{ srv_id {i} }}"
                       for i, u in enumerate(ups, 1))
    return f"""# rendered by llm-chaos from environment {env.name}: do not edit
global
  maxconn 4096
defaults
  mode http
  timeout connect 2s
  timeout client 300s
  timeout server 300s
frontend llm_in
  bind {gw.listen}
  default_backend llm
backend llm
  balance roundrobin
  option httpchk GET /health
  option redispatch
  default-server check inter {inter_ms}ms fastinter {max(100, inter_ms // 2)}ms fall {s.fall} rise {s.rise} observe layer7 error-limit {s.error_limit} on-error {s.on_error}
{named}
  http-response set-header Cache-Control no-store
{servers}
"""


def render_litellm(env: Environment) -> str:
    """One deployment per replica in one model group named as the clients ask (endpoints.model);
    `model_info.id` is "<pool>/<replica>", which LiteLLM returns in `x-litellm-model-id`."""
    gw = env.gateway
    assert gw is not None
    s = gw.litellm
    deployments = [{"model_name": env.endpoints.model, "model_info": {"id": f"{u.pool}/{u.name}"},
                    "litellm_params": {"model": f"openai/{env.endpoints.model}", "api_base": f"http://{u.address}/v1",
                                       "api_key": "unused", "weight": u.weight}} for u in upstreams(env)]
    config = {"model_list": deployments,
              "router_settings": {"routing_strategy": s.routing_strategy, "num_retries": s.num_retries,
                                  "allowed_fails": s.allowed_fails, "cooldown_time": s.cooldown_time_s,
                                  "timeout": s.timeout_s},
              "litellm_settings": {"drop_params": True, "telemetry": False},
              "general_settings": {"master_key": env.endpoints.api_key}}
    return f"# rendered by llm-chaos from environment {env.name}: do not edit\n" + yaml.safe_dump(config, sort_keys=False)


def _litellm(env: Environment, state_dir: Path) -> GatewayProcess:
    key = env.endpoints.api_key
    if not key or not key.startswith("sk-"):
        raise StackError("gateway.kind litellm: endpoints.api_key: expected the proxy's master key (sk-...); "
                         "LiteLLM refuses to start without one")
    binary = litellm_binary()
    if binary is None:
        raise StackError(f"gateway.kind litellm: no `litellm` binary (`make setup-litellm` installs "
                         f"litellm[proxy]=={LITELLM_VERSION} into .tools/litellm/venv; or set CHAOS_LITELLM)")
    assert env.gateway is not None
    conf = state_dir / "litellm.yaml"
    conf.write_text(render_litellm(env))
    host, port = env.gateway.listen.rsplit(":", 1)
    # one worker: without Redis each worker would keep cooldowns of its own
    return GatewayProcess([binary, "--config", str(conf), "--host", host, "--port", port, "--num_workers", "1"],
                          {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}, "/health/liveliness")


def gateway_process(env: Environment, state_dir: Path) -> GatewayProcess:
    """Write the gateway's config into the state dir, have the gateway check it, say how to run it."""
    gw = env.gateway
    assert gw is not None and gw.kind != "reference"
    state_dir = state_dir.resolve()
    if gw.kind == "litellm":
        return _litellm(env, state_dir)
    binary = _binary(gw.kind)
    if gw.kind == "nginx":
        tmp = state_dir / "nginx"
        tmp.mkdir(parents=True, exist_ok=True)
        conf = tmp / "nginx.conf"
        conf.write_text(render_nginx(env, state_dir))
        cmd, check = [binary, "-p", str(tmp), "-e", "stderr", "-c", str(conf)], ["-t", "-q"]
    else:
        conf = state_dir / "haproxy.cfg"
        conf.write_text(render_haproxy(env, state_dir))
        cmd, check = [binary, "-db", "-f", str(conf)], ["-c", "-q"]
    probe = subprocess.run(cmd + check, capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        first = (probe.stderr or probe.stdout).strip().splitlines()
        raise StackError(f"gateway.kind {gw.kind}: {conf} was refused by {gw.kind}: "
                         f"{first[-1] if first else f'exit {probe.returncode}'}")
    return GatewayProcess(cmd)
