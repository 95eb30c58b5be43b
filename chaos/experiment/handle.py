"""The run handle: what an experiment's steps act through. The runner (runner.py) makes one per run and
hands it to the experiment's `steps` (its declared sequence when it has none); every phase, wait and
fault goes through the handle's Method, so every step is a typed event on its bus and runs on its clock.

`RunHandle` is the bare handle a game day's declared sequence needs (a load, a fault, the clock).
`Run` (run.py) adds what a suite reads under pytest: an environment's observers and load, the timeline,
the journal, the Allure steps and the verdict stages.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from chaos.experiment import events as ev
from chaos.experiment.method import Method
from chaos.experiment.outcome import ExperimentRun, Status

if TYPE_CHECKING:
    from chaos.experiment.waits import Condition
    from chaos.load.records import RequestRecord

# how long a started load may take to record its first request (Locust's start and its users' spawn on a
# busy 2-core machine take seconds; a load that sends nothing in a minute is broken, not slow)
LOAD_START_S = 60.0


class RunHandle:
    """One run of an experiment: its Method (phases, waits, the fault), its load and what it saw."""

    def __init__(self, name: str, method: Method, *,
                 records: Callable[[], list[RequestRecord]] | None = None) -> None:
        self.name = name
        self.method = method
        self.bus = method.bus
        self.clock, self.sleep = method.clock, method.sleep
        self.load: Any = None             # the started load: a handle with records() and stop()
        self.result: ExperimentRun | None = None  # what the runner records (set by the runner)
        self.experiment: Any = None        # the Experiment being run (set by the runner)
        self._records = records

    # -- the method's steps -----------------------------------------------------------------------
    def publish(self, cls: type[ev.Event], *, t: float | None = None, **kw: Any) -> ev.Event:
        return self.method.publish(cls, t=t, **kw)

    @contextmanager
    def phase(self, name: str, **detail: Any) -> Iterator[None]:
        """A named phase of this run (an event: the timeline, the report and the journal see it)."""
        with self.method.phase(name, **detail):
            yield

    def tick(self, seconds: float | None = None) -> None:
        self.method.tick(seconds)

    def wait(self, seconds: float, phase: str | None = None) -> None:
        """Let the load and observers run for `seconds` (a phase of its own when named)."""
        if phase is None:
            self.method.wait(seconds)
        else:
            with self.phase(phase, seconds=round(seconds, 2)):
                self.method.wait(seconds)

    def poll(self, done: Callable[[], bool], timeout: float, every: float = 0.2) -> bool:
        """Ask `done()` every `every` seconds until it holds (True) or `timeout` passes (False)."""
        return self.method.poll(done, timeout, every)

    def wait_until(self, condition: Condition, timeout: float, every: float = 0.2) -> bool:
        """Poll a wait condition (chaos.experiment.waits; composed with & and |) on this run's clock
        until it holds (True) or `timeout` passes (False)."""
        condition.reset()
        return self.method.poll(lambda: condition.done(self), timeout, every)

    @property
    def fault(self) -> Any:
        """The fault in place (None once reverted)."""
        return self.method.fault if self.method.injected else None

    def load_flowing(self) -> bool:
        """Wait until the started load has recorded a request (its records reach the file every flush_s), for
        LOAD_START_S at most; False where it never did. A steady state's window begins only then: on a busy
        machine Locust can take longer to start than the window, which then judges no traffic at all."""
        progress = getattr(self.load, "progress", None)
        if progress is None:
            return True
        return self.poll(lambda: progress()[0] > 0, timeout=LOAD_START_S, every=0.2)

    def load_records(self) -> list[RequestRecord]:
        """The records of the load so far (the experiment's own source where it gave one)."""
        if self._records is not None:
            return self._records()
        return self.load.records() if self.load is not None else []

    # -- the runner's hooks -----------------------------------------------------------------------
    def start(self, plan: str) -> None:
        """The run began: ExperimentStarted with its plan in words."""
        self.publish(ev.ExperimentStarted, plan=plan)

    def finish(self, run: ExperimentRun) -> None:
        """Every way out: revert a fault still in place at once (no proof), stop the load, say how it ended."""
        try:
            self.method.revert_on_exit()  # left the steps early (abort, stop, error): revert at once
            run.t_revert = self.method.t_revert
        except BaseException as x:
            run.status, run.reason = Status.ERROR, f"revert failed: {x}; run `chaos cleanup`"
        if self.load is not None:
            try:
                result = self.load.stop()
                run.records = getattr(result, "records", run.records) or run.records
            except Exception as x:
                run.reason += f" (the load did not stop cleanly: {x})"
        run.t_end = self.clock()
        self.publish(ev.ExperimentEnded, status=run.status.value, reason=run.reason)
