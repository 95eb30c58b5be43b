"""The shape every verdict returns: rows of (check, limit, measured, ok) plus the data behind them."""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from chaos.errors import SLOViolation


@dataclass
class Row:
    """One checked rule: what was required, what was measured, and whether it held (None = not applicable)."""

    check: str
    limit: Any
    measured: Any
    ok: bool | None
    detail: str = ""
    # "": judged or merely informational; else why this check could not be judged although the
    # verdict needs it, and the checklist items it leaves unproven (empty: every item of the test)
    unproven: str = ""
    items: tuple[str, ...] = ()

    @property
    def mark(self) -> str:
        return "not proven" if self.unproven else {True: "ok", False: "FAIL", None: "n/a"}[self.ok]

    def line(self) -> str:
        mark = self.mark
        extra = f" ({self.detail})" if self.detail else ""
        return f"{self.check}: measured {fmt(self.measured)}, limit {fmt(self.limit)} -> {mark}{extra}"


@dataclass
class Verdict:
    """A named list of rows over a time window; `assert_ok()` raises SLOViolation on the first failures."""

    name: str
    rows: list[Row] = field(default_factory=list)
    window: tuple[float, float] | None = None
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(r.ok is not False for r in self.rows)

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if r.ok is False]

    def row(self, check: str) -> Row:
        for r in self.rows:
            if r.check == check:
                return r
        raise KeyError(f"{self.name}: no row {check!r} (rows: {[r.check for r in self.rows]})")

    def add(self, check: str, limit: Any, measured: Any, ok: bool | None, detail: str = "") -> Row:
        r = Row(check, limit, measured, ok, detail)
        self.rows.append(r)
        return r

    def not_proven(self, check: str, limit: Any, measured: Any, why: str, *, items: Iterable[str] = ()) -> Row:
        """A check the verdict needs that could not be judged here: never a pass (ok None), and the
        checklist items of its test (or only `items`) are "not proven" with `why`."""
        r = Row(check, limit, measured, None, why, unproven=why, items=tuple(items))
        self.rows.append(r)
        return r

    @property
    def unproven(self) -> list[Row]:
        return [r for r in self.rows if r.unproven]

    def extend(self, rows: Iterable[Row]) -> None:
        self.rows.extend(rows)

    def as_table(self) -> list[dict[str, Any]]:
        return [{"check": r.check, "limit": r.limit, "measured": r.measured, "ok": r.ok, "detail": r.detail}
                for r in self.rows]

    def rich_table(self) -> Any:
        from rich.table import Table

        t = Table(title=self.name)
        for col in ("check", "limit", "measured", "ok", "evidence"):
            t.add_column(col)
        for r in self.rows:
            mark = "[yellow]not proven[/]" if r.unproven else {True: "[green]ok[/]", False: "[red]FAIL[/]",
                                                              None: "[yellow]n/a[/]"}[r.ok]
            t.add_row(r.check, fmt(r.limit), fmt(r.measured), mark, r.detail)
        return t

    def window_text(self) -> str:
        if not self.window:
            return "the whole run"
        a, b = self.window
        return f"window {a:.3f}-{b:.3f} ({b - a:.1f} s)"

    def assert_ok(self) -> Verdict:
        for hear in list(_JUDGED):
            hear(self)
        bad = self.failures
        if not bad:
            return self
        head = bad[0]
        more = f"; and {len(bad) - 1} more: " + ", ".join(r.check for r in bad[1:]) if len(bad) > 1 else ""
        msg = (f"{self.name}: {head.check}: measured {fmt(head.measured)} breaks limit {fmt(head.limit)} "
               f"over {self.window_text()}" + (f" ({head.detail})" if head.detail else "") + more)
        raise SLOViolation(msg, limit=head.limit, measured=head.measured, window=self.window,
                           evidence={"verdict": self.name, "rows": self.as_table(), "data": self.data})


_JUDGED: list[Callable[[Verdict], None]] = []


def on_judged(listener: Callable[[Verdict], None]) -> Callable[[], None]:
    """Call `listener` with every verdict asserted from now on (the pytest plugin's release checklist
    hears which rows a test could not prove); returns the function that removes it."""
    _JUDGED.append(listener)
    return lambda: _JUDGED.remove(listener) if listener in _JUDGED else None


def fmt(v: Any) -> str:
    """Short human text for a limit or measured value."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v) or math.isnan(v):
            return str(v)
        return f"{v:.3f}" if abs(v) < 100 else f"{v:.1f}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(fmt(x) for x in v[:8]) + (", ..." if len(v) > 8 else "") + "]"
    return str(v)
