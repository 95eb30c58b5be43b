"""One run against an environment, wired once: the fault policy (the ledger, the protected targets, destructive or
not, the revert bound), the event bus with its journal, the emergency stop (the stop file, SIGINT/SIGTERM/SIGHUP)
and the stack it started. The game day, `chaos capacity`, `chaos explore`/`replay` and the pytest plugin's `stack`
fixture each wired these by hand; now each opens a Session."""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from chaos.experiment import events as ev
from chaos.experiment.journal import Journal
from chaos.experiment.stop import StopSwitch, stop_file


def configure_faults(env: Any, *, allow_destructive: bool = False) -> None:
    """Every fault of this process from now on: recorded in the environment's ledger (undone on success, failure,
    Ctrl-C, SIGTERM, SIGHUP), refused on its protected targets unless destructive faults are allowed, and a revert
    waits for a crashed replica as long as the SLAs give one to recover."""
    from chaos.faults import base as fault_base
    from chaos.faults.ledger import Ledger

    fault_base.configure(ledger=Ledger(env.state_dir), protected=env.safety.protected, allow_destructive=allow_destructive,
                         recover_timeout_s=fault_base.recover_bound_s(env.slas))


class Session:
    """One run against `env`: the fault policy, the event bus and its journal (in `out_dir`), the emergency stop and
    the stack; a context manager that sets them up in that order and undoes them in reverse (the journal last).

    `start_stack(env)` starts the stand-ins of an embedded environment (the face that opens the session hands in
    the bridge: the harness never imports it) and returns something with `down()`; with none, or for an
    environment that is not embedded, `stack` is None."""

    def __init__(self, env: Any, out_dir: str | Path, *, title: str, meta: dict[str, Any] | None = None,
                 allow_destructive: bool = False, start_stack: Callable[[Any], Any] | None = None) -> None:
        self.env, self.out_dir, self.allow_destructive, self.start_stack = env, Path(out_dir), allow_destructive, start_stack
        self.bus = ev.EventBus()
        self.journal = Journal(self.out_dir, title=title, meta={"environment": env.name, **(meta or {})})
        self.bus.subscribe(self.journal)
        self.stop = StopSwitch(stop_file(env.state_dir), since=time.time())
        self.stack: Any = None
        self._undo_signals: Callable[[], None] | None = None

    def __enter__(self) -> Session:
        configure_faults(self.env, allow_destructive=self.allow_destructive)
        self.stop.since = time.time()  # a stop asked before the run began is not for it
        self._undo_signals = self.stop.install_signals()
        try:
            if self.env.embedded != "none" and self.start_stack is not None:
                self.stack = self.start_stack(self.env)
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            if self._undo_signals is not None:
                self._undo_signals()
                self._undo_signals = None
            if self.stack is not None:
                self.stack.down()
                self.stack = None
        finally:
            self.journal.write()
