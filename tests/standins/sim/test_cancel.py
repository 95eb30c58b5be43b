"""Cancellation frees compute in the simulator, as in vLLM: a client that closes its connection mid-answer
gets its request aborted (vLLM's request-disconnect watcher), so the running requests and the generation
rate fall back to what the clients still reading ask for."""
from __future__ import annotations

import json
import socket
import time

from chaos.load.hangup import HANGUP, STAY, HangUp, start_streams
from chaos.observe.metrics import parse_metrics, value
from tests.standins.sim.conftest import Sim, wait_for

STEP_S = 0.02  # `slow:20` on the instant profile: one token per stream every 20 ms


def _engine(sim: Sim) -> tuple[float, float]:
    """(running requests, generation tokens so far) from the replica's /metrics."""
    samples = parse_metrics(sim.request("GET", "/metrics")[1].decode())
    return value(samples, "vllm:num_requests_running") or 0.0, value(samples, "vllm:generation_tokens_total") or 0.0


def _rate_per_s(sim: Sim, seconds: float) -> float:
    _, g0 = _engine(sim)
    t0 = time.monotonic()
    time.sleep(seconds)
    _, g1 = _engine(sim)
    return (g1 - g0) / (time.monotonic() - t0)


def test_clients_that_hang_up_free_the_engine(sim_factory, tmp_path) -> None:
    log = tmp_path / "requests.jsonl"
    sim = sim_factory("--served-model-name", "sim-model", "--max-model-len", "4096", "--fault", "slow:20",
                      "--request-log", str(log))
    step = HangUp(clients=3, after_tokens=50, stay=2, max_tokens=600, deadline_s=30.0)
    stayers, join_stayers = start_streams(sim.base, step, STAY, model="sim-model")
    assert wait_for(lambda: all(c.t_first_token for c in stayers), 10.0), stayers
    base_rate = _rate_per_s(sim, 0.5)
    hangers, join_hangers = start_streams(sim.base, step, HANGUP, model="sim-model")
    assert wait_for(lambda: _engine(sim)[0] == 5, 5.0), _engine(sim)
    held_rate = _rate_per_s(sim, 0.4)  # before the 50th token (1 s at 20 ms a step)
    join_hangers()
    assert all(c.hung_up and c.tokens >= 50 and c.error is None for c in hangers), hangers
    t_hangup = max(c.t_hangup for c in hangers if c.t_hangup)
    assert wait_for(lambda: _engine(sim)[0] == 2, 1.0), f"still running after the hang-up: {_engine(sim)}"
    freed_s = time.time() - t_hangup
    after_rate = _rate_per_s(sim, 0.5)
    # five streams decode ~2.5x what two do; once three leave, the rate is the two's again
    assert held_rate > 2.0 * base_rate, (base_rate, held_rate)
    assert after_rate < 1.3 * base_rate, (base_rate, held_rate, after_rate, freed_s)
    join_stayers()
    assert all(c.finish_reason == "length" and c.tokens == 600 for c in stayers), stayers
    lines = {r["request_id"]: r for r in map(json.loads, log.read_text().splitlines())}
    for c in hangers:
        rec = lines[c.request_id]
        assert rec["outcome"] == "abort" and rec["output_tokens"] < 150, rec


def test_a_non_streaming_client_that_leaves_is_aborted_too(sim_factory) -> None:
    sim = sim_factory("--served-model-name", "sim-model", "--max-model-len", "4096", "--fault", "slow:20")
    body = json.dumps({"model": "sim-model", "prompt": "x", "max_tokens": 1000, "ignore_eos": True}).encode()
    s = socket.create_connection(("127.0.0.1", sim.port))
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n%b" % (len(body), body))
    assert wait_for(lambda: _engine(sim)[0] == 1, 5.0)
    s.shutdown(socket.SHUT_RDWR)
    s.close()
    assert wait_for(lambda: _engine(sim)[0] == 0, 1.0), "a non-streaming request outlived its client"
    _, g0 = _engine(sim)
    time.sleep(0.3)
    assert _engine(sim)[1] == g0  # nothing generated for nobody
