"""Request accounting: every logical request ends exactly once, nothing is lost or silently
duplicated, and every answer came from the model that was asked for.

Client side: the RequestRecords (one per attempt, `request_id` kept across retries, the last one
`final=True` with `outcome` succeeded|failed|rejected). Server side (optional): the simulator's
request log, one JSON line per request it received, `request_id` = the client's x-request-id,
with t_arrival, status, outcome (stop|length|abort|error|rejected) and model.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any, Iterable, Sequence

from chaos.errors import LoadError
from chaos.load.records import RequestRecord
from chaos.verify.verdict import Verdict

OUTCOMES = ("succeeded", "failed", "rejected")
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


def _group(records: Iterable[RequestRecord]) -> dict[str, list[RequestRecord]]:
    by: dict[str, list[RequestRecord]] = defaultdict(list)
    for r in records:
        by[r.request_id].append(r)
    return by


def accounting_verdict(records: Sequence[RequestRecord], server_log: Sequence[dict[str, Any]] | None = None, *,
                       wrong_model_max: float = 0.0, ignore_prefixes: Sequence[str] = ("probe-",),
                       strict_orphans: bool = False) -> Verdict:
    """Rows: one_outcome, outcome_matches, right_model, and with a server log: server_saw_success,
    no_hidden_attempts, orphans, server_model."""
    v = Verdict("request accounting")
    by = _group(records)
    _client_rows(v, by, wrong_model_max)
    if server_log is not None:
        _server_rows(v, by, server_log, ignore_prefixes, strict_orphans)
    outcomes = Counter(r.outcome for rs in by.values() for r in rs if r.final)
    v.data = {"logical": len(by), "attempts": len(records), "outcomes": dict(outcomes)}
    return v


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
