"""Observers against the real simulator (skipped until it is runnable)."""
from __future__ import annotations

import importlib.util
import subprocess
import sys
import time

import pytest

from chaos.observe import CompletionProber, HealthProber, MetricsScraper, Timeline
from tests._support import free_port


@pytest.fixture
def sim_url():
    if importlib.util.find_spec("chaos.stack.sim.__main__") is None:
        pytest.skip("simulator not runnable yet")
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "chaos.stack.sim", "--port", str(port), "--profile", "instant"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        ok, _, err, _ = False, 0, None, None
        end = time.monotonic() + 20
        while time.monotonic() < end and not ok:
            ok, _, err, _ = CompletionProber(url, timeout_s=1).probe_once()
            time.sleep(0.1)
        assert ok, f"simulator did not serve a completion: {err}"
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_observers_on_the_simulator(sim_url):
    tl = Timeline()
    with HealthProber(sim_url, tl, interval_s=0.05), CompletionProber(sim_url, tl, interval_s=0.1), \
            MetricsScraper(sim_url, tl, interval_s=0.2):
        time.sleep(1.0)
    assert [e.detail["to"] for e in tl.find_events("state", "health")] == ["up"]
    oks = [s.value for s in tl.series("completion", "ok")]
    assert len(oks) >= 5 and all(oks)
    names = {s.name for s in tl.samples if s.source == "metrics"}
    assert {"vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc"} <= names
    gen = [s.value for s in tl.series("metrics", "vllm:generation_tokens_total")]
    assert gen and gen[-1] >= 1  # the completion probes' tokens are counted
