"""Kernel receive stamps: a late reader still learns when the bytes arrived."""
from __future__ import annotations

import json
import time

import gevent
import gevent.socket
import pytest

from chaos.load import kstamp

pytestmark = pytest.mark.skipif(not kstamp.SUPPORTED, reason="SO_TIMESTAMPNS is Linux-only")


def _pair():
    lst = gevent.socket.socket()
    lst.bind(("127.0.0.1", 0))
    lst.listen(1)
    cli = kstamp.StampingSocket(gevent.socket.AF_INET, gevent.socket.SOCK_STREAM)
    cli.connect(lst.getsockname())
    srv, _ = lst.accept()
    lst.close()
    # the kernel switches stamping on a moment after the first socket asks (a deferred static key)
    for _ in range(100):
        srv.sendall(b"w")
        cli.recv(10)
        if cli.stamp is not None:
            break
        time.sleep(0.01)
    cli.stamp = None
    return cli, srv


def test_stamp_is_the_arrival_not_the_read():
    cli, srv = _pair()
    try:
        srv.sendall(b"first")
        sent = time.time()
        time.sleep(0.15)  # the reader is busy: the bytes wait in the socket
        assert cli.recv(100) == b"first"
        read = time.time()
        assert cli.stamp is not None
        assert abs(cli.stamp - sent) < 0.01, (cli.stamp - sent)
        assert read - cli.stamp > 0.14
    finally:
        cli.close()
        srv.close()


def test_merged_segments_carry_the_newest_stamp_and_stale_stamps_are_ignored():
    cli, srv = _pair()
    try:
        srv.sendall(b"a")
        time.sleep(0.05)
        srv.sendall(b"b")
        second = time.time()
        time.sleep(0.05)
        assert cli.recv(100) == b"ab"
        # TCP merged the unread segments: the stamp bounds both from above, never from below
        assert cli.stamp >= second - 0.005
        assert kstamp.arrival(cli, not_before=cli.stamp + 1) is None
        assert kstamp.arrival(cli, not_before=cli.stamp - 1) == cli.stamp
        assert kstamp.arrival(object(), not_before=0.0) is None
    finally:
        cli.close()
        srv.close()


def test_install_stamps_a_pooled_http_client_against_the_simulator(monkeypatch, tmp_path):
    """End to end: a client frozen for 200 ms before it reads still times the first token
    within 2 ms of the simulator's log (which records when the chunk was written)."""
    import sys

    from geventhttpclient import HTTPClient
    from geventhttpclient.connectionpool import ConnectionPool

    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    from sim.conftest import Sim

    monkeypatch.setattr(ConnectionPool, "_create_tcp_socket", ConnectionPool._create_tcp_socket)
    monkeypatch.delenv("CHAOS_KERNEL_STAMPS", raising=False)
    assert kstamp.install()
    log = tmp_path / "requests.jsonl"
    sim = Sim("--profile", "h200", "--request-log", str(log))
    try:
        client = HTTPClient("127.0.0.1", sim.port)
        client.get("/health").read()  # a stamping socket is open: the kernel's stamps are on
        body = json.dumps({"prompt": "stamp me", "max_tokens": 3, "stream": True}).encode()
        sent = time.time()
        resp = client.post("/v1/completions", body=body, headers={"content-type": "application/json",
                                                                  "x-request-id": "kstamp-1"})
        sock = resp._sock
        assert isinstance(sock, kstamp.StampingSocket)
        time.sleep(0.2)  # frozen: the whole stream arrives meanwhile
        first = None
        while True:
            line = resp.readline(b"\n")
            if not line:
                break
            if line.startswith(b"data: {") and first is None:
                first = kstamp.arrival(sock, not_before=sent)
                late = time.time()
        client.close()
    finally:
        sim.stop()
    truth = json.loads(log.read_text().splitlines()[0])
    assert truth["request_id"] == "kstamp-1"
    assert first is not None
    assert late - truth["t_first_token"] > 0.15  # the user-space clock would be this late
    # 3 tokens of one request come one step apart: unread, they merge, so the stamp is the last
    # segment's; the error is bounded by the stream's own length, far below the 200 ms freeze
    assert -0.002 < first - truth["t_first_token"] < 0.02, first - truth["t_first_token"]
