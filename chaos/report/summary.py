"""The end-of-run terminal summary: one line per suite with its key numbers.

The plugin owns one SummaryCollector per session; the `pytest_terminal_summary` hook writes `render()`
line by line. Counts add up across scenarios (`add`, `count`); a label or a one-off figure is `set`;
the worst of a figure over the scenarios is `worst`.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from chaos.report.tables import fmt

if TYPE_CHECKING:
    from chaos.verify.verdict import Verdict

HEADER = "llm-chaos summary"


class SummaryCollector:
    """Key numbers per suite, in the order suites first reported; thread-safe."""

    def __init__(self) -> None:
        self._suites: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()

    def add(self, suite: str, **numbers: int | float) -> None:
        """Add each number to the suite's counter of that name (a sum across scenarios: lost, failed)."""
        bad = {k: v for k, v in numbers.items() if isinstance(v, bool) or not isinstance(v, (int, float))}
        if bad:
            raise TypeError(f"summary.add({suite!r}): counters must be numbers, got {bad}; use set() for labels")
        with self._lock:
            nums = self._suites.setdefault(suite, {})
            for key, n in numbers.items():
                nums[key] = nums.get(key, 0) + n

    def set(self, suite: str, **values: Any) -> None:
        """Set values for a suite; a key set again replaces the earlier value (labels, one-off figures)."""
        with self._lock:
            self._suites.setdefault(suite, {}).update(values)

    def count(self, suite: str, key: str, n: int | float = 1) -> None:
        """Add `n` to a counter of the suite (e.g. scenarios)."""
        self.add(suite, **{key: n})

    def worst(self, suite: str, key: str, value: float, *, higher_is_worse: bool = True) -> None:
        """Keep the worst value seen for a key across the suite's scenarios (e.g. max recovery time)."""
        with self._lock:
            nums = self._suites.setdefault(suite, {})
            old = nums.get(key)
            if old is None or (value > old if higher_is_worse else value < old):
                nums[key] = value

    def suites(self) -> dict[str, dict[str, Any]]:
        with self._lock:
            return {k: dict(v) for k, v in self._suites.items()}

    def render(self) -> list[str]:
        """Header plus one aligned line per suite; empty when nothing was reported."""
        data = self.suites()
        if not data:
            return []
        width = max(len(s) for s in data)
        lines = [HEADER]
        for suite, nums in data.items():
            parts = " ".join(f"{k}={fmt(v)}" for k, v in nums.items())
            lines.append(f"{suite.ljust(width)}  {parts}".rstrip())
        return lines


def add_recovery(summary: SummaryCollector, recovery: Verdict, accounting: Verdict, *, fault: bool,
                 target: str = "") -> None:
    """A recovery scenario's numbers: scenarios, the targets hurt, the worst time to the first completion
    after a fault (a no-fault baseline has none), and lost and failed requests summed over scenarios
    (accounting's data)."""
    summary.count("recovery", "scenarios")
    if target:
        seen = {t for t in str(summary.suites().get("recovery", {}).get("targets", "")).split(", ") if t}
        summary.set("recovery", targets=", ".join(sorted(seen | {target})))
    if fault and recovery.data.get("first_completion_s") is not None:
        summary.worst("recovery", "worst_recovery_s", round(recovery.data["first_completion_s"], 2))
    summary.add("recovery", lost=accounting.data["lost"], failed=accounting.data["failed"])


def add_breaker(summary: SummaryCollector, scenario: str, *, observed: str, expected: str) -> None:
    """A breaker scenario's tier: what the gateway did beside what the policy expected."""
    summary.count("breaker", "scenarios")
    summary.set("breaker", **{scenario: f"{observed} (expected {expected})"})
