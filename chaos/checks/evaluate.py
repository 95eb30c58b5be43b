"""A check's readings as a Verdict: a reading with too few requests is an n/a row, and a verdict whose
every row is n/a gets a "not proven" row (it breaks no limit, and proves nothing either)."""
from __future__ import annotations

from collections.abc import Sequence

from chaos.checks.base import Check, Reading, Window, ended_in
from chaos.load.records import RequestRecord
from chaos.verify.verdict import Row, Verdict


def _row(r: Reading) -> Row:
    measured = None if r.got is None else round(r.got, 6)
    detail = f"too few requests: {r.shown}, expected {r.expected}" if r.ok is None else f"{r.shown}, {r.requests} requests"
    return Row(r.probe, r.limit, measured, r.ok, detail)


def evaluate(check: Check, records: Sequence[RequestRecord], *, name: str = "checks", window: Window = None) -> Verdict:
    """Judge `check` over the requests that ended inside `window` (None: all) and return the verdict.

    Where every row is n/a (too few requests) the verdict gets a "not proven" row: it breaks no limit,
    so its assert passes, but the release checklist never counts it as a proof."""
    n = len(ended_in(records, window))
    v = Verdict(name, [_row(r) for r in check.readings(records, window)], window=window, data={"requests": n})
    if v.rows and all(r.ok is None for r in v.rows):
        why = f"{n} requests" + (f" in {v.window_text()}" if window else "") + ": every check n/a (" \
            + "; ".join(f"{r.check}: {r.detail}" for r in v.rows[:3]) + ")"
        v.not_proven("requests judged", "at least one check judged", "none", why)
    return v
