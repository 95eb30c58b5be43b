"""A dcgm-exporter stand-in for tests: the recorded two-H200 page (data/dcgm_two_h200_old_xid.prom)
served over real HTTP on 127.0.0.1, editable between scrapes."""
from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

PAGE = (Path(__file__).parent / "data" / "dcgm_two_h200_old_xid.prom").read_text()
UUID1 = "GPU-3b1d0e8a-5c27-4f49-9e0b-8d6a2f71c4e2"


class Exporter:
    """A dcgm-exporter stand-in: serves `page` on /metrics over real HTTP on 127.0.0.1."""

    def __init__(self) -> None:
        self.page, self.scrapes = PAGE, 0
        outer = self

        class H(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                outer.scrapes += 1
                body = outer.page.encode()
                self.send_response(200 if self.path == "/metrics" else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def set(self, metric: str, gpu: str, value: str) -> None:
        lines = self.page.splitlines()
        for i, line in enumerate(lines):
            if line.startswith(metric + "{") and f'gpu="{gpu}"' in line:
                lines[i] = line.rsplit(" ", 1)[0] + " " + value
        self.page = "\n".join(lines) + "\n"


@pytest.fixture
def exporter() -> Iterator[Exporter]:
    ex = Exporter()
    yield ex
    ex.server.shutdown()
    ex.server.server_close()
