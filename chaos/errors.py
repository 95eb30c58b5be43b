"""One exception tree for the whole harness.

    ChaosError
     +-- ConfigError          bad environment file, flag or value (one clear line)
     +-- TargetError          a target cannot be found, started or acted on
     +-- FaultError           a fault could not be injected or reverted
     |    +-- FaultNotEffective   injected, but the proof that it took effect failed
     +-- StackError           the embedded stack (simulator, gateway, toxiproxy) misbehaved
     +-- LoadError            the load generator failed to run
     +-- SafetyError          refused: destructive action against a protected environment
     +-- SLOViolation         (also an AssertionError) a verdict failed; carries its evidence
"""
from __future__ import annotations

from typing import Any


class ChaosError(Exception):
    """Root of every error the harness raises on purpose."""


class ConfigError(ChaosError):
    """Bad environment file, flag or value; the message is one line naming where."""


class TargetError(ChaosError):
    """A target could not be found, started or acted on."""

    def __init__(self, message: str, *, target: str | None = None) -> None:
        super().__init__(f"target {target}: {message}" if target else message)
        self.target = target


class FaultError(ChaosError):
    """A fault could not be injected or reverted."""

    def __init__(self, message: str, *, fault: str | None = None) -> None:
        super().__init__(f"fault {fault}: {message}" if fault else message)
        self.fault = fault


class FaultNotEffective(FaultError):
    """A fault was injected but the check that it took effect failed."""


class StackError(ChaosError):
    """The embedded stack (simulator, gateway, toxiproxy) failed to start or answer."""


class LoadError(ChaosError):
    """The load generator failed to run or produced unreadable records."""


class SafetyError(ChaosError):
    """A destructive action was refused against a protected environment."""


class SLOViolation(ChaosError, AssertionError):
    """A verdict failed: which limit, what was measured, over which window, and the evidence."""

    def __init__(
        self,
        message: str,
        *,
        limit: Any = None,
        measured: Any = None,
        window: tuple[float, float] | None = None,
        evidence: Any = None,
    ) -> None:
        super().__init__(message)
        self.limit = limit
        self.measured = measured
        self.window = window
        self.evidence = evidence
