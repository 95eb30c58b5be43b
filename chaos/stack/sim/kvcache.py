"""KV-cache blocks with vLLM-style prefix caching.

A block holds `block_size` token slots. A FULL block gets a hash chained on its parent's hash
(`hash((parent_hash, tokens))`), so two requests share a block only when their whole prefix up
to and including that block is identical. Blocks whose reference count drops to zero go to the
tail of a free queue but stay findable by hash; allocation pops from the head, so cached blocks
are evicted least-recently-freed first (LRU). Requests free their blocks tail-first, so a
request's last blocks are evicted before its (more shareable) first ones, as in vLLM.
"""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class Block:
    """One KV block: id, reference count and (when full and cached) its chain hash."""

    __slots__ = ("id", "ref", "hash")

    def __init__(self, block_id: int) -> None:
        self.id = block_id
        self.ref = 0
        self.hash: int | None = None


def chain_hashes(tokens: Sequence[str], block_size: int, parent: int | None = None,
                 start_block: int = 0) -> list[int]:
    """Chained hashes of the full blocks of `tokens`, starting at block index `start_block`."""
    out: list[int] = []
    h = parent
    n_full = len(tokens) // block_size
    for i in range(start_block, n_full):
        h = hash((h, tuple(tokens[i * block_size:(i + 1) * block_size])))
        out.append(h)
    return out


class BlockPool:
    """Fixed pool of KV blocks with a hash index of cached blocks and an LRU free queue."""

    def __init__(self, num_blocks: int, block_size: int, enable_prefix_caching: bool = True) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError("num_blocks and block_size must be >= 1")
        self.block_size = block_size
        self.num_blocks = num_blocks
        self.prefix_caching = enable_prefix_caching
        self.blocks = [Block(i) for i in range(num_blocks)]
        self.free: OrderedDict[int, Block] = OrderedDict((b.id, b) for b in self.blocks)
        self.cached: dict[int, Block] = {}
        self.evictions = 0

    @property
    def num_free(self) -> int:
        """Blocks not referenced by any running request (cached-but-free ones included)."""
        return len(self.free)

    def usage(self) -> float:
        """Fraction of blocks in use, as vLLM's kv_cache_usage_perc (0-1)."""
        return 1.0 - len(self.free) / self.num_blocks

    def lookup(self, hashes: Sequence[int], max_blocks: int) -> list[Block]:
        """Longest run of cached blocks matching `hashes` (at most `max_blocks`)."""
        if not self.prefix_caching:
            return []
        hit: list[Block] = []
        cached = self.cached
        for h in hashes[:max_blocks]:
            b = cached.get(h)
            if b is None:
                break
            hit.append(b)
        return hit

    def touch(self, blocks: Sequence[Block]) -> None:
        """Take a reference on already-cached blocks (removing them from the free queue)."""
        free = self.free
        for b in blocks:
            if b.ref == 0:
                free.pop(b.id, None)
            b.ref += 1

    def allocate(self, n: int) -> list[Block] | None:
        """Pop `n` fresh blocks from the head of the free queue, evicting their cache entries."""
        if n > len(self.free):
            return None
        out: list[Block] = []
        for _ in range(n):
            _, b = self.free.popitem(last=False)
            if b.hash is not None:
                if self.cached.get(b.hash) is b:
                    del self.cached[b.hash]
                b.hash = None
                self.evictions += 1
            b.ref = 1
            out.append(b)
        return out

    def release(self, blocks: Sequence[Block]) -> None:
        """Drop one reference on each block, tail first; unreferenced blocks become free."""
        free = self.free
        for b in reversed(blocks):
            b.ref -= 1
            if b.ref == 0:
                free[b.id] = b

    def cache_block(self, block: Block, h: int) -> None:
        """Register a just-filled block under its chain hash (first writer wins)."""
        if not self.prefix_caching or block.hash is not None:
            return
        if h not in self.cached:
            block.hash = h
            self.cached[h] = block
