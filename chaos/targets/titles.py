"""Which process of a replica is what, from its process title (real vLLM) or command line (the simulator).

vLLM names its processes with setproctitle, `{VLLM_PROCESS_NAME_PREFIX}::{name}` (prefix `VLLM` by
default; vllm/utils/system_utils.py set_process_title). Every title vLLM 0.32 sets, read from its source
(tests/unit/targets/fixtures/vllm_titles.json records each with its file and line):
    `EngineCore`, `EngineCore_DP{d}`        the V1 engine core (one per data-parallel rank)
    `Worker`                                a worker before its parallel groups exist, or at TP 1
    `Worker[_DP{d}][_PP{p}][_PCP{c}][_TP{t}][_DCP{k}][_EP{e}]`  a worker; a part only when its size > 1
    `APIServer_{i}`                         one of `--api-server-count` > 1 API servers
    `APIServer_DP{d}`                       the API server of one DP rank (the DP supervisor)
    `DPCoordinator`                         the data-parallel coordinator
The single API server keeps its command line (`vllm serve ...`); older releases called workers
`VllmWorker-N`. The simulator: the engine is the main process (`chaos.stack.sim` / `chaos sim`) and
TP ranks 1..N-1 are `chaos-sim-rank N` children, so "rank 0" is a worker on vLLM and the main process on
the simulator (counting the API server as rank 0 would freeze the wrong process).

A title under vLLM's prefix that none of these describe, or a choice more than one process fits, is
refused with the titles seen (TargetError): the fault would otherwise aim at a guess.
"""
from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from chaos.errors import TargetError

VLLM_ENGINE_TITLE = "VLLM::EngineCore"
_TITLE_RE = re.compile(r"(?P<prefix>[A-Za-z0-9_.-]+)::(?P<name>[A-Za-z]+)(?P<rest>(?:_[A-Z]*\d+)*)")
_PART_RE = re.compile(r"_([A-Z]*)(\d+)")
_WORKER_ORDER = ("DP", "PP", "PCP", "TP", "DCP", "EP")  # the order multiproc_executor appends them in
_OLD_WORKER_RE = re.compile(r"VllmWorker[-_ ]?(\d+)$")
SIM_RANK_RE = re.compile(r"chaos-sim-rank(?:\s+--rank)?[-_ =]*(\d+)")
SIM_MAIN_MARKERS = ("chaos.stack.sim", "chaos sim")
# a submodule (the rank worker, chaos.stack.sim.rank) is never the main, even in a command line cut before its rank
SIM_RANK_MODULE = "chaos.stack.sim."
Procs = Sequence[tuple[int, str]]


@dataclass(frozen=True)
class Title:
    """One vLLM process title, parsed: its role and its ranks (None: that dimension has size 1)."""

    role: str  # "engine", "worker", "api-server", "dp-coordinator"
    dp: int | None = None
    pp: int | None = None
    tp: int | None = None
    api: int | None = None
    other: tuple[tuple[str, int], ...] = ()  # PCP, DCP, EP: recognised, not selectable

    def rank(self, dim: str) -> int:
        value: int | None = getattr(self, dim)
        return value or 0


def _first(cmd: str) -> str:
    parts = cmd.split()
    return parts[0] if parts else ""


def parse(cmd: str) -> Title | None:
    """The vLLM title of a command line, or None when it is not one vLLM sets (see unknown_titles)."""
    head = _first(cmd)
    if m := _OLD_WORKER_RE.match(head):
        return Title("worker", tp=int(m.group(1)))
    m = _TITLE_RE.fullmatch(head)
    if not m:
        return None
    name, parts = m.group("name"), [(k, int(v)) for k, v in _PART_RE.findall(m.group("rest"))]
    keys = [k for k, _ in parts]
    if name == "EngineCore" and keys in ([], ["DP"]):
        return Title("engine", dp=parts[0][1] if parts else None)
    if name == "DPCoordinator" and not parts:
        return Title("dp-coordinator")
    if name == "APIServer" and keys == [""]:
        return Title("api-server", api=parts[0][1])
    if name == "APIServer" and keys == ["DP"]:
        return Title("api-server", dp=parts[0][1])
    if name == "Worker" and len(set(keys)) == len(keys) and all(k in _WORKER_ORDER for k in keys) \
            and keys == sorted(keys, key=_WORKER_ORDER.index):
        d = dict(parts)
        return Title("worker", dp=d.get("DP"), pp=d.get("PP"), tp=d.get("TP"),
                     other=tuple((k, v) for k, v in parts if k in ("PCP", "DCP", "EP")))
    return None


def _prefix(cmd: str) -> str | None:
    m = _TITLE_RE.fullmatch(_first(cmd))
    return m.group("prefix") if m and parse(cmd) is not None else None


def unknown_titles(procs: Procs) -> list[str]:
    """Titles under vLLM's prefix (VLLM, or the one its recognised titles carry) that vLLM does not set."""
    prefixes = {"VLLM"} | {p for _, cmd in procs if (p := _prefix(cmd))}
    return [_first(cmd) for _, cmd in procs
            if parse(cmd) is None and any(_first(cmd).startswith(f"{p}::") for p in prefixes)]


def is_vllm(procs: Procs) -> bool:
    """True when any process of the replica carries a vLLM title (known or not)."""
    return any(parse(cmd) for _, cmd in procs) or bool(unknown_titles(procs))


def _seen(procs: Procs) -> str:
    return ", ".join(f"{pid} {cmd[:60]!r}" for pid, cmd in procs) or "none"


def _known(procs: Procs) -> list[tuple[Title, int]]:
    """Each process's parsed title; refuses a layout with a vLLM title it does not know."""
    unknown = unknown_titles(procs)
    if unknown:
        raise TargetError(f"unknown vLLM process layout: titles {', '.join(unknown)} are none vLLM 0.32 sets "
                          f"(processes seen: {_seen(procs)}); refusing to guess which process to hurt")
    return [(t, pid) for pid, cmd in procs if (t := parse(cmd)) is not None]


def vllm_workers(procs: Procs) -> list[int]:
    """vLLM's worker pids in global rank order (DP, then PP, then TP)."""
    ws = [(t, pid) for t, pid in _known(procs) if t.role == "worker"]
    return [pid for t, pid in sorted(ws, key=lambda w: (w[0].rank("dp"), w[0].rank("pp"), w[0].rank("tp"), w[1]))]


def select_worker(procs: Procs, main: int | None, *, tp: int | None = None, pp: int | None = None,
                  dp: int | None = None) -> int:
    """The one process of TP rank `tp`, PP rank `pp`, DP rank `dp`; a rank not named must be the
    same for every match, else the choice is refused (TargetError) naming the candidates."""
    if not is_vllm(procs):
        if pp or dp:
            raise TargetError(f"pp_rank {pp}/dp_rank {dp}: the simulator has tensor-parallel ranks only")
        ranks = rank_pids(procs, main)
        if tp is None and len(ranks) > 1:
            raise TargetError(f"ranks {ranks}: name tp_rank")
        if len(ranks) <= (tp or 0):
            raise TargetError(f"no TP rank {tp or 0}: ranks {ranks} (processes seen: {_seen(procs)})")
        return ranks[tp or 0]
    want = {"tp": tp, "pp": pp, "dp": dp}
    workers = [(t, pid) for t, pid in _known(procs) if t.role == "worker"]
    hits = [(t, pid) for t, pid in workers if all(v is None or t.rank(k) == v for k, v in want.items())]
    asked = " ".join(f"{k}_rank={v}" for k, v in want.items() if v is not None) or "no rank named"
    titles = ", ".join(f"{pid} {_first(cmd)}" for pid, cmd in procs if parse(cmd) is not None)
    if not hits:
        raise TargetError(f"no vLLM worker with {asked}; workers seen: {titles}")
    if len(hits) > 1:
        open_dims = [k for k in ("dp", "pp", "tp") if len({t.rank(k) for t, _ in hits}) > 1]
        why = f"name {'/'.join(d + '_rank' for d in open_dims)}" if open_dims else "titles repeat"
        raise TargetError(f"{len(hits)} vLLM workers fit {asked} ({', '.join(str(p) for _, p in hits)}): "
                          f"{why}; workers seen: {titles}")
    return hits[0][1]


def engine_pid(procs: Procs, main: int | None, dp: int | None = None) -> int | None:
    """The engine: `VLLM::EngineCore[_DPd]` on vLLM (one DP rank's when `dp` is given), the main
    process on the simulator; None on vLLM without an engine core (it died, or V0)."""
    if not is_vllm(procs):
        if dp:
            raise TargetError(f"dp_rank {dp}: the simulator has one engine")
        return main
    engines = [(t, pid) for t, pid in _known(procs) if t.role == "engine" and (dp is None or t.rank("dp") == dp)]
    if len(engines) > 1:
        found = ", ".join(f"{pid} DP {t.rank('dp')}" for t, pid in engines)
        raise TargetError(f"{len(engines)} engine cores ({found}): name dp_rank")
    return engines[0][1] if engines else None


def sim_main(procs: Procs) -> int | None:
    """The simulator's main process, found by its command line (inside a container)."""
    mains = [pid for pid, cmd in procs if any(k in cmd for k in SIM_MAIN_MARKERS)
             and not SIM_RANK_RE.search(cmd) and SIM_RANK_MODULE not in cmd and "docker-init" not in cmd]
    return mains[-1] if mains else None


def rank_pids(procs: Procs, main: int | None) -> list[int]:
    """Ranks, rank 0 first: vLLM's workers (global order), or the simulator's engine plus its rank workers."""
    if is_vllm(procs):
        return vllm_workers(procs)
    ranked = sorted((int(m.group(1)), pid) for pid, cmd in procs if (m := SIM_RANK_RE.search(cmd)))
    if main is None:
        main = sim_main(procs)
    return ([main] if main is not None else []) + [pid for _, pid in ranked]
