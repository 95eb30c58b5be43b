"""CPU watch of a process the harness runs (a client command, a load generator): its CPU time and its
run-queue wait, from Linux's per-task schedstat (`/proc/PID/task/TID/schedstat`: ns on a CPU, ns
runnable but waiting for one, time slices).

A starved client is not a slow client. When the host gives a client no CPU (a TP 2 engine's ranks
busy-polling both cores, a CPU cgroup capped at 2 % of a core) the client is runnable and waits; a
verdict on its timing (no retry within the window, an answer that never came) would then be about
the host. The watch tells the two apart: a process tree that waited for a CPU STARVED_RATIO times as
long as it ran, for at least STARVED_SHARE of the time watched, was starved. Sleeping (a backoff wait,
a socket read) is neither CPU nor run-queue wait, so an idle client is never called starved.

Every task of each watched tree is sampled every `interval_s` (one pass over /proc for all trees): a
task's figures only grow, so the last sample of each (pid, tid) is kept and summed; a task that lived shorter than one
interval is missed, which can only make the watch call starvation less often, never more.
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chaos.shared.proc import stat_fields

STARVED_RATIO = 10.0  # waited >= 10x its CPU time: far beyond a busy machine's fair share (about 1x-2x)
STARVED_SHARE = 0.25  # ... and for at least a quarter of the time watched
MIN_WAIT_S = 2.0  # less than this is scheduling noise whatever the ratio
EARLY_S = 5.0  # a starved tree is reported (on_starved) once it has been watched this long


@dataclass(frozen=True)
class CpuUse:
    """What a watched tree got: seconds on a CPU, seconds runnable but waiting, seconds watched."""

    cpu_s: float
    wait_s: float
    wall_s: float
    tasks: int = 0

    @property
    def starved(self) -> bool:
        return (self.wait_s >= MIN_WAIT_S and self.wait_s >= STARVED_RATIO * self.cpu_s
                and self.wait_s >= STARVED_SHARE * self.wall_s)

    def why(self, who: str = "the client") -> str:
        """The verdict's words: 'the host starved the client (N s of CPU in M s)' and the wait behind it."""
        return (f"the host starved {who} ({self.cpu_s:.2f} s of CPU in {self.wall_s:.1f} s; "
                f"{self.wait_s:.1f} s runnable, waiting for a CPU)")

    def as_dict(self) -> dict[str, float | int]:
        return {"cpu_s": round(self.cpu_s, 3), "wait_s": round(self.wait_s, 3), "wall_s": round(self.wall_s, 3),
                "tasks": self.tasks}


def schedstat_readable() -> bool:
    """True where this kernel keeps per-task schedstat (CONFIG_SCHED_INFO): otherwise nothing is watched."""
    return os.path.exists(f"/proc/{os.getpid()}/schedstat")


def _trees(leaders: set[int]) -> dict[int, list[int]]:
    """{leader: every live pid in the session or process group it leads}: a command started in a session
    of its own, or a process started as a group leader, and whatever it started. One pass over /proc."""
    out: dict[int, list[int]] = {x: [] for x in leaders}
    for name in os.listdir("/proc"):
        if name.isdigit() and (rest := stat_fields(name)) is not None:
            for leader in {int(rest[3]), int(rest[2])} & leaders:  # its session, its process group
                out[leader].append(int(name))
    return out


def _tasks(pid: int) -> dict[tuple[int, int], tuple[int, int]]:
    """{(pid, tid): (cpu ns, wait ns)} for each thread of pid that could be read."""
    got: dict[tuple[int, int], tuple[int, int]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return got
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                cpu, wait, _ = f.read().split()
        except (OSError, ValueError):
            continue
        got[(pid, int(tid))] = (int(cpu), int(wait))
    return got


class CpuWatch:
    """Samples process trees' schedstat in one thread until stop(); use(leader) is a tree's total so far.

    Add each process with watch(pid) as it starts (a command in a session of its own or a group
    leader: its tree is the session or group). `on_starved(leader, use)` is called once per tree, from
    the watch's thread, when it has been watched EARLY_S and is starved by then: the caller stops
    waiting on a client that cannot run (never a hang). of_threads() watches threads of this process."""

    def __init__(self, *, interval_s: float = 0.5,
                 on_starved: Callable[[int, CpuUse], None] | None = None,
                 tasks: Callable[[set[int]], dict[int, dict[tuple[int, int], tuple[int, int]]]] | None = None) -> None:
        self.interval_s = interval_s
        self.on_starved = on_starved
        self._read = tasks or _read_trees
        self._seen: dict[int, dict[tuple[int, int], tuple[int, int]]] = {}
        self._since: dict[int, float] = {}
        self._until: dict[int, float] = {}
        self._told: set[int] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.watched = schedstat_readable()

    @classmethod
    def of_threads(cls, **kw: Any) -> CpuWatch:
        """A watch of threads of this process (clients run as callables): watch(native thread id)."""
        me = os.getpid()

        def read(tids: set[int]) -> dict[int, dict[tuple[int, int], tuple[int, int]]]:
            got = _tasks(me)
            return {t: {k: v for k, v in got.items() if k[1] == t} for t in tids}
        return cls(tasks=read, **kw)

    def watch(self, leader: int) -> None:
        with self._lock:
            self._seen.setdefault(leader, {})
            self._since[leader] = time.monotonic()
        if self.watched and self._thread is None:
            self._thread = threading.Thread(target=self._run, name="cpu-watch", daemon=True)
            self._thread.start()

    def done(self, leader: int) -> CpuUse | None:
        """The tree ended (or is given up on): sample it a last time and freeze its wall clock."""
        if self.watched and leader not in self._until:
            self._sample({leader})
        self._until.setdefault(leader, time.monotonic())
        return self.use(leader)

    def _sample(self, leaders: set[int]) -> None:
        got = self._read(leaders)
        with self._lock:
            for leader, tasks in got.items():
                seen = self._seen.setdefault(leader, {})
                for k, (cpu, wait) in tasks.items():  # a task's figures only grow
                    old = seen.get(k, (0, 0))
                    seen[k] = (max(old[0], cpu), max(old[1], wait))

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            live = {x for x in self._seen if x not in self._until}
            if not live:
                continue
            self._sample(live)
            for leader in live - self._told:
                u = self.use(leader)
                if self.on_starved is not None and u is not None and u.wall_s >= EARLY_S and u.starved:
                    self._told.add(leader)
                    self.on_starved(leader, u)

    def use(self, leader: int) -> CpuUse | None:
        """None where this kernel keeps no schedstat or the tree was never watched."""
        if not self.watched or leader not in self._since:
            return None
        with self._lock:
            seen = list(self._seen.get(leader, {}).values())
        end = self._until.get(leader, time.monotonic())
        return CpuUse(sum(c for c, _ in seen) / 1e9, sum(w for _, w in seen) / 1e9, end - self._since[leader], len(seen))

    def stop(self) -> None:
        for leader in list(self._since):
            self.done(leader)
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(2.0)

    def __enter__(self) -> CpuWatch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _read_trees(leaders: set[int]) -> dict[int, dict[tuple[int, int], tuple[int, int]]]:
    return {leader: {k: v for p in pids for k, v in _tasks(p).items()} for leader, pids in _trees(leaders).items()}


def own_schedstat() -> tuple[float, float] | None:
    """(seconds on a CPU, seconds runnable but waiting) of this process, all its threads; None where
    this kernel keeps no schedstat. A process that reports itself (a load worker on another host)."""
    got = _tasks(os.getpid())
    if not got:
        return None
    return sum(c for c, _ in got.values()) / 1e9, sum(w for _, w in got.values()) / 1e9


def starved_of(uses: list[CpuUse | None]) -> CpuUse | None:
    """The most starved of several watched processes that were starved (None: none was)."""
    bad = [u for u in uses if u is not None and u.starved]
    return max(bad, key=lambda u: u.wait_s / max(u.cpu_s, 1e-9)) if bad else None
