"""`chaos lab up|down`: the lab of real hosts (network namespaces) this machine can be."""
from __future__ import annotations

import typer

lab_app = typer.Typer(help="A lab of real hosts on this machine: a GPU host reached over SSH, a load host.",
                      no_args_is_help=True)
StateOption = typer.Option(".state/lab", "--state-dir", help="where the lab keeps its keys, configs and logs")


@lab_app.command("up")
def up(state_dir: str = StateOption,
       image: list[str] = typer.Option([], "--image", help="copy this image into the GPU host's engine (repeatable)"),
       env: str | None = typer.Option(None, "--env", help="deploy this staging-like environment onto the hosts "
                                                             "(environments/lab.yaml: `--env lab`)")) -> None:
    """Create the hosts (sshd and Docker engine on the GPU host); with --env, deploy a staging onto them."""
    from chaos.bridge.lab import check, deploy
    from chaos.env import load
    from chaos.stack.lab import EDGE, GPU, LOAD, Lab

    environment = load(env) if env else None
    if environment is not None:
        check(environment)  # a wrong address is refused before any host is made
    lab = Lab(state_dir).up()
    for name in image:
        lab.load_image(name)
    typer.echo(f"GPU host  {GPU.netns}  {GPU.address}  docker_host: {lab.docker_host()}")
    typer.echo(f"load host {LOAD.netns}  {LOAD.address}")
    typer.echo(f"edge host {EDGE.netns}  {EDGE.address}")
    if environment is not None:
        deploy(lab, environment, log=lambda s: typer.echo(f"lab: {s}"))
        typer.echo(f"lab: {environment.name} serves on {environment.endpoints.api}")
    typer.echo(f"export CHAOS_SSH_CONFIG={lab.ssh_config}")


@lab_app.command("down")
def down(state_dir: str = StateOption) -> None:
    """Remove the GPU host's containers, stop every lab service, its engine and sshd; delete the namespaces."""
    from chaos.stack.lab import Lab

    done = Lab(state_dir).down()
    typer.echo("lab: removed " + (", ".join(done) if done else "nothing (it was not up)"))


def register(app: typer.Typer) -> None:
    app.add_typer(lab_app, name="lab")
