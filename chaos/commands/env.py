"""`chaos env ...`: list and check environments (up/down/status live in chaos.bridge)."""
from __future__ import annotations

import typer

import chaos
from chaos.commands import ENV_OPTION
from chaos.env import available, environments_dir, load

env_app = typer.Typer(help="Inspect environments and run the embedded stack.", no_args_is_help=True)

EnvOption = ENV_OPTION


@env_app.command("list")
def list_envs() -> None:
    """List the environments found in environments/."""
    d = environments_dir()
    for name in available(d):
        typer.echo(name)


@env_app.command("check")
def check(env: str = EnvOption,
          probe: bool = typer.Option(False, "--probe", help="check each part is what the file says"),
          allow_destructive: bool = typer.Option(False, "--allow-destructive", envvar="CHAOS_ALLOW_DESTRUCTIVE",
                                                 help="plan as a run with --allow-destructive would"),
          timeout: float = typer.Option(3.0, "--timeout", min=0.1, help="seconds per probe"),
          target: list[str] = typer.Option([], "--target", metavar="NAME",
                                           help="plan the recovery suite against this target (repeatable)"),
          read: bool = typer.Option(True, "--read/--no-read",
                                    help="read each docker target's container (docker inspect) for its settings")) -> None:
    """Validate an environment file; print what each docker target's container says about itself and
    which value the run uses, then which suites will run, skip (and why) or be refused.

    With --probe, first check each part the file names is what the file says; exit 1 when any fails."""
    from chaos.env.hurt import check_names
    from chaos.experiment.suite_plan import format_plan, plan

    e = load(env)
    check_names(e, target)
    prot = "protected" if e.safety.protected else "not protected"
    typer.echo(f"{e.name}: ok ({len(e.targets)} targets, embedded={e.embedded}, {prot}, api {e.endpoints.api})")
    for note in e.unset_unused:
        typer.echo(f"note: {note}")
    failed = False
    if e.monitoring is not None:
        from chaos.env_check.monitoring import expectation_problems

        for problem in expectation_problems(e.monitoring):  # alert names checked against the loaded rules
            typer.echo(f"FAIL  {e.source}: {problem}")
            failed = True
    docker_targets = [t for t in e.targets if t.kind == "docker"]
    if read and docker_targets:
        from chaos.targets.container_facts import format_read, read_all

        typer.echo("")
        typer.echo("read from the containers (the file overrides a value it sets):")
        for line in format_read(docker_targets, read_all(docker_targets, timeout=timeout)):
            typer.echo(f"  {line}")
    if read and not probe:  # with --probe, the probes say it
        from chaos.env_check.engine_plugin import engine_plugin_lines

        for line in engine_plugin_lines(e, timeout):
            typer.echo(line)
    if probe:
        from chaos.env_check import format_probes
        from chaos.env_check import probe as run_probes

        probes = run_probes(e, timeout=timeout)
        failed = failed or any(not p.ok for p in probes)
        typer.echo("")
        for line in format_probes(e, probes):
            typer.echo(line)
    typer.echo("")
    for line in format_plan(plan(e, allow_destructive=allow_destructive, only=target)):
        typer.echo(line)
    if failed:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(env_app, name="env")

    @app.command("version")
    def version() -> None:
        """Print the llm-chaos version."""
        typer.echo(chaos.__version__)
