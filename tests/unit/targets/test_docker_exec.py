"""The exec stream reader: frames split anywhere, stdout and stderr interleaved, a short last frame."""
from __future__ import annotations

import io
import struct

from chaos.targets.docker_exec import _read_frames


def _frame(stream: int, data: bytes) -> bytes:
    return struct.pack(">BxxxL", stream, len(data)) + data


class _Trickle(io.RawIOBase):
    """A socket that hands out n bytes per read, as a slow forward does."""

    def __init__(self, data: bytes, n: int) -> None:
        self.data, self.n = data, n

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        chunk, self.data = self.data[:min(self.n, len(b))], self.data[min(self.n, len(b)):]
        b[:len(chunk)] = chunk
        return len(chunk)


def test_frames_are_joined_in_order_whatever_the_read_sizes() -> None:
    data = _frame(1, b"  1 init\n") + _frame(2, b"warn\n") + _frame(1, b"  7 python -m chaos.stack.sim\n")
    for n in (1, 3, 8, 9, 1000):
        assert _read_frames(io.BufferedReader(_Trickle(data, n), buffer_size=16)) == \
            b"  1 init\nwarn\n  7 python -m chaos.stack.sim\n"


def test_a_stream_cut_mid_frame_keeps_what_arrived() -> None:
    data = _frame(1, b"complete\n") + _frame(1, b"cut short")[:-4]
    assert _read_frames(io.BufferedReader(_Trickle(data, 5))) == b"complete\ncut s"
    assert _read_frames(io.BytesIO(b"")) == b""
