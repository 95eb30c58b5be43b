"""CLI sub-commands; each module here has `register(app: typer.Typer) -> None`."""
import typer

# One --env for every command, so `chaos stop` in another terminal finds the run CHAOS_ENV names
ENV_OPTION = typer.Option("local", "--env", envvar="CHAOS_ENV", help="environment name or YAML path")
# the same, for commands that also run without an environment (the gateway from flags, backoff's default policy)
OPTIONAL_ENV_OPTION = typer.Option(None, "--env", envvar="CHAOS_ENV", help="environment name or YAML path")
