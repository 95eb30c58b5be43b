"""Every fault mode through the admin API (and one by flag), each checked for its effect."""
from __future__ import annotations

import json
import socket
import threading
import time

import openai
import pytest

from tests.standins.sim.conftest import ADMIN, Sim, wait_for


def _raw_stream(sim: Sim, max_tokens: int = 10, timeout: float = 5.0) -> tuple[bytes, bool]:
    """Raw HTTP streaming request; returns (bytes, ended_cleanly)."""
    body = json.dumps({"prompt": "fault", "max_tokens": max_tokens, "stream": True}).encode()
    with socket.create_connection(("127.0.0.1", sim.port), timeout=timeout) as c:
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        data = b""
        while not data.endswith(b"\r\n0\r\n\r\n"):
            chunk = c.recv(65536)
            if not chunk:
                return data, False
            data += chunk
    return data, True


def test_admin_requires_token(sim: Sim) -> None:
    st, data, _ = sim.request("POST", "/admin/faults", {"mode": "slow"})
    assert st == 401 and json.loads(data) == {"error": "Unauthorized"}
    st, _, _ = sim.request("GET", "/admin/faults", headers={"Authorization": "Bearer wrong"})
    assert st == 401
    assert sim.admin("POST", body={"mode": "nope"})[0] == 400
    assert sim.admin("POST", body={"mode": "slow", "factor": -1})[0] == 400
    assert sim.admin("GET") == (200, {"active": []})


def test_error_rate_and_revert(sim: Sim) -> None:
    assert sim.admin("POST", body={"mode": "error-rate", "fraction": 1.0, "status": 503})[0] == 200
    st, data, _ = sim.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})
    assert st == 503 and json.loads(data)["error"]["code"] == 503
    assert sim.admin("GET")[1]["active"][0]["mode"] == "error-rate"
    assert sim.admin("DELETE", "/admin/faults/error-rate")[0] == 200
    assert sim.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2})[0] == 200


def test_slow_factor(sim: Sim) -> None:
    def timed() -> float:
        t0 = time.perf_counter()
        sim.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 20})
        return time.perf_counter() - t0

    base = timed()
    sim.admin("POST", body={"mode": "slow", "factor": 20})  # instant step counts as 1 ms -> 20 ms
    try:
        assert timed() > max(0.3, 3 * base)
    finally:
        sim.admin("POST", body={"mode": "slow", "revert": True})
    assert sim.admin("GET")[1]["active"] == []


def test_stall_mid_stream(sim: Sim) -> None:
    sim.admin("POST", body={"mode": "stall", "after_tokens": 2, "seconds": 0.6})
    try:
        t0 = time.perf_counter()
        data, clean = _raw_stream(sim, 5)
        assert clean and data.count(b"data: {") == 5 and time.perf_counter() - t0 >= 0.6
    finally:
        sim.admin("DELETE", "/admin/faults/stall")


def test_truncate_closes_without_done(sim: Sim) -> None:
    sim.admin("POST", body={"mode": "truncate", "after_tokens": 3})
    try:
        data, clean = _raw_stream(sim, 10)
        assert not clean and b"[DONE]" not in data and data.count(b"data: {") == 3
    finally:
        sim.admin("DELETE", "/admin/faults/truncate")


def test_error_chunk_then_done(sim: Sim) -> None:
    sim.admin("POST", body={"mode": "error-chunk", "after_tokens": 2})
    try:
        data, clean = _raw_stream(sim, 10)
        assert clean and b'data: {"error"' in data and data.rstrip().endswith(b"0")
        assert b"data: [DONE]" in data and data.count(b'"text"') == 2
        st, _, _ = sim.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 10})
        assert st == 500
    finally:
        sim.admin("DELETE", "/admin/faults/error-chunk")


def test_leak_grows_rss(sim: Sim) -> None:
    def rss() -> float:
        text = sim.request("GET", "/metrics")[1].decode()
        line = [ln for ln in text.splitlines() if ln.startswith("process_resident_memory_bytes")][0]
        return float(line.split()[-1])

    before = rss()
    sim.admin("POST", body={"mode": "leak", "bytes_per_request": 8 << 20})
    try:
        for _ in range(5):
            sim.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 1})
        assert rss() - before > 30 << 20
    finally:
        sim.admin("DELETE", "/admin/faults/leak")


def test_rss_stays_flat_without_a_leak_fault(sim_factory) -> None:
    """The negative control of the leak mode: a finished request must free its prompt at once.

    A reference cycle per request (stream <-> request) kept every long prompt until a rare
    collection, so RSS climbed by hundreds of MB under a 32k mix and gateways saw a 'leak'."""
    s = sim_factory("--profile", "instant")
    prompt = " ".join(f"w{i % 997}" for i in range(30000))

    def rss_after(n: int) -> float:
        for _ in range(n):
            st, _, _ = s.request("POST", "/v1/completions", {"prompt": prompt, "max_tokens": 2}, timeout=30)
            assert st == 200
        text = s.request("GET", "/metrics")[1].decode()
        return float([ln for ln in text.splitlines() if ln.startswith("process_resident_memory_bytes")][0].split()[-1])

    warm = rss_after(20)
    grown = rss_after(150) - warm
    assert grown < 20 << 20, f"RSS grew {grown / 2**20:.0f} MiB over 150 requests with no leak fault"


def test_hang_keeps_health_200_and_resumes(sim: Sim) -> None:
    sim.admin("POST", body={"mode": "hang"})
    out: dict = {}

    def go() -> None:
        out["st"] = sim.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 2}, timeout=10)[0]

    t = threading.Thread(target=go)
    t.start()
    time.sleep(0.5)
    assert "st" not in out and sim.request("GET", "/health")[0] == 200
    sim.admin("DELETE", "/admin/faults/hang")
    t.join(5)
    assert out.get("st") == 200


def _gauge(sim: Sim, name: str) -> float:
    text = sim.request("GET", "/metrics")[1].decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def test_decode_stall_first_token_then_nothing_health_200_and_revert_resumes(sim: Sim) -> None:
    assert sim.admin("POST", body={"mode": "decode-stall"})[0] == 200
    body = json.dumps({"prompt": "fault", "max_tokens": 6, "stream": True, "ignore_eos": True}).encode()
    with socket.create_connection(("127.0.0.1", sim.port), timeout=5) as c:
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        data = b""
        while data.count(b"data: {") < 1:
            data += c.recv(65536)
        generated = _gauge(sim, "vllm:generation_tokens_total")
        time.sleep(0.5)  # dozens of decode steps' worth on the default profile
        extra = b""
        c.settimeout(0.05)
        try:
            extra = c.recv(65536)
        except TimeoutError:
            pass
        assert extra == b"" and data.count(b"data: {") == 1, "a token was decoded under decode-stall"
        assert sim.request("GET", "/health")[0] == 200
        assert _gauge(sim, "vllm:num_requests_running") == 1
        assert _gauge(sim, "vllm:generation_tokens_total") == generated >= 1
        sim.admin("DELETE", "/admin/faults/decode-stall")
        c.settimeout(5)
        data += extra
        while not data.endswith(b"\r\n0\r\n\r\n"):
            chunk = c.recv(65536)
            assert chunk, "the stream ended without its terminal chunk after the revert"
            data += chunk
    assert data.count(b"data: {") >= 6 and b"data: [DONE]" in data
    assert _gauge(sim, "vllm:num_requests_running") == 0


@pytest.mark.parametrize("mode,marker", [
    ("engine-death", "EngineCore encountered a fatal error."),
    ("oom", "CUDA out of memory"),
])
def test_death_modes_exit_zero(sim_factory, mode: str, marker: str) -> None:  # noqa: ANN001
    s: Sim = sim_factory()
    assert s.admin("POST", body={"mode": mode})[0] == 200
    assert wait_for(lambda: s.request("GET", "/health")[0] == 503, 2.0)
    assert s.request("POST", "/v1/completions", {"prompt": "x"})[0] == 500
    assert s.proc.wait(timeout=5 + 0.8 + 2) == 0  # the watchdog's tick, then the teardown
    assert marker in s.output


def test_crash_is_nonzero_and_immediate(sim_factory) -> None:  # noqa: ANN001
    s: Sim = sim_factory("--tensor-parallel-size", "2")
    ranks = s.rank_pids()
    s.admin("POST", body={"mode": "crash"})
    assert s.proc.wait(timeout=3) != 0
    import psutil

    assert wait_for(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                                    for p in ranks), 3.0)


def test_tokenizer_crash_by_flag(sim_factory) -> None:  # noqa: ANN001
    s: Sim = sim_factory("--fault", "tokenizer-crash")
    client = openai.OpenAI(base_url=s.base + "/v1", api_key="x", max_retries=0)
    normalized = "\U0001F600" * 20 + " fine"
    assert client.completions.create(model="sim-model", prompt=normalized, max_tokens=2).usage
    bad = "\U0001F600" * 20 + " cafe\u0301"  # combining accent: not NFC
    with pytest.raises(openai.InternalServerError):
        client.completions.create(model="sim-model", prompt=bad, max_tokens=2)
    assert s.proc.wait(timeout=6) == 0


def test_start_time_fault_flag_parsing(sim_factory) -> None:  # noqa: ANN001
    s: Sim = sim_factory("--fault", "error-rate:fraction=1,status=429")
    assert s.request("POST", "/v1/completions", {"prompt": "x"})[0] == 429
    assert s.admin("GET")[1]["active"] == [{"mode": "error-rate", "fraction": 1.0, "status": 429, "spread": 1}]
    st, _, _ = s.request("GET", "/admin/faults", headers={"Authorization": f"Bearer {ADMIN}x"})
    assert st == 401


def test_admin_is_loopback_only() -> None:
    from types import SimpleNamespace
    from unittest import mock

    from aiohttp.test_utils import make_mocked_request

    from chaos.stack.sim.api import Api

    cfg = SimpleNamespace(name="m", api_key=None, admin_token=ADMIN)
    api = Api(SimpleNamespace(cfg=cfg))  # type: ignore[arg-type]

    def req(peer: str):  # noqa: ANN202
        tr = mock.Mock()
        tr.get_extra_info.side_effect = lambda k, d=None: (peer, 5555) if k == "peername" else d
        return make_mocked_request("GET", "/admin/faults", transport=tr,
                                   headers={"Authorization": f"Bearer {ADMIN}"})

    denied = api._admin_denied(req("10.1.2.3"))
    assert denied is not None and denied.status == 403
    assert api._admin_denied(req("127.0.0.1")) is None


def test_engine_death_shuts_down_at_the_watchdog_tick_not_before(sim_factory) -> None:  # noqa: ANN001
    """As vLLM's API server: the dead engine is found by a watchdog ticking from the HTTP server's start;
    until that tick the server answers 503, at it the server stops accepting, then it exits 0."""
    s: Sim = sim_factory("--watchdog-period", "4")  # returns once it serves: well under 1 s after the start
    assert s.admin("POST", body={"mode": "engine-death"})[0] == 200
    time.sleep(1.5)  # the tick is 3-4 s after the death
    assert s.proc.poll() is None and s.request("GET", "/health")[0] == 503
    assert s.proc.wait(timeout=4 + 0.8 + 2) == 0
    assert "Engine is dead; shutting down the API server (exit 0)." in s.output
