"""The emergency stop: Ctrl-C, SIGTERM, SIGHUP, `chaos stop` from another terminal, or the stop file.

`chaos stop --env X` writes `<state_dir>/STOP` (who asked, when, why); a running experiment polls it
every tick (0.1 s) and reverts at once. A stop file older than the run is an earlier run's and is
ignored. Signals raise EmergencyStop (a KeyboardInterrupt) where the run is, even inside a long
injection, so the runner's `finally` reverts without waiting for the next tick.
"""
from __future__ import annotations

import json
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

# the file's writer lives apart, so that `chaos stop` need not import the runner
from chaos.shared.stop_file import request_stop as request_stop
from chaos.shared.stop_file import stop_file as stop_file


class EmergencyStop(KeyboardInterrupt):
    """A stop asked for by a signal: `by` names it."""

    def __init__(self, by: str, reason: str = "") -> None:
        super().__init__(f"emergency stop by {by}" + (f": {reason}" if reason else ""))
        self.by, self.reason = by, reason


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
