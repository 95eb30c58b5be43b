"""`mirror_refusal`: the real proxy, started by the harness's controller, in front of an upstream this
test kills and brings back on the same port. While it is down, the reference gateway's own client
sees the proxy as it would see the dead replica (a connect refused: RETRYABLE, passed on to another
replica), not a 502; the admin API and the request log answer on the admin listener throughout."""
from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import aiohttp
import pytest

from chaos.faults.proxy_admin import FaultProxyAdmin
from chaos.faults.tokens import TokenRef
from chaos.stack.faultproxy import FaultProxyServer
from chaos.stack.gateway.proxy import RETRYABLE, SENT_THEN_LOST
from chaos.stack.toxiproxy import ToxiproxyServer
from tests._support import free_port, require, toxiproxy_binary


class _Ok(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"ok": true}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a: object) -> None:
        pass


@contextmanager
def _upstream(port: int) -> Iterator[None]:
    srv = ThreadingHTTPServer(("127.0.0.1", port), _Ok)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield
    finally:
        srv.shutdown()
        srv.server_close()


async def _post(url: str) -> str:
    """What the gateway's client makes of one POST: the status, or RETRYABLE / SENT_THEN_LOST."""
    async with aiohttp.ClientSession() as s:
        try:
            async with s.post(url + "/v1/completions", data=b'{"prompt": "x"}') as r:
                await r.read()
                return str(r.status)
        except RETRYABLE:
            return "RETRYABLE"
        except SENT_THEN_LOST:
            return "SENT_THEN_LOST"


def _until(url: str, want: str, within: float) -> str:
    end = time.monotonic() + within
    got = asyncio.run(_post(url))
    while got != want and time.monotonic() < end:
        time.sleep(0.02)
        got = asyncio.run(_post(url))
    return got


def test_a_dead_upstream_is_a_refused_connect_at_the_proxy_and_the_admin_api_stays(faultproxy_bin, token_file,
                                                                                      tmp_path) -> None:
    up = free_port()
    server = FaultProxyServer("replica-m", f"127.0.0.1:{free_port()}", f"http://127.0.0.1:{up}",
                              TokenRef(file=str(token_file)), request_log=str(tmp_path / "replica-m.proxy.jsonl"),
                              log_path=tmp_path / "proxy.log", binary=faultproxy_bin,
                              admin_listen=f"127.0.0.1:{free_port()}", mirror_refusal=True)
    admin = FaultProxyAdmin.of(server)
    with server:
        with _upstream(up):
            assert asyncio.run(_post(server.url)) == "200"
        # the first request after the kill was sent: the proxy answers it 502 (and logs it); from then
        # on the gateway's connect is refused, as without the proxy
        first = asyncio.run(_post(server.url))
        assert first in ("502", "RETRYABLE"), first
        assert _until(server.url, "RETRYABLE", 2.0) == "RETRYABLE"
        health = admin.health()
        assert health["refusing"] is True, health
        assert admin.rules() == []  # the admin API, token and all, answers while the data port is closed
        with _upstream(up):
            assert _until(server.url, "200", 3.0) == "200"
            assert admin.health()["refusing"] is False
    lines = [json.loads(x) for x in (tmp_path / "replica-m.proxy.jsonl").read_text().splitlines()]
    assert [r["status"] for r in lines][0] == 200 and lines[-1]["status"] == 200
    assert all(r["status"] in (200, 502) for r in lines), lines  # every answer it gave is in its log
    assert "closed until it accepts again" in (tmp_path / "proxy.log").read_text()


@pytest.mark.parametrize("mirror", [False, True], ids=["502", "mirror_refusal"])
def test_behind_toxiproxy_the_gateway_sees_a_cut_either_way(mirror, faultproxy_bin, token_file, tmp_path) -> None:
    """Why the lab's crash accounting does not move with mirror_refusal: there the gateway calls Toxiproxy,
    which accepts every connect and closes it when its own dial is refused, so a dead replica is a cut
    after sending (SENT_THEN_LOST: not passed on), whether the proxy behind it answers 502 or refuses."""
    require("toxiproxy")
    up, listen = free_port(), f"127.0.0.1:{free_port()}"
    server = FaultProxyServer("replica-t", listen, f"http://127.0.0.1:{up}", TokenRef(file=str(token_file)),
                              log_path=tmp_path / "proxy.log", binary=faultproxy_bin,
                              admin_listen=f"127.0.0.1:{free_port()}" if mirror else None, mirror_refusal=mirror)
    tox = ToxiproxyServer("127.0.0.1", free_port(), binary=toxiproxy_binary(), log_path=tmp_path / "toxiproxy.log")
    with server, tox.start():
        front = f"127.0.0.1:{free_port()}"
        tox.create_proxies([{"name": "replica-t", "listen": front, "upstream": listen}])
        with _upstream(up):
            assert asyncio.run(_post(f"http://{front}")) == "200"
        seen = {asyncio.run(_post(f"http://{front}")) for _ in range(10)}
        direct = asyncio.run(_post(server.url))
    if mirror:  # the proxy itself refuses (its first answer was a 502, through Toxiproxy a 502 too)
        assert seen <= {"502", "SENT_THEN_LOST"} and "SENT_THEN_LOST" in seen and direct == "RETRYABLE", (seen, direct)
    else:
        assert seen == {"502"} and direct == "502", (seen, direct)
