"""Smoke: the real Toxiproxy server starts, proxies a local echo server, and a latency toxic applies."""
from __future__ import annotations

import socket
import socketserver
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from chaos import evidence as rep
from chaos.faults import latency
from chaos.shared.proc import free_port


class _Echo(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        while data := self.request.recv(4096):
            self.request.sendall(data)


@pytest.fixture
def echo_proxy(toxiproxy_server: Callable[[], Any]) -> Iterator[tuple[Any, int]]:
    toxi = toxiproxy_server()
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    listen = free_port()
    try:
        toxi.create_proxies([{"name": "echo", "listen": f"127.0.0.1:{listen}",
                              "upstream": f"127.0.0.1:{server.server_address[1]}"}])
        yield toxi, listen
    finally:
        server.shutdown()
        server.server_close()


def _round_trip_ms(port: int, n: int = 5) -> float:
    times = []
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        for i in range(n):
            t0 = time.perf_counter()
            s.sendall(f"ping {i}\n".encode())
            assert s.recv(64).startswith(b"ping")
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def test_latency_toxic_applies(echo_proxy: tuple[Any, int]) -> None:
    rep.labels(epic="Smoke", feature="Toxiproxy")
    toxi, port = echo_proxy
    with rep.phase("baseline through the proxy"):
        base = _round_trip_ms(port)
    assert base < 50, f"the proxy alone adds {base:.1f} ms; expected a few ms on loopback"
    fault = latency(toxi.api, "echo", latency=200, jitter=0, probe_request=None)
    with rep.phase("inject 200 ms latency"), fault:
        hurt = _round_trip_ms(port)
        assert [t["type"] for t in toxi.client().toxics("echo")] == ["latency"]
    with rep.phase("reverted"):
        after = _round_trip_ms(port)
        assert toxi.client().toxics("echo") == []
    rep.attach_text(f"baseline {base:.1f} ms, with toxic {hurt:.1f} ms, after revert {after:.1f} ms", "round trips")
    assert 190 <= hurt - base <= 400, f"latency toxic added {hurt - base:.1f} ms, expected about 200 ms"
    assert after < base + 50
