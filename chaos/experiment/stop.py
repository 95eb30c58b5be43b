"""The emergency stop: Ctrl-C, SIGTERM, SIGHUP, `chaos stop` from another terminal, or the stop file.

`chaos stop --env X` writes `<state_dir>/STOP` (who asked, when, why); a running experiment polls it
every tick (0.1 s) and reverts at once. A stop file older than the run is an earlier run's and is
ignored. Signals raise EmergencyStop (a KeyboardInterrupt) where the run is, even inside a long
injection, so the runner's `finally` reverts without waiting for the next tick.
"""
from __future__ import annotations

import getpass
import json
import os
import signal
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

STOP_FILE = "STOP"


class EmergencyStop(KeyboardInterrupt):
    """A stop asked for by a signal: `by` names it."""

    def __init__(self, by: str, reason: str = "") -> None:
        super().__init__(f"emergency stop by {by}" + (f": {reason}" if reason else ""))
        self.by, self.reason = by, reason


def stop_file(state_dir: str | os.PathLike[str]) -> Path:
    return Path(state_dir) / STOP_FILE


def request_stop(state_dir: str | os.PathLike[str], reason: str = "", *, clock: Callable[[], float] = time.time) -> Path:
    """What `chaos stop` does: write the stop file, naming who asked."""
    who = f"chaos stop ({getpass.getuser()}@{socket.gethostname()}, pid {os.getpid()})"
    path = stop_file(state_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"by": who, "reason": reason, "t": clock()}), encoding="utf-8")
    tmp.replace(path)  # whole or not at all: the runner never reads half a file
    return path


class StopSwitch:
    """What the runner polls: a stop asked in this process, or a stop file newer than `since`."""

    def __init__(self, path: Path | None = None, *, since: float = 0.0) -> None:
        self.path, self.since = path, since
        self._asked: tuple[str, str] | None = None

    def request(self, by: str, reason: str = "") -> None:
        self._asked = self._asked or (by, reason)

    def asked(self) -> tuple[str, str] | None:
        """(who, why) once a stop was asked, else None."""
        if self._asked is None and self.path is not None:
            try:
                info: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                return None
            if float(info.get("t", 0.0)) >= self.since:
                self._asked = (str(info.get("by", "the stop file")), str(info.get("reason", "")))
        return self._asked

    def install_signals(self) -> Callable[[], None]:
        """SIGINT, SIGTERM and SIGHUP raise EmergencyStop (main thread only); returns the undo."""
        if threading.current_thread() is not threading.main_thread():
            return lambda: None

        def handler(signum: int, frame: Any) -> None:
            name = signal.Signals(signum).name
            self.request(name)
            raise EmergencyStop(name)

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}

        def undo() -> None:
            for sig, prev in previous.items():
                signal.signal(sig, prev)

        return undo
