"""Lifecycle fidelity probes: what a server does when its engine freezes or dies, on any backend.

The same probes run against the simulator and real vLLM (tests/fidelity), each on a TP 2 replica
started by the test with `restart: no`, so the exit code and time are the server's own:
- frozen_rank: SIGSTOP the last TP rank (vLLM's `VLLM::Worker_TP1`, the simulator's rank 1):
  what /health answers, whether a completion hangs, and whether it serves again after SIGCONT.
- engine_death: the engine dies (vLLM: SIGKILL of `VLLM::EngineCore`; the simulator: its
  engine-death fault): /health after it, the exit code, and how soon the process exits.
The exit time is bucketed (within vLLM's 5 s engine-death watchdog period or not) so a busy
machine does not make it flap.
"""
from __future__ import annotations

import json
import signal
import time
import urllib.error
import urllib.request
from typing import Any, Callable

Shape = dict[str, Any]


def _status(url: str, path: str = "/health", timeout: float = 3.0) -> int | str:
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError) as e:
        return "timeout" if "timed out" in str(e) else "refused"


def _completion(url: str, model: str, timeout: float) -> int | str:
    body = json.dumps({"model": model, "prompt": "ping", "max_tokens": 2}).encode()
    req = urllib.request.Request(f"{url}/v1/completions", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, OSError) as e:
        return "hangs" if "timed out" in str(e) else "refused"


def bucket(seconds: float | None) -> str:
    """Within vLLM's 5 s engine-death watchdog period, after it, or never."""
    if seconds is None:
        return "never"
    return "<= 5 s" if seconds <= 5 else "> 5 s"


def frozen_rank(target: Any, url: str, model: str) -> Shape:
    """SIGSTOP the last TP rank, look, SIGCONT it, look again."""
    ranks = target.rank_pids()
    if len(ranks) < 2:
        return {"error": f"needs TP >= 2, found ranks {ranks}"}
    pid = ranks[-1]
    target.signal(pid, signal.SIGSTOP)
    try:
        health = _status(url)
        completion = _completion(url, model, timeout=4.0)
    finally:
        target.signal(pid, signal.SIGCONT)
    deadline = time.monotonic() + 30
    after = _completion(url, model, timeout=10.0)
    while after != 200 and time.monotonic() < deadline:
        time.sleep(0.5)
        after = _completion(url, model, timeout=10.0)
    return {"health_while_frozen": health, "completion_while_frozen": completion, "serves_after_resume": after == 200}


def engine_death(target: Any, url: str, kill_engine: Callable[[], None], wait_s: float = 30.0) -> Shape:
    """Kill the engine; then /health, the exit code and how soon the server exits (restart: no)."""
    kill_engine()  # returns once the engine is proven dead
    t0 = time.monotonic()
    time.sleep(0.3)
    # 503 or refused: which one depends on how soon the process exits, so only "unhealthy" is compared
    health = "healthy" if target.is_running() and _status(url, timeout=2.0) == 200 else "unhealthy"
    while target.is_running() and time.monotonic() - t0 < wait_s:
        time.sleep(0.05)
    took = None if target.is_running() else time.monotonic() - t0
    deadline = time.monotonic() + 2.0  # the supervisor notes the exit within its 50 ms poll
    while took is not None and not any(e[1] == "exit" for e in target.events) and time.monotonic() < deadline:
        time.sleep(0.05)
    exits = [e for e in target.events if e[1] == "exit"]
    return {"health_after": health, "exit_code": exits[-1][2] if exits else None, "exit_within": bucket(took)}
