"""Turn an OpenAI-style SSE stream, line by line, into the timing fields of a RequestRecord.

TTFT counts only an event whose first choice carries non-empty text (`text` for completions,
`delta.content` for chat): vLLM's chat stream opens with an empty role chunk, which is ignored.

Duplicates and reorders are judged by what the server states on each chunk, never by counting events:
vLLM merges several tokens into one delta when its output processing lags, so one duplicated event
can hide inside "events <= tokens". With `stream_options.continuous_usage_stats` vLLM puts the
cumulative `usage.completion_tokens` on every chunk (serving_chat.py / serving_completion.py add
`len(output.token_ids)` before each yield), so a content chunk whose count does not advance is a
repeat and one whose count goes back is out of order, however many tokens a delta carries.
"""
from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from chaos.load.records import ANSWER_DIGEST_HEX, RequestRecord

_DATA = b"data:"
_DONE = b"[DONE]"


# what a streaming request asks for: the final usage chunk and the cumulative count on every chunk
STREAM_OPTIONS = {"include_usage": True, "continuous_usage_stats": True}
NO_COUNT = "not proven: the server states no per-chunk token count"

# the inside of a JSON string literal that decodes to itself: printable ASCII, no quote, no backslash
_PLAIN_TEXT = re.compile(rb'[ !#-\[\]-~]*')
_PROBE = "chaos-slot-probe"  # a plain text put in a template's slot to prove where the slot is
_TEMPLATE_TRIES = 3  # content chunks per stream tried as the template before giving up on it


class ChunkOrder:
    """Per-chunk order check of one choice from the server's cumulative completion_tokens."""

    __slots__ = ("last", "last_text", "duplicates", "problem", "counted", "uncounted")

    def __init__(self) -> None:
        self.last: int | None = None
        self.last_text = ""
        self.duplicates = 0          # verbatim repeats dropped
        self.problem: str | None = None  # a reorder or a conflicting repeat: the stream is corrupt
        self.counted = self.uncounted = 0  # content chunks with / without a stated count

    def see(self, count: int | None, text: str) -> bool:
        """One chunk's cumulative count (None when it states none) and text; True when it is to be shown."""
        if not text:
            return True
        if count is None:
            self.uncounted += 1
            return True
        self.counted += 1
        if self.last is not None and count <= self.last:
            if count == self.last and text == self.last_text:
                self.duplicates += 1  # the same chunk again: what it says was shown already
                return False
            if self.problem is None:
                self.problem = (f"a chunk stating {count} tokens after one stating {self.last}: reordered"
                                if count < self.last else f"two different chunks both state {count} tokens")
            return False
        self.last, self.last_text = count, text
        return True

    def proof(self) -> str:
        """'proven' when every content chunk stated its count (or none carried content), else why not."""
        return NO_COUNT if self.uncounted else "proven"


def chunk_count(chunk: dict[str, object]) -> int | None:
    """The cumulative completion_tokens a chunk states, None when it states none."""
    usage = chunk.get("usage")
    n = usage.get("completion_tokens") if isinstance(usage, dict) else None
    return n if isinstance(n, int) else None


# the finish_reasons with which vLLM ends a request it dropped (its engine shutting down on SIGTERM,
# an abort, an engine error): the answer is 200 and well-formed, but not a whole answer
ABORTED_REASONS = frozenset({"abort", "error"})


def aborted(finish_reason: str | None, events: int | None = None) -> tuple[str, str] | None:
    """("aborted", why) when the server itself ended the answer with an abort or error finish_reason."""
    if finish_reason not in ABORTED_REASONS:
        return None
    after = "" if events is None else f" after {events} content events"
    return "aborted", f"the server ended it with finish_reason {finish_reason!r}{after}: not a whole answer"


def stream_problem(*, done: bool, finish_reason: str | None, events: int, usage_out: int | None,
                   bad_json: int = 0, order: str | None = None) -> tuple[str, str] | None:
    """Why a 200 stream that carried no error chunk is still not a whole answer, or None when it is.

    vLLM ends every choice with a finish_reason before `[DONE]`. `order` is a ChunkOrder's problem.
    More content events than the usage chunk counts is a sure duplicate (vLLM sends at most one
    event per token), but fewer proves nothing: merged deltas hide a repeat, hence ChunkOrder."""
    if not done:
        return "stream_cut", f"stream ended without data: [DONE] after {events} content events"
    if finish_reason is None:
        return "stream_cut", f"[DONE] came without a finish_reason after {events} content events"
    if (why := aborted(finish_reason, events)) is not None:
        return why
    if order is not None:
        return "stream_corrupt", order
    if usage_out is not None and events > usage_out:
        return "stream_corrupt", f"{events} content events for {usage_out} tokens: duplicated chunks"
    if bad_json:
        return "stream_corrupt", f"{bad_json} unreadable stream event(s)"
    return None


def _template(line: bytes, chunk: dict[str, Any], in_text: bool) -> tuple[bytes, bytes, int, int] | None:
    """The bytes of `line` before and after its text's JSON string, if a probe put there parses to
    `chunk` with the probe as its text (`choices[0].text`, or `.delta.content` when not `in_text`).

    The probe proves that the slot is the text and that nothing else in the line depends on it; a
    text without a plain spelling in the line (escapes, non-ASCII) gives no template. Changes `chunk`."""
    choice = chunk["choices"][0]
    slot = choice if in_text else choice["delta"]
    key = "text" if in_text else "content"
    text = slot[key].encode("utf-8")
    if _PLAIN_TEXT.fullmatch(text) is None:
        return None
    slot[key] = _PROBE
    lit = b'"' + text + b'"'
    i = line.find(lit)
    while i >= 0:
        head, tail = line[:i + 1], line[i + len(lit) - 1:]
        try:
            probed = json.loads((head + _PROBE.encode() + tail)[5:])
        except ValueError:
            probed = None
        if probed == chunk:
            return head, tail, len(head), len(tail)
        i = line.find(lit, i + 1)
    return None


def answer_text(data: Any) -> str:
    """The first choice's text of a whole (non-streamed) answer: `message.content` (chat) or `text`."""
    choices = data.get("choices") if isinstance(data, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = choice.get("message")
    text = message.get("content") if isinstance(message, dict) else choice.get("text")
    return text if isinstance(text, str) else ""


class StreamMeter:
    """Feeds SSE lines with their arrival times (perf_counter seconds) and fills a record."""

    __slots__ = ("t0", "first", "last", "gaps", "events", "done", "error", "model", "usage_out",
                 "usage_prompt", "finish_reason", "bad_json", "order", "template", "tries", "tail", "text")

    def __init__(self, t0: float, *, digest: bool = False) -> None:
        """`digest`: keep a digest of the shown text (the answers verdict's greedy load), see `answer()`."""
        self.t0 = t0
        self.text: Any = hashlib.sha256() if digest else None
        self.first: float | None = None
        self.last: float | None = None
        self.gaps: list[float] = []
        self.events = 0
        self.done = False
        self.error: str | None = None
        self.model: str | None = None
        self.usage_out: int | None = None
        self.usage_prompt: int | None = None
        self.finish_reason: str | None = None
        self.bad_json = 0
        self.order = ChunkOrder()
        # (head, tail, len(head), len(tail)) of this stream's content-chunk lines: see receive()
        self.template: tuple[bytes, bytes, int, int] | None = None
        self.tries = _TEMPLATE_TRIES
        self.tail = b""  # the last line of the receives so far, while it is not ended

    def receive(self, data: bytes, now: float) -> bool:
        """Consume one receive's bytes (all its lines get `now`); True when a `data: [DONE]` was in it.

        A line not yet ended waits for the next receive. Most lines are content chunks that differ
        only in their text: once one was parsed, its bytes around the text are this stream's template,
        and a line that is the template with a plain text in the slot is counted without a JSON parse.
        That is exact, not a guess: the template was proven by parsing it with a probe in the slot
        (`_template`), and a plain text (printable ASCII, no quote or backslash) is a whole JSON string,
        so such a line parses to the template's chunk with that text. Every other line (the first
        chunks, escapes, non-ASCII, finish, usage, error, anything malformed) goes through `feed`."""
        buf = self.tail + data if self.tail else data
        last = buf.rfind(b"\n")
        if last < 0:
            self.tail = buf
            return False
        self.tail = buf[last + 1:]
        done = False
        pos = 0
        find, plain = buf.find, _PLAIN_TEXT.fullmatch
        tpl = self.template
        while pos <= last:
            nl = find(b"\n", pos)
            if nl == pos:  # the blank line after each event
                pos += 1
                continue
            if tpl is not None:
                head, tail, nh, nt = tpl
                start, end = pos + nh, nl - nt
                if (start <= end and buf.startswith(head, pos, nl) and buf.endswith(tail, pos, nl)
                        and plain(buf, start, end) is not None):
                    # a non-empty text: a content event (feed's path, for a chunk with no count); _content's
                    # lines inlined on purpose: this loop runs per chunk of every stream, a call costs more here
                    if start < end:
                        if self.text is not None:
                            self.text.update(buf[start:end])  # a plain text: its JSON literal is its UTF-8
                        self.order.uncounted += 1
                        if self.first is None:
                            self.first = now
                        else:
                            self.gaps.append(now - self.last)  # type: ignore[operator]
                        self.last = now
                        self.events += 1
                    pos = nl + 1
                    continue
            line = buf[pos:nl].strip()
            if line and self.feed(line, now):
                done = True
            tpl = self.template
            pos = nl + 1
        return done

    def feed(self, line: bytes, now: float) -> bool:
        """Consume one stripped line; returns True once `data: [DONE]` was seen."""
        if not line.startswith(_DATA):
            return False
        payload = line[5:].strip()
        if payload == _DONE:
            self.done = True
            return True
        if not payload:
            return False
        try:
            chunk = json.loads(payload)
        except ValueError:
            self.bad_json += 1
            return False
        if not isinstance(chunk, dict):
            return False
        if "error" in chunk:
            err = chunk["error"]
            self.error = json.dumps(err)[:300] if not isinstance(err, str) else err[:300]
            return False
        if self.model is None:
            self.model = chunk.get("model")
        usage = chunk.get("usage")
        if usage:
            self.usage_out = usage.get("completion_tokens")
            self.usage_prompt = usage.get("prompt_tokens")
        choices = chunk.get("choices")
        if not choices:
            return False
        choice = choices[0]
        text = choice.get("text")
        if text is None:
            delta = choice.get("delta") or {}
            text = delta.get("content")
        if choice.get("finish_reason"):
            self.finish_reason = choice["finish_reason"]
        count = chunk_count(chunk)
        shown = self.order.see(count, text if isinstance(text, str) else "")
        if shown and self.text is not None and isinstance(text, str) and text:
            self.text.update(text.encode("utf-8"))
        self._content(bool(text) and shown, now)
        if (self.template is None and self.tries and self.model is not None and not usage and count is None
                and isinstance(text, str) and text and not choice.get("finish_reason")):
            self.tries -= 1
            self.template = _template(line, chunk, choice.get("text") is not None)
        return False

    def _content(self, nonempty: bool, now: float) -> None:
        if nonempty:
            if self.first is None:
                self.first = now
            else:
                self.gaps.append(now - self.last)  # type: ignore[operator]
            self.last = now
            self.events += 1

    def answer(self) -> str | None:
        """The digest of the text shown so far (chaos.load.records.answer_digest of it), None when not kept."""
        return None if self.text is None else str(self.text.hexdigest()[:ANSWER_DIGEST_HEX])

    def problem(self) -> tuple[str, str] | None:
        """The stream's error class and detail (error chunk, cut, corrupt), or None for a whole answer."""
        if self.error is not None:
            return "error_chunk", self.error
        return stream_problem(done=self.done, finish_reason=self.finish_reason, events=self.events,
                              usage_out=self.usage_out, bad_json=self.bad_json, order=self.order.problem)

    def fill(self, rec: RequestRecord, t_end: float) -> None:
        """Copy timing and token fields into `rec`; `t_end` is perf_counter at [DONE] or cut."""
        rec.e2e = t_end - self.t0
        if self.first is not None:
            rec.ttft = self.first - self.t0
        rec.gaps = self.gaps
        rec.output_tokens = self.usage_out if self.usage_out is not None else self.events
        if self.usage_prompt is not None:
            rec.prompt_tokens = self.usage_prompt
        rec.model_answered = self.model
        rec.finish_reason = self.finish_reason
        n = rec.output_tokens or 0
        if rec.ttft is not None and n > 1:
            rec.tpot = (rec.e2e - rec.ttft) / (n - 1)
