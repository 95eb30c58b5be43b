"""Health and completion probers against a switchable fake server; the metrics parser and scraper."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from chaos.observe.completion import CompletionProber, first_ok_after
from chaos.observe.health import HealthProber, health_state
from chaos.observe.metrics import MetricsScraper, parse_metrics, value
from chaos.observe.timeline import Timeline

sys.path.insert(0, str(Path(__file__).parent))
from fake_vllm import METRICS, dead_url  # noqa: E402


def _wait(cond, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end and not cond():
        time.sleep(0.02)
    return cond()


def test_health_state_mapping():
    assert health_state(200, None) == "up"
    assert health_state(503, None) == "down"
    assert health_state(None, "timeout") == "timeout"
    assert health_state(None, "reset") == "unreachable"


def test_health_prober_rate_and_state_changes(fake_vllm):
    tl = Timeline()
    p = HealthProber(fake_vllm.url, tl, interval_s=0.05)
    with p:
        time.sleep(0.6)
        fake_vllm.health_status = 503
        assert _wait(lambda: any(e.detail["to"] == "down" for e in tl.find_events("state", "health")))
        fake_vllm.health_status = 200
        assert _wait(lambda: tl.find_events("state", "health")[-1].detail["to"] == "up")
    samples = tl.series("health", "status")
    span = samples[-1].t - samples[0].t
    assert len(samples) / max(span, 1e-9) >= 10  # at least 10 Hz
    states = [e.detail["to"] for e in tl.find_events("state", "health")]
    assert states == ["up", "down", "up"]
    assert not p.running


def test_health_prober_sees_unreachable(tmp_path):
    tl = Timeline()
    with HealthProber(dead_url(), tl, interval_s=0.05, max_polls=3):
        _wait(lambda: len(tl.series("health", "status")) >= 3)
    assert [e.detail["to"] for e in tl.find_events("state", "health")] == ["unreachable"]
    assert all(s.value is None for s in tl.series("health", "status"))


def test_completion_prober_detects_hang_that_health_misses(fake_vllm):
    tl = Timeline()
    comp = CompletionProber(fake_vllm.url, tl, interval_s=0.05, timeout_s=0.3)
    health = HealthProber(fake_vllm.url, tl, interval_s=0.05)
    with comp, health:
        assert _wait(lambda: comp.state == "ok")
        fake_vllm.hang_completions = True
        t_hang = time.time()
        assert _wait(lambda: comp.state == "failing")
        fake_vllm.hang_completions = False
        t_heal = time.time()
        # a probe sent before the heal but read by the server after it (a loaded machine) also succeeds:
        # wait for one sent after it, which is what recovery is judged by
        assert _wait(lambda: first_ok_after(tl, t_heal) is not None)  # and so the prober's state went back to ok
    assert health.state == "up" and len(tl.find_events("state", "health")) == 1  # /health lied
    bad = [s for s in tl.series("completion", "ok") if s.value is False]
    assert bad and all(s.labels["error"] == "timeout" for s in bad) and bad[0].t >= t_hang - 0.1
    first = first_ok_after(tl, t_heal)
    assert first is not None and first.t >= t_heal


def test_completion_prober_http_error(fake_vllm):
    fake_vllm.completion_status = 500
    ok, _, err, status = CompletionProber(fake_vllm.url).probe_once()
    assert (ok, err, status) == (False, "http", 500)


def test_parse_metrics_keeps_vllm_only():
    samples = parse_metrics(METRICS)
    names = {s.name for s in samples}
    assert "vllm:num_requests_running" in names and "vllm:prompt_tokens_total" in names
    assert "vllm:time_to_first_token_seconds_count" in names
    assert not any(n.endswith("_bucket") for n in names)
    assert not any(n.startswith("python_") for n in names)
    assert value(samples, "vllm:num_requests_running", model_name="sim-model") == 3.0
    assert value(samples, "vllm:num_requests_running", model_name="other") is None
    with_buckets = parse_metrics(METRICS, buckets=True)
    assert any(s.name.endswith("_bucket") and s.labels["le"] == "+Inf" for s in with_buckets)


def test_metrics_scraper_samples_and_scrape_failures(fake_vllm):
    tl = Timeline()
    with MetricsScraper(fake_vllm.url, tl, interval_s=0.05):
        assert _wait(lambda: len(tl.series("metrics", "vllm:num_requests_waiting")) >= 2)
        fake_vllm.metrics = fake_vllm.metrics.replace("} 3.0", "} 9.0")
        assert _wait(lambda: tl.series("metrics", "vllm:num_requests_running")[-1].value == 9.0)
    s = tl.series("metrics", "vllm:num_requests_running")[0]
    assert s.value == 3.0 and s.labels["model_name"] == "sim-model"
    fake_vllm.stop()
    tl2 = Timeline()
    with MetricsScraper(fake_vllm.url, tl2, interval_s=0.05, max_polls=2):
        _wait(lambda: len(tl2.series("metrics", "scrape_ok")) >= 2)
    assert [s.value for s in tl2.series("metrics", "scrape_ok")] == [False, False]
    assert tl2.find_events("state", "metrics_scrape")[0].detail["ok"] is False
