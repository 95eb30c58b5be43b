"""The process helper the harness and the stand-ins share: Linux /proc state, process group members, identity
(pid + start time), and stopping what was started."""
from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import subprocess


# Popen's process_group for a process of the stack (replica, gateway, proxy, load generator): a process
# group of its own, so that it is signalled and killed as one (killpg) and a Ctrl-C at the terminal
# does not reach it, but inside the harness's session rather than a new one (setsid). Why not a new
# session: with CONFIG_SCHED_AUTOGROUP (Linux's default) every session is its own scheduling group,
# and CPU is shared between groups first. A TP 2 vLLM replica's API server, engine and two ranks then
# got ONE process's share between the gateway's, each proxy's and Locust's, while each of its
# all-reduces needs both ranks on a core at once: on 2 cores an engine step outlasted vLLM's
# 20 s execute-model timeout under the load suite's 4 users, and the engine died (docs/vllm-fidelity.md).
# In one group the scheduler is fair per process, as on a server without autogroups.
# The kernel's orphaned-process-group rule now applies: when the harness dies, a group of the stack
# with a stopped member (a frozen rank) gets SIGHUP and SIGCONT from the kernel.
STACK_PROCESS_GROUP = 0  # Popen(process_group=...): a new group led by the child


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, session, ...), or None if
    pid does not exist (the name, in parentheses, may hold spaces and parentheses itself)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode(errors="replace")
    except OSError:
        return None
    return raw[raw.rindex(")") + 2:].split()


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state letter, pgrp, starttime ticks) of pid, or None if it does not exist."""
    rest = stat_fields(pid)
    return None if rest is None else (rest[0], int(rest[2]), int(rest[19]))


def state(pid: int) -> str | None:
    st = proc_stat(pid)
    return st[0] if st else None


def start_time(pid: int) -> int | None:
    st = proc_stat(pid)
    return st[2] if st else None


def alive(pid: int, start: int | None = None) -> bool:
    """True if pid exists, is not a zombie and (when given) has the same start time."""
    st = proc_stat(pid)
    if st is None or st[0] in ("Z", "X"):
        return False
    return start is None or st[2] == start


def group_pids(pgid: int) -> list[int]:
    """Every live pid whose process group is pgid."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st and st[1] == pgid and st[0] not in ("Z", "X"):
                out.append(int(name))
    return sorted(out)


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def children(pid: int) -> list[int]:
    """All descendants of pid (recursive)."""
    parents: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit() and (rest := stat_fields(name)) is not None:
            parents.setdefault(int(rest[1]), []).append(int(name))
    out, todo = [], [pid]
    while todo:
        for c in parents.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return sorted(out)


def kill_group(pgid: int, *, timeout: float = 5.0, sleep: Callable[[float], None] = time.sleep) -> None:
    """SIGCONT + SIGTERM a process group, then SIGKILL whatever is left after timeout."""
    for sig in (signal.SIGCONT, signal.SIGTERM):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not group_pids(pgid):
            return
        sleep(0.05)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def kill_group_now(pgid: int) -> None:
    """SIGKILL a process group at once (a command we started in a session of its own); gone already is fine."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def communicate_until(p: subprocess.Popen[Any], timeout_s: float, give_up: Callable[[], bool],
                      before_kill: Callable[[], object] = lambda: None) -> tuple[Any, Any, bool]:
    """(stdout, stderr, exited): p.communicate() until p exits, or until `timeout_s` passes or `give_up()`
    holds (asked twice a second); then `before_kill()`, p's process group (a command started in a session
    of its own) is killed at once and what it printed is collected, with exited False."""
    import subprocess

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            out, err = p.communicate(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
            return out, err, True
        except subprocess.TimeoutExpired:
            if time.monotonic() < deadline and not give_up():
                continue
        before_kill()
        kill_group_now(p.pid)
        out, err = p.communicate()
        return out, err, False


def terminate(proc: subprocess.Popen[bytes] | None, timeout: float = 5.0) -> None:
    """SIGTERM a child we started, then SIGKILL it if it has not exited within `timeout`."""
    import subprocess

    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout)


def find_program(env_var: str, *names: str) -> str | None:
    """The program $env_var names, else the first of `names` on $PATH (an executable file); None if none."""
    import shutil

    for c in (os.environ.get(env_var), *(shutil.which(n) for n in names)):
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    return None


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on `host` now (the OS picks it; another process may take it before it is bound)."""
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
