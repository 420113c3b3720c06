"""The KV block pool with a block-hash prefix cache (LRU) and an optional CPU tier.

Blocks are integers indexing flat numpy arrays (reference counts, "holds a cached hash", LRU stamp), so taking or
dropping a request's thousand-block prefix is a handful of vectorised operations, not a Python loop.

A prompt block is cached under its chain hash once computed. When its last holder releases it the block stays cached
but becomes evictable; new allocations take free blocks first and then evict the least recently released cached
blocks. The LRU is kept as release *groups* (one per release call, tail blocks first, so a prefix's tail is evicted
before its head and cached prefixes stay prefix-closed, as in vLLM's free-block queue); a block re-acquired and
released again simply carries a newer stamp, and stale group entries are skipped.

The CPU tier (SGLang HiCache / vLLM offload connector) is write-through: every block registered on the GPU is also
recorded in a host LRU of `host_blocks` entries; a prefix lookup that runs past the GPU's hits continues in the host
tier, and those blocks are loaded back (the core charges their transfer time to the step).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from itertools import repeat, takewhile

import numpy as np

_MISSING = repeat(-1)
"""The default :meth:`dict.get` gives a hash the GPU does not cache (block ids are >= 0)."""


class KVPool:
    """Reference counts, a hash -> block map, an LRU of evictable cached blocks and a host-tier LRU of hashes."""

    def __init__(self, num_blocks: int, block_size: int, *, host_blocks: int = 0, prefix_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.ref = np.zeros(num_blocks, np.int32)
        self.hashed = np.zeros(num_blocks, bool)
        self.stamp = np.zeros(num_blocks, np.int64)
        self.hash_of: list[int] = [0] * num_blocks
        self.free: list[int] = list(range(num_blocks - 1, -1, -1))
        self.cached: dict[int, int] = {}
        self.groups: deque[tuple[int, np.ndarray]] = deque()
        self.n_evictable = 0
        self._gid = 0
        self._group_entries = 0
        self.host: OrderedDict[int, None] = OrderedDict()
        self.host_blocks = host_blocks
        self.prefix_caching = prefix_caching

    # -- capacity -------------------------------------------------------------------------------------------------
    def available(self) -> int:
        """Blocks an allocation may take now: free ones plus cached ones nobody holds."""
        return len(self.free) + self.n_evictable

    def used_blocks(self) -> int:
        """Blocks held by at least one request (what engines report as KV usage)."""
        return self.num_blocks - len(self.free) - self.n_evictable

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
        blocks = list(map(self.cached.__getitem__, hashes[:n]))
        self.acquire(blocks)
        return blocks

    def lookup(self, hashes: list[int], limit: int) -> tuple[list[int], int]:
        """:meth:`match` in one pass that also returns the GPU blocks of the cached prefix (for :meth:`acquire`)."""
        if not self.prefix_caching or limit <= 0:
            return [], 0
        head = hashes[:limit] if limit < len(hashes) else hashes
        found: list[int] = list(map(self.cached.get, head, _MISSING))
        try:
            g = found.index(-1)
        except ValueError:
            return found, 0
        del found[g:]
        if not self.host_blocks:
            return found, 0
        return found, len(list(takewhile(self.host.__contains__, head[g:])))

    def acquire(self, blocks: list[int]) -> None:
        """Take a reference on cached blocks (from :meth:`lookup`)."""
        if not blocks:
            return
        arr = np.array(blocks, np.int64)
        ref = self.ref
        self.n_evictable -= int(np.count_nonzero(ref[arr] == 0))
        ref[arr] += 1

    # -- allocation -------------------------------------------------------------------------------------------------
    def allocate(self, n: int) -> list[int] | None:
        """`n` fresh blocks (free first, then evicting the least recently released cached ones), or None if short."""
        if n <= 0:
            return []
        free = self.free
        if n > len(free) + self.n_evictable:
            return None
        take = min(n, len(free))
        out = free[len(free) - take:]
        del free[len(free) - take:]
        if take < n:
            out.extend(self._evict(n - take))
        if len(out) == 1:
            self.ref[out[0]] = 1
        else:
            self.ref[np.array(out, np.int64)] = 1
        return out

    def _evict(self, k: int) -> list[int]:
        """Take `k` evictable blocks, oldest release group first, dropping their hashes from the cache."""
        ref, stamp, hashed, groups = self.ref, self.stamp, self.hashed, self.groups
        taken: list[np.ndarray] = []
        while k > 0:
            gid, arr = groups[0]
            # the group's first k valid entries, checking only as far as needed: an entry that is not valid now never
            # becomes valid for this group again (re-released blocks carry a newer stamp), so an unchecked remainder
            # filtered later keeps exactly the entries a full filter now would
            n = len(arr)
            scan = min(k, n)
            while True:
                head = arr[:scan]
                pos = np.flatnonzero((ref[head] == 0) & (stamp[head] == gid) & hashed[head])
                if len(pos) >= k or scan == n:
                    break
                scan = min(n, 2 * scan + k - len(pos))
            if len(pos) > k:  # stop at the k-th valid entry; the rest of the head stays queued
                pos = pos[:k]
                scan = int(pos[-1]) + 1
            valid = head[pos]
            if scan == n:
                groups.popleft()
            else:
                groups[0] = (gid, arr[scan:])
            self._group_entries -= scan
            if len(valid):
                taken.append(valid)
                k -= len(valid)
        out = np.concatenate(taken) if len(taken) > 1 else taken[0]
        hashed[out] = False
        self.n_evictable -= len(out)
        blocks: list[int] = out.tolist()
        cached, hash_of = self.cached, self.hash_of
        for b in blocks:
            h = hash_of[b]
            if cached.get(h) == b:
                del cached[h]
        return blocks

    def register_many(self, blocks: list[int], hashes: list[int]) -> None:
        """Record that `blocks[i]` now holds the prompt block with chain hash `hashes[i]` (first writer wins)."""
        if not self.prefix_caching:
            return
        cached, hash_of = self.cached, self.hash_of
        fresh = []
        for b, h in zip(blocks, hashes, strict=False):
            if h not in cached:
                cached[h] = b
                hash_of[b] = h
                fresh.append(b)
        if fresh:
            self.hashed[np.array(fresh, np.int64)] = True
        if self.host_blocks:
            host = self.host
            for h in hashes:
                if h in host:
                    host.move_to_end(h)
                else:
                    host[h] = None
            while len(host) > self.host_blocks:
                host.popitem(last=False)

    def register(self, block: int, h: int) -> None:
        self.register_many([block], [h])

    def release(self, blocks: list[int]) -> None:
        """Drop one reference on each block; unreferenced cached blocks join the LRU as one group, tail first."""
        if not blocks:
            return
        arr = np.array(blocks[::-1], np.int64)
        ref = self.ref
        ref[arr] -= 1
        zero = arr[ref[arr] == 0]
        if not len(zero):
            return
        is_hashed = self.hashed[zero]
        keep = zero[is_hashed]
        if len(keep):
            self._gid += 1
            self.stamp[keep] = self._gid
            self.groups.append((self._gid, keep))
            self.n_evictable += len(keep)
            self._group_entries += len(keep)
            if self._group_entries > 4 * self.num_blocks + 1024:
                self._compact()
        if len(keep) < len(zero):
            self.free.extend(zero[~is_hashed].tolist())

    def _compact(self) -> None:
        """Drop stale group entries (re-acquired or re-released blocks) so the LRU stays O(pool size)."""
        ref, stamp, hashed = self.ref, self.stamp, self.hashed
        kept: deque[tuple[int, np.ndarray]] = deque()
        total = 0
        for gid, arr in self.groups:
            valid = arr[(ref[arr] == 0) & (stamp[arr] == gid) & hashed[arr]]
            if len(valid):
                kept.append((gid, valid))
                total += len(valid)
        self.groups = kept
        self._group_entries = total
