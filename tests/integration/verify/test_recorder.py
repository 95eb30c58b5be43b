"""The recorder: failure modes on the wire, keys per logical request, per-slot modes, bad config."""
from __future__ import annotations

import http.client
import json

import pytest

from chaos.errors import ConfigError
from chaos.verify.recorder import Recorder


def post(rec: Recorder, slot: str, rid: str | None, stream: bool = False) -> tuple[int | None, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", rec.port, timeout=2)
    headers = {"Content-Type": "application/json", **({"x-request-id": rid} if rid else {})}
    try:
        conn.request("POST", f"/c/{slot}/v1/chat/completions", json.dumps({"model": "m", "stream": stream}), headers)
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    except (ConnectionError, http.client.HTTPException, OSError):
        return None, {}, b""
    finally:
        conn.close()


def test_first_k_attempts_fail_per_logical_request() -> None:
    with Recorder("503", 2) as rec:
        got = [post(rec, "0", "a")[0] for _ in range(3)] + [post(rec, "0", "b")[0]] + [post(rec, "1", "a")[0]]
        keys = [(a.key, a.attempt, a.action) for a in rec.arrivals()]
    assert got == [503, 503, 200, 503, 503]
    assert keys[:3] == [("0/a", 1, "503"), ("0/a", 2, "503"), ("0/a", 3, "ok")] and keys[4][0] == "1/a"


def test_without_request_id_the_slot_is_one_logical_request() -> None:
    with Recorder("500", 1) as rec:
        assert [post(rec, "7", None)[0] for _ in range(2)] == [500, 200]
        assert {a.key for a in rec.arrivals()} == {"7/-"}


def test_retry_after_below_half_a_second_is_sent_as_is() -> None:
    with Recorder("429", 1, retry_after=0.2) as rec:
        status, headers, _ = post(rec, "0", "a")
        assert rec.arrivals()[0].retry_after == 0.2
    assert status == 429 and headers["Retry-After"] == "0.2"


def test_a_busy_529_is_dynamos_overload_answer() -> None:
    with Recorder("529", 1) as rec:
        rec.configure("529", 1, retry_after=1.5, slot="ra")
        status, headers, body = post(rec, "0", "a")
        with_ra = post(rec, "ra", "a")
        assert [a.retry_after for a in rec.arrivals()] == [None, 1.5]
    assert status == 529 and "Retry-After" not in headers
    assert json.loads(body)["error"] == {"message": "recorder: overloaded, busy: back off", "type": "Overloaded",
                                         "param": None, "code": 529}
    assert with_ra[0] == 529 and with_ra[1]["Retry-After"] == "1.5"


def test_reset_and_stream_cut_and_per_slot_modes() -> None:
    with Recorder("reset", 1) as rec:
        rec.configure("stream-cut", 1, slot="s")
        rec.configure("400", 1, slot="n")
        assert post(rec, "0", "a")[0] is None
        status, _, body = post(rec, "s", "a", stream=True)
        assert [post(rec, "n", "a")[0] for _ in range(2)] == [400, 400]  # non-retryable: every attempt
        assert post(rec, "s", "a", stream=True)[2].endswith(b"data: [DONE]\n\n")
    assert status is None or b"[DONE]" not in body


def test_completed_answer_is_openai_shaped() -> None:
    with Recorder("503", 0) as rec:
        status, _, body = post(rec, "0", "a")
    doc = json.loads(body)
    assert status == 200 and doc["model"] == "m" and doc["choices"][0]["message"]["content"]


@pytest.mark.parametrize("kw, message", [({"failure": "418"}, "--failure"), ({"fail_first": -1}, "--fail-first"),
                                         ({"retry_after": -1.0}, "--retry-after")])
def test_bad_configuration(kw: dict, message: str) -> None:
    args = {"failure": "503", "fail_first": 1, **kw}
    with pytest.raises(ConfigError, match=message):
        Recorder(args.pop("failure"), args.pop("fail_first"), **args)
