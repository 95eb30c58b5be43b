"""Faults by name, as `chaos fault inject` and game-day plans say them: a kind, where (a target or a
proxy) and its parameters (checked by chaos.faults.params first); anything unknown is one ConfigError line."""
from __future__ import annotations

from typing import Any

from chaos.errors import ConfigError
from chaos.faults.params import check as check_params

NETWORK = ("latency", "jitter", "timeout", "reset-peer", "bandwidth", "slicer", "limit-data", "slow-close", "down",
           "rank-link-cut")
TARGET = ("restart", "kill", "pause", "stop", "rank-freeze")
HTTP = ("http-error", "oom-error", "slow-headers", "slow-first-token", "stream-stall", "stream-cut", "error-chunk",
        "malformed-chunk", "duplicate-chunk", "rewrite-model", "header-fault", "hang", "corrupt-answer")


def _http_fault(env: Any, kind: str, target: str | None, proxy: str | None, params: dict[str, Any]) -> Any:
    from chaos.faults import http
    from chaos.faults.proxy_admin import admins_for

    admins = admins_for(env)
    if not admins:
        raise ConfigError(f"environment {env.name!r} declares no fault_proxies; start one with `chaos proxy` and list it")
    name = proxy or (env.target(target).fault_proxy if target else None)
    if not name:
        raise ConfigError(f"fault {kind} needs --proxy (fault proxies: {', '.join(admins)}) or --target")
    if name not in admins:
        raise ConfigError(f"--proxy {name!r}: environment {env.name!r} has no fault proxy of that name "
                          f"(fault proxies: {', '.join(admins)})")
    return getattr(http, kind.replace("-", "_"))(admins[name], **params)


def build_fault(env: Any, kind: str, *, target: str | None, proxy: str | None, params: dict[str, Any],
                run_id: str = "cli") -> Any:
    """Build a fault from the CLI's words; ConfigError on anything unknown, before anything is touched."""
    from chaos import faults
    from chaos.targets import make_target

    params = check_params(kind, params)  # on every kind of target, and in a dry run
    if kind in HTTP:
        return _http_fault(env, kind, target, proxy, params)
    if kind in NETWORK:
        if env.toxiproxy is None:
            raise ConfigError(f"environment {env.name!r} has no toxiproxy section")
        if not proxy:
            raise ConfigError(f"fault {kind} needs --proxy (proxies: {', '.join(p.name for p in env.toxiproxy.proxies)})")
        if proxy not in {p.name for p in env.toxiproxy.proxies}:
            raise ConfigError(f"--proxy {proxy!r}: environment {env.name!r} defines no such toxiproxy proxy")
        fn = getattr(faults, kind.replace("-", "_"))
        return fn(env.toxiproxy.api, proxy, **params)
    if kind in TARGET:
        if not target:
            raise ConfigError(f"fault {kind} needs --target (targets: {', '.join(t.name for t in env.targets)})")
        cfg = env.target(target)
        if cfg.kind != "docker":
            raise ConfigError(f"--target {target!r} is a process target: only the harness that supervises it can hurt it")
        t = make_target(cfg, run_id=run_id, state_dir=env.state_dir, env=env)
        return getattr(faults, kind.replace("-", "_"))(t, **params)
    raise ConfigError(f"unknown fault {kind!r}; known: {', '.join(NETWORK + TARGET + HTTP)}")
