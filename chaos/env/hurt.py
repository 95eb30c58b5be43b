"""Which targets each recovery fault hurts: every target the environment marks for it, named.

A target's `hurt:` marks it: true (every recovery fault), false (none) or a list of faults; unset, a
stable target is hurt and a canary is not (the breaker suite's canary is not the recovery suite's).
`--target NAME` (pytest and `chaos env check`) picks targets by name instead, marks or not. A fault that
needs a second rank keeps, of those, the targets with TP > 1, so a TP 2 replica listed anywhere in the
file is found; the rank-link cut also needs that target's rank link through Toxiproxy. The plan's rows
and the suite's test ids come from here, so they name the same targets.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import get_args

from chaos.env import Environment
from chaos.env.model import TIMEOUT_HELD, RecoveryFault, Target
from chaos.errors import ConfigError

FAULTS: tuple[str, ...] = get_args(RecoveryFault)
TP_ONLY = ("nccl-rank-kill", "nccl-rank-freeze", "nccl-rank-link-cut", "nccl-timeout-allreduce-hang")
HELD = TIMEOUT_HELD  # of those, the faults held until the engine died of its own timeout


def tp_of(t: Target) -> int:
    """The target's TP size: the file's, else its container's once read (chaos/targets/container_facts.py)."""
    return t.tp_size


def marked(t: Target, fault: str | None) -> bool:
    """Whether target t's `hurt:` (or its pool, when unset) lets `fault` hurt it; None: any fault."""
    if t.hurt is None:
        return t.pool == "stable"
    if isinstance(t.hurt, bool):
        return t.hurt
    return bool(t.hurt) if fault is None else fault in t.hurt


def no_second_rank(t: Target, verb: str = "freeze") -> str | None:
    """Why target t has no rank 1 to `verb` (None when it has one)."""
    n = tp_of(t)
    return None if n >= 2 else f"target {t.name} runs TP {n}: there is no second rank to {verb}"


def no_rank_link(env: Environment, t: Target) -> str | None:
    if (why := no_second_rank(t)) is not None:
        return why
    if t.backend == "vllm":
        return (f"rank-link cut: vLLM's CPU ranks of {t.name} talk over shared memory, not TCP, so there is "
                "no link for Toxiproxy to cut (on GPUs it is NCCL over NVLink/IB)")
    return None if t.rank_proxies and env.toxiproxy is not None else f"target {t.name} has no rank link through Toxiproxy"


def no_engine_plugin(t: Target) -> str | None:
    """Why the engine plugin's all-reduce hang cannot reach target t (None when it can)."""
    if (why := no_second_rank(t)) is not None:
        return why
    if t.backend != "vllm" or not (t.vllm and t.vllm.engine_faults):
        return (f"target {t.name}: the all-reduce hang is the engine plugin's fault inside real vLLM "
                "(vllm.engine_faults: true; docs/engine-plugin.md); the rank freeze plays it elsewhere")
    return None


def _fit(env: Environment, fault: str | None) -> Callable[[Target], str | None]:
    if fault == "nccl-rank-freeze":
        return no_second_rank
    if fault == "nccl-rank-kill":
        return lambda t: no_second_rank(t, "kill")
    if fault == "nccl-timeout-allreduce-hang":
        return no_engine_plugin
    if fault == "nccl-rank-link-cut":
        return lambda t: no_rank_link(env, t)
    return lambda t: None


def check_names(env: Environment, only: Sequence[str], flag: str = "--target") -> None:
    """A --target that names no target of the environment is a one-line ConfigError."""
    known = [t.name for t in env.targets]
    for name in only:
        if name not in known:
            raise ConfigError(f"{flag} {name}: environment {env.name} has no such target "
                              f"(targets: {', '.join(known) or 'none'})")


def chosen(env: Environment, fault: str | None, only: Sequence[str] = ()) -> tuple[list[Target], str]:
    """(the targets `fault` hurts, in file order; why there are none). `fault` None: the no-fault
    baselines, observed on every target some recovery fault may hurt."""
    check_names(env, only)
    if only:
        pool, how = [t for t in env.targets if t.name in only], f"--target {', '.join(only)}"
    else:
        pool, how = [t for t in env.targets if marked(t, fault)], "marked for it"
    if not pool:
        if only:
            return [], f"{how} names no target"
        return [], (f"environment {env.name} has no target {fault or 'a recovery fault'} may hurt "
                    "(a stable target, or one whose hurt: lists it)")
    fit = _fit(env, fault)
    why = {t.name: fit(t) for t in pool}
    keep = [t for t in pool if why[t.name] is None]
    if keep:
        return keep, ""
    return [], "; ".join(w for w in why.values() if w)


def matrix(env: Environment, rows: Sequence[tuple[str | None, str]], only: Sequence[str] = ()
           ) -> list[tuple[str | None, str, str | None, str]]:
    """(fault, load, target or None, why none) for each (fault, load) row and each target it hurts; a
    row no target fits stays once, with the reason its test skips."""
    out: list[tuple[str | None, str, str | None, str]] = []
    for fault, load in rows:
        targets, why = chosen(env, fault, only)
        out += [(fault, load, t.name, "") for t in targets] or [(fault, load, None, why)]
    return out
