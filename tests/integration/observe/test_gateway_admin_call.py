"""The one call to the gateway's admin API that faults, release gates and suites share: the token
goes along, and every way it can go wrong is one line naming the call (never a traceback)."""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chaos.errors import FaultError
from chaos.faults.gateway import GatewayConfigFault
from chaos.faults.tokens import TokenRef
from chaos.observe.gateway import GatewayAdminError, admin_call
from tests._support import free_port


class Admin(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str | None, bytes]] = []

    def _answer(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        Admin.seen.append((self.command, self.path, self.headers.get("Authorization"), self.rfile.read(n)))
        if self.headers.get("Authorization") != "Bearer s3cret":
            code, body = 401, b'{"error": "unauthorized"}'
        elif self.path == "/admin/list":
            code, body = 200, b"[1, 2]"
        elif self.path == "/admin/garbled":
            code, body = 200, b"<html>"
        else:
            code, body = 200, json.dumps({"ok": True, "path": self.path}).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *a) -> None:
        pass


@pytest.fixture
def admin_url():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Admin)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()


def test_the_call_carries_the_token_and_body_and_returns_the_json(admin_url):
    Admin.seen.clear()
    assert admin_call(admin_url + "/", "POST", "/admin/config", {"canary_weight": 0.2}, token="s3cret") == \
        {"ok": True, "path": "/admin/config"}
    assert Admin.seen == [("POST", "/admin/config", "Bearer s3cret", b'{"canary_weight": 0.2}')]


@pytest.mark.parametrize("path, token, message", [
    ("/admin/state", None, r"GET http://127\.0\.0\.1:\d+/admin/state -> 401 b'\{\"error\": \"unauthorized\"\}'"),
    ("/admin/garbled", "s3cret", r"the answer is not JSON"),
    ("/admin/list", "s3cret", r"expected a JSON object, got list"),
])
def test_a_refusal_or_a_garbled_answer_is_one_line(admin_url, path, token, message):
    with pytest.raises(GatewayAdminError, match=message) as caught:
        admin_call(admin_url, "GET", path, token=token)
    assert "\n" not in str(caught.value)


def test_a_gateway_that_is_not_there_is_named_and_a_fault_says_so_as_a_fault_error():
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(GatewayAdminError, match=f"gateway admin {dead} not answering"):
        admin_call(dead, "GET", "/admin/state", timeout_s=1)
    fault = GatewayConfigFault(dead, TokenRef(literal="s3cret"), {"canary_weight": 1.0}, {"canary_weight": 0.1})
    with pytest.raises(FaultError, match="not answering"):
        fault._call("GET", "/admin/state")
