"""`chaos capacity --env X --fault KIND`: the resilience capacity curve (chaos/experiment/capacity.py)."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import typer

from chaos.commands import ENV_OPTION
from chaos.errors import ConfigError


def capacity(
    env: str = ENV_OPTION,
    fault: str = typer.Option(..., "--fault", help="fault kind, as `chaos fault inject` names it (restart, kill, ...)"),
    target: str | None = typer.Option(None, "--target", help="the target it hurts (default: the first stable one)"),
    min_rate: float = typer.Option(2.0, "--min-rate", min=0.1, help="first offered rate (requests/s)"),
    max_rate: float = typer.Option(64.0, "--max-rate", min=0.1, help="highest offered rate tried"),
    trials: int = typer.Option(2, "--trials", min=1, max=10, help="trials per rate; a rate holds when all recover"),
    refine: int = typer.Option(2, "--refine", min=0, max=6, help="bisection steps between the last good and first "
                                                                 "bad rate"),
    hold: float = typer.Option(5.0, "--hold", min=0.0, help="seconds the fault is held"),
    budget: float = typer.Option(840.0, "--budget", min=30.0, help="seconds the whole search may take"),
    out: Path = typer.Option(Path("reports/capacity"), "--out", help="where the table, curve and journal go "
                                                                     "(a run subdir is made)"),
    allow_destructive: bool = typer.Option(False, "--allow-destructive", help="allow restarts and kills on a "
                                                                               "protected environment"),
) -> None:
    """Find the highest offered load at which the recovery SLA still holds under --fault: rates rise
    geometrically until a trial fails to recover within slas.recovery_s, then the gap is bisected; each
    rate also runs once without the fault. Prints the table, writes capacity.json and capacity.png."""
    from rich.console import Console
    from rich.table import Table

    from chaos import env as envmod
    from chaos.bridge import start_embedded
    from chaos.experiment import capacity as cap
    from chaos.experiment.gameday import make_fault
    from chaos.experiment.plan import PlanFault
    from chaos.experiment.session import Session
    from chaos.faults.params import check as check_params
    from chaos.load.runner import start_env_load

    check_params(fault, {})  # an unknown --fault is one line, before anything starts
    e = envmod.load(env)
    if max_rate < min_rate:
        raise ConfigError(f"--max-rate {max_rate:g}: expected >= --min-rate {min_rate:g}")
    name = target or next((t.name for t in e.targets if t.pool == "stable"), None)
    if name is None:
        raise ConfigError(f"--target: environment {e.name} has no stable target; name one")
    run_dir = out / time.strftime("%Y%m%d-%H%M%S")
    run_dir.mkdir(parents=True, exist_ok=True)
    console = Console()
    n = [0]
    with Session(e, run_dir, title=f"capacity under {fault} on {e.name}", allow_destructive=allow_destructive,
                 start_stack=start_embedded) as session:

        def load(rate: float, seconds: float) -> Any:
            n[0] += 1
            return start_env_load(e, out_dir=run_dir / "load" / f"{n[0]:03d}-{rate:g}", rate=rate, users=None,
                                  shape="rate", duration_s=seconds, seed=n[0])

        def trial(rate: float, with_fault: bool) -> Any:
            f = make_fault(e, session.stack, PlanFault(kind=fault, target=name), allow_destructive=allow_destructive) \
                if with_fault else None
            return cap.trial_experiment(e, rate, fault=f, load=load, hold_s=hold).run(bus=session.bus, stop=session.stop)

        search = cap.Search(min_rate=min_rate, max_rate=max_rate, trials=trials, refine=refine, budget_s=budget)
        t0 = time.monotonic()
        search.run(trial, say=lambda line: console.print(line))
        took = time.monotonic() - t0
    table = Table(title=f"capacity under {fault} on {name} ({e.name}): recovery SLA {e.slas.recovery_s:g} s")
    for col in ("rate/s", "trials held", "recovery s", "goodput/s (fault)", "goodput/s (none)", "P99 s (fault)",
                "P99 s (none)"):
        table.add_column(col, justify="right")
    rows = cap.table_rows(search, e.slas)
    for r in rows:
        table.add_row(*["-" if v is None else (f"{v:.2f}" if isinstance(v, float) else str(v)) for v in r])
    console.print(table)
    found = search.capacity()
    png = run_dir / "capacity.png"
    cap.plot(search, e.slas, title=f"capacity under {fault} ({e.name})", path=png)
    (run_dir / "capacity.json").write_text(json.dumps({
        "environment": e.name, "fault": fault, "target": name, "capacity_rps": found, "trials": search.trials_run(),
        "wall_s": round(took, 1), "ran_out_of_budget": search.ran_out, "recovery_sla_s": e.slas.recovery_s,
        "rows": rows}, indent=1), encoding="utf-8")
    what = "no rate held" if found is None else f"{found:g} requests/s"
    more = f" (search stopped at its {budget:g} s budget)" if search.ran_out else ""
    top = "" if found is None or any(not p.held for p in search.points) else f"; every rate up to {max_rate:g}/s held"
    console.print(f"capacity under {fault}: {what}{top}{more}; {search.trials_run()} trials in {took:.0f} s")
    console.print(f"curve: {png}\ntable: {run_dir / 'capacity.json'}\njournal: {run_dir / 'summary.md'}")


def register(app: typer.Typer) -> None:
    app.command("capacity")(capacity)
