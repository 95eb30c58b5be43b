"""A live check: something asked now (a health endpoint, GPU memory), not measured from the records."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from chaos.checks.base import Check, Reading, Window, ended_in
from chaos.load.records import RequestRecord


class _Live(Check):
    def __init__(self, label: str, expected: str, fn: Callable[[], tuple[bool, float | None, str]]) -> None:
        self.label, self.expected, self.fn = label, expected, fn

    def readings(self, records: Sequence[RequestRecord], window: Window = None) -> list[Reading]:
        ok, value, shown = self.fn()
        return [Reading(self.label, self.expected, value, ok, window, len(ended_in(records, window)), shown)]

    def describe(self) -> str:
        return self.label


def live(label: str, expected: str, fn: Callable[[], tuple[bool, float | None, str]]) -> Check:
    """A live check: `fn()` -> (ok, value, how to show it), e.g. the API's /health answering 200."""
    return _Live(label, expected, fn)
