"""The breaker's leak trend on real vLLM: the engine plugin's leak in the API server, sized to the replica.

A gateway that judges a leak reads each replica's `process_resident_memory_bytes`; on vLLM that page is
the API server's (the EngineCore and the ranks are other processes, which no gateway sees), so the leak
goes into the API server (`process: api`). Its size per request comes from the replica's RSS and its
request rate, both read from vLLM's own /metrics, so that the rise breaks the policy's leak rule
(leak_bytes_per_request) whatever the replica's size and traffic.
"""
from __future__ import annotations

import math
import re
import time
import urllib.request
from typing import TYPE_CHECKING

from chaos.errors import FaultError
from chaos.faults.engine_plugin import EngineFault, engine_fault
from chaos.targets.base import Target

if TYPE_CHECKING:
    from chaos.env.model import BreakerPolicy

LEAK_CAP = 256 << 20  # per request: more than this at once is an allocation failure, not a leak trend
# vLLM counts a request served when its batch ends, so completions come in bursts: 5 s of a canary serving
# 2.5 req/s read 4.4 req/s (22 completions), and a leak sized from that, 1.5 times over, grew 32 % of the
# 50 % the rule needs. The rate is read over SAMPLE_S and the leak sized MARGIN times over
SAMPLE_S = 15.0
MARGIN = 2.0
_RSS = re.compile(r"^process_resident_memory_bytes\s+([0-9.eE+-]+)", re.M)
_DONE = re.compile(r"^vllm:request_success_total(?:\{[^}]*\})?\s+([0-9.eE+-]+)", re.M)


def leak_bytes_per_request(policy: BreakerPolicy, rss_bytes: float, calls_per_s: float, margin: float = MARGIN,
                           cap: int = LEAK_CAP) -> int:
    """Bytes a leak must keep per request for a replica of `rss_bytes` serving `calls_per_s` to break the
    leak rule within one leak_window_s, `margin` times over (at most `cap`).

    The rule's growth is the rise over the window divided by the window's mean RSS: for a linear rise G
    from R that is G / (R + G/2), so reaching leak_min_growth g needs G = g R / (1 - g/2)."""
    g = policy.leak_min_growth
    need = g / (1 - g / 2) if g < 2 else 4.0
    calls = max(calls_per_s * policy.leak_window_s, 1.0)
    return int(min(cap, math.ceil(margin * max(need, 0.01) * rss_bytes / calls)))


def read_rss_and_served(url: str) -> tuple[float, float]:
    """(the API server's RSS in bytes, requests vLLM has completed) from the replica's /metrics."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as r:
        text = r.read().decode()
    rss = _RSS.search(text)
    if rss is None:
        raise FaultError(f"{url}/metrics has no process_resident_memory_bytes: no leak can be sized", fault="engine-leak")
    return float(rss.group(1)), sum(float(m.group(1)) for m in _DONE.finditer(text))


def api_leak(target: Target, url: str, policy: BreakerPolicy, *, sample_s: float = SAMPLE_S,
             fault_id: str | None = None) -> EngineFault:
    """A leak in the replica's API server, sized from its RSS and the requests it completed over `sample_s`."""
    rss, before = read_rss_and_served(url)
    time.sleep(sample_s)
    rss, after = read_rss_and_served(url)
    rate = max(0.0, after - before) / sample_s
    size = leak_bytes_per_request(policy, rss, max(rate, 0.2), cap=LEAK_CAP)
    if size >= LEAK_CAP:
        raise FaultError(f"not proven: {url} completed {rate:.2f} requests/s; a leak that breaks the leak rule "
                         f"(leak_min_growth {policy.leak_min_growth:g} of {rss / 1e6:.0f} MB within "
                         f"{policy.leak_window_s:g} s) would need more than {LEAK_CAP >> 20} MiB per request",
                         fault="engine-leak")
    fault = engine_fault(target, "leak", bytes_per_request=size, process="api", fault_id=fault_id)
    fault.evidence.update(sized_from={"rss_bytes": int(rss), "requests_per_s": round(rate, 3),
                                      "bytes_per_request": size})
    return fault


__all__ = ["api_leak", "leak_bytes_per_request", "read_rss_and_served"]
