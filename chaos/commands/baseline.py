"""`chaos baseline record|show|diff`: a load run's figures kept as a file a team commits, and a later
run (or another record) compared with it, naming the prompt classes that regressed."""
from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import typer

from chaos.commands import ENV_OPTION
from chaos.errors import ConfigError

app = typer.Typer(help="Baseline performance records: record one, show it, diff a run against it.", no_args_is_help=True)

ENV = ENV_OPTION
WORKLOAD = typer.Option("mix-7-2-1", "--workload", help="mix-7-2-1 | burst-100x32k")
DURATION = typer.Option(None, "--duration", min=1.0, help="seconds of mix load (default: the suite's: 2 x "
                                                          "load.duration_s x time_scale)")


@contextmanager
def _serving(e: Any) -> Iterator[None]:
    """The environment's stack: used as it is when its endpoint answers; an embedded one is started
    here otherwise, and taken down afterwards."""
    from chaos.bridge import EmbeddedStack
    from chaos.observe.completion import completion_ok

    if completion_ok(e.endpoints.api, e.endpoints.model, timeout=3.0, api_key=e.endpoints.api_key) or \
            e.embedded == "none":
        yield
        return
    stack = EmbeddedStack(e).up()
    try:
        yield
    finally:
        stack.down()


def _run(e: Any, workload: str, duration: float | None) -> tuple[list[Any], float, dict[str, Any]]:
    """The workload's records, how long it took, and the GPU's figures over it (or why there are none)."""
    from chaos.load import baseline as bl
    from chaos.load.runner import start_env_load
    from chaos.observe.gpu import gpu_summary
    from chaos.observe.gpu_plan import observer_for
    from chaos.observe.timeline import Timeline

    overrides = bl.workload_load(e, workload)
    if duration is not None and workload.startswith("mix"):
        overrides["duration_s"] = duration
    out = Path(e.state_dir) / "baseline" / time.strftime("%Y%m%d-%H%M%S")
    typer.echo(f"chaos: {workload} against {e.endpoints.api} for up to {overrides['duration_s']:.0f} s ...")
    timeline = Timeline()
    with _serving(e):
        gpu = observer_for(e, timeline).start()
        t0 = time.time()
        try:
            result = start_env_load(e, out_dir=out, seed=0, **overrides).wait()
        finally:
            gpu.stop()
    t1 = time.time()
    records = list(result.records)
    tokens = sum(r.output_tokens or 0 for r in records if r.ok)
    return records, t1 - t0, gpu_summary(timeline, t0, t1, tokens)


def _table(title: str, doc: dict[str, Any]) -> Any:
    from rich.table import Table

    t = Table(title=title)
    for col in ("class", "requests", "error rate", "goodput", "ttft p50/p99", "tpot p99", "itl p99", "e2e p50/p99",
                "tokens/s"):
        t.add_column(col, justify="right")

    def ms(v: float | None) -> str:
        return "miss" if v is None else f"{v * 1000:.1f}"

    for name, c in sorted(doc["classes"].items()):
        def g(m: str, q: int, c: dict[str, Any] = c) -> float | None:
            v = (c.get(m) or {}).get(str(q))
            return None if v is None else float(v)

        t.add_row(name, str(c.get("requests", "-")), _pct(c.get("error_rate")), _pct(c.get("goodput_share")),
                  f"{ms(g('ttft', 50))}/{ms(g('ttft', 99))}", ms(g("tpot", 99)), ms(g("itl", 99)),
                  f"{ms(g('e2e', 50))}/{ms(g('e2e', 99))}", "-" if c.get("tokens_per_s") is None
                  else f"{c['tokens_per_s']:.1f}")
    return t


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1%}"


@app.command("record")
def record(env: str = ENV, workload: str = WORKLOAD, duration: float | None = DURATION,
           out: Path | None = typer.Option(None, "--out", help="file to write (default: the environment's "
                                                                  "baseline_file, named for the workload)"),
           rel: float = typer.Option(0.2, "--tolerance-rel", min=0.0, help="allowed growth, e.g. 0.2 = +20 %"),
           abs_ms: float = typer.Option(5.0, "--tolerance-abs-ms", min=0.0, help="allowed growth in ms on top")) -> None:
    """Run the workload against --env and write its baseline (latency per class over all attempts,
    error rate, goodput, throughput, GPU figures where a GPU is visible, versions, environment hash)."""
    from rich.console import Console

    from chaos import env as envmod
    from chaos.load import baseline as bl

    e = envmod.load(env)
    path = out or bl.path_for(e, workload)
    if path is None:
        raise ConfigError(f"--out: environment {e.name} has no baseline_file; name the file to write")
    bl.workload_load(e, workload)  # a bad --workload fails before any load runs
    records, took, gpu = _run(e, workload, duration)
    doc = bl.record(records, env=e, workload=workload, rel=rel, abs_s=abs_ms / 1000.0, gpu=gpu)
    bl.write(path, doc)
    Console(width=160).print(_table(f"baseline {workload} on {e.name} ({len(records)} attempts, {took:.0f} s)", doc))
    typer.echo(f"baseline written: {path} (commit it; `chaos baseline diff {path} --env {env}` compares a run)")


@app.command("show")
def show(path: Path = typer.Argument(..., help="baseline file")) -> None:
    """Print a baseline's figures and what it was measured on."""
    from rich.console import Console

    from chaos.load import baseline as bl

    doc = bl.read(path)
    Console(width=160).print(_table(f"{path} ({doc.get('workload', '?')} on {doc.get('environment', '?')})", doc))
    typer.echo(f"environment hash {doc.get('env_hash', '-')}, versions {doc.get('versions', {})}, "
               f"tolerance {doc.get('tolerance')}, gpu {doc.get('gpu', 'not recorded')}")


@app.command("diff")
def diff(base: Path = typer.Argument(..., help="the stored baseline"),
         other: Path | None = typer.Argument(None, help="another baseline file to compare (default: run the "
                                                          "workload against --env now)"),
         env: str = ENV, duration: float | None = DURATION) -> None:
    """Compare a run (or another record) with the baseline: the SLA and baseline verdict per class, and
    the classes that regressed. Exit 1 when any check fails."""
    from rich.console import Console

    from chaos import env as envmod
    from chaos.load import baseline as bl
    from chaos.verify.load import load_verdict, regressed_classes

    doc = bl.read(base)
    e = envmod.load(env)
    if other is None:
        records, _, _ = _run(e, str(doc.get("workload", "mix-7-2-1")), duration)
        v = load_verdict(records, e.slas, baseline=doc)
    else:
        v = _doc_verdict(doc, bl.read(other))
    Console(width=160).print(v.rich_table())
    regressed = regressed_classes(v)
    typer.echo(f"regressed: {', '.join(regressed)}" if regressed else "regressed: none")
    if not v.ok:
        raise typer.Exit(1)


def _doc_verdict(base: dict[str, Any], new: dict[str, Any]) -> Any:
    """Two records compared figure by figure, with the base's tolerance (the rows of a live run's)."""
    from chaos.load.baseline import METRICS, QUANTILES
    from chaos.verify.load import baseline_row
    from chaos.verify.verdict import Verdict

    v = Verdict("baseline diff")
    for cls, was in sorted(base["classes"].items()):
        now = new["classes"].get(cls, {})
        counted = (was.get("attempts"), now.get("attempts"))  # a class the other lacks: judged, a miss
        for m in METRICS:
            for q in QUANTILES:
                b, n = (was.get(m) or {}).get(str(q)), (now.get(m) or {}).get(str(q))
                if b is not None:
                    baseline_row(v, cls, m, q, was=b, now="miss" if n is None else round(n, 6),
                                 attempts=counted, tolerance=base.get("tolerance", {}))
    return v


def register(root: typer.Typer) -> None:
    root.add_typer(app, name="baseline")
