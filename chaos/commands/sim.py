"""`chaos sim ...`: run one vLLM simulator replica (flags: `chaos sim --help`)."""
from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    @app.command(
        "sim",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True,
                          "help_option_names": []},
        add_help_option=False,
    )
    def sim(ctx: typer.Context) -> None:
        """Run a vLLM-compatible simulator replica (all flags pass through; see --help)."""
        from chaos.stack.sim.cli import main

        raise typer.Exit(main(list(ctx.args)))
