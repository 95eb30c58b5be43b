"""CLI sub-commands; each module here has `register(app: typer.Typer) -> None`."""
