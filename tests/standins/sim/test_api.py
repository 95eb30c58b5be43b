"""Endpoints, shapes, errors, SSE, metrics and the request log, over real HTTP."""
from __future__ import annotations

import json
import time

import openai
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.standins.sim.conftest import Sim, wait_for


@pytest.fixture(scope="module")
def client(sim: Sim) -> openai.OpenAI:
    return openai.OpenAI(base_url=sim.base + "/v1", api_key="x", max_retries=0)


def test_health_version_load_models(sim: Sim) -> None:
    st, body, _ = sim.request("GET", "/health")
    assert (st, body) == (200, b"")
    assert sim.request("POST", "/ping")[0] == 200
    assert json.loads(sim.request("GET", "/version")[1])["version"]
    assert json.loads(sim.request("GET", "/load")[1]) == {"server_load": 0}
    models = json.loads(sim.request("GET", "/v1/models")[1])
    assert models["object"] == "list"
    m = models["data"][0]
    assert (m["id"], m["object"], m["owned_by"], m["max_model_len"]) == ("sim-model", "model", "vllm", 256)


def test_completion_and_chat_with_openai(client: openai.OpenAI) -> None:
    c = client.completions.create(model="sim-model", prompt="hello there", max_tokens=5)
    assert c.object == "text_completion" and c.id.startswith("cmpl-") and c.model == "sim-model"
    assert c.usage.completion_tokens == 5 and c.usage.prompt_tokens == 2
    assert c.choices[0].finish_reason == "length" and c.choices[0].text.strip()
    again = client.completions.create(model="sim-model", prompt="hello there", max_tokens=5)
    assert again.choices[0].text == c.choices[0].text  # deterministic from seed + prompt
    ch = client.chat.completions.create(model="sim-model", max_tokens=4,
                                        messages=[{"role": "user", "content": "hi"}])
    assert ch.object == "chat.completion" and ch.choices[0].message.role == "assistant"
    assert ch.usage.completion_tokens == 4
    nat = client.chat.completions.create(model="sim-model", messages=[{"role": "user", "content": "x"}])
    assert nat.choices[0].finish_reason in ("stop", "length") and nat.usage.completion_tokens >= 1


def test_streams_with_openai(client: openai.OpenAI) -> None:
    chunks = list(client.chat.completions.create(
        model="sim-model", max_tokens=6, stream=True, stream_options={"include_usage": True},
        messages=[{"role": "user", "content": "stream please"}]))
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    assert len(content) == 6
    assert content[-1].choices[0].finish_reason == "length"
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6
    comp = list(client.completions.create(model="sim-model", prompt="abc", max_tokens=3, stream=True))
    assert [c.object for c in comp] == ["text_completion"] * 3
    assert comp[-1].choices[0].finish_reason == "length"


def test_continuous_usage_stats_state_the_running_count_on_every_chunk(sim: Sim) -> None:
    """vLLM's stream_options.continuous_usage_stats: every chunk carries the cumulative completion_tokens
    (the role chunk 0), which the harness's duplicate check reads; without include_usage it is off."""
    for path, body in (("/v1/chat/completions", {"messages": [{"role": "user", "content": "count"}]}),
                       ("/v1/completions", {"prompt": "count"})):
        st, raw, _ = sim.request("POST", path, {**body, "max_tokens": 4, "stream": True, "stream_options": {
            "include_usage": True, "continuous_usage_stats": True}})
        assert st == 200
        chunks = [json.loads(e[6:]) for e in raw.decode().split("\n\n") if e.startswith("data: {")]
        counts = [c["usage"]["completion_tokens"] for c in chunks if c["choices"]]
        assert counts == ([0] if "messages" in body else []) + [1, 2, 3, 4], counts
        assert all(c["usage"]["prompt_tokens"] == chunks[-1]["usage"]["prompt_tokens"] for c in chunks)
    st, raw, _ = sim.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2, "stream": True,
                                                         "stream_options": {"continuous_usage_stats": True}})
    assert st == 200 and b'"usage"' not in raw


def test_raw_sse_format(sim: Sim) -> None:
    st, body, hdrs = sim.request("POST", "/v1/completions",
                                 {"prompt": "raw", "max_tokens": 2, "stream": True})
    assert st == 200 and hdrs["Content-Type"].startswith("text/event-stream")
    events = body.decode().split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    assert all(e.startswith("data: ") for e in events[:-1])
    assert json.loads(events[0][6:])["choices"][0]["finish_reason"] is None


@pytest.mark.parametrize("body,status,snippet", [
    ({"prompt": "x", "model": "nope"}, 404, "The model `nope` does not exist."),
    ({"prompt": "word " * 300}, 400, "maximum context length is 256 tokens"),
    ({"prompt": "x", "max_tokens": 0}, 400, "max_tokens"),
    ({"prompt": "x", "temperature": "hot"}, 400, "temperature"),
    ({"messages": []}, 400, None),
    ({}, 400, "prompt"),
])
def test_errors_are_vllm_shaped(sim: Sim, body: dict, status: int, snippet: str | None) -> None:
    path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
    st, data, _ = sim.request("POST", path, body)
    err = json.loads(data)["error"]
    assert st == status and err["code"] == status and set(err) == {"message", "type", "param", "code"}
    if snippet:
        assert snippet in err["message"]


def test_non_json_and_bad_utf8(sim: Sim) -> None:
    assert sim.request("POST", "/v1/completions", raw=b"{nope")[0] == 400
    assert sim.request("POST", "/v1/completions", raw=b'{"prompt": "\xff\xfe"}')[0] == 400
    st, _, _ = sim.request("POST", "/v1/completions", raw=b"prompt=x",
                           headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert st == 400
    huge = b'{"prompt": "' + b"a " * (9 * 1024 * 1024) + b'"}'
    assert 400 <= sim.request("POST", "/v1/completions", raw=huge)[0] < 500


def test_prompt_plus_max_tokens_is_clamped_but_max_tokens_over_the_length_is_a_400(sim: Sim) -> None:
    # as real vLLM 0.32 does (measured, docs/vllm-fidelity.md)
    st, data, _ = sim.request("POST", "/v1/completions", {"prompt": "a b c", "max_tokens": 256,
                                                          "ignore_eos": True})
    assert st == 200 and json.loads(data)["usage"]["completion_tokens"] == 256 - 3
    st, data, _ = sim.request("POST", "/v1/completions", {"prompt": "a b c", "max_tokens": 10_000})
    err = json.loads(data)["error"]
    assert st == 400 and err["param"] == "max_tokens" and "cannot be greater than max_model_len=256" in err["message"]


def test_metrics_names_types_buckets(sim: Sim) -> None:
    sim.request("POST", "/v1/completions", {"prompt": "metrics", "max_tokens": 3})
    text = sim.request("GET", "/metrics")[1].decode()
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    for g in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"):
        assert fams[g].type == "gauge"
    for c in ("vllm:prompt_tokens", "vllm:generation_tokens", "vllm:num_preemptions",
              "vllm:prefix_cache_queries", "vllm:prefix_cache_hits", "vllm:request_success"):
        assert fams[c].type == "counter", c
        assert all(s.name.endswith("_total") for s in fams[c].samples)
    ttft = fams["vllm:time_to_first_token_seconds"]
    assert ttft.type == "histogram"
    les = [s.labels["le"] for s in ttft.samples if s.name.endswith("_bucket")]
    assert les[:3] == ["0.001", "0.005", "0.01"] and les[-2:] == ["2560.0", "+Inf"]
    itl = [s.labels["le"] for s in fams["vllm:inter_token_latency_seconds"].samples if "le" in s.labels]
    assert itl[0] == "0.01" and itl[-2] == "80.0"
    e2e = [s.labels["le"] for s in fams["vllm:e2e_request_latency_seconds"].samples if "le" in s.labels]
    assert e2e[0] == "0.3" and e2e[-2] == "7680.0"
    reasons = {s.labels["finished_reason"] for s in fams["vllm:request_success"].samples}
    assert {"stop", "length", "abort", "error"} <= reasons
    gen = [s for s in fams["vllm:generation_tokens"].samples][0]
    assert gen.value >= 3 and gen.labels == {"engine": "0", "model_name": "sim-model"}
    assert fams["vllm:cache_config_info"].samples[0].labels["block_size"] == "16"
    assert "process_resident_memory_bytes" in fams


def test_request_log_ground_truth(sim: Sim) -> None:
    sim.request("POST", "/v1/completions", {"prompt": "logged", "max_tokens": 4},
                headers={"x-request-id": "abc-123"})
    sim.request("POST", "/v1/completions", {"prompt": "x", "model": "nope"},
                headers={"x-request-id": "rej-1"})

    def records() -> dict:
        lines = sim.log_path.read_text().splitlines()  # type: ignore[attr-defined]
        return {r["request_id"]: r for r in map(json.loads, lines)}

    assert wait_for(lambda: "rej-1" in records(), 2.0)
    r = records()["abc-123"]
    assert r["outcome"] == "length" and r["status"] == 200 and r["output_tokens"] == 4
    assert r["t_arrival"] <= r["t_scheduled"] <= r["t_first_token"] <= r["t_finish"] <= time.time()
    assert records()["rej-1"]["outcome"] == "rejected" and records()["rej-1"]["status"] == 404


def test_api_key(sim_factory) -> None:  # noqa: ANN001
    s = sim_factory("--api-key", "k1")
    st, data, _ = s.request("POST", "/v1/completions", {"prompt": "x"})
    assert st == 401 and json.loads(data) == {"error": "Unauthorized"}
    st, _, _ = s.request("POST", "/v1/completions", {"prompt": "x"}, {"Authorization": "Bearer k1"})
    assert st == 200
    assert s.request("GET", "/health")[0] == 200
