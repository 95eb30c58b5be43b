"""What the gateway counts as a failed stream, read from the bytes it relays (no JSON parse per chunk).

A 200 stream failed when it carried an error chunk, ended without `[DONE]`, reached `[DONE]` with
no finish_reason, reached it with finish_reason "abort" or "error" (the server ended the answer itself: vLLM
aborts the requests in flight at a SIGTERM and still sends a well-formed 200), sent a content chunk whose
cumulative token count (vLLM's continuous_usage_stats) did not advance, or more content events than its usage
chunk counts (duplicated chunks). `aborted_answer` asks the same of a whole (non-streamed) 200 body.
"""
from __future__ import annotations

import re

_CONTENT = re.compile(rb'"(?:text|content)": ?"[^"]')
_FINISHED = re.compile(rb'"finish_reason": ?"')
_ABORTED = re.compile(rb'"finish_reason": ?"(abort|error)"')
_USAGE = re.compile(rb'"completion_tokens": ?(\d+)')
_TAIL = 128


def aborted_answer(body: bytes) -> str | None:
    """The finish_reason that says the server cut this answer short ("abort", "error"), or None."""
    m = _ABORTED.search(body)
    return m.group(1).decode() if m else None


class StreamCheck:
    """Fed the relayed chunks in order; `failure()` names what was wrong with the stream, or None."""

    __slots__ = ("_buf", "error_chunk", "oom_text", "done", "finished", "events", "usage_out", "last_count", "stale",
                 "aborted")

    def __init__(self) -> None:
        self._buf = b""
        self.error_chunk = False
        self.oom_text = b""
        self.done = self.finished = False
        self.events = 0
        self.usage_out: int | None = None
        self.last_count: int | None = None
        self.stale = 0  # content chunks whose stated count did not advance: repeated or reordered
        self.aborted: str | None = None  # the finish_reason that cut the answer short

    def feed(self, chunk: bytes) -> None:
        buf = self._buf + (chunk.replace(b"\r\n", b"\n") if b"\r" in chunk else chunk)
        *events, self._buf = buf.split(b"\n\n")
        for ev in events:
            self._event(ev.strip())
        if len(self._buf) > 1 << 20:  # a runaway event without a separator: judge what we have
            self._event(self._buf[:_TAIL])
            self._buf = b""

    def _event(self, ev: bytes) -> None:
        if not ev.startswith(b"data:"):
            return
        data = ev[5:].strip()
        if data == b"[DONE]":
            self.done = True
        elif data.startswith(b'{"error"') or b'"error":{' in data[:40] or b'"error": {' in data[:40]:
            self.error_chunk = True
            self.oom_text += data[:400]
        else:
            content = _CONTENT.search(data) is not None
            if content:
                self.events += 1
            if _FINISHED.search(data):
                self.finished = True
                self.aborted = self.aborted or aborted_answer(data)
            m = _USAGE.search(data) if b'"usage"' in data else None
            if m:
                self.usage_out = n = int(m.group(1))
                if content:
                    if self.last_count is not None and n <= self.last_count:
                        self.stale += 1
                    self.last_count = max(n, self.last_count or 0)

    def failure(self) -> str | None:
        if self.error_chunk:
            return "error chunk"
        if not self.done:
            return "ended without [DONE]"
        if not self.finished:
            return "[DONE] without a finish_reason"
        if self.aborted:
            return f"ended with finish_reason {self.aborted!r}: not a whole answer"
        if self.stale:
            return f"{self.stale} content chunk(s) whose token count did not advance (duplicated or reordered)"
        if self.usage_out is not None and self.events > self.usage_out:
            return f"{self.events} content events for {self.usage_out} tokens (duplicated chunks)"
        return None
