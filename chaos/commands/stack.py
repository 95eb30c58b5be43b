"""`chaos env up|down|status`: run the embedded stack outside pytest, for game days."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import typer

from chaos.commands.env import EnvOption, env_app
from chaos.env import load
from chaos.errors import StackError
from chaos.shared import proc as _proc


def _stack_file(env_name: str) -> Path:
    return Path(load(env_name).state_dir) / "stack.json"


@env_app.command("up")
def up(env: str = EnvOption,
       detach: bool = typer.Option(False, "--detach", "-d", help="start in the background and return"),
       timeout: float = typer.Option(0.0, help="seconds to wait for the stack to serve "
                                                "(default: the environment's slas.cold_start_s)")) -> None:
    """Start the embedded stack (Toxiproxy, replicas, gateway) and wait until it serves."""
    e = load(env)
    timeout = timeout or e.slas.cold_start_s
    if detach:
        _up_detached(env, e.state_dir, timeout)
        return
    from chaos.bridge import EmbeddedStack
    from chaos.faults.ledger import cleanup

    cleanup(e)
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    stack = EmbeddedStack(e, log=lambda s: typer.echo(f"chaos: {s}"))
    stack.up(timeout)
    typer.echo(f"chaos: stack {e.name} serving at {e.endpoints.api} (Ctrl-C or `chaos env down` to stop)", err=False)
    sys.stdout.flush()
    try:
        while not stop.wait(0.5):
            pass
    finally:
        typer.echo("chaos: stopping stack")
        stack.down()
        cleanup(e)


def _up_detached(env: str, state_dir: str, timeout: float) -> None:
    Path(state_dir).mkdir(parents=True, exist_ok=True)
    log = open(Path(state_dir) / "stack-up.log", "ab")
    proc = subprocess.Popen([sys.executable, "-m", "chaos.cli", "env", "up", "--env", env, "--timeout", str(timeout)],
                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + timeout + 15
    stack_file = Path(state_dir) / "stack.json"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise StackError(f"stack failed to start (exit {proc.returncode}); see {state_dir}/stack-up.log")
        if stack_file.exists() and json.loads(stack_file.read_text() or "{}").get("owner") == proc.pid:
            typer.echo(f"chaos: stack up in the background (pid {proc.pid}); `chaos env down --env {env}` stops it")
            return
        time.sleep(0.2)
    proc.terminate()
    raise StackError(f"stack did not come up within {timeout:g}s; see {state_dir}/stack-up.log")


@env_app.command("down")
def down(env: str = EnvOption, timeout: float = typer.Option(30.0, help="seconds to wait for a clean stop")) -> None:
    """Stop a stack started with `chaos env up`, then revert and reap anything left over."""
    from chaos.faults.ledger import cleanup

    e = load(env)
    f = Path(e.state_dir) / "stack.json"
    if f.exists():
        try:
            info = json.loads(f.read_text() or "{}")
        except (OSError, ValueError):
            info = {}  # torn by a crash: the cleanup below still reaps by pidfiles
        owner, start = int(info.get("owner", 0) or 0), info.get("owner_start")
        # the start time guards against a recycled pid: the owner may have been SIGKILLed long ago
        if owner and owner != os.getpid() and _proc.alive(owner, start):
            try:
                os.kill(owner, signal.SIGTERM)
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline and _proc.alive(owner, start):
                    time.sleep(0.2)
            except ProcessLookupError:
                pass
    undone = cleanup(e, force=True)
    f.unlink(missing_ok=True)
    typer.echo(f"chaos: stack {e.name} down" + (f"; cleaned up: {'; '.join(undone)}" if undone else ""))


@env_app.command("status")
def status_cmd(env: str = EnvOption) -> None:
    """Show what answers: Toxiproxy, each replica, the gateway, a real completion (exit 1 if not serving)."""
    from rich.console import Console
    from rich.table import Table

    from chaos.bridge import status

    e = load(env)
    st = status(e)
    table = Table(title=f"stack {e.name}")
    table.add_column("part")
    table.add_column("answers")
    for part, ok in st.items():
        table.add_row(part, "[green]yes[/green]" if ok else "[red]no[/red]")
    Console().print(table)
    if not st.get("completion"):
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """The commands attach to `chaos env` (see chaos/commands/env.py)."""
