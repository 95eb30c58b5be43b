"""The method every experiment follows, whichever way it is written: named phases, waits on the
experiment's own clock, and one fault injected and reverted, each step published as a typed event.

One runner drives it (runner.py `execute`): an Experiment's steps, its declared sequence (load, steady
state, inject, hold, revert, recover, verify; runner.py) or the steps of its own that a suite gives as
`steps=`, act through the run handle (handle.py; under pytest `Run`, run.py), which holds this Method.
Either way the timeline, the Allure steps, the journal and the live view hear the same events
(chaos/experiment/subscribers.py), and the fault is reverted on every way out.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from chaos.errors import FaultNotEffective
from chaos.experiment import events as ev
from chaos.experiment.budget import PhaseBudget, Watchdog
from chaos.experiment.stop import StopSwitch


class StopAsked(Exception):
    """`chaos stop` or the stop file asked the experiment to end (a signal raises EmergencyStop)."""

    def __init__(self, by: str, reason: str) -> None:
        super().__init__(f"stopped by {by}" + (f": {reason}" if reason else ""))
        self.by, self.reason = by, reason


class Method:
    """Phases, waits and one fault at a time for the experiment `name` (see the module docstring)."""

    def __init__(self, name: str, *, bus: ev.EventBus | None = None, clock: Callable[[], float] = time.time,
                 sleep: Callable[[float], None] = time.sleep, stop: StopSwitch | None = None,
                 tick_s: float = 0.1, watchdog: Watchdog | None = None) -> None:
        self.name = name
        self.watchdog = watchdog  # the phases' time budget, checked each tick and as each phase ends
        self.bus = bus if bus is not None else ev.EventBus()
        self.clock, self.sleep, self.stop, self.tick_s = clock, sleep, stop or StopSwitch(), tick_s
        self.fault: Any = None
        self.injected = False      # from the moment inject() is called: a half-injected fault is reverted too
        self.t_inject: float | None = None
        self.t_revert: float | None = None
        self.t_revert_began: float | None = None  # the fault was fully in place from t_inject to here

    def publish(self, cls: type[ev.Event], *, t: float | None = None, **kw: Any) -> ev.Event:
        event = cls(t=self.clock() if t is None else t, experiment=self.name, **kw)
        self.bus.publish(event)
        return event

    @contextmanager
    def phase(self, name: str, *, budget: PhaseBudget | None = None, **detail: Any) -> Iterator[None]:
        """A named phase: PhaseStarted, then PhaseEnded with how it ended (an exception passes through).
        A phase that returns past its budget (the scenario's, or `budget`: a wait bounded by its own
        step) fails all the same (BudgetExceeded)."""
        self.publish(ev.PhaseStarted, phase=name, detail=detail)
        if self.watchdog is not None:
            self.watchdog.enter(name, budget)
        try:
            yield
            if self.watchdog is not None:
                self.watchdog.check()
        except BaseException as e:
            self.publish(ev.PhaseEnded, phase=name, ok=False, error=str(e) or type(e).__name__,
                         status="failed" if isinstance(e, AssertionError) else "broken")
            raise
        finally:
            if self.watchdog is not None:
                self.watchdog.leave(name)
        self.publish(ev.PhaseEnded, phase=name)

    # -- time -------------------------------------------------------------------------------------
    def tick(self, seconds: float | None = None) -> None:
        """Sleep one tick (or less); a stop asked meanwhile raises StopAsked at once, a phase past its
        budget BudgetExceeded."""
        asked = self.stop.asked()
        if asked is not None:
            raise StopAsked(*asked)
        if self.watchdog is not None:
            self.watchdog.check()
        self.sleep(self.tick_s if seconds is None else max(0.0, min(self.tick_s, seconds)))

    def wait(self, seconds: float) -> None:
        end = self.clock() + seconds
        while self.clock() < end:
            self.tick(end - self.clock())

    def poll(self, done: Callable[[], bool], timeout: float, every: float = 0.2) -> bool:
        """Ask `done()` every `every` seconds until it holds (True) or `timeout` passes (False)."""
        deadline = self.clock() + timeout
        while True:
            if done():
                return True
            if self.clock() >= deadline:
                return False
            self.wait(every)

    # -- the fault --------------------------------------------------------------------------------
    def inject(self, fault: Any) -> Any:
        """Inject `fault` (its ledger entry is written first, by the fault itself); FaultInjected is
        stamped with the moment the injection began."""
        self.fault, self.injected = fault, True
        t = self.clock()
        info = fault.inject()
        self.t_inject = self.clock()
        self.publish(ev.FaultInjected, t=t, fault=repr(fault))
        return info

    def revert(self, *, check: bool = True) -> None:
        """Undo the fault; with `check` it first proves the fault still held. A fault that had lapsed
        raises FaultNotEffective (removed all the same: what was measured while it "held" tested
        nothing); a revert that failed raises its own error."""
        if not self.injected:
            return
        self.injected = False
        fault = repr(self.fault)
        t = self.t_revert_began = self.clock()
        try:
            self.fault.revert(check=check)
        except FaultNotEffective as e:
            self.t_revert = self.clock()
            self.publish(ev.FaultReverted, t=t, fault=fault, error=f"it had lapsed before the revert: {e}")
            raise
        except Exception as e:
            self.publish(ev.FaultReverted, t=t, fault=fault, ok=False, error=str(e))
            raise
        self.t_revert = self.clock()  # recovery is timed from the moment the fault is gone
        self.publish(ev.FaultReverted, t=t, fault=fault)

    def revert_on_exit(self) -> None:
        """On the way out (an error, an abort, a stop): revert at once, without the proof."""
        if self.watchdog is not None:
            self.watchdog.disarm()  # the way out runs whatever the time
        if self.injected:
            with self.phase("revert"):
                self.revert(check=False)
