"""How an experiment ended (Status, with its exit code) and what one run saw (ExperimentRun); the
abort guard's limits. Data only: the runner (runner.py), the run handle and the reports read it."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from chaos.checks import Reading
from chaos.load.records import RequestRecord


class Status(str, Enum):
    """How an experiment ended; each has its own exit code (EXIT_CODES) and report category."""

    PASSED = "PASSED"
    FAILED = "FAILED"      # a verdict, or the hypothesis after recovery, did not hold
    STOPPED = "STOPPED"    # an emergency stop
    ABORTED = "ABORTED"    # the abort guard: hurt past the environment's safety.abort limits
    REFUSED = "REFUSED"    # the hypothesis did not hold before the fault: nothing was injected
    ERROR = "ERROR"        # the harness could not run it (a fault that would not inject or revert)


EXIT_CODES = {Status.PASSED: 0, Status.FAILED: 1, Status.STOPPED: 2, Status.ABORTED: 3, Status.REFUSED: 4,
              Status.ERROR: 5}


@dataclass(frozen=True)
class AbortLimits:
    """When to stop hurting: the load's error rate over `window_s`, or the fault's age."""

    error_rate: float = 0.5
    max_fault_duration_s: float = 600.0
    window_s: float = 10.0
    min_requests: int = 5

    @classmethod
    def from_env(cls, env: Any, window_s: float = 10.0) -> AbortLimits:
        a = env.safety.abort
        return cls(error_rate=a.error_rate, max_fault_duration_s=a.max_fault_duration_s, window_s=window_s)


@dataclass
class ExperimentRun:
    """What one run saw; verdicts read it, the journal keeps it."""

    name: str
    status: Status = Status.PASSED
    reason: str = ""
    t_start: float = 0.0
    t_inject: float | None = None
    t_revert: float | None = None
    t_revert_began: float | None = None  # the fault was fully in place from t_inject until here
    t_end: float = 0.0
    readings: list[tuple[str, Reading]] = field(default_factory=list)  # (when, reading)
    records: list[RequestRecord] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.status]
