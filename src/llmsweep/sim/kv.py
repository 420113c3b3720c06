"""The KV block pool with a block-hash prefix cache (LRU) and an optional CPU tier.

Blocks are integers indexing flat numpy arrays (reference counts, "holds a cached hash", LRU stamp), so taking or
dropping a request's thousand-block prefix is a handful of vectorised operations, not a Python loop.

A prompt block is cached under its chain hash once computed. When its last holder releases it the block stays cached
but becomes evictable; new allocations take free blocks first and then evict the least recently released cached
blocks. The LRU is kept as release *groups* (one per release call, tail blocks first, so a prefix's tail is evicted
before its head and cached prefixes stay prefix-closed, as in vLLM's free-block queue). A block's `stamp` is the group
whose entry for it is live: set when a release leaves it cached and unreferenced, cleared when it is acquired again
(blocks taken from the free list or by eviction have no live entry left), so an entry is live exactly while the
stamp names its group, and stale entries (re-acquired blocks, older releases) are skipped by one comparison.

The CPU tier (SGLang HiCache / vLLM offload connector) is write-through: every block registered on the GPU is also
recorded in a host LRU of `host_blocks` entries; a prefix lookup that runs past the GPU's hits continues in the host
tier, and those blocks are loaded back (the core charges their transfer time to the step).

The hash -> block map is a dict of 64-bit keys (:func:`as_keys`: a uint64 array, or Python ints taken modulo 2^64). A
lookup reads it key by key only until the cached run ends, and a request that continues a conversation first reads
its previous prompt's blocks (:meth:`KVPool.lookup_array`'s hint, checked against `hash_of` in two array reads), so
a prompt's thousand cached blocks cost no probe each. (An open-addressing table in numpy arrays held the map before:
faster for whole-prompt lookups, slower to register and drop a prefill chunk's blocks, which is what remains once
lookups take the hint; records are the same either way.)
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from itertools import takewhile

import numpy as np

_U = np.uint64
_MASK = (1 << 64) - 1
_NO_BLOCKS = np.empty(0, np.int64)

BlockHashes = np.ndarray | Sequence[int]
"""A prompt's chain hashes: a uint64 array (what the encoder gives) or a sequence of Python ints."""
Hint = tuple[np.ndarray, np.ndarray]
"""(keys, blocks) of an earlier prompt's cached blocks, for :meth:`KVPool.lookup_array`."""


def as_keys(hashes: BlockHashes) -> np.ndarray:
    """`hashes` as a uint64 array (Python ints are taken modulo 2^64: a negative `hash()` keeps its bits)."""
    if isinstance(hashes, np.ndarray):
        if hashes.dtype == _U:
            return hashes
        return hashes.astype(np.int64, copy=False).view(_U)
    return np.fromiter((h & _MASK for h in hashes), _U, len(hashes))


class KVPool:
    """Reference counts, a hash -> block map, an LRU of evictable cached blocks and a host-tier LRU of hashes."""

    def __init__(self, num_blocks: int, block_size: int, *, host_blocks: int = 0, prefix_caching: bool = True) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.ref = np.zeros(num_blocks, np.int32)
        self.hashed = np.zeros(num_blocks, bool)
        self.stamp = np.zeros(num_blocks, np.int64)
        self.hash_of = np.zeros(num_blocks, _U)
        """The key each registered (`hashed`) block is cached under."""
        self.free: list[int] = list(range(num_blocks - 1, -1, -1))
        self.map: dict[int, int] = {}
        """The prefix cache: hash key -> the block caching it (a block is `hashed` exactly while it is mapped)."""
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

    @property
    def cached(self) -> dict[int, int]:
        """The prefix cache as {hash key: block} (a copy; for checks, not the hot path)."""
        return dict(self.map)

    # -- prefix lookup ----------------------------------------------------------------------------------------------
    def _head(self, hashes: BlockHashes, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys of the first `limit` hashes, their GPU blocks or -1)."""
        keys = as_keys(hashes)
        if limit < len(keys):
            keys = keys[:limit]
        get = self.map.get
        return keys, np.fromiter((get(k, -1) for k in keys.tolist()), np.int64, len(keys))

    def _host_run(self, keys: np.ndarray) -> int:
        return len(list(takewhile(self.host.__contains__, keys.tolist())))

    def match(self, hashes: BlockHashes, limit: int) -> tuple[int, int]:
        """Leading blocks of `hashes` (at most `limit`) cached on the GPU, then how many more the host tier holds."""
        if not self.prefix_caching or limit <= 0:
            return 0, 0
        keys, found = self._head(hashes, limit)
        miss = np.flatnonzero(found < 0)
        g = int(miss[0]) if len(miss) else len(keys)
        if not self.host_blocks or g == len(keys):
            return g, 0
        return g, self._host_run(keys[g:])

    def acquire_cached(self, hashes: BlockHashes, n: int) -> list[int]:
        """Take a reference on the GPU blocks caching the first `n` hashes (all present, per :meth:`match`)."""
        _, found = self._head(hashes, n)
        blocks: list[int] = found.tolist()
        self.acquire(blocks)
        return blocks

    def lookup(self, hashes: BlockHashes, limit: int) -> tuple[list[int], int]:
        """:meth:`match` in one pass that also returns the GPU blocks of the cached prefix (for :meth:`acquire`)."""
        found, h = self.lookup_array(hashes, limit)
        return found.tolist(), h

    def lookup_array(self, hashes: BlockHashes, limit: int, hint: Hint | None = None) -> tuple[np.ndarray, int]:
        """:meth:`lookup` with the blocks as an int64 array. `hint`: the keys and blocks of an earlier prompt that
        this one may extend (the conversation's previous request): where a hinted block still caches this prompt's key
        at its place (`hash_of` equals the key and the block is `hashed`, which holds exactly while the table maps
        the key to it), that block is the answer, read from two arrays instead of probing the table; the keys past
        the first that fails are looked up as usual. The same answer either way (the hint's own keys need not be
        compared: a block that caches the key is the table's answer for it)."""
        if not self.prefix_caching or limit <= 0:
            return _NO_BLOCKS, 0
        keys = as_keys(hashes)
        if limit < len(keys):
            keys = keys[:limit]
        found = _NO_BLOCKS if hint is None else self._hinted(keys, hint)
        g = len(found)
        if g < len(keys):  # the cached run goes on past the hint (or starts here): one dict read a key, to its end
            get = self.map.get
            more: list[int] = []
            at, piece = g, 16  # (the keys as Python ints a growing piece at a time: the run often ends early)
            while at < len(keys):
                part = keys[at:at + piece].tolist()
                for k in part:
                    b = get(k)
                    if b is None:
                        break
                    more.append(b)
                if len(more) < at - g + len(part):
                    break
                at += len(part)
                piece *= 4
            if more:
                found = np.concatenate((found, np.array(more, np.int64))) if g else np.array(more, np.int64)
                g = len(found)
        if g == len(keys) or not self.host_blocks:
            return found, 0
        return found, self._host_run(keys[g:])

    def _hinted(self, keys: np.ndarray, hint: Hint) -> np.ndarray:
        """The leading blocks of `hint` that still cache the leading `keys`."""
        hint_keys, hint_blocks = hint
        m = min(len(keys), len(hint_keys), len(hint_blocks))
        if not m:
            return _NO_BLOCKS
        blocks = hint_blocks[:m]
        # a hinted block answers for its key exactly while it caches that key (whatever key the hint gave it)
        ok = self.hash_of[blocks] == keys[:m]
        ok &= self.hashed[blocks]
        return blocks if ok.all() else blocks[:int(ok.argmin())]

    def acquire(self, blocks: Sequence[int] | np.ndarray) -> None:
        """Take a reference on cached blocks (from :meth:`lookup`)."""
        if not len(blocks):
            return
        arr = np.asarray(blocks, np.int64)
        ref = self.ref
        held = ref[arr]
        self.n_evictable -= int(np.count_nonzero(held == 0))
        ref[arr] = held + 1
        self.stamp[arr] = 0  # their LRU entries are stale now

    # -- allocation -------------------------------------------------------------------------------------------------
    def allocate(self, n: int) -> list[int] | None:
        """`n` fresh blocks (free first, then evicting the least recently released cached ones), or None if short."""
        out = self.allocate_array(n)
        return None if out is None else out.tolist()

    def allocate_array(self, n: int) -> np.ndarray | None:
        """:meth:`allocate` as an int64 array."""
        if n <= 0:
            return _NO_BLOCKS
        free = self.free
        if n > len(free) + self.n_evictable:
            return None
        take = min(n, len(free))
        if take == n:
            out = np.array(free[len(free) - take:], np.int64)
            del free[len(free) - take:]
        elif take:
            head = np.array(free[len(free) - take:], np.int64)
            del free[len(free) - take:]
            out = np.concatenate((head, self._evict(n - take)))
        else:
            out = self._evict(n)
        self.ref[out] = 1
        return out

    def allocate_each(self, sizes: list[int]) -> list[np.ndarray] | None:
        """:meth:`allocate_array` for each of `sizes` (all positive) in turn, in one pass: each gets the blocks its
        own call would, and the pool ends as after those calls (free list tail first, from its end, then evictions
        in order). None, nothing taken, when their total does not fit."""
        total = sum(sizes)
        free = self.free
        have = len(free)
        if total > have + self.n_evictable:
            return None
        take = min(total, have)
        head = np.array(free[have - take:], np.int64)
        del free[have - take:]
        evicted = self._evict(total - take) if total > take else _NO_BLOCKS
        out: list[np.ndarray] = []
        end = take
        at = 0
        for n in sizes:
            f = n if n <= end else end
            if f == n:
                out.append(head[end - f:end])
            elif f:
                out.append(np.concatenate((head[end - f:end], evicted[at:at + n - f])))
            else:
                out.append(evicted[at:at + n])
            end -= f
            at += n - f
        self.ref[head] = 1
        self.ref[evicted] = 1
        return out

    def _evict(self, k: int) -> np.ndarray:
        """Take `k` evictable blocks, oldest release group first, dropping their hashes from the cache."""
        stamp, groups = self.stamp, self.groups
        taken: list[np.ndarray] = []
        while k > 0:
            gid, arr = groups[0]
            # the group's first k live entries, checking only as far as needed: an entry that is stale now never
            # becomes live again (a block's stamp only changes to 0 or to a newer group), so an unchecked remainder
            # filtered later keeps exactly the entries a full filter now would
            n = len(arr)
            scan = min(k, n)
            while True:
                head = arr[:scan]
                pos = (stamp[head] == gid).nonzero()[0]
                if len(pos) >= k or scan == n:
                    break
                scan = min(n, 2 * scan + k - len(pos))
            if len(pos) > k:  # stop at the k-th live entry; the rest of the head stays queued
                pos = pos[:k]
                scan = int(pos[-1]) + 1
            valid = head if len(pos) == scan else head[pos]
            if scan == n:
                groups.popleft()
            else:
                groups[0] = (gid, arr[scan:])
            self._group_entries -= scan
            if len(valid):
                taken.append(valid)
                k -= len(valid)
        out = np.concatenate(taken) if len(taken) > 1 else taken[0]
        self.hashed[out] = False
        self.n_evictable -= len(out)
        # a block is `hashed` exactly while the cache maps its key to it (first writer wins, see register_many)
        cache = self.map
        for key in self.hash_of[out].tolist():
            del cache[key]
        return out

    def register_many(self, blocks: Sequence[int] | np.ndarray, hashes: BlockHashes) -> None:
        """Record that `blocks[i]` now holds the prompt block with chain hash `hashes[i]` (first writer wins)."""
        if not self.prefix_caching:
            return
        m = min(len(blocks), len(hashes))
        if not m:
            return
        keys = as_keys(hashes)[:m]
        blk = np.asarray(blocks[:m], np.int64)
        key_list, blk_list = keys.tolist(), blk.tolist()
        won = list(map(self.map.setdefault, key_list, blk_list))  # each key's block: the first writer's
        if won == blk_list:  # every key was new (the usual case)
            self.hash_of[blk] = keys
            self.hashed[blk] = True
        else:
            added = [i for i, (w, b) in enumerate(zip(won, blk_list, strict=True)) if w == b]
            fresh = blk[added]
            self.hash_of[fresh] = keys[added]
            self.hashed[fresh] = True
        if self.host_blocks:
            host = self.host
            for h in key_list:
                if h in host:
                    host.move_to_end(h)
                else:
                    host[h] = None
            while len(host) > self.host_blocks:
                host.popitem(last=False)

    def register(self, block: int, h: int) -> None:
        self.register_many([block], [h])

    def release(self, blocks: Sequence[int] | np.ndarray) -> None:
        """Drop one reference on each block; unreferenced cached blocks join the LRU as one group, tail first."""
        if not len(blocks):
            return
        arr = np.asarray(blocks, np.int64)[::-1]
        ref = self.ref
        left = ref[arr] - 1
        ref[arr] = left
        zero = arr[left == 0]
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
        stamp = self.stamp
        kept: deque[tuple[int, np.ndarray]] = deque()
        total = 0
        for gid, arr in self.groups:
            valid = arr[stamp[arr] == gid]
            if len(valid):
                kept.append((gid, valid))
                total += len(valid)
        self.groups = kept
        self._group_entries = total
