"""Fixtures for fault tests: a real toxiproxy-server and a local HTTP upstream, per module."""
from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chaos.faults.base import Policy
from chaos.faults.ledger import Ledger
from chaos.stack.toxiproxy import ToxiproxyServer
from tests._support import free_port, require, toxiproxy_binary

BODY = b"x" * 4096


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *a: object) -> None:
        pass


@pytest.fixture(scope="module")
def upstream() -> Iterator[str]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield f"127.0.0.1:{srv.server_address[1]}"
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def toxiproxy_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToxiproxyServer]:
    require("toxiproxy")
    log = tmp_path_factory.mktemp("toxi") / "toxiproxy.log"
    server = ToxiproxyServer("127.0.0.1", free_port(), binary=toxiproxy_binary(), log_path=log).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def proxy(toxiproxy_server: ToxiproxyServer, upstream: str) -> Iterator[tuple[str, str]]:
    """A fresh proxy in front of the upstream: (name, listen address)."""
    name = f"p-{uuid.uuid4().hex[:8]}"
    listen = f"127.0.0.1:{free_port()}"
    toxiproxy_server.client().create_proxy(name, listen, upstream)
    try:
        yield name, listen
    finally:
        toxiproxy_server.client().delete_proxy(name)


@pytest.fixture
def policy(tmp_path) -> Policy:
    return Policy(ledger=Ledger(tmp_path / "state"), verify_timeout_s=3.0)
