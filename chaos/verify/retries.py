"""Retry behaviour seen from the client's own records: the gaps a client really left between
attempts of one logical request, and how much extra traffic its retries made (amplification)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from chaos.env.model import RetryPolicy
from chaos.load.records import RequestRecord
from chaos.verify.verdict import Verdict

CLOCK_SLACK_S = 0.002  # the wall clock of two records in one process; not a tolerance on the rule


def retry_gaps(records: Sequence[RequestRecord]) -> list[tuple[str, int, float]]:
    """(request_id, attempt index, seconds) from the end of attempt n to the send of attempt n+1."""
    by: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        by[r.request_id].append(r)
    out = []
    for rid, rs in by.items():
        rs.sort(key=lambda r: r.attempt)
        for a, b in zip(rs, rs[1:], strict=False):
            out.append((rid, a.attempt, b.t_send - (a.t_send + (a.e2e or 0.0))))
    return out


def retry_verdict(records: Sequence[RequestRecord], policy: RetryPolicy, *, max_amplification: float,
                  window: tuple[float, float] | None = None) -> Verdict:
    """Rows: min_interval (every gap >= policy minimum), amplification (attempts per logical request)."""
    v = Verdict("client retries", window=window)
    gaps = retry_gaps(records)
    shortest = min((g for _, _, g in gaps), default=None)
    worst = min(gaps, key=lambda g: g[2]) if gaps else None
    v.add("min_interval_s", policy.min_interval_s, None if shortest is None else round(shortest, 4),
          None if shortest is None else shortest + CLOCK_SLACK_S >= policy.min_interval_s,
          f"{len(gaps)} retries; shortest wait by {worst[0]} after attempt {worst[1]}" if worst else "no retries made")
    logical = {r.request_id for r in records}
    amp = len(records) / len(logical) if logical else None
    v.add("retry_amplification", max_amplification, None if amp is None else round(amp, 3),
          None if amp is None else amp <= max_amplification,
          f"{len(records)} attempts for {len(logical)} logical requests")
    v.data = {"gaps": len(gaps), "shortest_gap_s": shortest, "amplification": amp}
    return v
