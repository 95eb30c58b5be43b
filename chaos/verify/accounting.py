"""Request accounting: every logical request ends exactly once, nothing is lost or silently
duplicated, and every answer came from the model that was asked for.

Client side: the RequestRecords (one per attempt, `request_id` kept across retries, the last one
`final=True` with `outcome` succeeded|failed|rejected|abandoned; abandoned: the load stopped while it
waited to retry, so the system never had its last chance and it counts as neither served nor lost). Server
side (optional): the replica side's
request log, one JSON line per request it received, `request_id` = the client's x-request-id,
with t_arrival, status, outcome (stop|length|abort|error|rejected) and model. It comes from the
simulator when the replicas are simulators, else from the fault proxies in front of any backend
(same fields, plus `replica`), read over HTTP (chaos.observe.replica_log). Without one (none given,
or an environment with neither) "lost" is "not proven: client-side only" unless the client's own records
already show a loss; where one cannot be read it says "not proven", naming it.
"""
from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.errors import LoadError
from chaos.load.records import RequestRecord
from chaos.verify.verdict import Verdict

if TYPE_CHECKING:
    from chaos.observe.replica_log import ReplicaLogs

OUTCOMES = ("succeeded", "failed", "rejected", "abandoned")
SERVED = ("stop", "length")


def read_server_log(*paths: str | Path) -> list[dict[str, Any]]:
    """Lines of one or more simulator request logs; a bad line is a LoadError naming file and line."""
    out: list[dict[str, Any]] = []
    for p in paths:
        if not Path(p).exists():
            continue
        with open(p, encoding="utf-8") as f:
            for i, line in enumerate(f, 1):
                if line.strip():
                    try:
                        out.append(json.loads(line))
                    except ValueError as e:
                        raise LoadError(f"{p}:{i}: bad request-log line: {e}") from None
    return out


@dataclass
class ServerLog:
    """The replica side's request log and where it came from ("simulator", "fault proxy" or None); `unproven`
    names the proxy or simulator that could not be read and why (then the server side is not proven)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    source: str | None = None
    origins: list[str] = field(default_factory=list)
    unproven: str | None = None


def server_log_for(env: Any, sources: Sequence[str] = ("simulator", "fault proxy"), *,
                   since: float | None = None, until: float | None = None,
                   logs: ReplicaLogs | None = None) -> ServerLog:
    """The replica side's lines with t_arrival in [since, until], read over HTTP from the first of `sources`
    the environment has and that answers in full (simulators first: they see what the engine did; the
    fault proxies see what reached the client). One that cannot be read makes the log `unproven`, naming
    it; an environment with none of them gives an empty ServerLog ("client-side only"). `logs` keeps the
    cursors between calls (a StackHandle holds one per session)."""
    from chaos.observe.replica_log import ReplicaLogs

    own = logs is None
    readers = ReplicaLogs.for_env(env) if logs is None else logs
    why: list[str] = []
    try:
        for source in sources:
            got = readers.read(source, since, until)
            if got is None:
                continue
            if not got.failures:
                return ServerLog(got.rows, source, got.origins)
            why += got.failures
    finally:
        if own:
            readers.close()
    return ServerLog(unproven="; ".join(why)) if why else ServerLog()


def attribute_replicas(records: Iterable[RequestRecord], log: ServerLog, pool_of: dict[str, str]) -> int:
    """Fill `served_by` ("pool/replica") from a fault-proxy log where the client saw no pool header; returns
    how many records were attributed. An attempt matches the line of its request id that arrived during it."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in log.rows:
        if line.get("replica"):
            by[str(line.get("request_id"))].append(line)
    n = 0
    for r in records:
        if r.served_by or r.request_id not in by:
            continue
        hit = next((l for l in by[r.request_id]
                    if r.t_send - 0.05 <= float(l.get("t_arrival") or 0) <= r.t_end + 0.05), None)
        if hit is not None:
            replica = str(hit["replica"])
            r.served_by = f"{pool_of.get(replica, '?')}/{replica}"
            n += 1
    return n


def _group(records: Iterable[RequestRecord]) -> dict[str, list[RequestRecord]]:
    by: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        by[r.request_id].append(r)
    return by


def accounting_verdict(records: Sequence[RequestRecord],
                       server_log: Sequence[dict[str, Any]] | ServerLog | None = None, *,
                       wrong_model_max: float = 0.0, ignore_prefixes: Sequence[str] = ("probe-",),
                       strict_orphans: bool = False, failed_max: int | None = None,
                       items: Sequence[str] = ()) -> Verdict:
    """Rows: one_outcome, outcome_matches, right_model, and with a server log: server_saw_success,
    no_hidden_attempts, orphans, server_model; then lost (judged against 0) and failed (against
    `failed_max`, the fault's error allowance; not judged without one). A ServerLog names its source in a
    `server_side` row; one that could not be read fails that row ("not proven: fault proxy X: why"). With
    no replica-side log (None, or an empty ServerLog: no simulator, no fault proxy) lost is "not proven:
    client-side only" (a request with no outcome at the client still fails it); `items` names the checklist
    items that leaves unproven (empty: every item of the test)."""
    v = Verdict("request accounting")
    by = _group(records)
    _client_rows(v, by, wrong_model_max)
    rows = None if isinstance(server_log, ServerLog) else server_log
    if isinstance(server_log, ServerLog):
        rows = server_log.rows if server_log.source else None
        if server_log.unproven:
            v.add("server_side", "replica-side log", "not proven", False, f"not proven: {server_log.unproven}")
        elif server_log.source:
            v.add("server_side", "replica-side log", server_log.source, None,
                  f"{len(server_log.rows)} lines from {server_log.source} {', '.join(server_log.origins)}")
        else:
            v.add("server_side", "replica-side log", "client-side only", None,
                  "the environment has no simulator or fault proxy: the server-side rows are not judged")
    if rows is not None:
        _server_rows(v, by, rows, ignore_prefixes, strict_orphans)
    outcomes = Counter(r.outcome for rs in by.values() for r in rs if r.final)
    v.data = {"logical": len(by), "attempts": len(records), "outcomes": dict(outcomes)}
    _lost_and_failed(v, by, server_log, failed_max, tuple(items))
    return v


def _lost_and_failed(v: Verdict, by: dict[str, list[RequestRecord]],
                     server_log: Sequence[dict[str, Any]] | ServerLog | None, failed_max: int | None,
                     items: tuple[str, ...]) -> None:
    """lost: no outcome at the client, or a success no replica served (needs the replica side's log);
    failed: the client saw an error in the end (failed or rejected). Abandoned requests are neither."""
    no_end = [rid for rid, rs in by.items() if not any(r.final for r in rs)]
    source = "client records"
    rows: Sequence[dict[str, Any]] | None
    if isinstance(server_log, ServerLog):
        source = server_log.source or "client-side only"
        rows = server_log.rows if server_log.source else None
    else:
        rows = server_log
        source = "client records + server log" if rows is not None else "client-side only"
    unserved: list[str] = []
    if rows is not None:
        served = {str(l.get("request_id")) for l in rows if l.get("status") == 200 and l.get("outcome") in SERVED}
        unserved = [rid for rid, rs in by.items()
                    if any(r.final and r.outcome == "succeeded" for r in rs) and rid not in served]
    lost = no_end + unserved
    detail = f"no outcome at the client: {_few(no_end)}"
    if rows is not None:
        v.add("lost", 0, len(lost), not lost, f"{detail}; succeeded but no replica served it: {_few(unserved)}")
    elif no_end:  # the client's own records already show the loss: no replica-side log could clear it
        v.add("lost", 0, len(lost), False, f"{detail} (client-side only: no replica-side log)")
    else:
        # the client's success alone never proves a replica served it (a gateway's cache, a wrong route)
        why = ("the environment has no simulator or fault proxy" if isinstance(server_log, ServerLog)
               else "no replica-side log given")
        v.not_proven("lost", 0, len(lost), f"client-side only: {why}; no replica-side log says which "
                                           "successes a replica served", items=items)
    finals = [r for rs in by.values() for r in rs if r.final]
    failed = [r.request_id for r in finals if r.outcome == "failed"]
    rejected = [r.request_id for r in finals if r.outcome == "rejected"]
    n = len(failed) + len(rejected)
    v.add("failed", "not judged" if failed_max is None else failed_max, n, None if failed_max is None else n <= failed_max,
          f"ended in an error the client saw: {len(failed)} failed ({_few(failed)}), {len(rejected)} refused with a 4xx"
          + ("; no error allowance given" if failed_max is None
             else f"; limit: the fault's error allowance ({getattr(failed_max, 'why', 'given by the caller')})"))
    v.data.update(lost=len(lost), failed=n, source=source)


def fault_allowance(records: Sequence[RequestRecord], window: tuple[float, float] | None, error_budget: float, *,
                    grace_s: float = 1.0) -> Allowance:
    """The failed requests a fault may cost: every logical request with an attempt open at some moment of
    `window` (the fault's start to the engine's death: what it can cut; None: no fault), plus the error
    budget's share of all of them (rounded up). A cut attempt's record ends at its last token, up to a
    token gap before the cut: `grace_s` widens the window's start by that much."""
    hit: set[str] = set()
    if window is not None:
        t0, t1 = window
        hit = {r.request_id for r in records if r.t_send <= t1 and r.t_end >= t0 - grace_s}
    n = len({r.request_id for r in records})
    share = math.ceil(error_budget * n)
    return Allowance(len(hit) + share, f"{len(hit)} open while the fault held + {share} error budget "
                                       f"({error_budget:.2%} of {n})")


class Allowance(int):
    """A number of failed requests allowed, with how it was made up (shown in the `failed` row)."""

    why: str

    def __new__(cls, n: int, why: str) -> Allowance:
        self = super().__new__(cls, n)
        self.why = why
        return self


def _client_rows(v: Verdict, by: dict[str, list[RequestRecord]], wrong_model_max: float) -> None:
    no_end = [rid for rid, rs in by.items() if not any(r.final for r in rs)]
    twice = [rid for rid, rs in by.items() if sum(1 for r in rs if r.final) > 1]
    bad_outcome = [rid for rid, rs in by.items() for r in rs if r.final and r.outcome not in OUTCOMES]
    n_bad = len(no_end) + len(twice) + len(bad_outcome)
    v.add("one_outcome", 0, n_bad, n_bad == 0,
          f"{len(by)} logical requests; no final record: {_few(no_end)}; several finals: {_few(twice)}; "
          f"unknown outcome: {_few(bad_outcome)}")
    mismatch = [rid for rid, rs in by.items() for r in rs
                if r.final and r.outcome in OUTCOMES and (r.outcome == "succeeded") != r.ok]
    v.add("outcome_matches", 0, len(mismatch), not mismatch,
          f"final outcome 'succeeded' iff the final attempt has no error; mismatched: {_few(mismatch)}")
    answered = [r for rs in by.values() for r in rs if r.model_answered is not None]
    wrong = [r for r in answered if r.model_asked is not None and r.model_answered != r.model_asked]
    share = len(wrong) / len(answered) if answered else 0.0
    models = Counter(f"{r.model_asked}->{r.model_answered}" for r in wrong)
    v.add("right_model", wrong_model_max, round(share, 6), share <= wrong_model_max if answered else None,
          f"{len(wrong)}/{len(answered)} answers from another model" + (f": {dict(models)}" if wrong else ""))


def _server_rows(v: Verdict, by: dict[str, list[RequestRecord]], log: Sequence[dict[str, Any]],
                 ignore: Sequence[str], strict_orphans: bool) -> None:
    seen: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in log:
        seen[str(line.get("request_id"))].append(line)
    succeeded = [rid for rid, rs in by.items() if any(r.final and r.outcome == "succeeded" for r in rs)]
    lost = [rid for rid in succeeded
            if not any(l.get("status") == 200 and l.get("outcome") in SERVED for l in seen.get(rid, []))]
    v.add("server_saw_success", 0, len(lost), not lost,
          f"{len(succeeded)} succeeded at the client; with no served line in the server log: {_few(lost)}")
    # every attempt may have reached the server (a reset or timeout can come after it arrived)
    hidden = [rid for rid, rs in by.items() if len(seen.get(rid, [])) > len(rs)]
    v.add("no_hidden_attempts", 0, len(hidden), not hidden,
          f"server saw more attempts than the client made (retried or duplicated behind its back): {_few(hidden)}")
    orphans = [rid for rid in seen if rid not in by and not rid.startswith(tuple(ignore))]
    v.add("orphans", 0, len(orphans), (not orphans) if strict_orphans else None,
          f"server-log requests unknown to the client: {_few(orphans)}")
    asked = {rid: rs[0].model_asked for rid, rs in by.items()}
    wrong = [rid for rid, lines in seen.items() if rid in asked and asked[rid]
             for l in lines if l.get("model") not in (None, asked[rid])]
    v.add("server_model", 0, len(wrong), not wrong, f"server ran another model than asked: {_few(wrong)}")


def _few(ids: Sequence[str], n: int = 3) -> str:
    if not ids:
        return "none"
    return ", ".join(ids[:n]) + (f" (+{len(ids) - n} more)" if len(ids) > n else "")
