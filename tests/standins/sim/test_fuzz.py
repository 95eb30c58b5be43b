"""Hypothesis fuzz of request bodies: never a 5xx, never a dead server."""
from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.standins.sim.conftest import Sim

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                     st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40))
_json = st.recursive(_scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=8), c, max_size=4),
                     max_leaves=12)
_keys = st.sampled_from(["model", "prompt", "messages", "max_tokens", "temperature", "top_p",
                         "top_k", "n", "stream", "stream_options", "stop", "seed", "logprobs",
                         "max_completion_tokens", "presence_penalty", "ignore_eos", "echo"])
_bodies = st.one_of(
    st.dictionaries(_keys, _json, max_size=6),
    st.fixed_dictionaries({"prompt": st.text(max_size=60), "max_tokens": st.integers(-5, 40)},
                          optional={"stream": st.booleans(), "temperature": _scalars}),
    st.fixed_dictionaries({"messages": st.lists(st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "system", 3]), "content": _scalars}), max_size=3)},
        optional={"max_tokens": _scalars, "stream": _scalars}),
    _json,
)


@settings(max_examples=100, deadline=None, suppress_health_check=list(HealthCheck))
@given(body=_bodies, chat=st.booleans())
def test_fuzz_no_5xx(sim: Sim, body: object, chat: bool) -> None:
    path = "/v1/chat/completions" if chat else "/v1/completions"
    raw = json.dumps(body, allow_nan=True).encode()
    status, data, _ = sim.request("POST", path, raw=raw)
    assert status < 500, (status, data[:300])
    if status >= 400:
        assert "error" in json.loads(data)


@settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck))
@given(raw=st.binary(max_size=200))
def test_fuzz_raw_bytes(sim: Sim, raw: bytes) -> None:
    status, _, _ = sim.request("POST", "/v1/completions", raw=raw)
    assert status < 500
    assert sim.request("GET", "/health")[0] == 200
