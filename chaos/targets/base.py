"""The Target protocol: a serving replica the harness can start, stop, hurt and inspect."""
from __future__ import annotations

import http.client
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from chaos.errors import TargetError


@runtime_checkable
class Target(Protocol):
    """A replica: a local process tree (ProcessTarget) or a container (DockerTarget).

    rank_pids() lists the tensor-parallel rank processes, rank 0 first. For the simulator rank 0 is the
    engine (main) process and ranks 1..N-1 are its `chaos-sim-rank` workers; for real vLLM they are the
    worker processes (chaos.targets.titles), in global rank order. The pids are ones `signal()` and
    `proc_state()` accept: host pids for a container (chaos.targets.docker_procs).
    """

    name: str

    def start(self) -> None: ...
    def stop(self, timeout: float = 10.0) -> None: ...
    def restart(self) -> None: ...
    def kill(self, sig: int = 9) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def logs(self, tail: int = 100) -> str: ...
    def exec(self, cmd: list[str]) -> tuple[int, str]: ...
    def pid(self) -> int | None: ...
    def rank_pids(self) -> list[int]: ...
    def engine_pid(self, dp_rank: int | None = None) -> int | None: ...
    def signal(self, pid: int, sig: int) -> None: ...
    def proc_state(self, pid: int) -> str | None: ...
    def proc_start(self, pid: int) -> int | None: ...
    def restart_count(self) -> int: ...
    def health(self) -> bool: ...
    def is_running(self) -> bool: ...
    def paused(self) -> bool: ...
    def wait_healthy(self, timeout: float = 30.0) -> None: ...
    def remove(self) -> None: ...


def http_health(host: str, port: int, path: str = "/health", timeout: float = 2.0) -> bool:
    """True if GET http://host:port/path answers 200."""
    try:
        with urllib.request.urlopen(f"http://{host}:{port}{path}", timeout=timeout) as r:
            return bool(r.status == 200)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError):
        return False


def wait_until(cond: Callable[[], bool], timeout: float, *, what: str, target: str,
               sleep: Callable[[float], None] = time.sleep, logs: Callable[[], str] | None = None) -> None:
    """Poll cond until true or raise TargetError naming what did not happen (with a log tail)."""
    deadline = time.monotonic() + timeout
    while True:
        if cond():
            return
        if time.monotonic() >= deadline:
            tail = ""
            if logs is not None:
                try:
                    tail = "; last log lines: " + " | ".join(logs().strip().splitlines()[-5:])
                except Exception:
                    tail = ""
            raise TargetError(f"{what} not reached within {timeout:g}s{tail}", target=target)
        sleep(0.05)
