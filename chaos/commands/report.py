"""`chaos report`: build the Allure HTML report (history kept between runs), optionally a screenshot."""
from __future__ import annotations

from pathlib import Path

import typer


def report(
    results: Path = typer.Option(Path("allure-results"), "--results", help="allure-pytest results dir (--alluredir)"),
    out: Path = typer.Option(Path("allure-report"), "--out", help="where the HTML report goes (replaced)"),
    history: Path = typer.Option(Path(".state/allure-history.jsonl"), "--history",
                                 help="JSONL file that carries trends from run to run (cache it in CI)"),
    no_history: bool = typer.Option(False, "--no-history", help="do not read or extend the history file"),
    name: str = typer.Option("llm-chaos", "--name", help="report title"),
    install: bool = typer.Option(False, "--install", help="npm-install the Allure 3 CLI into .tools/allure if missing"),
    screenshot: Path | None = typer.Option(None, "--screenshot", help="also save a PNG of the report here"),
    check: bool = typer.Option(False, "--check", help="open the report in headless Chromium and list its tests"),
) -> None:
    """Build the HTML report from Allure results (Allure 3 CLI, installed project-locally)."""
    from chaos.report import browser, html

    cli = html.find_allure()
    if cli is None and install:
        cli = html.install_allure()
        typer.echo(f"installed Allure CLI: {cli}")
    index = html.generate(results, out, history=None if no_history else history, name=name, cli=cli)
    typer.echo(f"report: {index}")
    if check:
        names = browser.listed_tests(index.parent)
        if not names:
            raise html.ReportError(f"headless Chromium shows no tests in {index}")
        typer.echo(f"chromium lists {len(names)} tests: {', '.join(names[:10])}{' ...' if len(names) > 10 else ''}")
    if screenshot is not None:
        png = browser.screenshot(index.parent, screenshot)
        typer.echo(f"screenshot: {png}")


def register(app: typer.Typer) -> None:
    app.command("report")(report)
