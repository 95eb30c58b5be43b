"""Every HTTP/stream fault, through a real fault proxy in front of a backend the harness did not start:
each one's effect on the wire, its proof (rule listed, hits counted), its ledger record, and its revert."""
from __future__ import annotations

import http.client
import json
import threading
import time
from urllib.parse import urlsplit

import pytest

from chaos.errors import FaultError, FaultNotEffective
from chaos.faults import http as H
from chaos.faults.proxy_admin import FaultProxyAdmin, FaultProxyError


def call(url: str, *, stream: bool = True, max_tokens: int = 8, timeout: float = 10.0, headers=None, model="sim-model",
         **extra):
    """One chat request; returns (status, headers, body bytes, seconds, error or None). A cut is an error."""
    u = urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=timeout)
    body = json.dumps({"model": model, "messages": [{"role": "user", "content": "hi"}], "max_tokens": max_tokens,
                       "stream": stream, **({"stream_options": {"include_usage": True}} if stream else {}), **extra})
    t0 = time.monotonic()
    try:
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"Content-Type": "application/json", **(headers or {})})
        r = conn.getresponse()
        hdrs = {k.lower(): v for k, v in r.getheaders()}
        try:
            data, err = r.read(), None
        except http.client.IncompleteRead as e:
            data, err = e.partial, "cut"
        return r.status, hdrs, data, time.monotonic() - t0, err
    except (OSError, http.client.HTTPException) as e:
        return None, {}, b"", time.monotonic() - t0, type(e).__name__
    finally:
        conn.close()


def events(data: bytes) -> list[str]:
    return [line[6:] for line in data.decode("utf-8", "replace").split("\n") if line.startswith("data: ")]


def tokens(data: bytes) -> list[str]:
    out = []
    for ev in events(data):
        try:
            for ch in json.loads(ev).get("choices") or []:
                if (ch.get("delta") or {}).get("content"):
                    out.append(ch["delta"]["content"])
        except ValueError:
            continue
    return out


def test_pass_through_unchanged_when_no_rule(proxy, backend):
    direct, via = call(backend), call(proxy.url)
    assert direct[0] == via[0] == 200 and via[4] is None
    assert tokens(direct[2]) == tokens(via[2]) and len(tokens(via[2])) == 8
    assert events(via[2])[-1] == "[DONE]"
    plain = call(proxy.url, stream=False)
    assert plain[0] == 200 and json.loads(plain[2])["choices"][0]["message"]["content"]


def test_abort_status_fraction_and_retry_after(proxy, policy):
    f = H.http_error(FaultProxyAdmin.of(proxy), 429, retry_after="2", fraction=0.25).using(policy)
    with f:
        got = [call(proxy.url, stream=False) for _ in range(8)]
    assert [s for s, *_ in got].count(429) == 2  # even spread: exactly a quarter
    s429 = next(g for g in got if g[0] == 429)
    assert s429[1]["retry-after"] == "2"
    assert json.loads(s429[2])["error"]["code"] == 429
    assert f.evidence["hits"] == 2 and f.evidence["matched"] == 8
    assert all(call(proxy.url, stream=False)[0] == 200 for _ in range(3))  # reverted


def test_busy_529_with_an_openai_error_body(proxy, policy):
    """NVIDIA Dynamo sheds overload with 529 ("busy: back off"): the status, its error type and Retry-After."""
    f = H.http_error(FaultProxyAdmin.of(proxy), 529, retry_after=1, message="busy").using(policy)
    with f:
        status, hdrs, body, _, _ = call(proxy.url, stream=False)
    assert status == 529 and hdrs["retry-after"] == "1"
    assert json.loads(body) == {"error": {"message": "busy", "type": "Overloaded", "param": None, "code": 529}}
    assert f.evidence["hits"] == 1
    assert call(proxy.url, stream=False)[0] == 200  # reverted


def test_oom_error_has_vllm_wording(proxy, policy):
    with H.oom_error(FaultProxyAdmin.of(proxy)).using(policy):
        status, _, body, _, _ = call(proxy.url)
    assert status == 500 and "CUDA out of memory" in json.loads(body)["error"]["message"]


def test_an_oom_burst_is_exactly_n_answers_then_none(proxy, policy):
    """limit: the breaker suite's burst. 3 OOM answers the reference gateway counts as OOMs (the same
    status and body a kept-alive vLLM gives), then every request served, at any request rate."""
    from chaos.stack.gateway import is_oom

    f = H.oom_error(FaultProxyAdmin.of(proxy), limit=3).using(policy)
    with f:
        got = [call(proxy.url, stream=False) for _ in range(7)]
        assert f.counters()["hits"] == 3
    assert [s for s, *_ in got] == [500, 500, 500, 200, 200, 200, 200]
    assert all(is_oom(body) for _, _, body, _, _ in got[:3])
    assert f.evidence["hits"] == 3 and f.evidence["matched"] == 7


def test_delays_before_headers_and_before_first_token(proxy, policy):
    base = call(proxy.url)[3]
    with H.slow_headers(FaultProxyAdmin.of(proxy), 0.6).using(policy):
        slow = call(proxy.url)
    with H.slow_first_token(FaultProxyAdmin.of(proxy), 0.6).using(policy):
        first = call(proxy.url)
    assert slow[0] == first[0] == 200 and slow[3] >= base + 0.55 and first[3] >= base + 0.55
    assert len(tokens(first[2])) == 8


def test_stall_then_the_stream_goes_on(proxy, policy):
    with H.stream_stall(FaultProxyAdmin.of(proxy), after_tokens=2, seconds=0.8).using(policy) as f:
        status, _, body, secs, err = call(proxy.url)
    assert status == 200 and err is None and secs >= 0.75 and len(tokens(body)) == 8
    assert f.evidence["hits"] == 1


@pytest.mark.parametrize("done", [False, True])
def test_cut_after_k_tokens(proxy, policy, done):
    with H.stream_cut(FaultProxyAdmin.of(proxy), after_tokens=3, done=done).using(policy):
        status, _, body, _, err = call(proxy.url)
    assert status == 200 and tokens(body) == tokens(call(proxy.url)[2])[:3]
    if done:
        assert err is None and events(body)[-1] == "[DONE]" and '"finish_reason":"' not in body.decode()
    else:
        assert err is not None and "[DONE]" not in body.decode()


def test_error_malformed_and_duplicated_chunks(proxy, policy):
    clean = tokens(call(proxy.url)[2])
    with H.error_chunk(FaultProxyAdmin.of(proxy), after_tokens=2).using(policy):
        _, _, body, _, _ = call(proxy.url)
    evs = events(body)
    assert json.loads(evs[-2])["error"]["message"].startswith("EngineCore encountered an issue") and evs[-1] == "[DONE]"
    with H.malformed_chunk(FaultProxyAdmin.of(proxy), after_tokens=2).using(policy):
        _, _, body, _, _ = call(proxy.url)
    assert sum(1 for e in events(body) if e != "[DONE]" and not _parses(e)) == 1 and tokens(body) == clean
    with H.duplicate_chunk(FaultProxyAdmin.of(proxy), after_tokens=2).using(policy):
        _, _, body, _, _ = call(proxy.url)
    assert tokens(body) == clean[:3] + clean[2:]


def _parses(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def test_rewrite_model_and_headers(proxy, policy):
    with H.rewrite_model(FaultProxyAdmin.of(proxy), "other-model").using(policy):
        s1 = call(proxy.url)
        s2 = call(proxy.url, stream=False)
    assert all(json.loads(e)["model"] == "other-model" for e in events(s1[2]) if e != "[DONE]")
    assert json.loads(s2[2])["model"] == "other-model"
    with H.header_fault(FaultProxyAdmin.of(proxy), drop=["content-type"], set={"x-chaos-test": "1"}).using(policy):
        _, hdrs, _, _, _ = call(proxy.url, stream=False)
    assert "content-type" not in hdrs and hdrs["x-chaos-test"] == "1"


def test_corrupt_answer_changes_the_text_of_a_whole_answer(proxy, policy):
    clean_stream, clean_json = call(proxy.url), call(proxy.url, stream=False)
    with H.corrupt_answer(FaultProxyAdmin.of(proxy)).using(policy) as f:
        s1 = call(proxy.url)
        s2 = call(proxy.url, stream=False)
    text = "".join(tokens(s1[2]))
    assert text == "corrupted " + "".join(tokens(clean_stream[2])) and s1[2].rstrip().endswith(b"data: [DONE]")
    content = json.loads(s2[2])["choices"][0]
    before = json.loads(clean_json[2])["choices"][0]
    key = "message" if "message" in content else None
    got, want = (content[key]["content"], before[key]["content"]) if key else (content["text"], before["text"])
    assert got == "corrupted " + want and f.evidence["hits"] == 2


def test_hang_holds_requests_until_revert_then_serves_them(proxy, policy):
    out = {}
    f = H.hang(FaultProxyAdmin.of(proxy)).using(policy)
    f.inject()
    try:
        t = threading.Thread(target=lambda: out.update(r=call(proxy.url, timeout=20)))
        t.start()
        time.sleep(1.0)
        assert t.is_alive(), "a hung replica must answer nothing"
    finally:
        f.revert()
    t.join(10)
    assert out["r"][0] == 200 and len(tokens(out["r"][2])) == 8


def test_match_filters_path_model_header(proxy, policy):
    f = H.http_error(FaultProxyAdmin.of(proxy), 503, match={"path": "/v1/chat/*", "header": {"x-tenant": "a"}}).using(policy)
    with f:
        hit = call(proxy.url, headers={"x-tenant": "a"})
        miss = call(proxy.url, headers={"x-tenant": "b"})
    assert hit[0] == 503 and miss[0] == 200 and f.evidence["hits"] == 1
    assert f.evidence["seen"] == 2 and f.evidence["matched"] == 1


def test_a_rule_that_hit_nothing_is_not_effective(proxy, policy):
    f = H.http_error(FaultProxyAdmin.of(proxy), 500, match={"model": "nobody-asks-for-this"}).using(policy)
    f.inject()
    call(proxy.url)
    with pytest.raises(FaultNotEffective, match="hit no request"):
        f.revert()
    assert FaultProxyAdmin.of(proxy).rules() == []  # reverted all the same


def test_ledger_records_the_token_source_never_the_token(proxy, policy, token_file):
    with H.stream_cut(FaultProxyAdmin.of(proxy), 1).using(policy):
        call(proxy.url)
    text = policy.get_ledger().path.read_text()
    assert token_file.read_text().strip() not in text
    assert str(token_file) in text and '"op":"done"' in text


@pytest.mark.parametrize("rule, expect", [
    ({"name": "chaos-x", "kind": "explode"}, "kind"),
    ({"name": "chaos-x", "kind": "abort", "fraction": 1.5}, "fraction"),
    ({"name": "chaos-x", "kind": "cut", "after_tokens": -1}, "after_tokens"),
    ({"name": "chaos-x", "kind": "abort", "bogus": 1}, "bogus"),
    ({"name": "bad name!", "kind": "abort"}, "name"),
])
def test_bad_rules_are_one_line_400s_and_the_proxy_keeps_serving(proxy, rule, expect):
    with pytest.raises(FaultProxyError) as e:
        FaultProxyAdmin.of(proxy).set_rule(rule)
    assert e.value.status == 400 and expect in str(e.value) and "\n" not in str(e.value)
    assert call(proxy.url)[0] == 200


def test_wrong_token_is_refused(proxy):
    from chaos.faults.proxy_admin import FaultProxyAdmin

    with pytest.raises(FaultProxyError) as e:
        FaultProxyAdmin(proxy.url, "wrong-token").rules()
    assert e.value.status == 401
    with pytest.raises(FaultError, match="401"):
        H.http_error(FaultProxyAdmin(proxy.url, "wrong-token")).inject()
