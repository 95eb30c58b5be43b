"""`chaos backoff-check`: judge any client's retry behaviour against the environment's retry policy."""
from __future__ import annotations

import json
from pathlib import Path

import typer

from chaos.commands import OPTIONAL_ENV_OPTION
from chaos.errors import ConfigError


def backoff_check(
    client_cmd: str = typer.Option(..., "--client-cmd", help="command template; {base_url} is replaced by the recorder URL"),
    failure: str = typer.Option("503", "--failure", help="503|500|429|529|reset|timeout|stream-cut"),
    fail_first: int = typer.Option(3, "--fail-first", help="fail the first K attempts of each logical request"),
    retry_after: float | None = typer.Option(None, "--retry-after", help="Retry-After seconds sent with 429 or 529"),
    clients: int = typer.Option(4, "--clients", help="copies run at once in the retry phase (jitter rule)"),
    env: str | None = OPTIONAL_ENV_OPTION,
    time_limit: float | None = typer.Option(None, "--time-limit", help="stop a client after this many seconds"),
    json_out: Path | None = typer.Option(None, "--json", help="also write the rows and evidence here"),
) -> None:
    """Run the client against a recorder on 127.0.0.1 and check each backoff rule (exit 0 ok, 1 fail or not
    proven, 2 usage).

    A client that never retries a retryable failure FAILS (rule `retries`), it does not pass on rules
    left n/a for want of retries; on an overload status of the policy (`retry.overload_statuses`, default
    429, 503, 529) the `overload` rule names a client that treats busy as down (never retries it: fails
    over or gives up) or hammers on it (retries within 100 ms)."""
    from rich.console import Console

    from chaos.env import RetryPolicy, load
    from chaos.verify.backoff_run import check_backoff
    from chaos.verify.recorder import WITH_RETRY_AFTER

    if fail_first < 1:
        raise ConfigError(f"--fail-first: expected at least 1 failed attempt, got {fail_first}")
    if failure not in WITH_RETRY_AFTER and retry_after is not None:
        raise ConfigError(f"--retry-after: only meaningful with --failure {' or '.join(WITH_RETRY_AFTER)}")
    if time_limit is not None and time_limit <= 0:
        raise ConfigError(f"--time-limit: expected seconds > 0, got {time_limit}")
    policy = load(env).retry if env else RetryPolicy()
    verdict = check_backoff(client_cmd, policy, failure=failure, fail_first=fail_first, retry_after=retry_after,
                            clients=clients, time_limit_s=time_limit)
    console = Console()
    console.print(f"policy: min {policy.min_interval_s:g} s, x{policy.multiplier:g}, jitter {policy.jitter:g}, "
                  f"cap {policy.max_interval_s:g} s, {policy.max_attempts} attempts, deadline {policy.deadline_s:g} s"
                  f" ({'env ' + env if env else 'defaults'})")
    console.print(verdict.rich_table())
    if json_out is not None:
        json_out.write_text(json.dumps({"ok": verdict.ok, "rows": verdict.as_table(), "data": verdict.data},
                                       default=str, indent=1), encoding="utf-8")
    bad = [r.check for r in verdict.failures]
    unproven = verdict.unproven  # e.g. jitter no wider than the machine's own scheduler noise: never a pass
    unjudged = [r.check for r in verdict.rows if r.ok is None and not r.unproven]
    if bad:
        console.print(f"FAIL: {', '.join(bad)}")
    elif unproven:
        console.print(f"NOT PROVEN: {', '.join(r.check for r in unproven)} ({unproven[0].unproven})")
    else:  # the "retries" row fails a client that never retried, so n/a rows here lack a phase, not a client
        console.print("PASS: every rule holds" if not unjudged
                      else f"PASS: every rule that could be judged holds (n/a: {', '.join(unjudged)})")
    raise typer.Exit(1 if bad or unproven else 0)


def register(app: typer.Typer) -> None:
    app.command("backoff-check")(backoff_check)
