"""The reference resilient client against the recorder: retries, waits, ids, signing, records."""
from __future__ import annotations

import random

import pytest

from chaos.env.model import RetryPolicy
from chaos.errors import ConfigError
from chaos.resilience.client import ResilientClient
from chaos.shared.signing import HDR_SIGNATURE, HDR_TIMESTAMP
from chaos.verify.recorder import Recorder

POLICY = RetryPolicy(min_interval_s=0.5, multiplier=2.0, max_interval_s=4.0, max_attempts=5, jitter=0.2,
                     deadline_s=30)


class FakeSleep:
    """Records the waits instead of sleeping, so the tests take no time."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def __call__(self, s: float) -> None:
        self.waits.append(s)


def client(url: str, sleep: FakeSleep, policy: RetryPolicy = POLICY, **kw) -> ResilientClient:
    return ResilientClient(url, policy, sleep=sleep, rng=random.Random(1), timeout_s=kw.pop("timeout_s", 2.0), **kw)


@pytest.mark.parametrize("failure", ["503", "500", "429", "529", "reset", "timeout", "stream-cut", "abort-finish"])
@pytest.mark.parametrize("stream", [False, True])
def test_retries_each_failure_then_succeeds(failure: str, stream: bool) -> None:
    sleep = FakeSleep()
    with Recorder(failure, 2, hold_s=5) as rec:
        res = client(rec.slot_url(0), sleep, timeout_s=0.3).chat("hi", stream=stream)
        arrivals = rec.arrivals()
    assert res.outcome == "succeeded" and res.text == "ok from the recorder"
    assert [r.attempt for r in res.records] == [1, 2, 3]
    assert [r.final for r in res.records] == [False, False, True]
    assert res.records[-1].outcome == "succeeded" and res.records[0].outcome is None
    assert all(r.error is not None for r in res.records[:2])
    assert len(sleep.waits) == 2 and all(w >= 0.5 for w in sleep.waits) and sleep.waits[1] > sleep.waits[0]
    assert {a.request_id for a in arrivals} == {res.request_id}  # one logical id across attempts
    if stream:
        final = res.final
        assert final.ttft is not None and final.output_tokens == 4 and final.tpot is not None
        assert len(final.gaps) == 3


def test_error_classes_are_the_record_vocabulary() -> None:
    seen = {}
    for failure in ("503", "reset", "timeout", "stream-cut", "abort-finish"):
        with Recorder(failure, 1, hold_s=5) as rec:
            res = client(rec.slot_url(0), FakeSleep(), timeout_s=0.3).chat("hi", stream=True)
        seen[failure] = (res.records[0].error, res.records[0].status)
    assert seen == {"503": ("http", 503), "reset": ("reset", None), "timeout": ("timeout", None),
                    "stream-cut": ("stream_cut", 200), "abort-finish": ("aborted", 200)}


@pytest.mark.parametrize("failure", ["400", "401", "404"])
def test_non_retryable_is_rejected_at_once(failure: str) -> None:
    sleep = FakeSleep()
    with Recorder(failure, None) as rec:
        res = client(rec.slot_url(0), sleep).chat("hi")
        n = len(rec.arrivals())
    assert (res.outcome, res.attempts, n, sleep.waits) == ("rejected", 1, 1, [])
    assert res.status == int(failure)


@pytest.mark.parametrize("retry_after, floor", [(0.1, 0.5), (0.0, 0.5), (1.7, 1.7)])
def test_retry_after_honoured_never_below_the_minimum(retry_after: float, floor: float) -> None:
    sleep = FakeSleep()
    with Recorder("429", 1, retry_after=retry_after) as rec:
        res = client(rec.slot_url(0), sleep).chat("hi")
    assert res.ok and len(sleep.waits) == 1 and sleep.waits[0] >= floor


def test_gives_up_after_max_attempts_with_growing_capped_waits() -> None:
    sleep = FakeSleep()
    with Recorder("503", None) as rec:
        res = client(rec.slot_url(0), sleep).chat("hi")
        n = len(rec.arrivals())
    assert res.outcome == "failed" and res.attempts == n == POLICY.max_attempts
    assert len(sleep.waits) == POLICY.max_attempts - 1
    assert all(b >= a for a, b in zip(sleep.waits, sleep.waits[1:], strict=False))
    assert max(sleep.waits) <= POLICY.max_interval_s and min(sleep.waits) >= POLICY.min_interval_s


def test_deadline_stops_retrying_before_it_is_passed() -> None:
    t = [0.0]
    waits: list[float] = []

    def sleep(s: float) -> None:
        waits.append(s)
        t[0] += s

    policy = RetryPolicy(min_interval_s=0.5, max_interval_s=4.0, max_attempts=50, jitter=0.0, deadline_s=3.0)
    with Recorder("503", None) as rec:
        res = ResilientClient(rec.slot_url(0), policy, sleep=sleep, clock=lambda: t[0]).chat("hi")
    assert res.outcome == "failed"
    assert sum(waits) <= 3.0 and waits == [0.5, 1.0]  # a third wait (2.0) would pass the deadline


def test_wrong_model_is_an_error_and_not_retried() -> None:
    with Recorder("503", 0, answer_model="old-model") as rec:
        res = client(rec.slot_url(0), FakeSleep()).chat("hi", model="new-model", stream=True)
    assert res.outcome == "failed" and res.attempts == 1
    assert (res.final.error, res.final.model_asked, res.final.model_answered) == ("wrong_model", "new-model", "old-model")


def test_hmac_signing_fresh_per_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_CHAOS_KEY", "s3cret")
    with Recorder("503", 1) as rec:
        res = client(rec.slot_url(0), FakeSleep(), hmac_key_env="TEST_CHAOS_KEY").completion("hi")
        arrivals = rec.arrivals()
    assert res.ok and all(a.signed for a in arrivals)
    sigs = [{k.lower(): v for k, v in a.headers.items()}[HDR_SIGNATURE.lower()] for a in arrivals]
    assert len(set(sigs)) == 2  # a new nonce each attempt, so a replay guard never refuses a retry
    assert all(HDR_TIMESTAMP.lower() in {k.lower() for k in a.headers} for a in arrivals)


def test_signing_key_missing_is_one_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_CHAOS_KEY_ABSENT", raising=False)
    with pytest.raises(ConfigError, match="TEST_CHAOS_KEY_ABSENT"):
        ResilientClient("http://127.0.0.1:1", hmac_key_env="TEST_CHAOS_KEY_ABSENT")


def test_records_go_to_callback_and_base_url_with_v1() -> None:
    got = []
    with Recorder("503", 0) as rec:
        c = client(rec.slot_url(3) + "/v1", FakeSleep(), on_record=got.append, keep_records=False)
        res = c.chat("hi", prompt_class="short", request_id="rid-7")
        path = rec.arrivals()[0].path
    assert path == "/v1/chat/completions" and res.request_id == "rid-7"
    assert [r.request_id for r in got] == ["rid-7"] and got[0].prompt_class == "short" and c.records == []


def test_connection_refused_is_a_retried_reset() -> None:
    from tests._support import free_port

    sleep = FakeSleep()
    res = client(f"http://127.0.0.1:{free_port()}", sleep, RetryPolicy(max_attempts=2)).chat("hi")
    assert res.outcome == "failed" and [r.error for r in res.records] == ["reset", "reset"] and len(sleep.waits) == 1


def test_bad_base_url_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="base_url"):
        ResilientClient("127.0.0.1:8000")
