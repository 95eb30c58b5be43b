"""A tensor-parallel rank worker: `python -m chaos.stack.sim.rank chaos-sim-rank --rank N --port P`.

It listens on 127.0.0.1:P and answers every 8-byte step message with the same 8 bytes (the
per-step collective). SIGSTOP it and the engine's step times out; SIGKILL it and the engine
sees the worker die. It exits when its parent engine process goes away. Imports stay minimal
so a rank starts in well under a second.
"""
from __future__ import annotations

import argparse
import os
import socket
import sys
import threading
import time


def _serve(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    try:
        while True:
            data = conn.recv(4096)
            if not data:
                return
            buf += data
            n = len(buf) - len(buf) % 8
            if n:
                conn.sendall(buf[:n])
                buf = buf[n:]
    except OSError:
        return
    finally:
        conn.close()


def _watch_parent(parent: int) -> None:
    while True:
        if os.getppid() != parent:
            os._exit(0)
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="chaos-sim-rank")
    ap.add_argument("tag", nargs="?", default="chaos-sim-rank")
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--parent", type=int, default=0)
    args = ap.parse_args(argv)
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        srv.bind((args.host, args.port))
    except OSError as e:
        print(f"ERROR rank {args.rank}: cannot listen on {args.host}:{args.port}: {e}",
              file=sys.stderr, flush=True)
        return 1
    srv.listen(16)
    if args.parent:
        threading.Thread(target=_watch_parent, args=(args.parent,), daemon=True).start()
    print(f"INFO Worker rank {args.rank} (pid {os.getpid()}) listening on {args.host}:{args.port}",
          flush=True)
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=_serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
