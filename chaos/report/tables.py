"""Tables for verdicts and latency: one model, rendered as HTML (Allure), text (terminal), CSV, markdown."""
from __future__ import annotations

import csv
import html
import io
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from chaos.load.records import RequestRecord
from chaos.load.stats import percentile

_CSS = (
    "body{font-family:sans-serif;font-size:13px}table{border-collapse:collapse}"
    "th,td{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#eee}"
    "td:first-child,th:first-child{text-align:left}tr.fail td{background:#fde2e2}tr.pass td{background:#e6f4e6}"
    "caption{font-weight:bold;text-align:left;padding:4px 0}"
)


def fmt(value: Any) -> str:
    """A cell as text: floats to 4 significant digits, None and nan as '-', bools as yes/no."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


@dataclass
class Table:
    """A titled table; `status` per row ('pass'/'fail'/None) colours HTML rows and marks text rows."""

    title: str
    headers: list[str]
    rows: list[list[Any]] = field(default_factory=list)
    status: list[str | None] = field(default_factory=list)

    def add(self, *cells: Any, status: str | None = None) -> None:
        self.rows.append(list(cells))
        self.status.append(status)

    def _cells(self) -> list[list[str]]:
        return [[fmt(c) for c in row] for row in self.rows]

    def to_html(self) -> str:
        head = "".join(f"<th>{html.escape(h)}</th>" for h in self.headers)
        body = []
        for row, st in zip(self._cells(), self.status + [None] * len(self.rows), strict=False):
            cls = f' class="{st}"' if st else ""
            body.append(f"<tr{cls}>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
        return (f"<!DOCTYPE html><html><head><meta charset=\"utf-8\"><style>{_CSS}</style></head><body>"
                f"<table><caption>{html.escape(self.title)}</caption><thead><tr>{head}</tr></thead>"
                f"<tbody>{''.join(body)}</tbody></table></body></html>")

    def to_text(self) -> str:
        cells = self._cells()
        widths = [max([len(h)] + [len(r[i]) for r in cells if i < len(r)]) for i, h in enumerate(self.headers)]

        def line(row: list[str]) -> str:
            # a short row leaves its last columns blank
            cols = enumerate(zip(row, widths, strict=False))
            return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in cols).rstrip()

        out = [self.title, line(self.headers), line(["-" * w for w in widths])]
        for row, st in zip(cells, self.status + [None] * len(cells), strict=False):
            out.append(line(row) + ("   <-- FAIL" if st == "fail" else ""))
        return "\n".join(out)

    def to_csv(self) -> str:
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(self.headers)
        w.writerows(self._cells())
        return buf.getvalue()

    def to_markdown(self) -> str:
        esc = lambda c: c.replace("|", "\\|")  # noqa: E731
        out = [f"**{self.title}**", "", "| " + " | ".join(map(esc, self.headers)) + " |",
               "|" + "|".join("---" for _ in self.headers) + "|"]
        out += ["| " + " | ".join(map(esc, row)) + " |" for row in self._cells()]
        return "\n".join(out)


def _get(item: Any, *names: str) -> Any:
    for n in names:
        if isinstance(item, Mapping) and n in item:
            return item[n]
        if not isinstance(item, Mapping) and hasattr(item, n):
            return getattr(item, n)
    return None


def verdict_table(verdicts: Iterable[Any], title: str = "Verdicts") -> Table:
    """One row per verdict (dicts or objects): check, stage, limit, measured, result, detail.

    Field names looked up: name|check|title, stage, limit, measured, passed|ok, detail|message|evidence.
    An SLOViolation counts as a failed verdict with its limit and measured value.
    """
    t = Table(title, ["check", "stage", "limit", "measured", "result", "detail"])
    for v in verdicts:
        passed = _get(v, "passed", "ok")
        if isinstance(v, AssertionError) and passed is None:
            passed = False
        name = _get(v, "name", "check", "title") or (str(v).split(":")[0] if isinstance(v, BaseException) else "?")
        detail = _get(v, "detail", "message")
        if detail is None and isinstance(v, BaseException):
            detail = str(v)
        result = "PASS" if passed else "FAIL" if passed is not None else "?"
        t.add(name, _get(v, "stage"), _get(v, "limit"), _get(v, "measured"),
              "NOT PROVEN" if _get(v, "unproven") else result, detail,
              status="pass" if passed else "fail" if passed is not None else None)
    return t


def latency_table(
    records: Sequence[RequestRecord], slas: Mapping[str, Any] | None = None, title: str = "Latency per prompt class"
) -> Table:
    """Per prompt class: attempts, errors, TTFT/E2E percentiles, TPOT P99, and the SLA check if given.

    `slas` maps class -> object with ttft_p99_s / e2e_p99_s (chaos.env LatencySLA) or dicts alike.
    """
    t = Table(title, ["class", "attempts", "errors", "error %", "ttft p50", "ttft p99", "e2e p50", "e2e p95",
                      "e2e p99", "tpot p99", "sla ttft p99", "sla e2e p99", "within sla"])
    by: dict[str, list[RequestRecord]] = {}
    for r in records:
        by.setdefault(r.prompt_class or "unclassified", []).append(r)
    for cls in sorted(by):
        rs = by[cls]
        ok = [r for r in rs if r.ok]
        ttft = [r.ttft for r in ok if r.ttft is not None]
        e2e = [r.e2e for r in ok if r.e2e is not None]
        tpot = [r.tpot for r in ok if r.tpot is not None]
        sla = (slas or {}).get(cls)
        lim_ttft, lim_e2e = _get(sla, "ttft_p99_s"), _get(sla, "e2e_p99_s")

        def pct(values: list[float], q: float) -> float | None:
            return percentile(values, q, method="nearest")

        p99_ttft, p99_e2e = pct(ttft, 99), pct(e2e, 99)
        within: bool | None = None
        if sla is not None:
            within = all(lim is None or (v is not None and v <= lim)
                         for v, lim in ((p99_ttft, lim_ttft), (p99_e2e, lim_e2e)))
        errors = len(rs) - len(ok)
        t.add(cls, len(rs), errors, 100.0 * errors / len(rs), pct(ttft, 50), p99_ttft, pct(e2e, 50),
              pct(e2e, 95), p99_e2e, pct(tpot, 99), lim_ttft, lim_e2e, within,
              status=None if within is None else "pass" if within else "fail")
    return t
