"""A controllable fake vLLM server for observer tests (stdlib, threaded, 127.0.0.1, port 0)."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="sim-model"} 3.0
# HELP vllm:num_requests_waiting Number of requests waiting.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="sim-model"} 1.0
# HELP vllm:prompt_tokens_total Prompt tokens.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="sim-model"} 1234.0
# HELP vllm:time_to_first_token_seconds TTFT.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="sim-model"} 5.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="sim-model"} 7.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="sim-model"} 7.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="sim-model"} 0.9
# HELP python_gc_objects_collected_total Objects collected.
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 10.0
"""


class FakeVllm:
    """health_status, hang_completions, completion_status are switchable while running."""

    def __init__(self) -> None:
        self.health_status = 200
        self.hang_completions = False
        self.completion_status = 200
        self.metrics = METRICS
        self.hits = {"health": 0, "completions": 0, "metrics": 0}
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):  # quiet
                pass

            def _send(self, status, body=b"", ctype="application/json"):
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if self.path == "/health":
                    fake.hits["health"] += 1
                    self._send(fake.health_status)
                elif self.path == "/metrics":
                    fake.hits["metrics"] += 1
                    self._send(200, fake.metrics.encode(), "text/plain; version=0.0.4")
                else:
                    self._send(404)

            def do_POST(self):
                n = int(self.headers.get("content-length", 0))
                json.loads(self.rfile.read(n))
                fake.hits["completions"] += 1
                if fake.hang_completions:
                    time.sleep(1.0)
                if fake.completion_status != 200:
                    self._send(fake.completion_status, b'{"error": {"message": "x"}}')
                    return
                self._send(200, json.dumps({"model": "sim-model", "choices": [{"text": "p"}]}).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def dead_url() -> str:
    """A URL nobody listens on (bound, then closed)."""
    from tests._support import free_port

    return f"http://127.0.0.1:{free_port()}"
