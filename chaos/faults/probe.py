"""A TCP probe through a proxy's listen address: what a client would see right now."""
from __future__ import annotations

import socket
import time
from dataclasses import asdict, dataclass
from typing import Any

HTTP_PROBE = b"GET /health HTTP/1.0\r\nHost: chaos-probe\r\nUser-Agent: llm-chaos-probe\r\n\r\n"


@dataclass
class ProbeResult:
    """One probe: connect, send, read until close, reset or the window ends."""

    refused: bool = False
    reset: bool = False
    closed: bool = False
    ttfb_s: float | None = None
    nbytes: int = 0
    chunks: int = 0
    duration_s: float = 0.0

    def answered(self) -> bool:
        return self.nbytes > 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return (host or "127.0.0.1").strip("[]"), int(port)


def probe(addr: str, *, request: bytes | None = HTTP_PROBE, window_s: float = 2.0) -> ProbeResult:
    """Connect to addr, send request, and record what comes back within window_s."""
    res = ProbeResult()
    t0 = time.monotonic()
    deadline = t0 + window_s
    try:
        sock = socket.create_connection(split_addr(addr), timeout=min(window_s, 3.0))
    except ConnectionRefusedError:
        res.refused = True
        res.duration_s = time.monotonic() - t0
        return res
    except OSError:
        res.refused = True
        res.duration_s = time.monotonic() - t0
        return res
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        if request:
            sock.sendall(request)
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            sock.settimeout(left)
            try:
                data = sock.recv(65536)
            except TimeoutError:
                break
            except ConnectionResetError:
                res.reset = True
                break
            if not data:
                res.closed = True
                break
            if res.ttfb_s is None:
                res.ttfb_s = time.monotonic() - t0
            res.nbytes += len(data)
            res.chunks += 1
    except (BrokenPipeError, ConnectionResetError):
        res.reset = True
    finally:
        sock.close()
        res.duration_s = time.monotonic() - t0
    return res
