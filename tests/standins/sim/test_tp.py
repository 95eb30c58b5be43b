"""Tensor parallel ranks as processes: frozen rank -> timeout -> 503 -> exit 0; killed rank."""
from __future__ import annotations

import os
import signal
import socket
import threading
import time

import psutil

from tests.standins.sim.conftest import Sim, free_port, wait_for


def _fire(sim: Sim, body: dict) -> dict:
    """Send a request in the background; the result lands in the returned dict."""
    out: dict = {}

    def go() -> None:
        out["status"], out["body"], _ = sim.request("POST", "/v1/completions", body, timeout=15)

    t = threading.Thread(target=go, daemon=True)
    t.start()
    out["thread"] = t
    return out


def test_ranks_are_child_processes_with_markers(sim_factory) -> None:  # noqa: ANN001
    s: Sim = sim_factory("--tensor-parallel-size", "3")
    pids = s.rank_pids()
    assert len(pids) == 2
    cmdlines = [psutil.Process(p).cmdline() for p in pids]
    assert sorted(c[c.index("--rank") + 1] for c in cmdlines) == ["1", "2"]
    st, _, _ = s.request("POST", "/v1/completions", {"prompt": "tp", "max_tokens": 3})
    assert st == 200


def test_sigstop_rank_times_out_and_exits_zero(sim_factory) -> None:  # noqa: ANN001
    s: Sim = sim_factory("--tensor-parallel-size", "2", "--collective-timeout", "1")
    rank = s.rank_pids()[0]
    os.kill(rank, signal.SIGSTOP)
    try:
        t0 = time.time()
        inflight = _fire(s, {"prompt": "frozen", "max_tokens": 50})
        assert wait_for(lambda: s.request("GET", "/health")[0] == 503, 4.0)
        inflight["thread"].join(5)
        assert inflight["status"] == 500
        # the 1 s collective timeout, then vLLM's 5 s watchdog tick at the latest, then the 0.8 s teardown
        assert s.proc.wait(timeout=1 + 5 + 0.8 + 2) == 0
        assert time.time() - t0 < 1 + 5 + 0.8 + 2
    finally:
        try:
            os.kill(rank, signal.SIGCONT)
        except OSError:
            pass
    assert "RPC call to execute_model timed out" in s.output
    assert "EngineCore encountered a fatal error." in s.output


def test_sigkill_rank_worker_died_and_exit_zero(sim_factory) -> None:  # noqa: ANN001
    s: Sim = sim_factory("--tensor-parallel-size", "2")
    os.kill(s.rank_pids()[0], signal.SIGKILL)
    assert wait_for(lambda: s.request("GET", "/health")[0] == 503, 3.0)
    assert s.proc.wait(timeout=5 + 0.8 + 2) == 0  # the watchdog's tick, then the teardown
    assert "Worker proc 1 died unexpectedly, shutting down executor." in s.output


def test_stream_gets_error_chunk_on_engine_death(sim_factory) -> None:  # noqa: ANN001
    s: Sim = sim_factory("--tensor-parallel-size", "2", "--collective-timeout", "1",
                         "--profile", "a100-80g")
    with socket.create_connection(("127.0.0.1", s.port)) as c:
        body = b'{"prompt": "x", "max_tokens": 5000, "stream": true}'
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        time.sleep(0.3)
        os.kill(s.rank_pids()[0], signal.SIGSTOP)
        c.settimeout(5)
        data = b""
        while not data.endswith(b"0\r\n\r\n"):
            chunk = c.recv(65536)
            if not chunk:
                break
            data += chunk
    assert b" 200 " in data.split(b"\r\n")[0]
    assert b'data: {"error"' in data and b"data: [DONE]" in data
    assert s.proc.wait(timeout=6) == 0


def test_tp_connect_through_a_cuttable_link(sim_factory) -> None:  # noqa: ANN001
    """A tiny TCP relay stands in for Toxiproxy; cutting it stalls the collective."""
    listen, relay_port = free_port(), free_port()
    stop = threading.Event()
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", relay_port))
    srv.listen()
    srv.settimeout(0.2)

    def pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while not stop.is_set():
                d = a.recv(4096)
                if not d:
                    break
                b.sendall(d)
        except OSError:
            pass

    def relay() -> None:
        while not stop.is_set():
            try:
                a, _ = srv.accept()
            except OSError:
                continue
            try:
                b = socket.create_connection(("127.0.0.1", listen))
            except OSError:
                a.close()  # upstream not up yet: drop the client, as Toxiproxy does
                continue
            threading.Thread(target=pipe, args=(a, b), daemon=True).start()
            threading.Thread(target=pipe, args=(b, a), daemon=True).start()

    threading.Thread(target=relay, daemon=True).start()
    try:
        s: Sim = sim_factory("--tensor-parallel-size", "2", "--tp-ports", str(listen),
                             "--tp-connect", f"127.0.0.1:{relay_port}", "--collective-timeout", "1")
        assert s.request("POST", "/v1/completions", {"prompt": "ok", "max_tokens": 2})[0] == 200
        stop.set()  # the link stops forwarding (a cut)
        time.sleep(0.3)
        assert s.request("POST", "/v1/completions", {"prompt": "cut", "max_tokens": 2},
                         timeout=8)[0] == 500
        assert s.proc.wait(timeout=6) == 0
    finally:
        stop.set()
        srv.close()


def test_a_self_connected_dial_is_not_taken_for_a_rank(monkeypatch) -> None:  # noqa: ANN001
    """Dialling a rank port nobody listens on yet can get that very port as its source: the socket
    then echoes every step itself, and the "rank" never freezes. The dial must refuse it."""
    import asyncio

    from chaos.stack.sim import tp
    real_open = asyncio.open_connection

    async def self_connected(host: str, port: int):  # what connect() returns when the kernel picks `port`
        s = socket.socket()
        s.bind((host, port))
        s.connect((host, port))
        return await real_open(sock=s)

    async def dial() -> tuple[bool, object]:
        port = free_port()
        group = tp.RankGroup([port], [("127.0.0.1", port)], 1.0, lambda lines: None)
        monkeypatch.setattr(tp.asyncio, "open_connection", self_connected)
        return await group._dial(group.links[0]), group.links[0].writer

    took, writer = asyncio.run(dial())
    assert not took and writer is None
