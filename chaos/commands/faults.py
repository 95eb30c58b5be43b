"""`chaos cleanup` and `chaos fault inject|ledger`: undo leftovers, inject one fault by hand (or plan it)."""
from __future__ import annotations

import json
import signal as _signal
import time
from typing import Any, Optional

import typer

from chaos.errors import ConfigError

fault_app = typer.Typer(help="Inject faults by hand and inspect the fault ledger.", no_args_is_help=True)

NETWORK = ("latency", "jitter", "timeout", "reset-peer", "bandwidth", "slicer", "limit-data", "slow-close", "down",
           "rank-link-cut")
TARGET = ("restart", "kill", "pause", "stop", "rank-freeze")
HTTP = ("http-error", "oom-error", "slow-headers", "slow-first-token", "stream-stall", "stream-cut", "error-chunk",
        "malformed-chunk", "duplicate-chunk", "rewrite-model", "header-fault", "hang")


def _params(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--param {item!r}: expected KEY=VALUE")
        try:
            out[key.replace("-", "_")] = json.loads(raw)
        except ValueError:
            out[key.replace("-", "_")] = raw
    return out


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
    fn = getattr(http, kind.replace("-", "_"))
    try:
        return fn(admins[name], **params)
    except TypeError as e:
        raise ConfigError(f"fault {kind}: bad --param: {e}") from None


def build_fault(env: Any, kind: str, *, target: str | None, proxy: str | None, params: dict[str, Any],
                run_id: str = "cli") -> Any:
    """Build a fault from the CLI's words; ConfigError on anything unknown."""
    from chaos import faults
    from chaos.targets import make_target

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
        if "signal" in params:
            params["sig"] = getattr(_signal, str(params.pop("signal")).upper())
        return getattr(faults, kind.replace("-", "_"))(t, **params)
    raise ConfigError(f"unknown fault {kind!r}; known: {', '.join(NETWORK + TARGET + HTTP)}")


def register(app: typer.Typer) -> None:
    @app.command("cleanup")
    def cleanup_cmd(env: Optional[str] = typer.Option(None, "--env", help="environment name or file"),
                    state_dir: Optional[str] = typer.Option(None, "--state-dir", help="state directory (instead of --env)"),
                    force: bool = typer.Option(False, "--force", help="also undo faults of live harness processes")) -> None:
        """Undo every outstanding fault in the ledger and reap orphaned targets (idempotent)."""
        from chaos.env import load
        from chaos.faults.ledger import cleanup

        subject: Any = state_dir if state_dir else load(env or "local")
        done = cleanup(subject, force=force)
        for line in done:
            typer.echo(line)
        typer.echo(f"chaos: cleanup: {len(done)} action(s)")

    @fault_app.command("inject")
    def inject(kind: str = typer.Argument(..., help=f"one of: {', '.join(NETWORK + TARGET + HTTP)}"),
               env: str = typer.Option("local", "--env"), target: Optional[str] = typer.Option(None, "--target"),
               proxy: Optional[str] = typer.Option(None, "--proxy", help="toxiproxy proxy, or fault proxy for HTTP kinds"),
               param: list[str] = typer.Option([], "--param", help="KEY=VALUE, repeatable (e.g. latency=500)"),
               duration: float = typer.Option(10.0, "--duration", help="seconds to hold the fault"),
               seed: Optional[int] = typer.Option(None, "--seed"),
               dry_run: bool = typer.Option(False, "--dry-run", help="print the plan; touch nothing"),
               allow_destructive: bool = typer.Option(False, "--allow-destructive")) -> None:
        """Inject one fault, hold it for --duration, then revert (Ctrl-C reverts too)."""
        from chaos.env import load
        from chaos.faults.base import Policy
        from chaos.faults.ledger import install_signal_handlers

        e = load(env)
        params = _params(param)
        if seed is not None:
            params["seed"] = seed
        fault = build_fault(e, kind, target=target, proxy=proxy, params=params)
        fault.using(Policy.for_env(e, allow_destructive=allow_destructive, dry_run=dry_run))
        if dry_run:
            typer.echo(json.dumps(fault.inject(), indent=2, default=str))
            return
        install_signal_handlers()
        with fault:
            typer.echo(json.dumps(fault.describe(), default=str))
            time.sleep(duration)
        typer.echo(f"chaos: {kind} reverted after {duration:g}s")

    @fault_app.command("ledger")
    def ledger_cmd(env: str = typer.Option("local", "--env")) -> None:
        """List faults injected and not yet reverted."""
        from chaos.env import load
        from chaos.faults.ledger import Ledger

        for rec in Ledger(load(env).state_dir).outstanding():
            typer.echo(json.dumps({k: rec[k] for k in ("id", "ts", "owner", "fault", "undo")}, default=str))

    app.add_typer(fault_app, name="fault")
