"""The KV block pool with a block-hash prefix cache (LRU) and an optional CPU tier.

Blocks are plain integers indexing flat lists (reference counts, the hash a block holds), so a step touches no
per-token Python objects. A prompt block is cached under its chain hash once computed; when its last holder releases
it the block stays cached but becomes evictable, in LRU order, and is reused for new allocations only when no free
block is left. Blocks are released tail first, so a prefix's tail is evicted before its head and cached prefixes stay
prefix-closed, as in vLLM's free-block queue.

The CPU tier (SGLang HiCache / vLLM offload connector) is write-through: every block registered on the GPU is also
recorded in a host LRU of `host_blocks` entries; a prefix lookup that runs past the GPU's hits continues in the host
tier, and those blocks are loaded back (the core charges their transfer time to the step).
"""

from __future__ import annotations

from collections import OrderedDict
from itertools import takewhile


class KVPool:
    """Integer block ids, reference counts, a hash -> block map, an LRU of evictable blocks and a host-tier LRU."""

    __slots__ = ("num_blocks", "block_size", "ref", "hash_of", "free", "cached", "evictable", "host",
                 "host_blocks", "prefix_caching")

    def __init__(self, num_blocks: int, block_size: int, *, host_blocks: int = 0, prefix_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.ref = [0] * num_blocks
        self.hash_of: list[int | None] = [None] * num_blocks
        self.free = list(range(num_blocks - 1, -1, -1))
        self.cached: dict[int, int] = {}
        self.evictable: OrderedDict[int, None] = OrderedDict()
        self.host: OrderedDict[int, None] = OrderedDict()
        self.host_blocks = host_blocks
        self.prefix_caching = prefix_caching

    # -- capacity -------------------------------------------------------------------------------------------------
    def available(self) -> int:
        """Blocks an allocation may take now: free ones plus cached ones nobody holds."""
        return len(self.free) + len(self.evictable)

    def used_blocks(self) -> int:
        """Blocks held by at least one request (what engines report as KV usage)."""
        return self.num_blocks - len(self.free) - len(self.evictable)

    # -- prefix lookup ----------------------------------------------------------------------------------------------
    def match(self, hashes: list[int], limit: int) -> tuple[int, int]:
        """Leading blocks of `hashes` (at most `limit`) cached on the GPU, then how many more the host tier holds."""
        if not self.prefix_caching or limit <= 0:
            return 0, 0
        head = hashes[:limit] if limit < len(hashes) else hashes
        g = len(list(takewhile(self.cached.__contains__, head)))
        if not self.host_blocks or g == len(head):
            return g, 0
        return g, len(list(takewhile(self.host.__contains__, head[g:])))

    def acquire_cached(self, hashes: list[int], n: int) -> list[int]:
        """Take a reference on the GPU blocks caching the first `n` hashes (all present, per :meth:`match`)."""
        ref, evictable = self.ref, self.evictable
        blocks = list(map(self.cached.__getitem__, hashes[:n]))
        pop = evictable.pop
        for b in blocks:
            if ref[b]:
                ref[b] += 1
            else:
                pop(b)
                ref[b] = 1
        return blocks

    def touch_host(self, hashes: list[int]) -> None:
        host = self.host
        for h in hashes:
            host.move_to_end(h)

    # -- allocation -------------------------------------------------------------------------------------------------
    def allocate(self, n: int) -> list[int] | None:
        """`n` fresh blocks (free first, then evicting the least recently used cached ones), or None if short."""
        if n <= 0:
            return []
        if n > len(self.free) + len(self.evictable):
            return None
        free, ref = self.free, self.ref
        take = min(n, len(free))
        out = free[len(free) - take:]
        del free[len(free) - take:]
        if take < n:
            evictable, cached, hash_of = self.evictable, self.cached, self.hash_of
            for _ in range(n - take):
                b, _unused = evictable.popitem(last=False)
                h = hash_of[b]
                if h is not None and cached.get(h) == b:
                    del cached[h]
                hash_of[b] = None
                out.append(b)
        for b in out:
            ref[b] = 1
        return out

    def register(self, block: int, h: int) -> None:
        """Record that `block` now holds the prompt block with chain hash `h` (first writer wins)."""
        if not self.prefix_caching:
            return
        if h not in self.cached:
            self.cached[h] = block
            self.hash_of[block] = h
        if self.host_blocks:
            host = self.host
            if h in host:
                host.move_to_end(h)
            else:
                host[h] = None
                if len(host) > self.host_blocks:
                    host.popitem(last=False)

    def release(self, blocks: list[int]) -> None:
        """Drop one reference on each block, tail first; unreferenced cached blocks become evictable (MRU end)."""
        ref, hash_of = self.ref, self.hash_of
        zero = []
        for b in reversed(blocks):
            r = ref[b] - 1
            ref[b] = r
            if not r:
                zero.append(b)
        if zero:
            self.evictable.update(dict.fromkeys([b for b in zero if hash_of[b] is not None]))
            self.free.extend([b for b in zero if hash_of[b] is None])
