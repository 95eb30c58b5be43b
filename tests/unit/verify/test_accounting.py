"""Request accounting on crafted client records and simulator request-log lines."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from chaos.errors import LoadError, SLOViolation
from chaos.load.records import RequestRecord
from chaos.verify.accounting import accounting_verdict, read_server_log


def logical(rid: str, errors: list[str | None], outcome: str, model: str = "m",
            answered: str | None = "m") -> list[RequestRecord]:
    out = []
    for i, err in enumerate(errors):
        last = i == len(errors) - 1
        out.append(RequestRecord(rid, i + 1, 100.0 + i, error=err, status=200 if err is None else 503,
                                 model_asked=model, model_answered=answered if err is None else None,
                                 final=last, outcome=outcome if last else None))
    return out


def line(rid: str, status: int = 200, outcome: str = "stop", model: str = "m") -> dict:
    return {"request_id": rid, "t_arrival": 100.0, "status": status, "outcome": outcome, "model": model}


def good_run() -> list[RequestRecord]:
    return (logical("a", [None], "succeeded") + logical("b", ["http", None], "succeeded")
            + logical("c", ["http", "http"], "failed") + logical("d", ["http"], "rejected"))


def test_clean_run_passes_with_and_without_server_log() -> None:
    log = [line("a"), line("b", 503, "rejected"), line("b"), line("c", 503, "rejected"), line("c", 503, "rejected"),
           line("d", 400, "rejected"), line("probe-1")]
    v = accounting_verdict(good_run(), log)
    assert v.ok, [r.line() for r in v.rows]
    assert v.data["outcomes"] == {"succeeded": 2, "failed": 1, "rejected": 1}
    assert accounting_verdict(good_run()).ok


def test_lost_and_double_finished_requests() -> None:
    recs = good_run()
    recs[0].final = False  # "a" never concluded
    recs.append(RequestRecord("c", 3, 105.0, error=None, final=True, outcome="succeeded"))  # "c" ended twice
    v = accounting_verdict(recs)
    assert v.row("one_outcome").measured == 2 and v.row("one_outcome").ok is False
    with pytest.raises(SLOViolation, match="one_outcome"):
        v.assert_ok()


def test_outcome_must_match_the_final_attempt() -> None:
    recs = logical("x", ["timeout"], "succeeded")
    assert accounting_verdict(recs).row("outcome_matches").ok is False


@pytest.mark.parametrize("wrong, limit, ok", [(12, 0.012, True), (13, 0.012, False)])  # the seed's 1.2 % incident
def test_wrong_model_share(wrong: int, limit: float, ok: bool) -> None:
    recs = [r for i in range(1000) for r in logical(f"r{i}", [None], "succeeded",
                                                   answered="old" if i < wrong else "m")]
    row = accounting_verdict(recs, wrong_model_max=limit).row("right_model")
    assert row.ok is ok and row.measured == pytest.approx(wrong / 1000)
    assert "m->old" in row.detail


def test_server_log_finds_phantom_success_and_hidden_attempts() -> None:
    log = [line("b"), line("b"), line("b"), line("c", 503), line("d", 400)]  # "a" never reached the server
    v = accounting_verdict(good_run(), log)
    assert v.row("server_saw_success").measured == 1 and "a" in v.row("server_saw_success").detail
    assert v.row("no_hidden_attempts").measured == 1 and "b" in v.row("no_hidden_attempts").detail
    assert v.row("orphans").ok is None


def test_orphans_and_server_model() -> None:
    log = [line("a"), line("b", model="old"), line("zzz")]
    v = accounting_verdict(logical("a", [None], "succeeded") + logical("b", [None], "succeeded"), log,
                           strict_orphans=True)
    assert v.row("orphans").ok is False and v.row("server_model").ok is False


def test_read_server_log(tmp_path: Path) -> None:
    p = tmp_path / "req.jsonl"
    p.write_text(json.dumps(line("a")) + "\n\n" + json.dumps(line("b")) + "\n", encoding="utf-8")
    assert [l["request_id"] for l in read_server_log(p, tmp_path / "missing.jsonl")] == ["a", "b"]
    p.write_text("{bad\n", encoding="utf-8")
    with pytest.raises(LoadError, match="req.jsonl:1"):
        read_server_log(p)


def test_replicas_attributed_from_a_fault_proxy_log() -> None:
    from chaos.verify.accounting import ServerLog, attribute_replicas

    recs = [RequestRecord(request_id="a", attempt=1, t_send=10.0, e2e=0.5),
            RequestRecord(request_id="a", attempt=2, t_send=12.0, e2e=0.5),
            RequestRecord(request_id="b", attempt=1, t_send=10.0, e2e=0.5, served_by="stable/x"),
            RequestRecord(request_id="c", attempt=1, t_send=10.0, e2e=0.5)]
    log = ServerLog([{"request_id": "a", "t_arrival": 10.01, "replica": "r1"},
                     {"request_id": "a", "t_arrival": 12.02, "replica": "r2"},
                     {"request_id": "b", "t_arrival": 10.01, "replica": "r2"},
                     {"request_id": "c", "t_arrival": 30.0, "replica": "r1"}], "fault proxy")
    assert attribute_replicas(recs, log, {"r1": "stable", "r2": "canary"}) == 2
    assert [r.served_by for r in recs] == ["stable/r1", "canary/r2", "stable/x", None]
