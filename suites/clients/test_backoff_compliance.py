"""Clients: any client must retry no sooner than 500 ms, back off exponentially with jitter, respect
its cap and Retry-After, give up in time, never retry a 400, and treat busy (529) as busy, not down
(back off and retry, never fail over). The reference client passes; every command listed in the
environment's `client_commands` is judged the same way; a naive fixed-100 ms loop is the negative
control and must be caught."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos import Environment, ResilientClient, SLOViolation, SummaryCollector, Verdict, client_commands, judge
from chaos import evidence as rep
from chaos.verify.backoff_run import check_backoff

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clients"
FAILURES: dict[str, dict[str, Any]] = {
    "503": {}, "429-retry-after-0.2s": {"failure": "429", "retry_after": 0.2}, "reset": {"failure": "reset"},
    "529-busy": {"failure": "529"}}  # NVIDIA Dynamo's overload answer: back off and retry, never fail over


def _reference(env: Environment) -> Callable[[str], object]:
    def call(base_url: str) -> object:
        return ResilientClient(base_url, env.retry, model=env.endpoints.model, timeout_s=5.0).chat("hello")
    return call


@pytest.mark.parametrize("failure", list(FAILURES))
def test_reference_client_complies(chaos_env: Environment, summary: SummaryCollector, failure: str) -> None:
    rep.labels(epic="Client compatibility", feature="Backoff", story=f"reference client, {failure}", suite="clients")
    kw: dict[str, Any] = {"failure": "503", **FAILURES[failure]}
    with rep.phase(f"run the reference client against a recorder failing with {failure}"):
        v = check_backoff(_reference(chaos_env), chaos_env.retry, fail_first=3, clients=8,
                          model=chaos_env.endpoints.model, **kw)
    summary.count("clients", "checked")
    judge("the client behaved", [v])


@pytest.mark.proves("retry-interval-500ms", "exponential-backoff")
@pytest.mark.parametrize("name", ["listed"])
def test_listed_client_commands_comply(chaos_env: Environment, summary: SummaryCollector, name: str) -> None:
    rep.labels(epic="Client compatibility", feature="Backoff", story="client commands", suite="clients")
    if not chaos_env.client_commands:  # llm-chaos's own client passing says nothing about the team's
        mine = Verdict("the environment's client commands")
        mine.not_proven("client_commands", "the team's clients, listed", "none listed",
                        "the environment lists no client_commands: only llm-chaos's reference client was judged")
        judge("whose clients", [mine])
    failures = []
    for cname, cmd in client_commands(chaos_env, EXAMPLES).items():
        with rep.phase(f"client command {cname}"):
            v = check_backoff(cmd, chaos_env.retry, failure="503", fail_first=3, clients=6,
                              model=chaos_env.endpoints.model)
            try:
                judge(cname, [v])
            except SLOViolation as e:
                failures.append(f"{cname}: {e}")
    summary.count("clients", "checked", len(client_commands(chaos_env, EXAMPLES)))
    assert not failures, "; ".join(failures)


def test_naive_client_is_caught(chaos_env: Environment, summary: SummaryCollector) -> None:
    """Negative control: a fixed-100 ms retry loop must fail the min-interval and exponential rules."""
    rep.labels(epic="Client compatibility", feature="Backoff", story="negative control", suite="clients")
    cmd = f"bash {EXAMPLES / 'naive_retry.sh'} {{base_url}}"
    with rep.phase("run the naive client"):
        v = check_backoff(cmd, chaos_env.retry, failure="503", fail_first=3, clients=2,
                          phases=("retry", "non_retryable"), model=chaos_env.endpoints.model)
    failed = {r.check for r in v.failures}
    rep.attach_text("\n".join(r.line() for r in v.rows), "naive client verdict")
    summary.set("clients", naive_caught="yes" if {"min_interval", "exponential"} <= failed else "NO")
    assert {"min_interval", "exponential"} <= failed, f"the naive client was not caught: failed rules {sorted(failed)}"
