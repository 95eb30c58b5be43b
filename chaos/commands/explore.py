"""`chaos explore` (random fault schedules within a budget) and `chaos replay` (one kept schedule)."""
from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from chaos.commands import ENV_OPTION
from chaos.errors import ConfigError


def _seconds(text: str) -> float:
    """'20m', '90s', '1h' or a number of seconds."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if m is None:
        raise ConfigError(f"--budget {text!r}: expected a duration such as 600, 90s, 20m or 1h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _window(records: list[Any]) -> dict[str, float | None]:
    """since/until: the replica-log window a schedule's records span."""
    from chaos.observe.replica_log import records_window

    since, until = records_window(records)
    return {"since": since, "until": until}


@contextmanager
def _explorer(env: str, out: Path, allow_destructive: bool) -> Iterator[Any]:
    """An Explorer on the environment's stack (an embedded one is started here and stopped after),
    with the ledger, the emergency stop and a journal of every schedule."""
    from chaos import env as envmod
    from chaos.bridge import start_embedded
    from chaos.experiment.session import Session
    from chaos.explore.wiring import explorer_for
    from chaos.observe.replica_log import ReplicaLogs
    from chaos.verify.accounting import server_log_for

    e = envmod.load(env)
    run_dir = out / time.strftime("%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    replica_logs = ReplicaLogs.for_env(e)  # one cursor per replica log for the whole exploration
    try:
        with Session(e, run_dir, title=f"exploration of {e.name}", allow_destructive=allow_destructive,
                     start_stack=start_embedded) as session:
            yield explorer_for(e, session.stack, run_dir, session.bus, session.stop, allow_destructive=allow_destructive,
                               server_log=lambda records: server_log_for(e, ("simulator", "fault proxy"),
                                                                         logs=replica_logs, **_window(records)))
    finally:
        replica_logs.close()


def explore(env: str = ENV_OPTION,
            budget: str = typer.Option("10m", "--budget", help="how long to explore: 600, 90s, 20m, 1h"),
            seed: int = typer.Option(1, "--seed", help="the same seed tries the same schedules"),
            max_faults: int = typer.Option(3, "--max-faults", min=1, max=8, help="faults per schedule, at most"),
            horizon: float = typer.Option(30.0, "--horizon", min=5.0, help="seconds of load a schedule's faults "
                                                                            "fall in"),
            shrink_runs: int = typer.Option(12, "--shrink-runs", min=0, max=100,
                                            help="replays spent shrinking each failing schedule (0: keep it whole)"),
            out: Path = typer.Option(Path("reports/explore"), "--out", help="where schedules, failures and the "
                                                                            "journal go (a run subdir is made)"),
            allow_destructive: bool = typer.Option(False, "--allow-destructive",
                                                   help="allow restarts, kills and rank freezes on a protected "
                                                        "environment")) -> None:
    """Run random fault schedules (seeded) under load until the budget is spent, each judged by
    heal-and-check: served again within the recovery SLA, nothing lost, the client rules on retries,
    and (where the gateway shows its breakers) a rollback held until an operator reset, every other
    trip healed.
    A failing schedule is shrunk (drop faults, shorten, start earlier, drop parameters) while it still
    breaks the same check, and written as failures/schedule-<hash>.yaml; `chaos replay` runs it again.
    Exit 1 when a schedule failed."""
    seconds = _seconds(budget)
    with _explorer(env, out, allow_destructive) as ex:
        outcomes = ex.explore(seed, seconds, max_faults=max_faults, horizon_s=horizon,
                              allow_destructive=allow_destructive, shrink_runs=shrink_runs, say=typer.echo)
    failed = [o for o in outcomes if not o.ok]
    typer.echo(f"{len(outcomes)} schedules tried (hashes in {ex.out_dir / 'explore.json'}), {len(failed)} failed")
    for o in failed:
        typer.echo(f"  {o.file}: {o.broken()}")
    raise typer.Exit(1 if failed else 0)


def replay(schedule: Path = typer.Argument(..., help="a schedule file (chaos explore's failures/schedule-*.yaml)"),
           env: str = ENV_OPTION,
           out: Path = typer.Option(Path("reports/replay"), "--out", help="where the run goes"),
           allow_destructive: bool = typer.Option(False, "--allow-destructive")) -> None:
    """Run one schedule again and judge it the same way; exit 1 when it fails (naming what broke)."""
    from chaos.explore.schedule import load_schedule

    sched = load_schedule(schedule)
    with _explorer(env, out, allow_destructive) as ex:
        outcome = ex.run_one(sched)
        ex.write_report(None)
    typer.echo(f"{schedule}: {'ok' if outcome.ok else 'FAILED ' + str(outcome.broken())}"
               + (f" (it was kept for: {sched.breaks})" if sched.breaks else ""))
    for err in outcome.errors:
        typer.echo(f"  note: {err}")
    raise typer.Exit(0 if outcome.ok else 1)


def register(app: typer.Typer) -> None:
    app.command("explore")(explore)
    app.command("replay")(replay)
