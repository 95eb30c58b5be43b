"""`chaos env check --probe` on an environment whose scrape targets lack `chaos_gateway_*` (a replica page of
vLLM's own metrics, served by a real HTTP server): each shipped alert that reads the reference gateway's
counters is a FAIL line naming the rule and its missing metric; the rest pass."""
from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._support import free_port
from tests.integration.cli.test_cli import chaos

RULES = Path(__file__).resolve().parents[3] / "examples" / "monitoring" / "rules" / "llm-serving.rules.yml"


class _VllmPage(http.server.BaseHTTPRequestHandler):
    body = (b"# TYPE vllm:time_to_first_token_seconds histogram\n"
            b'vllm:time_to_first_token_seconds_bucket{le="1.0"} 3\nvllm:time_to_first_token_seconds_count 3\n'
            b"vllm:kv_cache_usage_perc 0.2\nvllm:num_requests_running 1\n"
            b'vllm:request_success_total{finished_reason="stop"} 3\n'
            b"process_resident_memory_bytes 1.2e9\nprocess_start_time_seconds 1.7e9\n")

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200 if self.path == "/metrics" else 404)
        self.end_headers()
        self.wfile.write(self.body if self.path == "/metrics" else b"")

    def log_message(self, *a: object) -> None:
        pass


@pytest.fixture
def replica_page() -> Iterator[int]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), _VllmPage)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv.server_address[1]
    finally:
        srv.shutdown()
        srv.server_close()


def test_each_alert_no_scrape_target_can_feed_is_named_with_its_metric(tmp_path: Path, replica_page: int) -> None:
    env = tmp_path / "e.yaml"
    env.write_text(f"name: team\nendpoints: {{api: 'http://127.0.0.1:{replica_page}'}}\n"
                   f"targets: [{{name: r1, kind: process, host: 127.0.0.1, port: {replica_page}, command: [x]}}]\n"
                   f"monitoring:\n  prometheus: {{embedded: true}}\n  rule_files: [{RULES}]\n")
    r = chaos("env", "check", "--probe", "--timeout", "2", "--env", str(env))
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stdout + r.stderr
    fails = {line.split(":")[0].removeprefix("FAIL  "): line for line in r.stdout.splitlines()
             if line.startswith("FAIL  alert rule")}
    missing = {"LLMErrorRateDegrade": "chaos_gateway_requests_total", "LLMErrorRateRollback": "chaos_gateway_requests_total",
               "LLMLongContextFailureRate": "chaos_gateway_prompt_class_requests_total",
               "LLMOOMBurst": "chaos_gateway_oom_total"}
    assert fails.keys() == {f"alert rule {a}" for a in missing}, r.stdout
    for alert, metric in missing.items():
        line = fails[f"alert rule {alert}"]
        assert f"{RULES}" in line and f"reads {metric}, which no scrape target exports" in line, line
    assert f"ok    alert rule metrics: {RULES} (5 of 9 alerts read only exported metrics)" in r.stdout, r.stdout
