"""Start-up watch: a replica that cannot start fails the stack's start at once, naming itself and its own last error.

A replica whose engine dies at its first request answers /health between deaths and its supervisor restarts it
in a loop: a wait for the first completion would only time out, minutes later, saying nothing of why. The watch
sees the restarts (each Target counts its own) and the exits, and quotes the replica's log
(chaos.shared.log_errors), whichever engine it runs.
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from chaos.errors import StackError, TargetError
from chaos.shared.log_errors import last_error_line
from chaos.targets.base import Target

__all__ = ["StartupWatch", "wait_all_healthy", "log_place", "why_failed"]

LOG_TAIL = 400  # lines read for the last error: a vLLM traceback and a restarted run's start-up lines fit


def log_place(t: Target) -> str:
    """Where a person reads the target's own log: its file, or the `docker logs` command."""
    path = getattr(t, "log_path", None)
    if path is not None:
        return str(path)
    container = getattr(t, "container_name", None)
    return f"`docker logs {container}`" if container else "its logs"


def why_failed(t: Target) -> str:
    """The last error line of the target's log, quoted with where the log is; its last lines when none is found."""
    try:
        text = t.logs(LOG_TAIL)
    except Exception as e:  # a container already gone: say so rather than hide the start-up failure behind it
        return f"its log could not be read ({e})"
    line = last_error_line(text)
    if line is not None:
        return f"last error in its log ({log_place(t)}): {line}"
    tail = " | ".join(text.strip().splitlines()[-3:])
    return f"no error line in its log ({log_place(t)}); its last lines: {tail or '(empty)'}"


class StartupWatch:
    """Fails a start-up wait once a target exited for good or restarted `restarts` times since the watch began."""

    def __init__(self, targets: Mapping[str, Target], *, where: str, restarts: int = 2, down_for_s: float = 15.0,
                 every_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.targets, self.where, self.restarts, self.down_for_s = dict(targets), where, restarts, down_for_s
        self.every_s, self._clock = every_s, clock
        self._base = {name: t.restart_count() for name, t in self.targets.items()}
        self._down_since: dict[str, float] = {}
        self._last_check: float | None = None
        self._lock = threading.Lock()  # the warm-up's threads share one watch

    def add(self, name: str, target: Target) -> None:
        """Watch one more target (one started after the others: the gateway)."""
        with self._lock:
            self.targets[name] = target
            self._base[name] = target.restart_count()

    def problem(self, name: str) -> str | None:
        """What went wrong with target `name` so far ("restarted 2 times", "exited"), or None."""
        t = self.targets[name]
        try:
            restarted = t.restart_count() - self._base[name]
            running = t.is_running()
        except TargetError as e:  # its container was removed under it
            return f"is gone ({e})"
        if restarted >= self.restarts:
            return f"restarted {restarted} times"
        now = self._clock()
        if running:
            self._down_since.pop(name, None)
            return None
        since = self._down_since.setdefault(name, now)
        if getattr(t, "restart_policy", None) == "no" or now - since >= self.down_for_s:
            return "exited" if getattr(t, "restart_policy", None) == "no" else f"exited and stayed down {now - since:.0f} s"
        return None

    def troubled(self) -> str:
        """Each target that restarted or is down so far, with its last error ("" when none): a timeout's why."""
        out = []
        for name, t in self.targets.items():
            try:
                restarted, running = t.restart_count() - self._base[name], t.is_running()
            except TargetError:
                restarted, running = 0, False
            if restarted or not running:
                what = f"restarted {restarted} time{'s' if restarted != 1 else ''}" if restarted else "is not running"
                out.append(f"{name} {what}, {why_failed(t)}")
        return "; ".join(out)

    def check(self) -> None:
        """Raise StackError naming the first target that failed and quoting its log; at most once per `every_s`."""
        with self._lock:
            now = self._clock()
            if self._last_check is not None and now - self._last_check < self.every_s:
                return
            self._last_check = now
            for name, t in self.targets.items():
                what = self.problem(name)
                if what is not None:
                    raise StackError(f"{self.where}: {name} {what} before the stack served; {why_failed(t)}")


def wait_all_healthy(targets: Mapping[str, Target], timeout: float, watch: StartupWatch | None = None, *,
                     sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
    """Block until every target's /health answers 200; TargetError after `timeout`, StackError once `watch` fails."""
    pending = dict(targets)
    deadline = clock() + timeout
    while True:
        pending = {name: t for name, t in pending.items() if not t.health()}
        if not pending:
            return
        if watch is not None:
            watch.check()
        if clock() >= deadline:
            name, t = next(iter(pending.items()))
            raise TargetError(f"/health 200 not reached within {timeout:g}s; {why_failed(t)}", target=name)
        sleep(0.1)
