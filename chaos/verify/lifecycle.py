"""Lifecycle fidelity probes: what a server does when its engine freezes or dies, on any backend.

The same probes run against the simulator and real vLLM (tests/vllm/fidelity), each on a TP 2 replica
started by the test with `restart: no`, so the exit code and time are the server's own:
- frozen_rank: SIGSTOP the last TP rank (vLLM's `VLLM::Worker_TP1`, the simulator's rank 1):
  what /health answers, whether a completion hangs, and whether it serves again after SIGCONT.
- engine_death: the engine dies (vLLM: SIGKILL of `VLLM::EngineCore`; the simulator: its
  engine-death fault): /health after it, the exit code, how soon the server stops accepting
  connections, and how soon after that the process is gone.
vLLM's API server does not exit when its engine dies: a watchdog task, ticking every 5 s from the
start of the HTTP server, finds the engine dead and shuts uvicorn down (it closes its socket),
and the process exits 0.56-1.85 s later (measured here). So the time from the death to the exit
is 0-5 s of waiting for the tick, a phase no probe controls, plus the shutdown: one bucket on the
sum flaps (CI: 5.3 s once, against a recorded 0.5 s). The two parts are bucketed apart instead:
- shutdown_within: death -> refused connections, within one watchdog period (the 5 s, plus 1 s
  for uvicorn's 0.1 s exit poll and this probe's own polling), or later, or never;
- exit_after_shutdown: refused connections -> the process gone, within 5 s (2.7x the slowest
  measured) or later.
"""
from __future__ import annotations

import http.client
import json
import signal
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

Shape = dict[str, Any]


def _status(url: str, path: str = "/health", timeout: float = 3.0) -> int | str:
    try:
        with urllib.request.urlopen(f"{url}{path}", timeout=timeout) as r:
            status: int = r.status
            return status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        return "timeout" if "timed out" in str(e) else "refused"


def _completion(url: str, model: str, timeout: float) -> int | str:
    body = json.dumps({"model": model, "prompt": "ping", "max_tokens": 2}).encode()
    req = urllib.request.Request(f"{url}/v1/completions", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status: int = r.status
            return status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
        return "hangs" if "timed out" in str(e) else "refused"


WATCHDOG_S = 5.0  # vLLM's VLLM_WATCHDOG_TIME_S (vllm/entrypoints/launchers/launcher.py), not configurable
SHUTDOWN_SLACK_S = 1.0  # uvicorn notices should_exit within 0.1 s; the probe polls every 0.05 s
TEARDOWN_S = 5.0  # uvicorn "Shutting down" -> the process gone: 0.56-1.85 s measured here


def bucket(seconds: float | None, limit: float) -> str:
    """`<= limit s`, `> limit s`, or `never`."""
    if seconds is None:
        return "never"
    return f"<= {limit:g} s" if seconds <= limit else f"> {limit:g} s"


def frozen_rank(target: Any, url: str, model: str) -> Shape:
    """SIGSTOP the last TP rank, look, SIGCONT it, look again."""
    ranks = target.rank_pids()
    if len(ranks) < 2:
        return {"error": f"needs TP >= 2, found ranks {ranks}"}
    pid = ranks[-1]
    target.signal(pid, signal.SIGSTOP)
    try:
        state = _settled_state(target, pid, "T")
        health = _status(url)
        completion = _completion(url, model, timeout=4.0)
        state_after = target.proc_state(pid)
    finally:
        target.signal(pid, signal.SIGCONT)
    if state != "T":  # the probe did not freeze anything: say so, never "it served while frozen"
        completion = f"rank {pid} not stopped (state {state})"
    # what a reader needs when a completion came back from a "frozen" replica (CI saw it once)
    evidence = {"ranks": ranks, "frozen": pid, "state": state, "state_after": state_after}
    if completion != "hangs":
        evidence["processes"] = target.processes() if hasattr(target, "processes") else None
        evidence["log"] = target.logs(15) if hasattr(target, "logs") else None
    deadline = time.monotonic() + 30
    after = _completion(url, model, timeout=10.0)
    while after != 200 and time.monotonic() < deadline:
        time.sleep(0.5)
        after = _completion(url, model, timeout=10.0)
    return {"health_while_frozen": health, "completion_while_frozen": completion, "serves_after_resume": after == 200,
            "evidence": evidence}


def _settled_state(target: Any, pid: int, want: str, within_s: float = 2.0) -> str | None:
    """The process's state once it reads `want`, or whatever it reads after `within_s` (a signal is
    acted on when its threads next run, which on a loaded machine is not at once)."""
    deadline = time.monotonic() + within_s
    state: str | None = target.proc_state(pid)
    while state != want and time.monotonic() < deadline:
        time.sleep(0.01)
        state = target.proc_state(pid)
    return state


def engine_death(target: Any, url: str, kill_engine: Callable[[], None], wait_s: float = 30.0) -> Shape:
    """Kill the engine; then /health, when the server stops accepting, when it exits, its exit code."""
    kill_engine()  # returns once the engine is proven dead
    t0 = time.monotonic()
    time.sleep(0.3)
    # 503 or refused: which one depends on the watchdog's phase, so only "unhealthy" is compared
    health = "healthy" if target.is_running() and _status(url, timeout=2.0) == 200 else "unhealthy"
    refused = exited = None
    while time.monotonic() - t0 < wait_s:
        now = time.monotonic()
        if not target.is_running():
            exited = now
            refused = refused or now
            break
        if refused is None and _status(url, timeout=1.0) == "refused":
            refused = now
        time.sleep(0.05)
    deadline = time.monotonic() + 2.0  # the supervisor notes the exit within its 50 ms poll
    while exited is not None and not any(e[1] == "exit" for e in target.events) and time.monotonic() < deadline:
        time.sleep(0.05)
    exits = [e for e in target.events if e[1] == "exit"]
    return {"health_after": health, "exit_code": exits[-1][2] if exits else None,
            "shutdown_within": bucket(None if refused is None else refused - t0, WATCHDOG_S + SHUTDOWN_SLACK_S),
            # refused is set whenever exited is
            "exit_after_shutdown": bucket(None if exited is None or refused is None else exited - refused, TEARDOWN_S),
            "seconds": {"refused": None if refused is None else round(refused - t0, 2),
                        "exited": None if exited is None else round(exited - t0, 2)}}
