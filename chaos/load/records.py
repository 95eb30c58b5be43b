"""Per-request records: the raw material every verdict is computed from.

Clocks: `t_send` is wall-clock epoch seconds (time.time()) so records from several processes and
the simulator's request log line up on one timeline; every duration (ttft, gaps, e2e) is measured
with time.perf_counter() from just before the request was sent.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chaos.errors import LoadError

# error classes (None = success)
ERROR_CLASSES = (
    "http",          # non-2xx status; `status` holds it
    "reset",         # connection reset / refused / closed before a response
    "timeout",       # no response or no next chunk within the client's timeout
    "stream_cut",    # stream ended without `data: [DONE]`
    "error_chunk",   # `data: {"error": ...}` inside a 200 stream
    "stream_corrupt",  # a chunk out of order by its stated count, more events than tokens, or unreadable events
    "wrong_model",   # answered, but by another model than the one asked for
    "aborted",       # a 200 answer the server ended with finish_reason abort or error (vLLM's on SIGTERM)
    "other",
)
# the classes where the answer was lost on the way or cut short (no status says why): a client retries them and a
# breaker counts them as failures. A corrupt stream or a wrong model is a wrong answer, not a lost one.
LOST_ANSWER_ERRORS = frozenset({"reset", "timeout", "stream_cut", "error_chunk", "aborted"})


@dataclass
class RequestRecord:
    """One attempt of one logical request, as the client saw it."""

    request_id: str                 # logical request id, kept across retries
    attempt: int                    # 1 for the first try
    t_send: float                   # epoch seconds, just before sending
    ttft: float | None = None       # seconds to the first non-empty content event
    e2e: float | None = None        # seconds to [DONE] (stream) or last byte
    tpot: float | None = None       # (e2e - ttft) / (output_tokens - 1)
    gaps: list[float] = field(default_factory=list)  # raw inter-token gaps, seconds
    prompt_tokens: int | None = None
    output_tokens: int | None = None
    status: int | None = None       # HTTP status, None when no response
    error: str | None = None        # one of ERROR_CLASSES, None on success
    error_detail: str | None = None
    model_asked: str | None = None
    model_answered: str | None = None
    served_by: str | None = None    # x-served-by style header, when present
    prompt_class: str | None = None
    final: bool = True              # False when the client will retry this logical request
    outcome: str | None = None      # on final records: succeeded | failed | rejected
    finish_reason: str | None = None  # the stream's (or answer's) last finish_reason
    attrs: dict[str, str] | None = None  # the request attributes it carried (load.attributes), by header
    stream_order: str | None = None  # streams: "proven" by the server's per-chunk counts, or why not
    # greedy, seeded load only (LoadConfig.answers): which prompt it asked and a digest of its answer text
    prompt_key: str | None = None
    answer: str | None = None       # answer_digest() of the text (streams: the shown content, concatenated)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def t_end(self) -> float:
        return self.t_send + (self.e2e or 0.0)

    def to_json(self) -> str:
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RequestRecord:
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})


ANSWER_DIGEST_HEX = 16  # 64 bits of sha256: a collision among a run's answers is not a concern


def answer_digest(text: bytes | str) -> str:
    """The short digest a record keeps of an answer's text (or of a prompt's)."""
    data = text.encode("utf-8") if isinstance(text, str) else text
    return hashlib.sha256(data).hexdigest()[:ANSWER_DIGEST_HEX]


# json.dumps(d, separators=(",", ":")) with the encoder built once (dumps builds one per call); a
# record holds no reference cycle, so the cycle check is left out
_encode = json.JSONEncoder(separators=(",", ":"), check_circular=False).encode


def record_line(rec: RequestRecord) -> str:
    """`rec.to_json()`, cheaper: the load client writes one per attempt (a flat dataclass: its
    `__dict__` is its fields in order, so asdict's deep copy adds nothing)."""
    return _encode(rec.__dict__)


def write_records(path: str | Path, records: Iterable[RequestRecord]) -> int:
    """Append records as JSONL; returns how many were written."""
    n = 0
    with open(path, "a", encoding="utf-8") as f:
        for r in records:
            f.write(r.to_json() + "\n")
            n += 1
    return n


def iter_records(path: str | Path) -> Iterator[RequestRecord]:
    """Read a JSONL record file; a malformed line is a LoadError naming file and line."""
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                yield RequestRecord.from_dict(json.loads(line))
            except (ValueError, TypeError) as e:
                raise LoadError(f"{path}:{i}: bad request record: {e}") from None


def read_records(*paths: str | Path) -> list[RequestRecord]:
    """All records of several files, sorted by send time."""
    out = [r for p in paths if Path(p).exists() for r in iter_records(p)]
    out.sort(key=lambda r: r.t_send)
    return out
