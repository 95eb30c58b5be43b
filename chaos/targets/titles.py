"""Which process of a replica is what, from its process title (real vLLM) or command line (the simulator).

Real vLLM 0.32 names its processes with setproctitle (vllm-behaviour.md, measured here):
    API server   `vllm serve ...`  (the main process)
    engine core  `VLLM::EngineCore`
    TP workers   `VLLM::Worker` at TP 1, `VLLM::Worker_TP0`, `VLLM::Worker_TP1`, ... at TP > 1
                 (older releases: `VllmWorker-N`)
The simulator: the engine is the main process (`chaos.stack.sim` / `chaos sim`), and ranks 1..N-1 are
`chaos-sim-rank N` children. So "rank 0" is a worker on vLLM and the main process on the simulator;
counting the API server as rank 0 on vLLM would freeze the wrong process.
"""
from __future__ import annotations

import re
from typing import Sequence

VLLM_ENGINE_TITLE = "VLLM::EngineCore"
_ENGINE_RE = re.compile(r"VLLM::EngineCore(?:\s|$)")
VLLM_WORKER_RE = re.compile(r"(?:VLLM::Worker(?:_TP(\d+))?|VllmWorker[-_ ]?(\d+))(?:\s|$)")
SIM_RANK_RE = re.compile(r"chaos-sim-rank(?:\s+--rank)?[-_ =]*(\d+)")
SIM_MAIN_MARKERS = ("chaos.stack.sim", "chaos sim")


def is_vllm(procs: Sequence[tuple[int, str]]) -> bool:
    """True when any process of the replica carries a vLLM title."""
    return any(_ENGINE_RE.match(cmd) or VLLM_WORKER_RE.match(cmd) for _, cmd in procs)


def vllm_workers(procs: Sequence[tuple[int, str]]) -> list[int]:
    """vLLM's TP worker pids ordered by rank (`VLLM::Worker` without a number is rank 0 of TP 1)."""
    ranked = []
    for pid, cmd in procs:
        m = VLLM_WORKER_RE.match(cmd)
        if m:
            ranked.append((int(m.group(1) or m.group(2) or 0), pid))
    return [pid for _, pid in sorted(ranked)]


def engine_pid(procs: Sequence[tuple[int, str]], main: int | None) -> int | None:
    """The engine: `VLLM::EngineCore` on vLLM, the main process on the simulator."""
    for pid, cmd in procs:
        if _ENGINE_RE.match(cmd):
            return pid
    return None if is_vllm(procs) else main


def sim_main(procs: Sequence[tuple[int, str]]) -> int | None:
    """The simulator's main process, found by its command line (inside a container)."""
    mains = [pid for pid, cmd in procs if any(k in cmd for k in SIM_MAIN_MARKERS)
             and not SIM_RANK_RE.search(cmd) and "docker-init" not in cmd]
    return mains[-1] if mains else None


def rank_pids(procs: Sequence[tuple[int, str]], main: int | None) -> list[int]:
    """TP ranks, rank 0 first: vLLM's workers, or the simulator's engine plus its rank workers."""
    if is_vllm(procs):
        return vllm_workers(procs)
    ranked = sorted((int(m.group(1)), pid) for pid, cmd in procs if (m := SIM_RANK_RE.search(cmd)))
    if main is None:
        main = sim_main(procs)
    return ([main] if main is not None else []) + [pid for _, pid in ranked]
