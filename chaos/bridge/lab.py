"""The staging the lab stands in for, deployed from an environment file (`chaos lab up --env lab`).

A team's staging runs before the harness does, on machines the harness does not own; so does this:

    GPU host  (chaos-lab-gpu,  10.231.1.2): the replica containers on its own Docker engine, and a
                                             fault proxy (`chaos proxy`) in front of each one
    edge host (chaos-lab-edge, 10.231.3.2): Toxiproxy with the environment's proxies, the gateway

The harness then reaches them only as it reaches staging: Docker over SSH for the targets, HTTP to
the hosts' addresses for the rest (`embedded: none`). Each part runs on the lab host whose address
the environment gives it; an address outside the lab's hosts is refused before anything starts.
What a part needs from here (the environment file, a fault proxy's token) is put onto its host, and
what it writes (the fault proxies' and simulators' request logs) stays there, on the host's own
filesystem: the harness reads it over the network or not at all. The deployment starts the
replicas over SSH, as the harness reaches them, and copies images with the GPU host's own docker.
"""
from __future__ import annotations

import os
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from chaos.env import Environment
from chaos.errors import ConfigError, StackError
from chaos.shared import proc as _proc
from chaos.stack import lab_hostfs as hostfs
from chaos.stack.lab import GPU, HOSTS, Host, Lab
from chaos.targets.startup import StartupWatch, wait_all_healthy

RUN_ID = "lab-staging"  # the deployment's label on its containers: not the harness's run


def host_of(address: str, what: str) -> Host:
    """The lab host that owns HOST:PORT or a URL's host (ConfigError naming `what` otherwise)."""
    host = address.split("://", 1)[-1].split("/", 1)[0].rsplit(":", 1)[0]
    for h in HOSTS:
        if h.address == host:
            return h
    raise ConfigError(f"{what}: {host} is not a lab host ({', '.join(f'{h.name} {h.address}' for h in HOSTS)})")


def check(env: Environment) -> None:
    """Refuse an environment the lab cannot deploy, before anything starts."""
    if env.embedded != "none":
        raise ConfigError(f"{env.source}: embedded: the lab deploys a staging-like environment (embedded: none)")
    if env.toxiproxy is None:
        raise ConfigError(f"{env.source}: toxiproxy: the lab's staging has a Toxiproxy on the edge host")
    tox = host_of(env.toxiproxy.api, "toxiproxy.api")
    for p in env.toxiproxy.proxies:
        if host_of(p.listen, f"toxiproxy.proxies[{p.name}].listen") != tox:
            raise ConfigError(f"toxiproxy.proxies[{p.name}].listen: must be on the Toxiproxy's host {tox.address}")
        host_of(p.upstream, f"toxiproxy.proxies[{p.name}].upstream")
    for t in env.targets:
        if t.kind != "docker":
            raise ConfigError(f"targets[{t.name}].kind: the lab's replicas are containers (docker)")
        if host_of(t.host, f"targets[{t.name}].host").name != "gpu":
            raise ConfigError(f"targets[{t.name}].host: replicas run on the GPU host")
    for f in env.fault_proxies:
        where = host_of(f.listen, f"fault_proxies[{f.name}].listen")
        if f.admin_listen and host_of(f.admin_listen, f"fault_proxies[{f.name}].admin_listen") != where:
            raise ConfigError(f"fault_proxies[{f.name}].admin_listen: must be on the proxy's host {where.address}")
        if not f.token_file:
            raise ConfigError(f"fault_proxies[{f.name}].token_file: the lab writes each proxy's token to a file")
    if env.gateway is not None:
        host_of(env.gateway.listen, "gateway.listen")


def deploy(lab: Lab, env: Environment, log: Callable[[str], object] = lambda s: None, timeout: float | None = None) -> None:
    """Start what `env` describes on the lab's hosts (idempotent) and wait until it serves."""
    from chaos.faults.tokens import token_file
    from chaos.observe.completion import wait_completion
    from chaos.stack.faultproxy import find_binary as faultproxy_binary
    from chaos.stack.faultproxy import proxy_argv
    from chaos.stack.toxiproxy import ToxiproxyServer, split_api
    from chaos.stack.toxiproxy import find_binary as toxiproxy_binary

    check(env)
    timeout = timeout or env.slas.cold_start_s
    state = Path(env.state_dir)
    state.mkdir(parents=True, exist_ok=True)
    # the GPU host's directory at the state's path is its own: what the simulators log there (their
    # containers mount it) starts empty and stays on that host, whatever this machine's disk has there
    hostfs.own_dir(GPU, str(state.resolve()))
    assert env.toxiproxy is not None
    host, port = split_api(env.toxiproxy.api)
    lab.spawn("toxiproxy", [toxiproxy_binary(), "-host", host, "-port", str(port)], host_of(host, "toxiproxy.api"))
    toxiproxy = ToxiproxyServer(host, port)
    lab.wait_up("toxiproxy", toxiproxy.client().ping, 15)
    toxiproxy.create_proxies(env.toxiproxy.proxies)
    log(f"toxiproxy on {env.toxiproxy.api}: {len(env.toxiproxy.proxies)} proxies")
    watch = _start_replicas(lab, env, timeout)
    log(f"replicas on the GPU host: {', '.join(t.name for t in env.targets)}")
    binary = faultproxy_binary()
    for f in env.fault_proxies:
        assert f.token_file is not None
        where = host_of(f.listen, f"fault_proxies[{f.name}]")
        secret = _give_token(where, token_file(f.token_file).file)
        cmd = proxy_argv(binary, listen=f.listen, upstream=f.upstream, name=f.name, token_file=secret,
                         request_log=proxy_log(f.name), admin_listen=f.admin_listen, mirror_refusal=f.mirror_refusal)
        _start_proxy(lab, f"faultproxy-{f.name}", cmd, where, f.admin_url)
    if env.fault_proxies:
        log(f"fault proxies: {', '.join(f'{f.name} ({f.listen})' for f in env.fault_proxies)}")
    if env.gateway is not None:
        where = host_of(env.gateway.listen, "gateway.listen")
        hostfs.put(where, env.source, Path(env.source).read_bytes(), 0o644)  # the file it is deployed from
        lab.spawn("gateway", [sys.executable, "-m", "chaos.cli", "gateway", "--env", env.source], where)
        log(f"gateway on {env.gateway.listen}")
    with _lab_ssh(lab):  # the watch reads the replicas' restarts and logs over SSH
        if wait_completion(env.endpoints.api, env.endpoints.model, timeout, api_key=env.endpoints.api_key,
                           check=watch.check) is None:
            troubled = watch.troubled()
            raise StackError(f"lab: no completion through {env.endpoints.api} within {timeout:g} s; logs in {lab.state}"
                             + (f"; {troubled}" if troubled else ""))


def _start_proxy(lab: Lab, name: str, cmd: list[str], where: Host, url: str, tries: int = 3) -> None:
    """Spawn a fault proxy and wait until its admin health answers. A deploy is up only when every
    proxy is: the API's one completion can pass through another replica's proxy while this one is dead
    (CI: a redeploy's proxy gone, its replica's share of completions failing). One that exits at start
    (its port still held by the one just stopped) is started again, `tries` times at most."""
    for attempt in range(1, tries + 1):
        pid = lab.spawn(name, cmd, where)
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and _proc.alive(pid) and not _answers(f"{url}/_chaos/health"):
            time.sleep(0.2)
        if _answers(f"{url}/_chaos/health"):
            return
        if attempt < tries:
            lab.stop(name)
            time.sleep(1.0)
    lab.wait_up(name, lambda: _answers(f"{url}/_chaos/health"), 1.0)  # raises, naming its log's last line


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except (OSError, ValueError):
        return False


def _give_token(h: Host, path: str | None) -> str:
    """Put the harness's token file onto host `h` at the same path (the harness keeps its copy to
    authenticate); the path."""
    secret = Path(path or "").resolve()
    hostfs.put(h, str(secret), secret.read_bytes())
    return str(secret)


def proxy_log(name: str) -> str:
    """Where the fault proxy `name` writes its request log: on its own host, never here."""
    return f"{hostfs.LOG_DIR}/{name}.proxy.jsonl"


def undeploy(lab: Lab, env: Environment) -> list[str]:
    """Stop what deploy() started for `env` (the hosts stay up); what was stopped."""
    done = [n for n in ("gateway", *(f"faultproxy-{f.name}" for f in env.fault_proxies), "toxiproxy") if lab.stop(n)]
    for t in env.targets:
        if lab.gpu_docker("rm", "-f", t.container_name or f"chaos-{RUN_ID}-{t.name}").returncode == 0:
            done.append(f"container {t.container_name}")
    return done


def _start_replicas(lab: Lab, env: Environment, timeout: float) -> StartupWatch:
    """Start the replica containers and wait for their /health; the watch that fails the deploy if one cannot start."""
    from chaos.targets import admin_token, make_target

    _give_token(GPU, admin_token(env.state_dir).file)  # the simulators' admin token, in the state they mount
    targets = {}
    with _lab_ssh(lab):
        for cfg in env.targets:
            assert cfg.image is not None
            lab.load_image(cfg.image)
            t = make_target(cfg, run_id=RUN_ID, state_dir=env.state_dir, env=env)  # Docker over SSH (cfg's own)
            t.start()
            targets[cfg.name] = t
        watch = StartupWatch(targets, where=f"lab {env.name!r}")
        wait_all_healthy(targets, timeout, watch)
    return watch


@contextmanager
def _lab_ssh(lab: Lab) -> Iterator[None]:
    """SSH with the lab's key and known hosts while the deployment reaches the GPU host's engine."""
    before = os.environ.get("CHAOS_SSH_CONFIG")
    os.environ["CHAOS_SSH_CONFIG"] = str(lab.ssh_config)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CHAOS_SSH_CONFIG", None)
        else:
            os.environ["CHAOS_SSH_CONFIG"] = before
