"""What each replica was asked and answered, from the replica-side fault proxies' request logs.

A gateway's breaker sees upstream attempts, not client requests: nginx and LiteLLM retry a
failed attempt on another server, so a client can see one 200 where the canary answered a 500.
Judging a gateway black-box therefore needs the attempts as the replicas saw them. Each fault
proxy logs one line per request it passed or answered (chaos/stack/faultproxy/reqlog.go); here
each line becomes a RequestRecord of that attempt, `served_by` "pool/replica", so the breaker
analysis (chaos.verify.breaker.analyze) runs on it unchanged.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from chaos.load.records import RequestRecord

INFERENCE_PREFIX = "/v1/"  # health checks and metric scrapes are not traffic a breaker counts
CLIENT_SIDE = "the clients' records (their pool header): no replica-side log"


class UpstreamAttempts(list[RequestRecord]):
    """Attempt records with where they were read from ("fault proxy: N lines from <proxy> (<url>), ...")."""

    def __init__(self, records: Iterable[RequestRecord] = (), source: str = CLIENT_SIDE) -> None:
        super().__init__(records)
        self.source = source


def attempts_source(attempts: Iterable[RequestRecord]) -> str:
    """Where a breaker verdict's attempts came from: the fault proxies named, else the clients' pool header
    (a plain list: the suite fell back to its own records)."""
    return str(getattr(attempts, "source", CLIENT_SIDE))


def _error_of(row: Mapping[str, Any]) -> str | None:
    """The client-side error class this answer amounts to (None for a good answer)."""
    status, outcome = int(row.get("status") or 0), str(row.get("outcome") or "")
    if status >= 400 or status == 0:
        return "http" if status else "reset"
    if outcome == "error":  # a stream that broke or carried an error event after its 200
        return "stream_cut"
    return None


def upstream_attempts(rows: Iterable[Mapping[str, Any]], pool_of: Mapping[str, str], *,
                      since: float | None = None, until: float | None = None) -> list[RequestRecord]:
    """The inference requests each replica got in [since, until] (by arrival), as attempt records."""
    out: list[RequestRecord] = []
    for row in rows:
        replica, t = row.get("replica"), row.get("t_arrival")
        if not replica or t is None or not str(row.get("path") or "").startswith(INFERENCE_PREFIX):
            continue
        t = float(t)
        if (since is not None and t < since) or (until is not None and t > until):
            continue
        finish, first = row.get("t_finish"), row.get("t_first_token")
        status = int(row.get("status") or 0) or None
        out.append(RequestRecord(
            request_id=str(row.get("request_id") or ""), attempt=1, t_send=t,
            e2e=None if finish is None else max(0.0, float(finish) - t),
            ttft=None if first is None else max(0.0, float(first) - t),
            output_tokens=row.get("output_tokens"), status=status, error=_error_of(row),
            error_detail=row.get("rule"), model_answered=row.get("model"),
            served_by=f"{pool_of.get(str(replica), '?')}/{replica}", outcome=str(row.get("outcome") or "")))
    return sorted(out, key=lambda r: r.t_send)
