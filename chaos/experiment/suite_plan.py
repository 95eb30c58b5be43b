"""Know before you run: which suite of an environment will run, skip (and why) or be refused.

Each requirement below is the question a suite asks before it skips; the suites call these same
functions, so the table `chaos env check` prints and what a run then does cannot disagree. Some
answers exist only once the stack runs (the canary's measured traffic, a recorded baseline): those
rows say "decided at run time" and why.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urlparse

from chaos.env import Environment
from chaos.env.model import Target

RUN, SKIP, REFUSED, AT_RUN_TIME = "run", "skip", "refused", "at run time"


# -- requirements: None when met, else the reason the suite skips --------------------------------
def no_toxiproxy(env: Environment) -> str | None:
    return None if env.toxiproxy is not None else f"environment {env.name} has no Toxiproxy"


def client_proxy(env: Environment) -> str | None:
    """The Toxiproxy proxy clients go through: the one that listens on the API URL's host and port
    (80/443 when the URL names none), else one named "client"."""
    if env.toxiproxy is None:
        return None
    u = urlparse(env.endpoints.api)
    port = u.port or (443 if u.scheme == "https" else 80)
    for p in env.toxiproxy.proxies:
        host, _, lport = p.listen.rpartition(":")
        if lport.isdigit() and int(lport) == port and host in (u.hostname, "0.0.0.0", "", "[::]"):
            return p.name
    return next((p.name for p in env.toxiproxy.proxies if p.name == "client"), None)


def no_client_proxy(env: Environment) -> str | None:
    if (why := no_toxiproxy(env)) is not None:
        return why
    return None if client_proxy(env) else (f"no Toxiproxy proxy listens on the API endpoint {env.endpoints.api} "
                                           "(and none is named 'client')")


def no_gateway_admin(env: Environment) -> str | None:
    return None if env.endpoints.gateway_admin else f"environment {env.name} has no gateway admin endpoint"


def no_breaker_view(env: Environment) -> str | None:
    """The breaker verdict needs to know which replica served each request: the fault proxies' logs
    (any gateway), else the reference gateway's admin API and its pool header."""
    bare = [t.name for t in env.targets if not t.fault_proxy]
    if not bare or env.endpoints.gateway_admin:
        return None
    return (f"no fault proxy in front of replica {', '.join(bare)} and no gateway admin endpoint: "
            "nothing says which replica served each request")


def no_signing(env: Environment) -> str | None:
    """Signing is judged at the environment's own API, with the key its gateway checks."""
    var = env.breaker.hmac_key_env
    if not var:
        return (f"environment {env.name} sets no breaker.hmac_key_env: nothing says its gateway requires signed "
                "requests, so signing is not proven here")
    if not os.environ.get(var):
        return f"breaker.hmac_key_env names ${var}, which is not set here: the harness cannot sign a request"
    return None


def no_canary(env: Environment) -> str | None:
    return None if any(t.pool == "canary" for t in env.targets) else f"environment {env.name} has no canary pool"


def no_stable(env: Environment) -> str | None:
    return None if any(t.pool == "stable" for t in env.targets) else f"environment {env.name} has no stable target"


def no_fault_proxies(env: Environment) -> str | None:
    return None if any(t.fault_proxy for t in env.targets) else \
        f"environment {env.name} has no fault proxies in front of its replicas"


def sim_admin_reachable(t: Target) -> bool:
    """A simulator whose admin API (planted faults) the harness can call. It answers only on its own
    host's loopback: the simulator runs on this machine's, or in a container, which makes the call from
    inside itself on its host (chaos.faults.sim_exec); a process on another host has no such path."""
    return t.simulator is not None and (t.host.startswith("127.") or t.host in ("localhost", "::1")
                                        or t.kind == "docker")


def _remote_simulators(env: Environment, targets: list[Target]) -> str | None:
    far = [t.name for t in targets if t.simulator is not None and not sim_admin_reachable(t)]
    return (f"the simulator's admin API, which plants the defect, answers only on its own host's loopback; "
            f"{', '.join(far)} run(s) on another host as a process, with no container the call could be made "
            f"from") if far else None


def engine_death_unreachable(t: Target) -> str:
    """Why the engine death cannot be given to target `t` ("" when it can): the simulator's is an admin
    fault, planted through an API that answers only on its own host's loopback; a container on another
    host gets it from inside itself (chaos.faults.sim_exec), a process there cannot."""
    if t.backend == "simulator" and not sim_admin_reachable(t):
        return (f"target {t.name}: the simulator's engine death is an admin fault, and its admin API answers "
                f"only on its own host's loopback ({t.host} is another host, and the target is no container "
                f"the call could be made from)")
    return ""


def engine_plugin_on(t: Target) -> bool:
    """Whether target t is real vLLM with llm-chaos's engine plugin enabled (vllm.engine_faults)."""
    return t.backend == "vllm" and bool(t.vllm and t.vllm.engine_faults)


def no_simulator_replica(env: Environment) -> str | None:
    if any(sim_admin_reachable(t) or engine_plugin_on(t) for t in env.targets):
        return None
    return _remote_simulators(env, env.targets) or \
        ("the tokenizer crash on emoji (the seed's incident) is a defect planted in the simulator, or in real "
         "vLLM's tokenizer by the engine plugin (vllm.engine_faults: true); no replica here has either "
         "(test_special_characters_never_take_a_replica_down judges the corpus)")


def no_simulator_canary(env: Environment) -> str | None:
    canaries = [t for t in env.targets if t.pool == "canary"]
    if canaries and all(sim_admin_reachable(t) or engine_plugin_on(t) for t in canaries):
        return None
    return _remote_simulators(env, canaries) or \
        ("leak-trend: a memory leak is a defect inside the engine; the simulator plants one, and so does the "
         "engine plugin in real vLLM (vllm.engine_faults: true), which the canary lacks")


def stall_target(env: Environment) -> str | None:
    """The first replica a decode stall can be planted in, marked for recovery faults (a stable one unless
    `hurt:` says otherwise): a simulator whose admin API answers here, or real vLLM with the engine plugin."""
    from chaos.env.hurt import marked

    return next((t.name for t in env.targets if marked(t, None) and (sim_admin_reachable(t) or engine_plugin_on(t))),
                None)


def no_stall_target(env: Environment) -> str | None:
    """Why no decode stall can be planted here (None: it can); `chaos.experiment.suite.requires` skips with it."""
    if stall_target(env) is not None:
        return None
    return ("decode-stall is planted in the simulator or, in real vLLM, by the engine plugin (vllm.engine_faults: "
            f"true); environment {env.name} has no replica marked for recovery faults with either")


def no_progress_gateway(env: Environment) -> str | None:
    """Why the gateway acting on progress cannot be shown here (None: it can)."""
    gw = env.gateway
    if gw is None or gw.kind != "reference" or not env.endpoints.gateway_admin:
        return f"environment {env.name}: progress ejection is the reference gateway's (gateway.kind reference, its admin API)"
    if gw.reference.progress_eject_s <= 0:
        return f"environment {env.name} sets no gateway.reference.progress_eject_s: its gateway watches health only"
    return None


def standby_bases(env: Environment) -> list[Target]:
    """The stable targets a standby replica can be built from: local simulator or vLLM processes."""
    return [t for t in env.targets if t.pool == "stable" and t.kind == "process" and t.backend != "other"]


def no_local_standby(env: Environment) -> str | None:
    return None if standby_bases(env) else ("the standby replica is built from a local simulator or vLLM process target; "
                            f"environment {env.name} has none")


def no_degraded_floor(env: Environment) -> str | None:
    return None if env.degraded_floor else f"environment {env.name} sets no degraded_floor"


def missing_baselines(env: Environment) -> str | None:
    """The load suite's regression check skips for a workload without a recorded baseline file."""
    from chaos.load import baseline as bl

    missing = [w for w in bl.WORKLOADS if bl.missing(env, w)]  # the suite's own question
    if not missing:
        return None
    where = "the environment has no baseline_file" if not env.baseline_file else "no file"
    return (f"the regression check skips for {', '.join(missing)} ({where}): "
            "record one with `chaos baseline record`")


@dataclass(frozen=True)
class Entry:
    suite: str
    what: str
    destructive: bool
    needs: tuple[Callable[[Environment], str | None], ...] = ()
    # what is only known once the stack runs: a reason, or a question whose None means known now
    at_run_time: str | Callable[[Environment], str | None] = ""
    fault: str = ""  # a recovery fault (chaos/env/hurt.py): one row per target it hurts, naming the target


ENTRIES = (  # destructive: as the suites mark their tests (refused on a protected environment)
    Entry("smoke", "Toxiproxy proxies an echo server; a latency toxic applies", False),
    Entry("recovery", "GPU driver reset", True, fault="gpu-driver-reset"),
    Entry("recovery", "crash (SIGKILL)", True, fault="crash-sigkill"),
    Entry("recovery", "engine death (exit 0)", True, fault="engine-death-exit0"),
    Entry("recovery", "TP rank killed (SIGKILL)", True, fault="nccl-rank-kill"),
    Entry("recovery", "NCCL rank freeze", True, fault="nccl-rank-freeze"),
    Entry("recovery", "NCCL rank-link cut", True, fault="nccl-rank-link-cut"),
    Entry("recovery", "NCCL timeout: all-reduce hung on one rank (engine plugin)", True,
          fault="nccl-timeout-allreduce-hang"),
    Entry("recovery", "no-fault baselines", False, fault="baseline"),
    Entry("recovery", "cold start of a standby replica", False, (no_local_standby,)),
    Entry("recovery", "restart policy on-failure (negative control)", True, (no_local_standby,)),
    Entry("recovery", "decode stall: the stack restarts the replica within the SLA (progress truth)", True,
          (no_stall_target,)),
    Entry("recovery", "decode stall where only health is watched (negative control)", True, (no_stall_target,)),
    Entry("recovery", "plain restart (progress truth)", True, (no_stall_target,)),
    Entry("network", "client-path jitter, reset, timeout", False, (no_client_proxy,)),
    Entry("breaker", "degrade / rollback / OOM tiers on the canary", False, (no_breaker_view, no_canary),
          "the canary's traffic, measured once its window is full, must reach min_calls per window"),
    Entry("breaker", "leak trend", False, (no_breaker_view, no_simulator_canary)),
    Entry("routing", "cache headers, the model asked for, secrets", False),
    Entry("routing", "unsigned, tampered, expired, replayed requests refused", False, (no_signing,)),
    Entry("routing", "misrouting share", False, (no_gateway_admin, no_canary)),
    Entry("routing", "answers from another model", False, (no_fault_proxies,)),
    Entry("release", "gray release: shadow stage, then live stages, each gated", False, (no_canary, no_gateway_admin),
          "the gateway must answer GET /admin/release (the reference gateway's gray-release admin)"),
    Entry("streams", "SSE cut, stall, error chunk, duplicate", False, (no_fault_proxies,)),
    Entry("streams", "clients hang up mid-stream: every hop lets go within slas.cancel_s", False),
    Entry("clients", "backoff compliance of the reference and listed clients", False),
    Entry("inputs", "special characters; malformed requests", False),
    Entry("inputs", "tokenizer crash with and without NFKC", True, (no_simulator_replica,)),
    Entry("regressions", "kept fault schedules (suites/regressions)", True, (no_local_standby,)),
    Entry("load", "degraded-mode floor (a standby with batching off)", False, (no_degraded_floor, no_local_standby)),
    Entry("load", "shared-prefix reuse, KV memory and TTFT", False),
    Entry("load", "7:2:1 mix; 100 x xl burst", False, (), missing_baselines),
)


@dataclass(frozen=True)
class Row:
    suite: str
    what: str
    verdict: str
    reason: str
    budget_s: float | None = None  # a scenario's time budget in this suite (chaos/experiment/suite_budgets.py), where it runs
    target: str = ""  # the target a recovery row hurts (or observes, for its baseline)


def _per_target(env: Environment, e: Entry, only: Sequence[str]) -> list[tuple[str, str, str]]:
    """(what, target, skip reason) for each target a recovery entry's fault hurts; one row when none."""
    from chaos.env import hurt

    targets, why = hurt.chosen(env, None if e.fault == "baseline" else e.fault, only)
    if not targets:
        return [(e.what, "", why)]
    out = []
    for t in targets:
        tp = hurt.tp_of(t)
        skip = engine_death_unreachable(t) if e.fault == "engine-death-exit0" else ""
        out.append((f"{e.what} on {t.name}" + (f" (TP {tp})" if e.fault in hurt.TP_ONLY else ""), t.name, skip))
    return out


def _note(env: Environment, e: Entry, target: str) -> str:
    """What a run row depends on that the file or the container decided: the engine's timeout the rank
    freeze and link cut wait for, and where it was read."""
    from chaos.env import hurt
    from chaos.experiment import suite_budgets as budgets

    if e.fault not in hurt.HELD or not target:
        return ""
    _, why = budgets.engine_timeout(env.target(target))
    return f"waits for the engine's timeout: {why}"


def plan(env: Environment, *, allow_destructive: bool, only: Sequence[str] = ()) -> list[Row]:
    """One row per entry (per target hurt, for a recovery fault; `only`: the --target names): run, skip
    (the suite's own reason), refused (protected, destructive), or run with a condition decided at run time."""
    from chaos.experiment import suite_budgets as budgets

    rows = []
    for e in ENTRIES:
        for what, target, skip in (_per_target(env, e, only) if e.fault else [(e.what, "", "")]):
            why = skip or next((r for r in (need(env) for need in e.needs) if r), None)
            if why:
                rows.append(Row(e.suite, what, SKIP, why, target=target))
            elif e.destructive and env.safety.protected and not allow_destructive:
                rows.append(Row(e.suite, what, REFUSED, f"environment {env.name} is protected; pass --allow-destructive",
                                target=target))
            elif (later := e.at_run_time(env) if callable(e.at_run_time) else e.at_run_time):
                rows.append(Row(e.suite, what, AT_RUN_TIME, later, budgets.for_suite(env, e.suite).total, target))
            else:
                rows.append(Row(e.suite, what, RUN, _note(env, e, target), budgets.for_suite(env, e.suite).total,
                                target))
    return rows


def format_plan(rows: list[Row]) -> list[str]:
    """Plain-text table lines (terminal and report); `budget` is how long one scenario of the suite may
    run before it fails naming the phase that overran (chaos/experiment/suite_budgets.py)."""
    from chaos.experiment.suite_budgets import shown

    budget = {id(r): shown(r.budget_s) if r.budget_s is not None else "" for r in rows}
    w1, w2 = max(len(r.suite) for r in rows), max(len(r.what) for r in rows)
    w3, w4 = max(len(r.verdict) for r in rows), max(len("budget"), *(len(b) for b in budget.values()))
    out = [f"{'suite':<{w1}}  {'scenarios':<{w2}}  {'verdict':<{w3}}  {'budget':<{w4}}  why"]
    out += [f"{r.suite:<{w1}}  {r.what:<{w2}}  {r.verdict:<{w3}}  {budget[id(r)]:<{w4}}  {r.reason}".rstrip() for r in rows]
    return out
