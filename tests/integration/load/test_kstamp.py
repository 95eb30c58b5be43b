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
        before = time.time()
        srv.sendall(b"w")
        cli.recv(10)
        if kstamp.arrival(not_before=before) is not None:
            break
        time.sleep(0.01)
    return cli, srv


def test_stamp_is_the_arrival_not_the_read():
    cli, srv = _pair()
    try:
        before = time.time()
        srv.sendall(b"first")
        sent = time.time()
        time.sleep(0.15)  # the reader is busy: the bytes wait in the socket
        assert cli.recv(100) == b"first"
        read = time.time()
        stamp = kstamp.arrival(not_before=before)  # this recv's, not the warm-up's
        assert stamp is not None
        assert abs(stamp - sent) < 0.01, (stamp - sent)
        assert read - stamp > 0.14
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
        stamp = kstamp.arrival(not_before=0.0)
        # TCP merged the unread segments: the stamp bounds both from above, never from below
        assert stamp is not None and stamp >= second - 0.005
        assert kstamp.arrival(not_before=stamp + 1) is None
        assert kstamp.arrival(not_before=stamp - 1) == stamp
    finally:
        cli.close()
        srv.close()


def test_a_stamp_belongs_to_the_greenlet_that_read_it():
    cli, srv = _pair()
    other: list[float | None] = []
    try:
        before = time.time()
        srv.sendall(b"x")
        time.sleep(0.01)
        assert cli.recv(10) == b"x"
        mine = kstamp.arrival(not_before=before)
        assert mine is not None and mine <= time.time()
        gevent.spawn(lambda: other.append(kstamp.arrival(not_before=0.0))).join()
        assert other == [None]  # a greenlet that read nothing has no stamp
    finally:
        cli.close()
        srv.close()


def _first_token(resp, sent):
    """The arrival of the first data event and the clock at which it was read."""
    while True:
        line = resp.readline(b"\n")
        if not line:
            raise AssertionError("stream ended without a data event")
        if line.startswith(b"data: {"):
            return kstamp.arrival(not_before=sent), time.time()


def _time_first_token(monkeypatch, tmp_path, profile, rid, after_post):
    """One streamed completion from a simulator through a stamping pooled client; `after_post(resp)`
    runs between the header read and the body's. Returns the first token's stamp, the clock when
    it was read, and the simulator's log line for the request."""

    from geventhttpclient import HTTPClient
    from geventhttpclient.connectionpool import ConnectionPool

    from tests.standins.sim.conftest import Sim

    monkeypatch.setattr(ConnectionPool, "_create_tcp_socket", ConnectionPool._create_tcp_socket)
    monkeypatch.delenv("CHAOS_KERNEL_STAMPS", raising=False)
    assert kstamp.install()
    log = tmp_path / "requests.jsonl"
    sim = Sim("--profile", profile, "--request-log", str(log))
    try:
        client = HTTPClient("127.0.0.1", sim.port)
        client.get("/health").read()  # a stamping socket is open: the kernel's stamps are on
        body = json.dumps({"prompt": "stamp me", "max_tokens": 3, "stream": True}).encode()
        sent = time.time()
        resp = client.post("/v1/completions", body=body, headers={"content-type": "application/json",
                                                                  "x-request-id": rid})
        after_post(resp)
        first, late = _first_token(resp, sent)
        client.close()
    finally:
        sim.stop()
    truth = json.loads(log.read_text().splitlines()[0])
    assert truth["request_id"] == rid
    return first, late, truth


def test_install_stamps_a_pooled_http_client_against_the_simulator(monkeypatch, tmp_path):
    """End to end: a client frozen for 200 ms before it reads still times the first token
    within 2 ms of the simulator's log (which records when the chunk was written)."""
    def frozen(resp):
        assert isinstance(resp._sock, kstamp.StampingSocket)
        time.sleep(0.2)  # frozen: the whole stream arrives meanwhile

    first, late, truth = _time_first_token(monkeypatch, tmp_path, "h200", "kstamp-1", frozen)
    assert first is not None
    assert late - truth["t_first_token"] > 0.15  # the user-space clock would be this late
    # 3 tokens of one request come one step apart: unread, they merge, so the stamp is the last
    # segment's; the error is bounded by the stream's own length, far below the 200 ms freeze
    assert -0.002 < first - truth["t_first_token"] < 0.02, first - truth["t_first_token"]


def test_a_client_late_for_the_headers_still_times_the_first_token(monkeypatch, tmp_path):
    """The client is busy from its send until the whole short answer has arrived: its header read
    completes the message and the pool takes the socket back before the caller could ask it.
    The stamp is still there (it was the clock, 50-60 ms late, in the load suite's runs)."""
    sendall = kstamp.StampingSocket.sendall

    def busy_after_send(self, data, *args):
        sendall(self, data, *args)
        if b"kstamp-2" in data:
            time.sleep(0.2)  # blocks the process, not only this greenlet: the client is busy

    monkeypatch.setattr(kstamp.StampingSocket, "sendall", busy_after_send)

    def socket_gone(resp):
        assert resp._sock is None  # the message completed in the header read

    first, late, truth = _time_first_token(monkeypatch, tmp_path, "instant", "kstamp-2", socket_gone)
    assert first is not None
    assert late - truth["t_first_token"] > 0.15
    assert -0.002 < first - truth["t_first_token"] < 0.02, first - truth["t_first_token"]
