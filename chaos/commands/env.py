"""`chaos env ...`: list and check environments (up/down/status live in chaos.stack.launcher)."""
from __future__ import annotations

import typer

import chaos
from chaos.env import available, environments_dir, load

env_app = typer.Typer(help="Inspect environments and run the embedded stack.", no_args_is_help=True)

EnvOption = typer.Option("local", "--env", envvar="CHAOS_ENV", help="environment name or YAML path")


@env_app.command("list")
def list_envs() -> None:
    """List the environments found in environments/."""
    d = environments_dir()
    for name in available(d):
        typer.echo(name)


@env_app.command("check")
def check(env: str = EnvOption) -> None:
    """Validate an environment file and print a short summary."""
    e = load(env)
    prot = "protected" if e.safety.protected else "not protected"
    typer.echo(f"{e.name}: ok ({len(e.targets)} targets, embedded={e.embedded}, {prot}, api {e.endpoints.api})")


def register(app: typer.Typer) -> None:
    app.add_typer(env_app, name="env")

    @app.command("version")
    def version() -> None:
        """Print the llm-chaos version."""
        typer.echo(chaos.__version__)
