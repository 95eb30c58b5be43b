"""The script chaos.faults.sim_exec runs in a simulator's container, against a real HTTP server on this
machine's loopback: the token from the exec's environment (never its command line), the call from a
loopback source, one JSON line out, and its own exit code when nothing answers."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from chaos.faults import sim_exec


class _Admin(BaseHTTPRequestHandler):
    seen: list[tuple[str, str, str | None, bytes, str]] = []

    def _answer(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.seen.append((self.command, self.path, self.headers.get("Authorization"), body, self.client_address[0]))
        out = json.dumps({"active": ["slow"]}).encode()
        self.send_response(200 if self.headers.get("Authorization") == "Bearer s3cret" else 401)
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)

    do_GET = do_POST = do_DELETE = _answer

    def log_message(self, *a: object) -> None:
        pass


@pytest.fixture
def admin() -> Iterator[ThreadingHTTPServer]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Admin)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    _Admin.seen.clear()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def _run(cmd: list[str], token: str | None) -> subprocess.CompletedProcess[str]:
    assert cmd[0] == "python3"  # what the container runs; here this interpreter stands in for the image's
    env = {sim_exec.TOKEN_VAR: token} if token is not None else {}
    return subprocess.run([sys.executable, *cmd[1:]], capture_output=True, text=True, timeout=30, env=env)


def test_the_script_calls_from_loopback_with_the_token_from_its_environment(admin) -> None:
    url = f"http://127.0.0.1:{admin.server_address[1]}/admin/faults"
    cmd = sim_exec.command("POST", url, {"mode": "slow", "factor": 3.0})
    assert "s3cret" not in " ".join(cmd)  # the token never rides on the command line
    r = _run(cmd, "s3cret")
    assert r.returncode == 0 and json.loads(r.stdout) == {"status": 200, "body": '{"active": ["slow"]}'}, r
    assert _Admin.seen == [("POST", "/admin/faults", "Bearer s3cret", b'{"mode": "slow", "factor": 3.0}', "127.0.0.1")]
    r = _run(sim_exec.command("DELETE", url + "/slow"), "wrong")
    assert r.returncode == 0 and json.loads(r.stdout)["status"] == 401
    admin.shutdown()
    admin.server_close()
    r = _run(sim_exec.command("GET", url), "s3cret")
    assert r.returncode == sim_exec.NOT_ANSWERING and "error" in json.loads(r.stdout), r
