"""`chaos cleanup` and `chaos fault inject|ledger`: undo leftovers, inject one fault by hand (or plan it)."""
from __future__ import annotations

import json
import time
from typing import Any

import typer

from chaos.commands import ENV_OPTION
from chaos.errors import ConfigError
from chaos.faults.build import HTTP, NETWORK, TARGET, build_fault

fault_app = typer.Typer(help="Inject faults by hand and inspect the fault ledger.", no_args_is_help=True)


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


def register(app: typer.Typer) -> None:
    @app.command("cleanup")
    def cleanup_cmd(env: str = ENV_OPTION,
                    state_dir: str | None = typer.Option(None, "--state-dir", help="state directory (instead of --env)"),
                    force: bool = typer.Option(False, "--force", help="also undo faults of live harness processes")) -> None:
        """Undo every outstanding fault in the ledger and reap orphaned targets (idempotent)."""
        from chaos.env import load
        from chaos.faults.ledger import cleanup

        subject: Any = state_dir if state_dir else load(env)
        done = cleanup(subject, force=force)
        for line in done:
            typer.echo(line)
        typer.echo(f"chaos: cleanup: {len(done)} action(s)")

    @fault_app.command("inject")
    def inject(kind: str = typer.Argument(..., help=f"one of: {', '.join(NETWORK + TARGET + HTTP)}"),
               env: str = ENV_OPTION, target: str | None = typer.Option(None, "--target"),
               proxy: str | None = typer.Option(None, "--proxy", help="toxiproxy proxy, or fault proxy for HTTP kinds"),
               param: list[str] = typer.Option([], "--param", help="KEY=VALUE, repeatable (e.g. latency=500)"),
               duration: float = typer.Option(10.0, "--duration", help="seconds to hold the fault"),
               seed: int | None = typer.Option(None, "--seed"),
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
    def ledger_cmd(env: str = ENV_OPTION) -> None:
        """List faults injected and not yet reverted."""
        from chaos.env import load
        from chaos.faults.ledger import Ledger

        for rec in Ledger(load(env).state_dir).outstanding():
            typer.echo(json.dumps({k: rec[k] for k in ("id", "ts", "owner", "fault", "undo")}, default=str))

    app.add_typer(fault_app, name="fault")
