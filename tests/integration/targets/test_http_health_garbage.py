"""A health poll that reads a malformed answer is "not healthy", never a traceback.

A poll of a port nobody listens on yet can connect to itself (TCP simultaneous open: the kernel chose
the destination port as the source port) and read its own request back as the status line."""
from __future__ import annotations

import socket
import threading

from chaos.targets.base import http_health, wait_until


def _echo_server() -> tuple[socket.socket, int]:
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                conn.sendall(conn.recv(4096))  # the request comes back as the "answer", as on a self-connect

    threading.Thread(target=serve, daemon=True).start()
    return srv, int(srv.getsockname()[1])


def test_a_request_read_back_as_the_answer_is_not_healthy():
    srv, port = _echo_server()
    try:
        assert http_health("127.0.0.1", port) is False
    finally:
        srv.close()


def test_waiting_on_it_times_out_with_the_target_named():
    import pytest

    from chaos.errors import TargetError

    srv, port = _echo_server()
    try:
        with pytest.raises(TargetError, match="/health 200 not reached within 0.3s"):
            wait_until(lambda: http_health("127.0.0.1", port), 0.3, what="/health 200", target="echo")
    finally:
        srv.close()
