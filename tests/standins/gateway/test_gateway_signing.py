"""Request signing, judged as the routing suite judges it (chaos.verify.signing). The reference gateway,
started with a key, refuses unsigned, tampered, wrong-key, expired and replayed requests and serves a
signed one; the suite's scenario sends those requests to the environment's own API, so it passes where
that API enforces signing, fails where it does not, and skips, naming the setting, where the environment
declares no signing at all (never green by testing another gateway)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from chaos.env import load
from chaos.experiment.suite_plan import no_signing
from chaos.targets.base import http_health, wait_until
from chaos.verify.signing import signing_verdict
from tests._support import REPO, free_port, stop_process

KEY_VAR = "CHAOS_TEST_SIGNING_KEY"
KEY = "test-signing-key-5f1e2d3c4b"


class _Replica(BaseHTTPRequestHandler):
    """Answers every completion, /health, /metrics and /v1/models: whatever is refused, the gateway refused."""

    def _answer(self, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if self.path.startswith("/v1/models"):
            self._answer(json.dumps({"object": "list", "data": [{"id": "m", "object": "model"}]}).encode())
        else:
            self._answer(b"", "text/plain")

    def do_POST(self) -> None:  # noqa: N802
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer(json.dumps({"id": "x", "object": "chat.completion", "model": "m", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]}).encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def replica() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Replica)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@contextmanager
def gateway(replica: str, log: Path, *, signing: bool) -> Iterator[str]:
    """`chaos gateway` over `replica`, with the key in its environment when `signing`."""
    port = free_port()
    args = [sys.executable, "-m", "chaos.cli", "gateway", "--listen", f"127.0.0.1:{port}", "--stable",
            f"up={replica}", "--admin-token", "admin-token-for-the-test"]
    if signing:
        args += ["--hmac-key-env", KEY_VAR]
    with open(log, "wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, KEY_VAR: KEY})
    try:
        wait_until(lambda: proc.poll() is not None or http_health("127.0.0.1", port, "/gateway/health"), 30.0,
                   what="gateway /gateway/health", target="test gateway")
        assert proc.poll() is None, log.read_text()
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(proc)


def test_the_reference_gateway_serves_the_signed_request_and_refuses_the_rest(replica, tmp_path):
    with gateway(replica, tmp_path / "gw.log", signing=True) as url:
        v = signing_verdict(url, KEY.encode(), "m")
    got = {r.check: r.measured for r in v.rows}
    assert got == {"signed": 200, "replayed": 401, "unsigned": 401, "tampered-body": 401, "wrong-key": 401,
                   "expired": 401}, got
    assert v.ok
    assert KEY not in (tmp_path / "gw.log").read_text()


def test_a_gateway_that_does_not_check_signatures_fails_the_verdict(replica, tmp_path):
    with gateway(replica, tmp_path / "gw.log", signing=False) as url:
        v = signing_verdict(url, KEY.encode(), "m")
    assert not v.ok
    assert sorted(r.check for r in v.rows if r.ok is False) == ["expired", "replayed", "tampered-body", "unsigned",
                                                                  "wrong-key"]


def test_a_refused_signed_request_fails_the_control_so_the_refusals_prove_nothing():
    v = signing_verdict("http://127.0.0.1:9/prefix", b"k", "m", api_key="api-key-xyz", call=lambda url, body, h: 401)
    signed = v.rows[0]
    assert not v.ok and signed.check == "signed" and signed.ok is False and "prove nothing" in signed.detail


def test_every_case_carries_the_api_key_and_is_signed_over_the_path_the_gateway_sees():
    seen: list[tuple[str, dict[str, str]]] = []

    def call(url: str, body: bytes, headers: dict[str, str]) -> int:
        seen.append((url, headers))
        return 200

    signing_verdict("http://127.0.0.1:9/prefix/", b"k", "m", api_key="api-key-xyz", call=call)
    assert len(seen) == 6 and all(u == "http://127.0.0.1:9/prefix/v1/chat/completions" for u, _ in seen)
    assert all(h["Authorization"] == "Bearer api-key-xyz" for _, h in seen)
    from chaos.shared.signing import verify
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "sign me"}], "max_tokens": 4,
                       "stream": False}).encode()
    verify(b"k", "POST", "/prefix/v1/chat/completions", body, seen[0][1])  # the control is validly signed


def test_signing_is_judged_only_where_the_environment_declares_it(monkeypatch):
    env = load("local")
    assert "sets no breaker.hmac_key_env" in (no_signing(env) or "")
    env.breaker.hmac_key_env = KEY_VAR
    monkeypatch.delenv(KEY_VAR, raising=False)
    assert f"${KEY_VAR}, which is not set here" in (no_signing(env) or "")
    monkeypatch.setenv(KEY_VAR, KEY)
    assert no_signing(env) is None


def _env_file(tmp_path: Path, api: str, *, declare: bool) -> Path:
    doc = {"name": "signed-api", "embedded": "none", "state_dir": str(tmp_path / "state"),
           "endpoints": {"api": api, "model": "m"}, "breaker": {"hmac_key_env": KEY_VAR} if declare else {}}
    path = tmp_path / f"signed-api-{declare}.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def _scenario(env_file: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "CHAOS_REQUIRE"}  # a skip is an outcome here
    run = subprocess.run([sys.executable, "-m", "pytest", "suites/routing", "-k", "test_signing_enforced", "--env",
                          str(env_file), "-p", "no:cacheprovider", "-q", "-rs"], cwd=REPO, capture_output=True,
                         text=True, timeout=300, env={**env, KEY_VAR: KEY})
    return run.stdout + run.stderr


def test_the_routing_scenario_judges_the_environments_own_api(replica, tmp_path):
    with gateway(replica, tmp_path / "signed.log", signing=True) as url:
        out = _scenario(_env_file(tmp_path, url, declare=True))
        assert "1 passed" in out, out[-3000:]
        out = _scenario(_env_file(tmp_path, url, declare=False))
        assert "1 skipped" in out and "sets no breaker.hmac_key_env" in out, out[-3000:]
    with gateway(replica, tmp_path / "plain.log", signing=False) as url:
        out = _scenario(_env_file(tmp_path, url, declare=True))
        assert "1 failed" in out and "unsigned" in out, out[-3000:]
