"""The hang-up step's staying streams against a local server that never ends its answer."""
from __future__ import annotations

import json
import socket
import threading
import time

from chaos.load.hangup import STAY, STOP_POLL_S, HangUp, start_streams

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _event(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": None}]}).encode() + b"\n\n"


def test_staying_streams_are_closed_when_the_harness_is_done_not_at_their_deadline() -> None:
    """A slow engine's long answer need not be read to its end: join(True) closes the staying streams within
    STOP_POLL_S, with no error of the server's; join(False) would wait for the deadline."""
    srv = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def serve() -> None:  # answers the head and one token, then nothing more: a stream that is still going
        for _ in range(2):
            conn, _ = srv.accept()
            conn.recv(65536)
            conn.sendall(HEAD + b"%x\r\n%b\r\n" % (len(_event(" a")), _event(" a")))
            held.append(conn)

    threading.Thread(target=serve, daemon=True).start()
    step = HangUp(clients=1, after_tokens=1, stay=2, max_tokens=100, deadline_s=30.0)
    clients, join = start_streams(f"http://127.0.0.1:{srv.getsockname()[1]}", step, STAY, model="m")
    t = time.monotonic()
    while not all(c.t_first_token for c in clients) and time.monotonic() - t < 10:
        time.sleep(0.05)
    assert all(c.t_first_token and c.t_end is None for c in clients), clients  # streaming, not ended
    t = time.monotonic()
    join(True)
    took = time.monotonic() - t
    for c in held:
        c.close()
    srv.close()
    assert took < STOP_POLL_S + 1.0, took
    assert all(c.error is None and c.t_end is not None and c.tokens == 1 for c in clients), clients
