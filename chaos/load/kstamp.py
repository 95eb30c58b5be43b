"""Kernel receive timestamps for the load client's sockets (Linux `SO_TIMESTAMPNS`).

Why: a load client that is busy reads a socket late, and a clock read after the read measures
the client's own queueing: at 256 concurrent streams one process handles a step's burst of
chunks one by one, so the last chunks of the burst are timed milliseconds late. The kernel stamps
each segment when it arrives, whoever is busy.

Limit: TCP merges segments that queue up unread into one and keeps the NEWEST stamp, so the stamp
of a recv is that of the last segment it returned. It is therefore an upper bound on the arrival
of every byte the recv delivered, and never later than a clock read after the recv: using it is
never worse than the user-space clock, and exact while the client keeps up with the stream.

The kernel switches stamping on a moment after the first socket of the machine asks for it (a
deferred static key), so the first segments of a run's first connections may come unstamped;
their events keep the user-space clock.

`install()` makes geventhttpclient's pools (FastHttpUser) create StampingSocket for plain TCP, so
the header read is stamped too (a late client often reads the headers and the first token in one
recv). TLS sockets are not stamped; callers keep their user-space clock for them.

Each stamp is kept for the greenlet that read it (`arrival`), not on the socket: a client late
enough to find a whole short response waiting completes the message in its header read, and
geventhttpclient hands the socket back to its pool before the caller can ask it. That was exactly
the late client the stamps are for (the instant simulator's 8-token answers, the client paused
50 ms: the first token was timed by the clock, 50-60 ms late).
"""
from __future__ import annotations

import os
import socket
import struct
import sys
from typing import TYPE_CHECKING, Any

import gevent.local
import gevent.socket

if TYPE_CHECKING:
    from geventhttpclient.connectionpool import ConnectionPool

# Python's socket module does not export it; 35 is SO_TIMESTAMPNS (= SCM_TIMESTAMPNS) in Linux's
# asm-generic/socket.h, which x86, arm and most architectures use
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
_TIMESPEC = struct.Struct("@ll")  # struct timespec: tv_sec, tv_nsec
_ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
_TS_SIZE, _SOL_SOCKET, _unpack = _TIMESPEC.size, socket.SOL_SOCKET, _TIMESPEC.unpack_from  # hot path
SUPPORTED = SO_TIMESTAMPNS is not None and _ANC_SIZE > 0
# per greenlet: a Locust user's request is sent and read in the user's own greenlet
_read_by_greenlet = gevent.local.local()


class StampingSocket(gevent.socket.socket):  # type: ignore[misc]  # gevent is untyped
    """A gevent socket whose `recv` keeps the kernel's receive stamp of the data it returns, for
    the greenlet that read it (`arrival`): wall-clock seconds (CLOCK_REALTIME)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)

    def recv(self, n: int, flags: int = 0) -> bytes:
        data: bytes
        data, anc, _flags, _addr = self.recvmsg(n, _ANC_SIZE, flags)
        if anc:  # one SCM_TIMESTAMPNS message, the only one this socket asks for
            level, kind, raw = anc[0]
            if kind == SO_TIMESTAMPNS and level == _SOL_SOCKET and len(raw) >= _TS_SIZE:
                sec, nsec = _unpack(raw)
                _read_by_greenlet.stamp = sec + nsec * 1e-9
        return data


def _create_tcp_socket(self: ConnectionPool, family: int, socktype: int, protocol: int) -> gevent.socket.socket:
    try:
        return StampingSocket(family, socktype, protocol)
    except OSError:  # the option refused: an unstamped socket still works
        return gevent.socket.socket(family, socktype, protocol)


def install() -> bool:
    """Make geventhttpclient's connection pools create stamping sockets; False where unsupported.

    Uses the pool's documented socket-factory hook (`_create_tcp_socket`); TLS pools wrap the
    socket it returns, so their reads bypass `recv` here and stay unstamped."""
    if not SUPPORTED or os.environ.get("CHAOS_KERNEL_STAMPS", "1") == "0":  # the switch: user-space clock only
        return False
    from geventhttpclient.connectionpool import ConnectionPool

    ConnectionPool._create_tcp_socket = _create_tcp_socket  # type: ignore[method-assign]
    return True


def arrival(not_before: float) -> float | None:
    """Wall-clock stamp of the last data this greenlet read from a stamping socket, if that
    stamp is from after `not_before` (older ones belong to an earlier request)."""
    stamp: float | None = getattr(_read_by_greenlet, "stamp", None)
    return stamp if stamp is not None and stamp >= not_before else None
