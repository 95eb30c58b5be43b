"""The last error line of a log: what a replica that failed to start said last, whichever engine it runs.

Ranked, best first: an exception line (a Python traceback's last line, or `RuntimeError: ...` on its own),
a Go `panic:` or `fatal error:`, a line logged at ERROR, CRITICAL or FATAL. Only the last burst of error
lines counts (a traceback, the log lines around it), so an old run's exception earlier in an appended log
never wins over the newest failure; inside the burst the best-ranked, latest line wins. A line that only
points elsewhere (vLLM's "See root cause above") is quoted only when nothing else was said.
"""
from __future__ import annotations

import re

__all__ = ["last_error_line"]

MAX_CHARS = 300  # a quoted line goes into a one-line error message
BURST_GAP = 10  # lines without error context that end a burst (a few INFO lines between two tracebacks do not)

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_PROCESS_PREFIX = re.compile(r"^\([^()]*\bpid=\d+\) ?")  # vLLM: "(EngineCore_DP0 pid=123) "
_LEVEL_PREFIX = re.compile(r"^(?:ERROR|CRITICAL|FATAL|WARNING|INFO|DEBUG)\s+\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[^\]]*\] ")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)(?::(?:\s.*)?)?$")
_GO_PANIC = re.compile(r"^(?:panic|fatal error): \S")
_LEVEL = re.compile(r"\b(?:ERROR|CRITICAL|FATAL)\b")
_LEVEL_WORD = re.compile(r"\blevel=\"?(?:error|fatal)\b|\"level\":\s*\"(?:error|fatal)\"", re.IGNORECASE)
_POINTER = re.compile(r"\bsee\b.*\babove\b", re.IGNORECASE)
_CONTEXT = ("Traceback (most recent call last)", "During handling of the above exception",
            "The above exception was the direct cause", "goroutine ", "[signal ")

EXCEPTION, PANIC, LOGGED = 3, 2, 1


def _body(line: str) -> str:
    """The line without colour codes and vLLM's process prefix (indentation kept: it tells a frame apart)."""
    return _PROCESS_PREFIX.sub("", _ANSI.sub("", line.rstrip()))


def _rank(body: str, after_traceback: bool) -> int:
    message = _LEVEL_PREFIX.sub("", body)
    if after_traceback or _EXCEPTION.match(message):
        return EXCEPTION
    if _GO_PANIC.match(message):
        return PANIC
    if _LEVEL.search(body) or _LEVEL_WORD.search(body):
        return LOGGED
    return 0


def _is_context(body: str) -> bool:
    return body[:1].isspace() or body.startswith(_CONTEXT) or body.lstrip().startswith("^")


def _candidates(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, rank, the line as quoted) for every error line; rank 0 marks traceback context."""
    out: list[tuple[int, int, str]] = []
    in_traceback = False
    for i, raw in enumerate(lines):
        body = _body(raw)
        if not body.strip():
            continue
        if body.startswith("Traceback (most recent call last)"):
            in_traceback = True
            out.append((i, 0, body))
            continue
        if _is_context(body):
            if in_traceback or body.startswith(_CONTEXT) or body[:1] == "\t":
                out.append((i, 0, body))
            continue
        rank = _rank(body, in_traceback)
        in_traceback = False
        if rank:
            out.append((i, rank, _ANSI.sub("", raw).strip()))
    return out


def _quote(line: str) -> str:
    return line if len(line) <= MAX_CHARS else line[:MAX_CHARS - 1] + "…"


def last_error_line(text: str) -> str | None:
    """The line of `text` that best says why the program failed, from its last burst of errors; None if none."""
    found = _candidates(text.splitlines())
    if not any(rank for _, rank, _ in found):
        return None
    last = max(k for k, (_, rank, _) in enumerate(found) if rank)
    first = last
    while first > 0 and found[first][0] - found[first - 1][0] <= BURST_GAP:
        first -= 1
    burst = [(rank, line) for _, rank, line in found[first:last + 1] if rank]
    said = [(rank, line) for rank, line in burst if not _POINTER.search(line)] or burst
    best = max(rank for rank, _ in said)
    return _quote([line for rank, line in said if rank == best][-1])
