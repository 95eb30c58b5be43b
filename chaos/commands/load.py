"""`chaos load --env X`: run the environment's load profile alone, with a progress bar and a table."""
from __future__ import annotations

import time
from pathlib import Path

import typer

from chaos.commands import ENV_OPTION
from chaos.errors import ConfigError


def load_cmd(
    env: str = ENV_OPTION,
    users: int | None = typer.Option(None, "--users", min=1, help="concurrent users (default: env load.users)"),
    rate: float | None = typer.Option(None, "--rate", min=0.001, help="arrival rate per second (shape rate)"),
    duration: float | None = typer.Option(None, "--duration", min=0.1, help="seconds (default: env load.duration_s)"),
    shape: str | None = typer.Option(None, "--shape", help="users | rate | ramp | step"),
    workload: str = typer.Option("mix", "--workload", help="mix | burst | shared_prefix | special"),
    api: str = typer.Option("chat", "--api", help="chat | completions"),
    workers: int | None = typer.Option(None, "--workers", min=0, help="distributed: number of worker processes "
                                                                          "(default: env load.workers)"),
    worker_host: str | None = typer.Option(None, "--worker-host", help="where the workers run: local, a lab "
                                                                          "host (lab-load) or ssh://[user@]host[:port] "
                                                                          "(default: env load.worker_host)"),
    out: Path = typer.Option(Path(".state/load"), "--out", help="directory for the record files (a run subdir is made)"),
    classes: str | None = typer.Option(None, "--classes", help="prompt class sizes, e.g. short=512,long=2048,xl=4096"),
    retry: bool = typer.Option(True, "--retry/--no-retry", help="retry with the env's retry policy"),
) -> None:
    """Drive the environment's load profile once and print per-class latency and goodput."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from chaos import env as envmod
    from chaos.load.runner import start_load
    from chaos.load.stats import summarize

    e = envmod.load(env)
    prof = e.load
    kw = dict(users=users or prof.users, duration_s=duration or prof.duration_s, shape=shape or prof.shape,
              mix=prof.mix, classes=dict(prof.classes), model=e.endpoints.model, max_tokens=prof.max_tokens, stream=prof.stream,
              retry_policy=e.retry if retry else None, api=api, workload=workload, api_key=e.endpoints.api_key,
              served_by_header=e.breaker.pool_header)
    if rate is not None or kw["shape"] == "rate":
        kw["rate"] = rate or prof.rate_per_s
    if classes:
        kw["classes"] = _parse_classes(classes)
    run_dir = out / time.strftime("%Y%m%d-%H%M%S")
    console = Console()
    handle = start_load(e.endpoints.api, out_dir=run_dir, workers=prof.workers if workers is None else workers,
                        worker_host=worker_host or prof.worker_host,
                        worker_python=prof.worker_python, **kw)
    total = handle.cfg.duration_s
    try:
        with Progress(TextColumn("[bold]load[/]"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                      TimeElapsedColumn(), TextColumn("{task.fields[info]}"), console=console) as bar:
            task = bar.add_task("load", total=total, info="")
            while handle.running():
                n, errs = handle.progress()
                bar.update(task, completed=min(total, time.monotonic() - handle.t_start),
                           info=f"{n} requests, {errs} errors")
                time.sleep(0.5)
            bar.update(task, completed=total)
    except KeyboardInterrupt:
        console.print("stopping load ...")
    result = handle.stop()
    st = summarize(result.records, slos=e.slas.latency)
    table = Table(title=f"load on {e.name}: {len(result.records)} attempts, {st.logical} logical requests (ms)")
    for col in ("class", "n", "ok", "err", "ttft p50", "ttft p99", "tpot p50", "tpot p99", "e2e p50", "e2e p99"):
        table.add_column(col, justify="right")
    for row in st.table():  # [class, n, ok, err, ttft p50/p90/p99, tpot ..., e2e ...] in ms
        keep = row[:4] + [row[4], row[6], row[7], row[9], row[10], row[12]]
        table.add_row(*["-" if v is None else str(v) for v in keep])
    console.print(table)
    console.print(f"goodput {st.goodput_per_s:.2f} req/s, throughput {st.throughput_per_s:.2f} req/s, "
                  f"outcomes {st.outcomes}, errors {st.all.errors}")
    for lost in result.lost_workers:
        console.print(f"[yellow]load worker lost mid-run: {lost}; the others carried on[/]")
    console.print(f"records: {run_dir}")


def _parse_classes(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for part in text.split(","):
        name, _, size = part.partition("=")
        if not name.strip() or not size.strip().isdigit():
            raise ConfigError(f"--classes {text!r}: expected name=tokens[,name=tokens], e.g. short=512,long=2048")
        out[name.strip()] = int(size)
    return out


def register(app: typer.Typer) -> None:
    app.command("load")(load_cmd)
