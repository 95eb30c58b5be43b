"""The request log served to the harness (GET /admin/log), the fault proxy's `/_chaos/log` page for page:
whole lines from a byte cursor, read below a snapshot of the file's size, so neither side ever holds
the whole log and a line still being written is never cut in half (docs/faultproxy.md)."""
from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from typing import Any

PAGE_DEFAULT = 1000
PAGE_MAX_LINES = 10000
PAGE_MAX_BYTES = 1 << 20  # line bytes in one page; also the longest line that can be served
SCAN_MAX_BYTES = 16 << 20  # bytes one call may read while it filters by since


class PageError(Exception):
    """A request the log cannot answer, with its HTTP status."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_query(q: Mapping[str, str]) -> tuple[int, int, float | None]:
    """cursor (byte offset, 0), limit (lines, 1000) and since (epoch seconds, none) from a query."""
    unknown = sorted(set(q) - {"cursor", "limit", "since"})
    if unknown:
        raise PageError(400, f"log: unknown parameter {unknown[0]!r} (cursor, limit, since)")
    raw = q.get("cursor", "0") or "0"
    if not (raw.isascii() and raw.isdigit()):
        raise PageError(400, f"log.cursor: expected a byte offset >= 0, got {raw!r}")
    raw_limit = q.get("limit", str(PAGE_DEFAULT)) or str(PAGE_DEFAULT)
    if not (raw_limit.isascii() and raw_limit.isdigit()) or not 1 <= int(raw_limit) <= PAGE_MAX_LINES:
        raise PageError(400, f"log.limit: expected 1-{PAGE_MAX_LINES} lines, got {raw_limit!r}")
    since = None
    if q.get("since"):
        try:
            since = float(q["since"])
        except ValueError:
            since = math.nan
        if not math.isfinite(since):
            raise PageError(400, f"log.since: expected epoch seconds, got {q['since']!r}")
    return int(raw), int(raw_limit), since


def _arrived_since(line: bytes, since: float) -> bool:
    try:
        t = json.loads(line).get("t_arrival")
        return t is None or float(t) >= since
    except (ValueError, AttributeError, TypeError):
        return True  # kept: the reader names a line it cannot read


def read_page(path: str, cursor: int, limit: int, since: float | None) -> dict[str, Any]:
    """One page: {cursor, next_cursor, more, size, lines}; PageError for a cursor the log cannot serve."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if cursor > size:
            raise PageError(416, f"cursor {cursor} is past the end of the log ({size} bytes): was it truncated?")
        if cursor > 0:
            f.seek(cursor - 1)
            if f.read(1) != b"\n":
                raise PageError(400, f"cursor {cursor} is not at the start of a line")
        lines: list[str] = []
        pos, kept, more = cursor, 0, False
        while pos < size:
            line = f.readline(min(PAGE_MAX_BYTES + 1, size - pos))
            if not line.endswith(b"\n"):
                if len(line) > PAGE_MAX_BYTES:
                    if not lines and pos == cursor:
                        raise PageError(500, f"request log: the line at cursor {pos} is over {PAGE_MAX_BYTES} bytes")
                    more = True
                break  # else a line not yet finished: left for a later call
            body = line[:-1]
            if body and (since is None or _arrived_since(body, since)):
                if len(lines) == limit or kept + len(body) > PAGE_MAX_BYTES:
                    more = True
                    break
                lines.append(body.decode("utf-8", "replace"))
                kept += len(body)
            pos += len(line)
            if pos - cursor >= SCAN_MAX_BYTES and pos < size:
                more = True
                break
    return {"cursor": cursor, "next_cursor": pos, "more": more, "size": size, "lines": lines}
