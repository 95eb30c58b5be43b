"""ProcessTarget: a local supervisor (a thread in the harness) with restart policies and log capture."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from chaos.errors import TargetError
from chaos.shared import proc as _proc
from chaos.targets import titles
from chaos.targets.base import http_health, wait_until


def _unblock_signals() -> None:
    # a child inherits the signal mask; a fault may spawn (restart) while SIGINT/SIGTERM are held
    signal.pthread_sigmask(signal.SIG_SETMASK, set())


def lower_priority(nice: int) -> None:
    """Run the calling process (just after setsid: a session of its own) at `nice`, in its session's autogroup too.

    With CONFIG_SCHED_AUTOGROUP on (Linux's default, and this machine's), setsid() puts the process
    in a new autogroup, and the scheduler shares CPU between autogroups first: a plain `nice -n 5`
    then only ranks the process against its own children. Measured here: two vLLM replicas at
    `nice -n 5` still took an equal share from a restarting TP 2 replica, whose rank 1 imported for
    4 minutes. The autogroup's own nice (/proc/self/autogroup) is what weighs against the others."""
    os.nice(nice)
    try:
        with open("/proc/self/autogroup", "w") as f:
            f.write(str(nice))
    except OSError:  # no autogroup support: the plain nice is then the whole story
        pass


RESTART_POLICIES = ("always", "unless-stopped", "on-failure", "no")  # Docker's names


class ProcessTarget:
    """Runs `command` in its own process group and restarts it per policy (Docker's: always, unless-stopped, on-failure, no)."""

    def __init__(self, name: str, command: list[str], *, host: str = "127.0.0.1", port: int,
                 restart_policy: str = "always", restart_delay_s: float = 0.5, state_dir: str | os.PathLike[str] = ".state",
                 run_id: str = "local", env: dict[str, str] | None = None, health_path: str = "/health",
                 nice: int = 0, sleep: Callable[[float], None] = time.sleep) -> None:
        if restart_policy not in RESTART_POLICIES:
            raise TargetError(f"restart_policy must be {'|'.join(RESTART_POLICIES)}, got {restart_policy!r}", target=name)
        self.name, self.command, self.host, self.port = name, list(command), host, port
        self.restart_policy, self.restart_delay_s = restart_policy, restart_delay_s
        self.state_dir, self.run_id, self.env, self.health_path = Path(state_dir), run_id, dict(env or {}), health_path
        self.nice = nice
        self.log_path = self.state_dir / f"{name}.log"
        self.pidfile = self.state_dir / "targets" / f"{name}.pid"
        self.events: list[tuple[float, str, object]] = []  # (wall time, "start"|"exit"|"restart", detail)
        self._sleep = sleep
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._gen = 0
        self._restarts = 0
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._log: IO[bytes] | None = None

    def __repr__(self) -> str:
        return f"ProcessTarget({self.name!r}, pid={self.pid()})"

    # -- lifecycle ----------------------------------------------------------------------------
    def _preexec(self) -> None:  # in the child, after setsid() or setpgid()
        _unblock_signals()
        # nohup'd: a target's life is the harness's business (teardown, chaos cleanup). In the harness's
        # session, a SIGKILLed harness orphans the target's process group, and the kernel sends a group
        # with a stopped member (a frozen rank) SIGHUP and SIGCONT: ignored, the SIGHUP no longer kills
        # the replica, and the SIGCONT thaws the rank, as a revert would
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        if self.nice:
            lower_priority(self.nice)

    def _spawn(self) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if self._log is None:
            self._log = open(self.log_path, "ab")
        try:
            # a niced target needs an autogroup of its own for its nice to weigh (lower_priority); every
            # other one shares the harness's scheduling group (_proc.STACK_PROCESS_GROUP says why)
            own_session = bool(self.nice)
            proc = subprocess.Popen(self.command, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **self.env}, preexec_fn=self._preexec, start_new_session=own_session,
                                    process_group=None if own_session else _proc.STACK_PROCESS_GROUP)
        except OSError as e:
            raise TargetError(f"cannot start {self.command[0]!r}: {e}", target=self.name) from None
        self._proc = proc
        self._gen += 1
        self.events.append((time.time(), "start", proc.pid))
        self.pidfile.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.pidfile.with_suffix(".tmp")
        tmp.write_text(json.dumps({"target": self.name, "pid": proc.pid, "pgid": proc.pid, "start": _proc.start_time(proc.pid),
                                   "owner": {"pid": os.getpid(), "start": _proc.start_time(os.getpid())},
                                   "run_id": self.run_id, "command": self.command}))
        os.replace(tmp, self.pidfile)

    def start(self) -> None:
        """Start the process and its supervisor thread (no-op if already running)."""
        with self._lock:
            if self._proc is not None and self._proc.poll() is None:
                return
            self._stopping.clear()
            self._spawn()
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._supervise, name=f"supervise-{self.name}", daemon=True)
                self._thread.start()

    def _supervise(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                proc, gen = self._proc, self._gen
            rc = proc.poll() if proc else None
            if rc is None:
                self._stopping.wait(0.05)
                continue
            assert proc is not None  # rc came from it
            with self._lock:
                if gen != self._gen or self._stopping.is_set():
                    continue
                self.events.append((time.time(), "exit", rc))
                # like a container runtime when PID 1 exits: what the main process left behind goes too
                # (a killed VLLM::EngineCore orphans its workers, which hold memory and /dev/shm for seconds)
                _proc.kill_group(proc.pid, timeout=5.0, sleep=self._sleep)
                # unless-stopped is always here: the one who stops it is the harness (stop()), and then no
                # supervisor is left to restart it; Docker's difference (a daemon restart) has no twin here
                again = self.restart_policy in ("always", "unless-stopped") or (
                    self.restart_policy == "on-failure" and rc != 0)
                if not again:
                    self._proc = None
                    return
            if self._stopping.wait(self.restart_delay_s):
                return
            with self._lock:
                if gen == self._gen and not self._stopping.is_set():
                    self._spawn()
                    self._restarts += 1
                    self.events.append((time.time(), "restart", self._proc.pid if self._proc else None))

    def _terminate(self, timeout: float) -> None:
        proc = self._proc
        if proc is not None:
            _proc.kill_group(proc.pid, timeout=timeout, sleep=self._sleep)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                pass

    def stop(self, timeout: float = 10.0) -> None:
        """Stop supervising and terminate the process group (SIGCONT, SIGTERM, then SIGKILL)."""
        self._stopping.set()
        with self._lock:
            self._terminate(timeout)
            self._proc = None
            self._gen += 1
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self.pidfile.unlink(missing_ok=True)

    def remove(self) -> None:
        self.stop()
        if self._log:
            self._log.close()
            self._log = None

    def restart(self) -> None:
        """Terminate and start again now (counts as a restart)."""
        with self._lock:
            self._terminate(10.0)
            self._gen += 1
            self._stopping.clear()
            self._spawn()
            self._restarts += 1
            self.events.append((time.time(), "restart", self.pid()))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._supervise, name=f"supervise-{self.name}", daemon=True)
                self._thread.start()

    # -- signals ------------------------------------------------------------------------------
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _group(self) -> int:
        pid = self.pid()
        if pid is None:
            raise TargetError("not running", target=self.name)
        return pid

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send sig to the whole process group (a crash takes every rank down)."""
        os.killpg(self._group(), sig)

    def pause(self) -> None:
        os.killpg(self._group(), signal.SIGSTOP)

    def resume(self) -> None:
        os.killpg(self._group(), signal.SIGCONT)

    def signal(self, pid: int, sig: int) -> None:
        os.kill(pid, sig)

    def proc_state(self, pid: int) -> str | None:
        return _proc.state(pid)

    def proc_start(self, pid: int) -> int | None:
        return _proc.start_time(pid)

    def paused(self) -> bool:
        pid = self.pid()
        members = _proc.group_pids(pid) if pid else []
        return bool(members) and all(_proc.state(p) == "T" for p in members)

    def processes(self) -> list[tuple[int, str]]:
        """(pid, command line or title) of the main process and every live descendant."""
        main = self.pid()
        if main is None:
            return []
        return [(p, _proc.cmdline(p)) for p in [main, *_proc.children(main)] if _proc.alive(p)]

    def rank_pids(self) -> list[int]:
        """TP ranks, rank 0 first (titles.rank_pids: vLLM's workers, or the simulator's engine + ranks)."""
        return titles.rank_pids(self.processes(), self.pid())

    def rank_pid(self, tp_rank: int | None = None, pp_rank: int | None = None, dp_rank: int | None = None) -> int:
        """The one worker of these ranks (titles.select_worker: a rank left open must be unambiguous)."""
        return titles.select_worker(self.processes(), self.pid(), tp=tp_rank, pp=pp_rank, dp=dp_rank)

    def engine_pid(self, dp_rank: int | None = None) -> int | None:
        """vLLM's `VLLM::EngineCore[_DPn]`, or the simulator's main process (its engine)."""
        return titles.engine_pid(self.processes(), self.pid(), dp_rank)

    # -- inspection ---------------------------------------------------------------------------
    def restart_count(self) -> int:
        return self._restarts

    def is_running(self) -> bool:
        return self.pid() is not None

    def health(self) -> bool:
        return http_health(self.host, self.port, self.health_path)

    def wait_healthy(self, timeout: float = 30.0) -> None:
        wait_until(self.health, timeout, what="/health 200", target=self.name, sleep=self._sleep, logs=lambda: self.logs(20))

    def logs(self, tail: int = 100) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 256 * tail))
                lines = f.read().decode(errors="replace").splitlines()
        except FileNotFoundError:
            return ""
        return "\n".join(lines[-tail:])

    def exec(self, cmd: list[str]) -> tuple[int, str]:
        """Run cmd locally with the target's environment."""
        try:
            r = subprocess.run(cmd, capture_output=True, env={**os.environ, **self.env}, timeout=60)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise TargetError(f"exec {cmd!r}: {e}", target=self.name) from None
        return r.returncode, (r.stdout + r.stderr).decode(errors="replace")

    def __enter__(self) -> ProcessTarget:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()
