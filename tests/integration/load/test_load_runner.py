"""Locust in a subprocess against the purpose-built SSE server: records, error classes, retries."""
from __future__ import annotations

import time

import pytest
from sse_server import SMALL_CLASSES

from chaos.load.runner import run_load, start_load


def _by_id(log):
    return {e["request_id"]: e for e in log}


def test_records_match_server_ground_truth(sse_server, tmp_path):
    res = run_load(sse_server.url, out_dir=tmp_path, users=2, duration_s=1.5, classes=SMALL_CLASSES, seed=3)
    assert len(res.records) > 20
    truth = _by_id(sse_server.log)
    for r in res.records:
        assert r.ok, r
        assert r.final and r.outcome == "succeeded" and r.attempt == 1
        assert r.output_tokens == 4 and len(r.gaps) == 3
        assert r.served_by == "test-a" and r.model_answered == "sim-model" == r.model_asked
        assert r.prompt_class in SMALL_CLASSES
        assert r.prompt_tokens == 7  # from the usage chunk
        assert 0 < r.ttft <= r.e2e
        assert r.tpot == pytest.approx((r.e2e - r.ttft) / 3)
        t = truth[r.request_id]
        # the server stamps before writing; the client after reading: client first token is later
        assert r.t_send <= t["t_arrival"] + 0.002
        assert r.t_send + r.ttft >= t["t_first_token"] - 0.002
        assert abs((r.t_send + r.ttft) - t["t_first_token"]) < 0.25
    classes = {r.prompt_class for r in res.records}
    assert "short" in classes
    assert len(res.client_cpu) == 1 and 0 < res.client_busy <= 1.5  # the load process's own CPU meter


def test_every_error_class_is_recognised(sse_server, tmp_path):
    res = run_load(sse_server.url + "/rotate", out_dir=tmp_path, users=3, duration_s=2.5,
                   classes=SMALL_CLASSES, timeout_s=0.4)
    truth = _by_id(sse_server.log)
    expected = {"ok": None, "reset": "reset", "timeout": "timeout", "cut": "stream_cut",
                "error_chunk": "error_chunk", "http500": "http", "wrong_model": "wrong_model", "aborted": "aborted"}
    seen = {}
    for r in res.records:
        mode = truth[r.request_id]["mode"]
        assert r.error == expected[mode], (mode, r)
        seen[mode] = r
    assert set(seen) == set(expected)
    assert seen["http500"].status == 500 and seen["cut"].status == 200
    assert seen["cut"].output_tokens == 2
    assert seen["reset"].status is None
    assert all(r.outcome == ("succeeded" if r.ok else "failed") for r in res.records if r.error != "http")


def test_retries_keep_the_request_id_and_back_off(sse_server, tmp_path):
    policy = {"min_interval_s": 0.5, "multiplier": 2.0, "max_interval_s": 1.0, "max_attempts": 3, "jitter": 0.0}
    res = run_load(sse_server.url + "/flaky", out_dir=tmp_path, users=2, duration_s=2.0,
                   classes=SMALL_CLASSES, retry_policy=policy)
    by: dict[str, list] = {}
    for r in res.records:
        by.setdefault(r.request_id, []).append(r)
    done = [v for v in by.values() if any(r.final for r in v)]
    assert len(done) >= 2
    for attempts in done:
        first, second = sorted(attempts, key=lambda r: r.attempt)
        assert (first.attempt, first.final, first.error, first.status) == (1, False, "http", 503)
        assert (second.attempt, second.final, second.outcome) == (2, True, "succeeded")
        assert second.t_send - first.t_send >= 0.5


def test_non_retryable_is_rejected(sse_server, tmp_path):
    # 429 neither retried nor an overload status (busy: back off, which is retried by definition)
    policy = {"min_interval_s": 0.5, "max_attempts": 3, "retry_statuses": [503], "overload_statuses": [503]}
    res = run_load(sse_server.url + "/http429", out_dir=tmp_path, users=1, duration_s=1.0,
                   classes=SMALL_CLASSES, retry_policy=policy)
    assert res.records and all(r.final and r.outcome == "rejected" and r.status == 429 for r in res.records)


def test_start_load_is_non_blocking_and_stoppable(sse_server, tmp_path):
    h = start_load(sse_server.url, out_dir=tmp_path, users=2, duration_s=60, classes=SMALL_CLASSES)
    t0 = time.monotonic()
    try:
        while not h.records() and time.monotonic() - t0 < 15:
            time.sleep(0.1)
        assert h.records(), "no records while running"
    finally:
        res = h.stop()
    assert time.monotonic() - t0 < 30
    assert len(res.records) >= len(h.records()) > 0
    assert not h.running()


def test_rate_shape_follows_the_schedule(sse_server, tmp_path):
    res = run_load(sse_server.url, out_dir=tmp_path, rate=40, duration_s=2.0, classes=SMALL_CLASSES, seed=1)
    from chaos.load.pacing import poisson_offsets

    n = len(poisson_offsets(40, 2.0, seed=1 * 7919))
    assert len(res.records) == n


def test_distributed_two_workers_merge(sse_server, tmp_path):
    res = run_load(sse_server.url, out_dir=tmp_path, users=4, duration_s=2.0, classes=SMALL_CLASSES, workers=2)
    files = list(tmp_path.glob("records-*.jsonl"))
    assert len(files) == 2, files
    assert len(res.client_cpu) == 2
    assert len(res.records) > 10 and all(r.ok for r in res.records)
    assert len({r.request_id for r in res.records}) == len(res.records)
    assert res.records == sorted(res.records, key=lambda r: r.t_send)


def test_finite_workload_ends_the_run_early(sse_server, tmp_path):
    t0 = time.monotonic()
    res = run_load(sse_server.url, out_dir=tmp_path, users=2, duration_s=30, workload="burst", workload_n=5,
                   classes=SMALL_CLASSES)
    assert time.monotonic() - t0 < 15
    assert len(res.records) == 5 and {r.prompt_class for r in res.records} == {"xl"}
    assert all(r.prompt_tokens == 7 for r in res.records)  # the server's usage count wins


@pytest.mark.parametrize("shape", ["ramp", "step"])
def test_ramp_and_step_shapes_run_bounded(sse_server, tmp_path, shape):
    t0 = time.monotonic()
    res = run_load(sse_server.url, out_dir=tmp_path, shape=shape, users=4, duration_s=1.5, step_s=0.5,
                   classes=SMALL_CLASSES)
    assert res.records and all(r.ok for r in res.records)
    assert time.monotonic() - t0 < 15
    span = res.records[-1].t_send - res.records[0].t_send
    assert span < 2.5


def test_requests_the_harness_stopped_are_abandoned_not_lost(sse_server, tmp_path):
    """Load stopped while requests wait to retry: each still ends exactly once, as 'abandoned'."""
    from chaos.verify.accounting import accounting_verdict

    policy = {"min_interval_s": 0.5, "multiplier": 2.0, "max_interval_s": 4.0, "max_attempts": 10, "jitter": 0.0,
              "deadline_s": 60}
    h = start_load(sse_server.url + "/http500", out_dir=tmp_path, users=3, duration_s=60, classes=SMALL_CLASSES,
                   retry_policy=policy)
    t0 = time.monotonic()
    while len({r.request_id for r in h.records()}) < 3 and time.monotonic() - t0 < 15:
        time.sleep(0.1)
    time.sleep(1.0)  # everyone is in a backoff wait now (500s come back at once)
    res = h.stop()
    finals = [r for r in res.records if r.final]
    assert {r.outcome for r in finals} <= {"abandoned", "failed"} and any(r.outcome == "abandoned" for r in finals)
    assert all("load stopped" in (r.error_detail or "") for r in finals if r.outcome == "abandoned")
    v = accounting_verdict(res.records, strict_orphans=False)
    assert v.row("one_outcome").ok, v.row("one_outcome")
