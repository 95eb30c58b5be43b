"""Streams: faults after a stream has started, injected by the fault proxies in front of every replica.

Cases: the connection cut after the 3rd token (with and without a closing `[DONE]`), a 1.5 s stall
mid-stream, an error chunk in a 200 stream (as vLLM sends when its engine dies mid-answer), and a
duplicated chunk. For each, the reference client and every `client_commands` entry (run with
CHAOS_STREAM=1) make requests through the whole stack, and the verdicts are: the client never
shows a duplicated or reordered token, reports a whole answer as whole (with its finish_reason)
and a broken one as an error (a duplicated chunk it drops, knowing it by the token count the server
states on each chunk, leaves a whole answer), never retries a stream after its first token unless it
resumes it, exits within a limit derived from its own fault-free run and the retry deadline (or is
told what it was doing), and the gateway counts each broken stream as a failure (and a stall as none).
"""
from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from chaos import (
    Environment,
    Experiment,
    ExperimentRun,
    ResilientClient,
    Run,
    StackHandle,
    SummaryCollector,
    client_commands,
    fault_proof,
    faults,
    plan,
    requires,
)
from chaos import evidence as rep
from chaos.faults.http import HttpFault, duplicate_chunk, error_chunk, stream_cut, stream_stall
from chaos.faults.proxy_admin import FaultProxyAdmin
from chaos.observe.gateway import gateway_failures
from chaos.verify.streams import MAX_TOKENS as STREAM_MAX_TOKENS
from chaos.verify.streams import PROMPT as STREAM_PROMPT
from chaos.verify.streams import ClientAnswer, ClientLimit, client_verdict, run_client_command
from chaos.verify.streams import attempts_for as stream_attempts_for
from chaos.verify.streams import gateway_verdict as stream_gateway_verdict
from chaos.verify.streams import steady_run as stream_steady_run
from chaos.verify.streams import steady_verdict as stream_steady_verdict

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "clients"  # the reference and the naive clients

# every replica gets the rule; the gateway picks which ones see traffic, so a rule alone may hit none
CHAT: dict[str, Any] = {"match": {"path": "/v1/chat/completions"}, "expect_hits": False}
# case: (the fault at each replica's proxy, whether the client must get a whole answer (None: the
# whole answer or an error), the seconds the fault adds to a request)
CASES: dict[str, tuple[Callable[[FaultProxyAdmin], HttpFault], bool | None, float]] = {
    "cut-after-3": (lambda p: stream_cut(p, after_tokens=3, **CHAT), False, 0.0),
    "cut-after-3-with-done": (lambda p: stream_cut(p, after_tokens=3, done=True, **CHAT), False, 0.0),
    "stall-1.5s-after-3": (lambda p: stream_stall(p, after_tokens=3, seconds=1.5, **CHAT), True, 1.5),
    "error-chunk-after-3": (lambda p: error_chunk(p, after_tokens=3, **CHAT), False, 0.0),
    "duplicate-after-3": (lambda p: duplicate_chunk(p, after_tokens=3, **CHAT), None, 0.0),
}
REQUESTS = 3  # per client and case


def _reference(env: Environment) -> ResilientClient:
    return ResilientClient(env.endpoints.api, env.retry, model=env.endpoints.model, timeout_s=10.0,
                           api_key=env.endpoints.api_key, served_by_header=env.breaker.pool_header)


def _ask(client: ResilientClient) -> ClientAnswer:
    r = client.chat(STREAM_PROMPT, stream=True, max_tokens=STREAM_MAX_TOKENS, temperature=0)
    first, last = r.records[0], r.records[-1]
    return ClientAnswer("reference", r.ok, r.text, finish_reason=last.finish_reason, error=last.error,
                        request_id=r.request_id, window=(first.t_send, last.t_end), order=last.stream_order)


@pytest.fixture
def proxies(stack: StackHandle) -> list[FaultProxyAdmin]:
    requires(stack.env, plan.no_fault_proxies)
    names = [t.name for t in stack.env.targets if t.fault_proxy]
    return [stack.fault_proxy(n) for n in names]


@pytest.mark.parametrize("case", list(CASES))
def test_stream_fault(stack: StackHandle, proxies: list[FaultProxyAdmin],
        run_experiment: Callable[..., ExperimentRun],
        summary: SummaryCollector, case: str) -> None:
    env = stack.env
    make, expect_whole, fault_extra_s = CASES[case]
    rep.labels(epic="Resilience", feature="Mid-stream faults", story=case, suite="streams")
    want = {True: "gets the whole answer", False: "reports an error", None: "drops the repeat or reports an error"}
    rep.title(f"{case} at every replica -> the client {want[expect_whole]}")

    def steps(run: Run) -> None:
        with run.phase("the truth: the same request with no fault"):
            truth = _ask(_reference(env))
            assert truth.ok and truth.shown, f"no fault-free answer to compare with: {truth.error}"
            # with no fault nothing may have been dropped as a repeat: the count check itself would be wrong
            assert "dropped" not in (truth.order or ""), f"the fault-free answer had repeats: {truth.order}"
        commands = client_commands(env, EXAMPLES)
        steady: dict[str, tuple[ClientAnswer, ClientLimit]] = {}
        for name, cmd in commands.items():
            with run.phase(f"client command {name}: one fault-free run, for its time limit"):
                steady[name] = stream_steady_run(name, cmd, env.endpoints.api, env.retry.deadline_s, truth,
                                          fault_extra_s=fault_extra_s)
        gw = env.endpoints.gateway_admin
        errors_before = gateway_failures(gw) if gw else None
        rules = [make(p) for p in proxies]
        fault = faults.AllOf(rules)
        t0 = time.time()
        run.inject(fault)
        answers: dict[str, list[ClientAnswer]] = {"reference": []}
        with run.phase(f"reference client: {REQUESTS} streamed requests"):
            client = _reference(env)
            answers["reference"] = [_ask(client) for _ in range(REQUESTS)]
        for name, cmd in commands.items():
            limit = steady[name][1]
            with run.phase(f"client command {name}: {REQUESTS} streamed requests, {limit.seconds:.1f} s each at most "
                           f"({limit.why})"):
                answers[name] = [run_client_command(name, cmd, env.endpoints.api, timeout_s=limit.seconds)
                                 for _ in range(REQUESTS)]
        hits = sum(f.counters().get("hits", 0) for f in rules)
        run.revert()
        errors_after = gateway_failures(gw) if gw else None
        log = stack.proxy_rows(since=t0 - 5.0)  # the replicas' side, over HTTP
        verdicts = [client_verdict(name, got, [stream_attempts_for(a, log) for a in got], truth=truth.shown,
                                   truth_finish=truth.finish_reason, expect_whole=expect_whole)
                    for name, got in answers.items()]
        verdicts += [stream_steady_verdict(name, ran, truth.shown) for name, (ran, _) in steady.items()]
        verdicts.append(stream_gateway_verdict(errors_before, errors_after, hits, expect_failures=expect_whole is not True))
        rep.attach_text("\n".join(f"{n}: ok={a.ok} error={a.error} attempts={len(stream_attempts_for(a, log).lines)} "
                                  f"window={a.window[0]:.3f}-{a.window[1]:.3f} shown={a.shown!r}"
                                  for n, got in answers.items() for a in got)
                        + f"\ntruth: {truth.shown!r} ({truth.finish_reason})", "answers")
        summary.count("streams", "cases")
        summary.set("streams", **{case: "FAILED" if not all(v.ok for v in verdicts)
                                  else "not proven" if any(v.unproven for v in verdicts) else "ok"})
        run.judge("the fault really happened", [fault_proof(fault, together=True)])
        run.judge("clients and gateway behaved", verdicts)

    run_experiment(Experiment(f"streams-{case}", steps=steps))


@pytest.mark.parametrize("case, broken", [("cut-after-3", {"no_retry_of_started_stream", "shown_in_order"}),
                                          ("duplicate-after-3", {"shown_in_order", "reported_right"})])
def test_naive_stream_client_is_caught(stack: StackHandle, proxies: list[FaultProxyAdmin],
        run_experiment: Callable[..., ExperimentRun],
        summary: SummaryCollector, case: str, broken: set[str]) -> None:
    """Negative control: a client that prints tokens as they come, trusts [DONE] and restarts a broken
    stream must fail the verdicts that protect users."""
    env = stack.env
    rep.labels(epic="Resilience", feature="Mid-stream faults", story=f"negative control: {case}", suite="streams")

    def steps(run: Run) -> None:
        truth = _ask(_reference(env))
        fault = faults.AllOf([CASES[case][0](p) for p in proxies])
        t0 = time.time()
        cmd = f"{shlex.quote(sys.executable)} {EXAMPLES / 'naive_stream.py'} {{base_url}}"
        run.inject(fault)
        with run.phase("run the naive client"):
            got = [run_client_command("naive", cmd, env.endpoints.api, timeout_s=30) for _ in range(REQUESTS)]
        run.revert()
        log = stack.proxy_rows(since=t0 - 5.0)  # the replicas' side, over HTTP
        v = client_verdict("naive", got, [stream_attempts_for(a, log) for a in got], truth=truth.shown,
                           truth_finish=truth.finish_reason, expect_whole=CASES[case][1])
        failed = {r.check for r in v.failures}
        rep.attach_text("\n".join(r.line() for r in v.rows), "naive client verdict (expected to fail)")
        summary.set("streams", **{f"naive_caught_{case}": "yes" if broken <= failed else "NO"})
        assert broken <= failed, f"the naive client was not caught on {case}: failed rules {sorted(failed)}"

    run_experiment(Experiment(f"streams-naive-{case}", steps=steps))
