"""Fidelity probes: one probe set run against any OpenAI-compatible server, reduced to comparable shapes,
so the simulator can be diffed against a recorded run of real vLLM.

A shape keeps what a client or the harness depends on (status, error type and param, the message
with its numbers and names blanked, SSE event kinds in order, metric family names and types) and
drops what varies between runs (ids, timestamps, generated text).
"""
from __future__ import annotations

import http.client
import json
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

Shape = dict[str, Any]


def _request(base: str, method: str, path: str, body: bytes | None = None,
             ctype: str = "application/json") -> tuple[int, dict[str, str], bytes]:
    u = urlsplit(base)
    assert u.hostname is not None, f"no host in {base!r}"
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.request(method, path, body=body, headers={"Content-Type": ctype} if body is not None else {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally:
        conn.close()


def _blank(text: str, *names: str) -> str:
    for n in names:
        text = text.replace(n, "<name>")
    return re.sub(r"\d+", "N", text)


def _error_shape(status: int, raw: bytes, *names: str) -> Shape:
    try:
        doc = json.loads(raw)
    except ValueError:
        return {"status": status, "json": False}
    shape: Shape = {"status": status, "keys": sorted(doc) if isinstance(doc, dict) else type(doc).__name__}
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        shape.update(error_keys=sorted(err), type=err.get("type"), param=err.get("param"), code=err.get("code"),
                     message=_blank(str(err.get("message", "")), *names))
    return shape


def _chat(model: str, content: str, **kw: Any) -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": content}], **kw}).encode()


def _sse_shape(raw: bytes) -> Shape:
    kinds: list[str] = []
    for line in raw.decode("utf-8", "replace").split("\n"):
        if not line.startswith("data: "):
            continue
        data = line[6:]
        if data == "[DONE]":
            kinds.append("done")
            continue
        ev = json.loads(data)
        choices = ev.get("choices") or []
        if not choices:
            kinds.append("usage" if ev.get("usage") else "empty")
            continue
        ch = choices[0]
        delta = ch.get("delta") or {}
        kind = "role" if "role" in delta and not delta.get("content") else "token" if delta.get("content") else "none"
        if ch.get("finish_reason"):
            kind = f"{kind}+finish:{ch['finish_reason']}"
        if not kinds or kinds[-1] != kind or kind != "token":
            kinds.append(kind)
    return {"events": kinds}


def _metrics_shape(headers: dict[str, str], raw: bytes) -> Shape:
    fams = {}
    for line in raw.decode("utf-8", "replace").splitlines():
        m = re.match(r"# TYPE (vllm:\S+) (\S+)", line)
        if m:
            fams[m.group(1)] = m.group(2)
    return {"content_type": headers.get("content-type", "").split(";")[0], "families": fams}


def _health_shape(base: str) -> Shape:
    status, _headers, raw = _request(base, "GET", "/health")
    return {"status": status, "empty": raw == b""}


def _models_shape(base: str) -> Shape:
    status, _headers, raw = _request(base, "GET", "/v1/models")
    return {"status": status, "keys": sorted(json.loads(raw)["data"][0])}


def probes(model: str, max_model_len: int) -> dict[str, Callable[[str], Shape]]:
    """name -> probe(base_url) returning the shape of what the server answered."""
    too_long = " ".join(["word"] * (max_model_len + 8))
    return {
        "health": _health_shape,
        "models": _models_shape,
        "too_long_prompt": lambda b: _error_shape(*_request(b, "POST", "/v1/chat/completions",
                                                            _chat(model, too_long, max_tokens=4))[::2], model),
        "max_tokens_over_len": lambda b: _error_shape(*_request(b, "POST", "/v1/chat/completions",
                                                                _chat(model, "hi", max_tokens=max_model_len + 1))[::2],
                                                      model),
        "unknown_model": lambda b: _error_shape(*_request(b, "POST", "/v1/chat/completions",
                                                          _chat("no-such-model", "hi", max_tokens=4))[::2],
                                                "no-such-model", model),
        "malformed_json": lambda b: _error_shape(*_request(b, "POST", "/v1/chat/completions", b"{not json")[::2]),
        "invalid_utf8": lambda b: _error_shape(*_request(b, "POST", "/v1/chat/completions",
                                                         b'{"model": "' + model.encode() + b'\xff\xfe"}')[::2]),
        "sse_chat": lambda b: _sse_shape(_request(b, "POST", "/v1/chat/completions", _chat(
            model, "hi", max_tokens=4, stream=True, stream_options={"include_usage": True}))[2]),
        "metrics": lambda b: _metrics_shape(*_request(b, "GET", "/metrics")[1:]),
    }


def observe(base_url: str, model: str, max_model_len: int) -> dict[str, Shape]:
    """Run every probe against base_url."""
    return {name: probe(base_url) for name, probe in probes(model, max_model_len).items()}


MEASURED = {"seconds", "evidence"}  # raw figures and facts a probe reports for the reader; never compared


def diff(reference: dict[str, Shape], observed: dict[str, Shape]) -> list[tuple[str, str, Any, Any]]:
    """(probe, field, reference value, observed value) for every field that differs."""
    out = []
    for name, ref in reference.items():
        got = observed.get(name, {})
        for key in sorted((set(ref) | set(got)) - MEASURED):
            a, b = ref.get(key), got.get(key)
            if key == "families" and isinstance(a, dict) and isinstance(b, dict):
                for fam in sorted(set(a) | set(b)):
                    if a.get(fam) != b.get(fam):
                        out.append((name, f"families.{fam}", a.get(fam), b.get(fam)))
            elif a != b:
                out.append((name, key, a, b))
    return out
