"""Decode progress from the fault proxy's log: the spans in which every stream a replica was decoding paused.

The fault proxy logs, for each stream that carried tokens, its pauses between token events as the upstream sent
them (`decode_gaps`: every pause of `min_s` or more, with when it began, including one the stream ended in;
chaos/stack/faultproxy/reqlog.go). Outside its pauses a stream got a token at least every `min_s`. So while
streams were decoding on a replica (from their first token to their end) it made progress where any of them was
outside a pause, none where all of them were inside one, and it is unknown where one of them had pauses the log
left unlisted. This needs no /metrics: progress truth's second source (chaos.verify.progress_truth), and the only
one for an engine that exports no counters. Pure: no I/O.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

GAPS = "decode_gaps"


@dataclass(frozen=True)
class DecodingStream:
    """One stream on one replica: decoding from `start` (its first token) to `end`, paused over `pauses`."""

    start: float
    end: float
    pauses: tuple[tuple[float, float], ...]
    complete: bool  # every pause of min_s or more is listed

    def paused_at(self, t: float) -> bool:
        return any(a <= t < b for a, b in self.pauses)


@dataclass
class StreamProgress:
    """A replica's streams over [start, end]: where all of them paused, where that is unknown, how long any decoded."""

    start: float
    end: float
    streams: int
    stalls: list[tuple[float, float, int]] = field(default_factory=list)  # (from, to, streams paused)
    unknown: list[tuple[float, float]] = field(default_factory=list)
    busy_s: float = 0.0


def decoding_streams(rows: Iterable[Mapping[str, Any]], replica: str) -> list[DecodingStream] | None:
    """The streams the fault proxy in front of `replica` logged with their pauses; None where none of its lines
    carries `decode_gaps` (a proxy that does not log them, or no stream carried a token)."""
    out: list[DecodingStream] = []
    for row in rows:
        gaps = row.get(GAPS)
        if row.get("replica") != replica or not isinstance(gaps, Mapping):
            continue
        first, end = row.get("t_first_token"), row.get("t_finish")
        if first is None or end is None or float(end) <= float(first):
            continue
        pauses = tuple(sorted((float(a), float(a) + float(d)) for a, d in gaps.get("spans") or ()))
        out.append(DecodingStream(float(first), float(end), pauses, not gaps.get("dropped")))
    return out if out else None


def stream_progress(streams: Iterable[DecodingStream], since: float, until: float) -> StreamProgress:
    """Sweep [since, until]: each span between two stream or pause boundaries is progress (a stream outside a
    pause), a stall (every decoding stream paused), unknown (the others paused, one with unlisted pauses), or idle."""
    inside = [s for s in streams if s.end > since and s.start < until]
    cuts = {since, until}
    for s in inside:
        cuts.update(t for t in (s.start, s.end, *(x for p in s.pauses for x in p)) if since < t < until)
    out = StreamProgress(since, until, len(inside))
    bounds = sorted(cuts)
    for a, b in zip(bounds, bounds[1:], strict=False):
        mid = (a + b) / 2
        active = [s for s in inside if s.start <= mid < s.end]
        if not active:
            continue
        out.busy_s += b - a
        moving = [s for s in active if not s.paused_at(mid)]
        if any(s.complete for s in moving):
            continue
        if moving:  # only streams whose pauses the log did not all list: they may have paused too
            _grow(out.unknown, a, b)
        elif out.stalls and out.stalls[-1][1] == a:
            x, _, n = out.stalls[-1]
            out.stalls[-1] = (x, b, max(n, len(active)))
        else:
            out.stalls.append((a, b, len(active)))
    return out


def _grow(spans: list[tuple[float, float]], a: float, b: float) -> None:
    if spans and spans[-1][1] == a:
        spans[-1] = (spans[-1][0], b)
    else:
        spans.append((a, b))
