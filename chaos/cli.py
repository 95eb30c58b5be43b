"""The `chaos` command. Sub-commands live in chaos/commands/<area>.py, each with register(app)."""
from __future__ import annotations

import importlib
import pkgutil
import sys

import typer

try:  # typer >= 0.20 vendors click
    from typer._click import exceptions as _click_exc  # type: ignore[import-not-found, unused-ignore]  # absent before 0.20
except ImportError:  # pragma: no cover
    from click import exceptions as _click_exc  # type: ignore[no-redef]

from chaos.errors import ChaosError

# click's Abort (Ctrl-C at a prompt); typer's vendored click has none and handles that itself
_ABORT = tuple(x for x in (getattr(_click_exc, "Abort", None),) if x is not None)

app = typer.Typer(
    name="chaos",
    help="Chaos and resilience harness for LLM inference services.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register_all() -> None:
    import chaos.commands as pkg

    modules = [importlib.import_module(f"chaos.commands.{m.name}") for m in pkgutil.iter_modules(pkg.__path__)]
    for module in sorted(modules, key=lambda m: m.__name__):
        register = getattr(module, "register", None)
        if register is not None:
            register(app)


def fail(message: str, code: int = 2) -> typer.Exit:
    """Print one error line to stderr and return the Exit to raise."""
    typer.echo(f"chaos: error: {message}", err=True)
    return typer.Exit(code)


def main(argv: list[str] | None = None) -> int:
    """Entry point: every ChaosError becomes one line on stderr and exit code 2."""
    _register_all()
    try:
        rc = app(args=argv if argv is not None else sys.argv[1:], standalone_mode=False)
        if isinstance(rc, int):  # non-standalone click returns typer.Exit's code instead of raising
            return rc
    except ChaosError as e:
        for line in str(e).splitlines() or [""]:  # a file's schema errors: one line each
            typer.echo(f"chaos: error: {line}", err=True)
        return 2
    except typer.Exit as e:
        return e.exit_code
    except KeyboardInterrupt:
        typer.echo("chaos: interrupted", err=True)
        return 130
    except _click_exc.ClickException as e:  # usage errors arrive here in non-standalone mode
        e.show()
        return 2 if isinstance(e, _click_exc.UsageError) else e.exit_code
    except _ABORT:
        return 130
    except SystemExit as e:  # typer's own exit, e.g. after a closed pipe (`chaos env check | head`)
        _quiet_stdout()
        return e.code if isinstance(e.code, int) else 1
    return 0


def _quiet_stdout() -> None:
    # a reader that closed the pipe wants no more: silence the flush at exit instead of a traceback
    import os

    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


if __name__ == "__main__":
    sys.exit(main())
