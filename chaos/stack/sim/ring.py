"""A fixed ring of float samples whose memory is taken once, at its start.

The engine keeps its last 200 000 chunk-write lags for `/stats`. As a deque of Python floats that is about
7 MB grown sample by sample over a replica's first minutes under load: memory rising for as long as a
10-minute `deriv` window reads it, which a memory-growth alert takes for a leak. An array of doubles
allocated whole (1.6 MB) keeps the replica's resident memory flat."""
from __future__ import annotations

from array import array
from collections.abc import Iterator


class Ring:
    """The last `size` floats appended; older ones overwritten."""

    def __init__(self, size: int) -> None:
        self._xs = array("d", bytes(8 * size))
        self._size, self._n = size, 0  # _n: how many were ever appended

    def append(self, x: float) -> None:
        self._xs[self._n % self._size] = x
        self._n += 1

    def __len__(self) -> int:
        return min(self._n, self._size)

    def __iter__(self) -> Iterator[float]:
        return iter(self._xs[:len(self)])
