"""Inputs: the special-character corpus (emoji-dense text, ZWJ sequences, combining marks, RTL, CJK)
never takes a replica down, and malformed requests get a 4xx, never a 5xx or a dead server."""
from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from chaos import (
    Experiment,
    ExperimentRun,
    Run,
    StackHandle,
    SummaryCollector,
    Verdict,
    accounting_verdict,
    judge,
    plan,
    requires,
)
from chaos import evidence as rep

BAD_REQUESTS = {
    "not-json": (b"{not json", "application/json"),
    "wrong-content-type": (b"model=x", "text/plain"),
    "unknown-model": (json.dumps({"model": "no-such-model", "prompt": "hi"}).encode(), "application/json"),
    "negative-max-tokens": (json.dumps({"model": "{model}", "prompt": "hi", "max_tokens": -5}).encode(),
                            "application/json"),
    "prompt-wrong-type": (json.dumps({"model": "{model}", "prompt": {"a": 1}}).encode(), "application/json"),
    "invalid-utf8": (b'{"model": "{model}", "prompt": "\xff\xfe"}', "application/json"),
    "negative-temperature": (json.dumps({"model": "{model}", "prompt": "hi", "temperature": -1}).encode(),
                           "application/json"),
}


def _post(url: str, body: bytes, ctype: str) -> int:
    req = urllib.request.Request(url, data=body, headers={"Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return int(r.status)
    except urllib.error.HTTPError as e:
        return e.code


@pytest.mark.proves("emoji-nfkc")
def test_special_characters_never_take_a_replica_down(stack: StackHandle, run_experiment: Callable[..., ExperimentRun],
        summary: SummaryCollector) -> None:
    env = stack.env
    rep.labels(epic="Robustness", feature="Inputs", story="special-character corpus", suite="inputs")
    names = [t.name for t in env.targets]

    def steps(run: Run) -> None:
        for n in names:
            run.observe(stack.direct_url(n), source=n, completion=False)
        run.observe(env.endpoints.api)
        restarts = {n: stack.target(n).restart_count() for n in names}
        with run.phase("send the corpus", workload="special"):
            run.start_load(workload="special", duration_s=run.scaled(60), users=4)
            records = run.finish_load()
        v = Verdict("replicas stayed up")
        for n in names:
            changes = [e for e in run.timeline.find_events("state", f"health:{n}") if e.detail.get("from") is not None]
            # down: an error status or a refused connection. A /health answer slower than the prober's
            # timeout is a busy API server (real vLLM tokenizes on its event loop), not a replica down
            down = [e for e in changes if e.detail.get("to") in ("down", "unreachable")]
            slow = [e for e in changes if e.detail.get("to") == "timeout"]
            v.add(f"{n}.restarts", 0, stack.target(n).restart_count() - restarts[n],
                  stack.target(n).restart_count() == restarts[n])
            v.add(f"{n}.health_drops", 0, len(down), not down, "error status or connection refused at /health")
            v.add(f"{n}.slow_health_answers", "shown", len(slow), None, "no /health answer within the prober's timeout")
        v.add("requests_sent", ">= 1", len(records), bool(records))
        summary.add("inputs", special_requests=len(records))
        run.judge("the replicas stayed up and answered", [v, accounting_verdict(records, stack.server_log(records=records))])

    run_experiment(Experiment("inputs-special-characters", steps=steps, hurt=names))


@pytest.mark.parametrize("case", list(BAD_REQUESTS))
def test_bad_request_gets_4xx(stack: StackHandle, case: str) -> None:
    env = stack.env
    rep.labels(epic="Robustness", feature="Inputs", story="malformed requests", suite="inputs")
    body, ctype = BAD_REQUESTS[case]
    body = body.replace(b"{model}", env.endpoints.model.encode())
    status = _post(f"{env.endpoints.api}/v1/completions", body, ctype)
    assert 400 <= status < 500, f"{case}: expected a 4xx from {env.endpoints.api}, got {status}"
    ok = _post(f"{env.endpoints.api}/v1/completions",
               json.dumps({"model": env.endpoints.model, "prompt": "still alive?", "max_tokens": 2}).encode(),
               "application/json")
    assert ok == 200, f"after {case} a normal request got {ok}"


def _emoji_prompts() -> list[str]:
    """The whole special-character corpus: emoji-dense rows, some not NFC-normalized (as users type them)."""
    from chaos.load.workloads import special_corpus

    return [r["text"] for r in special_corpus()]


def _send_corpus(url: str, model: str, prompts: list[str]) -> list[int]:
    out = []
    for text in prompts:
        body = json.dumps({"model": model, "messages": [{"role": "user", "content": text}], "max_tokens": 4})
        out.append(_post(f"{url}/v1/chat/completions", body.encode(), "application/json"))
    return out


@pytest.mark.destructive
@pytest.mark.parametrize("normalize", [True, False], ids=["normalization-on", "normalization-off-negative-control"])
def test_unicode_normalization_guards_the_tokenizer(stack: StackHandle, extra_gateway: Callable[..., AbstractContextManager[str]],
        summary: SummaryCollector,
        normalize: bool) -> None:
    """With the replicas' tokenizer-crash fault armed (the seed's emoji incident: the simulator's planted
    defect kills its replica; in real vLLM, through the engine plugin, the tokenizer raises and vLLM fails
    that request), NFKC at the gateway keeps every prompt answered and no crash fires; with normalization
    off the same corpus crashes the tokenizer, and the suite says so."""
    from chaos import faults

    env = stack.env
    rep.labels(epic="Robustness", feature="Inputs", story=f"tokenizer crash, {'with' if normalize else 'without'} NFKC",
               suite="inputs")
    requires(env, plan.no_simulator_replica)
    crash = stack.tokenizer_crash_faults()
    names = list(crash)
    restarts = {n: stack.target(n).restart_count() for n in names}
    prompts = _emoji_prompts()
    flag = "--normalize" if normalize else "--no-normalize"
    with rep.phase(f"arm tokenizer-crash on {', '.join(names)}"), faults.AllOf(list(crash.values())):
        with extra_gateway(flag) as url, rep.phase(f"send {len(prompts)} emoji-dense prompts ({flag})"):
            statuses = _send_corpus(url, env.endpoints.model, prompts)
        # where the engine plugin armed it: the processes in which real vLLM's tokenizer raised
        fired = {n: len(f.fired_pids()) for n, f in crash.items() if hasattr(f, "fired_pids")}
    with rep.phase("let supervisors restart anything that died"):
        for n in names:
            stack.target(n).wait_healthy(env.slas.recovery_s)
    died = {n: stack.target(n).restart_count() - restarts[n] for n in names}
    v, crashes, failed = _crash_verdict(normalize, statuses, died, fired)
    summary.add("inputs", **{f"tokenizer_deaths_{'nfkc' if normalize else 'raw'}": sum(died.values()),
                             f"tokenizer_crashes_{'nfkc' if normalize else 'raw'}": crashes})
    if not normalize:
        rep.attach_text("Negative control: without NFKC normalization the tokenizer-crash fault fired "
                        f"{crashes} time(s) (replica deaths {json.dumps(died)}, engine-plugin processes {json.dumps(fired)}, "
                        f"{len(failed)} prompt(s) failed); the suite caught it.", "negative control")
    judge("the replicas' fate", [v])


def _crash_verdict(normalize: bool, statuses: list[int], died: dict[str, int],
                   fired: dict[str, int]) -> tuple[Verdict, int, list[int]]:
    """The replicas' fate under the corpus: crashes (deaths plus plugin firings) and failed prompts, 0 with
    NFKC; without it at least one crash (the negative control), deaths and failures shown."""
    crashes = sum(died.values()) + sum(fired.values())
    failed = [s for s in statuses if not 200 <= s < 300]
    v = Verdict("replicas under the emoji corpus")
    v.add("prompts_sent", ">= 1", len(statuses), bool(statuses))
    v.add("tokenizer_crashes", 0 if normalize else ">= 1 (negative control)", crashes,
          crashes == 0 if normalize else crashes >= 1,
          f"replica deaths {json.dumps(died)}; processes whose tokenizer raised (engine plugin) {json.dumps(fired)}")
    v.add("replica_deaths", 0 if normalize else "shown", sum(died.values()),
          sum(died.values()) == 0 if normalize else None, "real vLLM answers a tokenizer crash with a 4xx and lives")
    v.add("prompts_failed", 0 if normalize else "shown", len(failed), not failed if normalize else None,
          f"statuses {sorted(set(statuses))}")
    return v, crashes, failed
