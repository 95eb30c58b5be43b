"""How long each suite's scenario may take, derived from the environment it runs against.

A scenario's phases each get a budget from the figure that bounds them (the load's duration x
time_scale, the SLAs' recovery_s, steady_state_s and cold_start_s, the engine's own timeout on a
frozen rank, the abort limit on a fault's age) plus a margin (chaos.experiment.budget.margin); the
scenario's budget is their sum. The `run_experiment` fixture holds each phase to its share (a Watchdog on
the scenario's clock), so an environment at time_scale 1.0 gets the time its SLAs give it and a
hung scenario fails naming the phase. The pytest plugin sets each suite test's pytest-timeout above
that sum (`item_ceiling_s`), the last resort for a call that never returns; `chaos env check`'s plan
shows the figure.

Phase names are the ones the run handle's steps and the suites use; a phase the budget does not name
counts only against the sum.
"""
from __future__ import annotations

from collections.abc import Callable

from chaos.env import Environment
from chaos.env.model import BreakerPolicy, Target
from chaos.experiment import answers_steps
from chaos.experiment.budget import Budget, PhaseBudget, derived, margin
from chaos.faults.base import recover_bound_s
from chaos.targets.container_facts import EXECUTE_TIMEOUT_DEFAULT_S, EXECUTE_TIMEOUT_VAR, facts_of

START_S = 60.0    # start a load generator, observers or one process: no figure in the environment bounds it
VERIFY_S = 60.0   # read the records and logs, judge, attach the tables
LOAD_GRACE_S = 30.0  # the load runner's own start-up and stop grace (chaos/load/runner.py)
ENGINE_DEATH_SLACK_S = 15.0  # the recovery suite's wait beyond the engine's timeout
# vLLM's own teardown after the execute-model timeout, which a frozen rank sits through, bounds when the engine
# (VLLM::EngineCore) is gone: it first hands ENGINE_CORE_DEAD to its output thread and joins it for up to 5 s
# (vllm/v1/engine/core.py, EngineCoreProc._send_engine_dead), then its executor waits
# VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS (default 5) for its workers, SIGTERMs them, waits 4 s, then SIGKILLs
# (vllm/v1/executor/multiproc_executor.py, _ensure_worker_termination). Under `vllm serve` the API server is
# usually faster: on ENGINE_CORE_DEAD uvicorn stops, and the engine client's shutdown SIGTERMs the engine core,
# waits --shutdown-timeout (default 0) and SIGKILLs its whole process tree, the frozen rank included
# (vllm/v1/utils.py shutdown -> kill_process_tree): measured 0.2 s after the timeout on the stripped vLLM image.
# The replica's restart comes later: its container exits only when its last process has, and the SIGKILLed
# frozen rank took 0.3-0.7 s, and 18 s while its core was held by another replica's busy-polling worker
# (docs/vllm-fidelity.md); that is waited for separately (restart_after_engine_death)
VLLM_ENGINE_DEAD_SEND_S = 5.0  # fixed in vLLM: the output thread's join
VLLM_WORKER_SHUTDOWN_VAR, VLLM_WORKER_SHUTDOWN_S = "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS", 5.0  # vLLM's default
VLLM_SIGTERM_WAIT_S = 4.0  # fixed in vLLM
VLLM_EXECUTE_MODEL_TIMEOUT_S = EXECUTE_TIMEOUT_DEFAULT_S  # VLLM_EXECUTE_MODEL_TIMEOUT_SECONDS's default


def _s(x: float) -> str:
    return f"{x:g}"


def engine_timeout(cfg: Target) -> tuple[float, str]:
    """How long the engine waits on a frozen or cut-off rank before it dies, and which setting says so."""
    if cfg.simulator:
        return cfg.simulator.collective_timeout_s, f"{cfg.name}'s simulator collective_timeout_s " \
                                                   f"{_s(cfg.simulator.collective_timeout_s)}"
    if cfg.vllm and cfg.vllm.execute_model_timeout_s:  # the file overrides what the container says
        return cfg.vllm.execute_model_timeout_s, f"{cfg.name}'s vllm.execute_model_timeout_s " \
                                                 f"{_s(cfg.vllm.execute_model_timeout_s)}"
    facts = facts_of(cfg)
    if facts is not None and facts.execute_model_timeout_s:
        return facts.execute_model_timeout_s, f"{EXECUTE_TIMEOUT_VAR} {_s(facts.execute_model_timeout_s)} " \
                                              f"read from container {facts.container}"
    return VLLM_EXECUTE_MODEL_TIMEOUT_S, f"vLLM's default execute-model timeout {_s(VLLM_EXECUTE_MODEL_TIMEOUT_S)}"


def vllm_worker_teardown(cfg: Target) -> float:
    """vLLM's engine teardown after the timeout: the ENGINE_CORE_DEAD send (5 s at most), its worker shutdown wait
    (the target's own setting, from the file's env or read from its container, else vLLM's default) and the fixed
    4 s after SIGTERM."""
    facts = facts_of(cfg)
    raw = cfg.env.get(VLLM_WORKER_SHUTDOWN_VAR) or (facts.variables.get(VLLM_WORKER_SHUTDOWN_VAR) if facts else None)
    try:
        shutdown = float(raw) if raw is not None else VLLM_WORKER_SHUTDOWN_S
    except ValueError:
        shutdown = VLLM_WORKER_SHUTDOWN_S
    return VLLM_ENGINE_DEAD_SEND_S + shutdown + VLLM_SIGTERM_WAIT_S


def engine_death_wait(cfg: Target) -> tuple[float, str]:
    """How long to wait for the engine to die of a held rank fault: its timeout, vLLM's engine teardown, a slack."""
    t, why = engine_timeout(cfg)
    teardown = vllm_worker_teardown(cfg) if cfg.backend == "vllm" else 0.0
    return t + teardown + ENGINE_DEATH_SLACK_S, (f"{why} + {_s(teardown)} s of vLLM's engine teardown" if teardown
                                                 else why) + f" + {_s(ENGINE_DEATH_SLACK_S)} s"


def restart_after_engine_death(env: Environment) -> tuple[float, str]:
    """How long a replica whose engine died of a held fault may take to be restarted by its supervisor: all its
    processes must exit first (a SIGKILLed frozen rank took up to 18 s on a starved core, docs/vllm-fidelity.md),
    and no figure of vLLM's bounds that. It is the start of the replica's recovery, so slas.recovery_s bounds it: a
    replica not even restarted by then has not recovered, which the recovery verdict then says."""
    return env.slas.recovery_s, f"slas.recovery_s {_s(env.slas.recovery_s)}"


def _window(env: Environment) -> float:
    return max(1.0, 30.0 * env.time_scale)  # the suites' rolling window: sc.scaled(30)


def common(env: Environment) -> list[PhaseBudget]:
    """The phases of the run handle's own steps (chaos/experiment/run.py), in the order a run meets them."""
    s, ts = env.slas, env.time_scale
    bound = recover_bound_s(s)
    bound_why = f"max(slas.cold_start_s {_s(s.cold_start_s)}, 2 x slas.recovery_s {_s(s.recovery_s)})"
    load = env.load.duration_s * ts
    return [
        PhaseBudget("start load", START_S, "starting the load generator"),
        derived("steady state", 3.0, "the 3 s pre-fault check"),
        derived("inject", bound, f"a replica fault proven within {bound_why}"),
        derived("hold fault", env.safety.abort.max_fault_duration_s,
                f"safety.abort.max_fault_duration_s {_s(env.safety.abort.max_fault_duration_s)}"),
        derived("revert", bound, f"a reverted replica healthy within {bound_why}"),
        derived("recover", 2 * s.recovery_s, f"2 x slas.recovery_s {_s(s.recovery_s)}"),
        derived("steady state after recovery", max(2 * _window(env) + 1, s.steady_state_s + _window(env)),
                f"slas.steady_state_s {_s(s.steady_state_s)} + a {_s(_window(env))} s window"),
        derived("drain load", 2 * load + LOAD_GRACE_S,
                f"2 x load.duration_s {_s(env.load.duration_s)} x time_scale {_s(ts)} + the runner's grace"),
        PhaseBudget("verify", VERIFY_S, "judging the records"),
    ]


def _golden(env: Environment, *phases: str) -> list[PhaseBudget]:
    """The answers verdict's waits for its answers (chaos/experiment/answers_steps.py)."""
    return [derived(p, answers_steps.golden_wait_s(env), f"60 s x time_scale {_s(env.time_scale)}") for p in phases]


def _recovery(env: Environment) -> list[PhaseBudget]:
    s = env.slas
    phases = [p for p in common(env) if p.phase not in ("hold fault", "drain load")]
    phases += _golden(env, answers_steps.PHASE, answers_steps.PHASE_AFTER)
    from chaos.env.hurt import HELD, chosen

    held = [t for f in HELD for t in chosen(env, f)[0]]
    if held:  # the rank freeze and link cut hold until the engine died of its own timeout: the longest one's
        t, why = max((engine_death_wait(x) for x in held), key=lambda tw: tw[0])
        phases.append(derived("wait for the engine to die", t, why))
        phases.append(derived("wait for the replica's restart", *restart_after_engine_death(env)))
    return phases + [
        derived("no fault: same load, same observers", max(1.0, 20 * env.time_scale), "20 s x time_scale"),
        PhaseBudget("start a new replica", START_S, "starting a process"),
        derived("wait until it serves a real completion", 2 * s.cold_start_s, f"2 x slas.cold_start_s {_s(s.cold_start_s)}"),
    ]


def _load(env: Environment) -> list[PhaseBudget]:
    from chaos.load import baseline as bl

    mix = env.load.duration_s * 2 * env.time_scale
    burst = bl.burst_deadline_s(env)
    run = derived("run load", max(mix, burst) + LOAD_GRACE_S,
                  f"2 x load.duration_s {_s(env.load.duration_s)} x time_scale {_s(env.time_scale)} + grace"
                  if mix >= burst else f"the burst's deadline, 100 x the {bl.largest_class(env)} class's E2E P99 + 30 s, "
                                       "+ grace")
    return [run, PhaseBudget("verify", VERIFY_S, "judging the records")]


def _network(env: Environment) -> list[PhaseBudget]:
    settle = max(env.retry.deadline_s * 0.5, _window(env))
    return common(env) + [derived("steady state after revert", settle,
                                  f"max(retry.deadline_s {_s(env.retry.deadline_s)} / 2, a {_s(_window(env))} s window)")]


# the breaker tier's wait for a full canary window (chaos.experiment.breaker_tier): its budget's phase by name
BREAKER_FILL = "steady state: the canary's breaker window is full"


def breaker_steady_s(policy: BreakerPolicy) -> float:
    """The breaker tier's steady state after its load starts: half a breaker window, 3 s at least."""
    return max(3.0, policy.window_s * 0.5)


def _breaker(env: Environment) -> list[PhaseBudget]:
    p = env.breaker
    steady = derived("steady state", breaker_steady_s(p), f"half of breaker.window_s {_s(p.window_s)}, 3 s at least")
    return [steady if b.phase == "steady state" else b for b in common(env)] + _golden(env, answers_steps.PHASE) + [
        derived(BREAKER_FILL, 2 * p.window_s, f"2 x breaker.window_s {_s(p.window_s)}"),
        derived("recovery: half-open probing, then closed", 2 * p.window_s + 10 * p.open_wait_s + 2 * p.reaction_allowance_s,
                f"breaker.window_s {_s(p.window_s)}, open_wait_s {_s(p.open_wait_s)}, reaction_allowance_s "
                f"{_s(p.reaction_allowance_s)}"),
    ]


SUITES: dict[str, Callable[[Environment], list[PhaseBudget]]] = {
    "recovery": _recovery, "load": _load, "network": _network, "breaker": _breaker}


def for_suite(env: Environment, suite: str | None) -> Budget:
    """The budget of one scenario of `suite` (a suite this module does not know: the run handle's own steps)."""
    return Budget(SUITES.get(suite or "", common)(env), name=suite or "scenario")


def stack_allowance_s(env: Environment) -> float:
    """Before a suite test's scenario starts: the stack's start (the session's first test) and the wait
    for every replica to serve again, each bounded by slas.cold_start_s."""
    return env.slas.cold_start_s + env.warmup_s


def item_ceiling_s(env: Environment, suite: str | None) -> float:
    """pytest-timeout for one suite test: above the scenario's budget and the stack's start, so the
    budget's message (the phase that overran) is what a user sees, and a process stuck in a call that
    never returns still ends."""
    total = for_suite(env, suite).total + stack_allowance_s(env)
    return round(total + margin(total), 0)


def suite_of(parts: tuple[str, ...]) -> str | None:
    """The suite a test file belongs to: the folder under `suites/` (None elsewhere)."""
    return parts[parts.index("suites") + 1] if "suites" in parts[:-2] else None


def shown(seconds: float) -> str:
    """A duration as the plan prints it."""
    return f"{seconds:.0f} s" if seconds < 600 else f"{seconds / 60:.0f} min"
