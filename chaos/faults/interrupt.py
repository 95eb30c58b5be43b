"""SIGTERM and SIGHUP stop a run the way Ctrl-C does.

A cancelled CI job sends SIGTERM, a closed terminal SIGHUP. Python's default for both is to die at
once: no `finally`, no fixture teardown, so a jitter toxic and the whole embedded stack stayed in
place until someone ran `chaos cleanup`. Raised as a KeyboardInterrupt, they unwind like Ctrl-C:
the fault ledger's handler (which wraps this one) reverts every active fault first, then pytest
tears down its fixtures (the stack, the load), prints the interruption and exits 2.
"""
from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any

SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """The run was asked to stop by SIGTERM or SIGHUP."""


def _raise(signum: int, frame: Any) -> None:
    name = signal.Signals(signum).name
    raise Terminated(f"{name} received: faults reverted, stopping as on Ctrl-C")


def install() -> Callable[[], None]:
    """Make SIGTERM/SIGHUP raise Terminated, then let the fault ledger revert first on all three
    signals; returns the undo. A signal someone chose to ignore (`nohup` ignores SIGHUP) or to
    handle stays as it was."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None
    from chaos.faults import ledger

    previous: dict[int, Any] = {}
    for sig in SIGNALS:
        if signal.getsignal(sig) is signal.SIG_DFL:
            previous[sig] = signal.signal(sig, _raise)
    ledger.install_signal_handlers()

    def uninstall() -> None:
        ledger.uninstall_signal_handlers()
        for sig, prev in previous.items():
            if signal.getsignal(sig) is _raise:
                signal.signal(sig, prev)

    return uninstall
