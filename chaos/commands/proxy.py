"""`chaos proxy`: run the HTTP/SSE fault proxy in front of any OpenAI-compatible server."""
from __future__ import annotations

import os
import re
from pathlib import Path

import typer

from chaos.errors import ConfigError


def _token_file(explicit: str | None, listen: str, state_dir: str) -> str | None:
    """The token file to hand the proxy: the one given, none when $CHAOS_PROXY_TOKEN is set, else a new one."""
    if explicit:
        if not Path(explicit).is_file():
            raise ConfigError(f"--token-file {explicit}: no such file")
        return explicit
    if os.environ.get("CHAOS_PROXY_TOKEN"):
        return None
    from chaos.faults.tokens import token_file

    return token_file(Path(state_dir) / f"faultproxy-{listen.replace(':', '-')}.token").file


def _default_log(state_dir: str, name: str) -> str:
    """STATE_DIR/NAME.proxy.jsonl, the folder made if need be."""
    d = Path(state_dir)
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--state-dir {state_dir}: cannot create it for the request log ({e.strerror})") from None
    return str(d / f"{re.sub(r'[^A-Za-z0-9._-]', '-', name)}.proxy.jsonl")


def register(app: typer.Typer) -> None:
    @app.command("proxy")
    def proxy(listen: str = typer.Option(..., "--listen", help="HOST:PORT to listen on"),
              upstream: str = typer.Option(..., "--upstream", help="the server, http://HOST:PORT"),
              name: str | None = typer.Option(None, "--name", help="replica name written in the request log"),
              token_file: str | None = typer.Option(None, "--token-file",
                                                       help="admin token file (else $CHAOS_PROXY_TOKEN, else a new file)"),
              request_log: str | None = typer.Option(
                  None, "--request-log",
                  help="JSONL request log to append to, served to the harness at GET /_chaos/log "
                       "(default: STATE_DIR/NAME.proxy.jsonl)"),
              state_dir: str = typer.Option(".state", "--state-dir",
                                            help="where a generated token file and the request log go"),
              admin_listen: str | None = typer.Option(
                  None, "--admin-listen", help="HOST:PORT for the admin API and the request log only (default: --listen)"),
              mirror_refusal: bool = typer.Option(
                  False, "--mirror-refusal",
                  help="refuse connections while the upstream refuses them (needs --admin-listen)")) -> None:
        """Run chaos-faultproxy in the foreground (rules via its admin API or `chaos fault inject`)."""
        from chaos.stack.faultproxy import find_binary, proxy_argv

        binary = find_binary()
        tf = _token_file(token_file, listen, state_dir)
        if tf:
            typer.echo(f"chaos: fault proxy admin token in {tf} (give it to the environment as token_file)", err=True)
        # always a log: it is the replica side's evidence the harness reads over HTTP (accounting, attribution)
        log = request_log or _default_log(state_dir, name or listen)
        typer.echo(f"chaos: fault proxy request log in {log} (served at GET /_chaos/log)", err=True)
        argv = proxy_argv(binary, listen=listen, upstream=upstream, name=name or listen, token_file=tf, request_log=log,
                          admin_listen=admin_listen, mirror_refusal=mirror_refusal)
        os.execv(binary, argv)  # the proxy itself takes the signals; its flag errors are its own one line
