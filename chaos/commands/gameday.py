"""`chaos gameday` (a plan of experiments, or the standard suites) and `chaos stop` (the emergency stop)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import typer

from chaos.commands import ENV_OPTION


def gameday(
    env: str = ENV_OPTION,
    plan: Path | None = typer.Option(None, "--plan", help="game-day plan (YAML); without it: the standard suites"),
    out: Path = typer.Option(Path("reports/gameday"), "--out", help="where the journal, summary and Allure results go "
                                                                    "(a run subdir is made)"),
    allow_destructive: bool = typer.Option(False, "--allow-destructive", help="allow restarts, kills and rank freezes "
                                                                               "on a protected environment"),
    live: bool = typer.Option(True, "--live/--no-live", help="a live table on a terminal (else one line per phase)"),
    check: bool = typer.Option(False, "--check", help="validate the plan (and each alert it expects against the "
                                                      "environment's rule files), start nothing; exit 1 on a problem"),
) -> None:
    """Run a game day: the plan's experiments in order, each with its steady-state hypothesis, abort
    guard and emergency stop (Ctrl-C, SIGTERM, `chaos stop`); then the journal and summary. Exit code:
    0 passed, 1 failed, 2 stopped, 3 aborted, 4 refused (sick before the fault), 5 harness error."""
    from chaos import env as envmod

    e = envmod.load(env)
    run_dir = out / time.strftime("%Y%m%d-%H%M%S")
    if plan is None:
        if check:
            raise typer.BadParameter("--check validates a plan: give --plan", param_hint="--check")
        args = [sys.executable, "-m", "pytest", "suites/", "--env", env, f"--alluredir={run_dir / 'allure-results'}",
                *(["--allow-destructive"] if allow_destructive else [])]
        typer.echo(f"chaos: no --plan: the standard suites ({' '.join(args[2:])})")
        raise typer.Exit(subprocess.call(args))
    from chaos.bridge import start_embedded
    from chaos.bridge.monitoring import alert_monitor
    from chaos.experiment.alerts import plan_alert_problems
    from chaos.experiment.gameday import GameDay
    from chaos.experiment.plan import load_plan

    the_plan = load_plan(plan)
    if check:  # the plan and the alerts it expects, nothing started
        problems = plan_alert_problems(the_plan, e, plan)
        for problem in problems:
            typer.echo(f"FAIL  {problem}")
        typer.echo(f"{plan}: {'ok' if not problems else f'{len(problems)} problem(s)'} (environment {e.name})")
        raise typer.Exit(1 if problems else 0)
    day = GameDay(e, the_plan, plan_path=plan, out_dir=run_dir, allow_destructive=allow_destructive, live=live,
                  start_stack=start_embedded, start_monitoring=alert_monitor)
    code = day.run()
    typer.echo(f"journal: {run_dir / 'journal.json'}\nsummary: {run_dir / 'summary.md'}")
    typer.echo(f"report: {_report(run_dir, day.plan.name)}")
    raise typer.Exit(code)


def _report(run_dir: Path, title: str) -> str:
    """The HTML report where the Allure CLI is installed (`make setup`), else where the results are."""
    from chaos.errors import ChaosError
    from chaos.report import html

    results = run_dir / "allure-results"
    if html.find_allure() is None:
        return f"{results} (no Allure CLI here: `make report RESULTS={results}`)"
    try:
        return str(html.generate(results, run_dir / "allure-report", name=f"game day: {title}"))
    except ChaosError as e:  # the journal and summary are written: a report problem is one line
        return f"not built ({e}); results in {results}"


def stop(env: str = ENV_OPTION,
         reason: str = typer.Option("", "--reason", help="why, for the journal")) -> None:
    """Emergency stop: the game day running against --env reverts its fault at once and ends STOPPED."""
    from chaos import env as envmod
    from chaos.shared.stop_file import request_stop  # not through chaos.experiment: a stop must be quick

    path = request_stop(envmod.load(env).state_dir, reason)
    typer.echo(f"chaos: stop asked ({path}); a running game day reverts within its next tick")


def register(app: typer.Typer) -> None:
    app.command("gameday")(gameday)
    app.command("stop")(stop)
