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

The hash -> block map is an open-addressing table in numpy arrays (:class:`_BlockTable`): a prompt's ~thousand block
hashes are looked up, registered or dropped in a few vectorised probe rounds, not one dict operation each. Hashes
are 64-bit keys (:func:`as_keys`: a uint64 array, or Python ints taken modulo 2^64).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from itertools import takewhile

import numpy as np

_U = np.uint64
_MASK = (1 << 64) - 1
_GOLDEN = _U(0x9E3779B97F4A7C15)
_EMPTY, _TOMB = -1, -2
_NO_BLOCKS = np.empty(0, np.int64)
_WINDOW = 8
_OFFSETS = np.arange(_WINDOW, dtype=np.int64)

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


class _BlockTable:
    """An open-addressing (linear probing) hash table from 64-bit keys to block ids in one numpy array of (key, value)
    pairs — a probe reads one cache line — with vectorised find / add / remove. A value of -1 marks an empty slot,
    -2 a removed entry (a tombstone, kept until the next rebuild). Load (entries plus tombstones) stays at most 1/2."""

    def __init__(self, num_blocks: int) -> None:
        self.slot_of = np.zeros(num_blocks, np.int64)
        """The slot each registered block occupies (valid while it is registered)."""
        self._alloc(1024)

    def _alloc(self, cap: int) -> None:
        self.cap = cap
        self.bits = cap.bit_length() - 1
        self.ent = np.zeros((cap, 2), np.int64)
        """Per slot: the key (its bits as int64), the block (>= 0), or _EMPTY / _TOMB."""
        self.ent[:, 1] = _EMPTY
        self._claim = np.zeros(cap, np.int64)
        self.n_full = 0
        self.n_tomb = 0

    def _home(self, keys: np.ndarray) -> np.ndarray:
        return ((keys * _GOLDEN) >> _U(64 - self.bits)).astype(np.int64)

    def find(self, keys: np.ndarray) -> np.ndarray:
        """Block of each key, -1 where absent. The home slots are read in one gather; the few keys whose home holds
        another key then scan windows of `_WINDOW` slots, up to their key or an empty slot."""
        n = len(keys)
        if not n or not self.n_full:
            return np.full(n, -1, np.int64)
        ent = self.ent
        want = keys.view(np.int64)
        idx = self._home(keys)
        e = ent.take(idx, axis=0)
        val = e[:, 1]
        hit = (e[:, 0] == want) & (val >= 0)
        out = np.where(hit, val, -1)
        pending = np.flatnonzero((val != _EMPTY) & ~hit)
        if not len(pending):
            return out
        mask = self.cap - 1
        base = idx[pending] + 1
        wanted = want[pending][:, None]
        while True:
            m = len(pending)
            e = ent.take(((base[:, None] + _OFFSETS) & mask).ravel(), axis=0).reshape(m, _WINDOW, 2)
            val = e[:, :, 1]
            hit = (e[:, :, 0] == wanted) & (val >= 0)
            stop = hit | (val == _EMPTY)
            first = stop.argmax(axis=1)
            cell = np.arange(m) * _WINDOW + first
            at = stop.ravel().take(cell)
            found = at & hit.ravel().take(cell)
            if found.any():
                out[pending[found]] = val.ravel().take(cell[found])
            if at.all():
                return out
            go = ~at
            pending, base, wanted = pending[go], base[go] + _WINDOW, wanted[go]

    def add(self, keys: np.ndarray, vals: np.ndarray) -> np.ndarray:
        """Insert the keys not present yet, as a dict walk in order would (a key twice: its first value); returns the
        positions in `keys` it inserted. One probe loop for the presence check and the insert: a key stops at itself
        (present) or at an empty slot, which it claims (tombstones are passed over, never reused, until a rebuild)."""
        n = len(keys)
        if 2 * (self.n_full + self.n_tomb + n) > self.cap:
            self._rebuild(self.n_full + n)
        mask = self.cap - 1
        ent, claim = self.ent, self._claim
        flat = ent.reshape(-1)
        want = keys.view(np.int64)
        idx = self._home(keys)
        added: list[np.ndarray] = []
        # most keys are new and find their home slot empty: read the home slots alone first (one gather, no window)
        e = ent.take(idx, axis=0)
        val = e[:, 1]
        empty = val == _EMPTY
        go = ~((e[:, 0] == want) & (val >= 0))  # not present at home
        ci = np.flatnonzero(empty)
        if len(ci):
            slots = idx.take(ci)
            claim[slots[::-1]] = ci[::-1]  # equal keys share a home: the first in order wins it
            won = ci[claim.take(slots) == ci]
            at = idx.take(won)
            blocks = vals.take(won)
            flat[2 * at] = want.take(won)
            flat[2 * at + 1] = blocks
            self.slot_of[blocks] = at
            self.n_full += len(won)
            added.append(won)
            go[won] = False
        pending = np.flatnonzero(go)
        if not len(pending):
            return added[0] if added else np.empty(0, np.int64)
        idx, want = idx.take(pending), want.take(pending)
        while True:
            # each key reads the window of `_WINDOW` slots from `idx` up to itself (present) or an empty slot
            m = len(pending)
            win = (idx[:, None] + _OFFSETS) & mask
            e = ent.take(win.ravel(), axis=0)
            val = e[:, 1].reshape(m, _WINDOW)
            empty = val == _EMPTY
            here = (e[:, 0].reshape(m, _WINDOW) == want[:, None]) & (val >= 0)
            stop = here | empty
            first = stop.argmax(axis=1)
            cell = np.arange(m) * _WINDOW + first
            found = here.ravel().take(cell)
            free = empty.ravel().take(cell)
            go = ~found
            ci = np.flatnonzero(free)
            if len(ci):
                slots = win.ravel().take(cell.take(ci))
                # keys reaching one empty slot: the first in order wins it (equal keys move in lockstep, so the
                # first of a repeated key is the one inserted; the others find it there next round)
                claim[slots[::-1]] = ci[::-1]
                mine = claim.take(slots) == ci
                won = ci[mine]
                at = slots[mine]
                who = pending.take(won)
                blocks = vals.take(who)
                flat[2 * at] = want.take(won)
                flat[2 * at + 1] = blocks
                self.slot_of[blocks] = at
                self.n_full += len(won)
                added.append(who)
                go[won] = False
            if not go.any():
                break
            # a key that lost an empty slot looks at it again (a repeat of the winner finds itself there); a key
            # whose window held neither moves past it
            idx = (idx + np.where(free, first, _WINDOW)) & mask
            pending, idx, want = pending[go], idx[go], want[go]
        if not added:
            return np.empty(0, np.int64)
        return added[0] if len(added) == 1 else np.concatenate(added)

    def remove(self, blocks: np.ndarray) -> None:
        """Drop the entries of registered `blocks`."""
        self.ent.reshape(-1)[2 * self.slot_of.take(blocks) + 1] = _TOMB
        self.n_full -= len(blocks)
        self.n_tomb += len(blocks)

    def _rebuild(self, live: int) -> None:
        full = self.ent[self.ent[:, 1] >= 0]
        cap = 1024
        while cap < 4 * live:
            cap *= 2
        self._alloc(cap)
        self.add(full[:, 0].view(_U), full[:, 1].copy())

    def items(self) -> dict[int, int]:
        full = self.ent[self.ent[:, 1] >= 0]
        return dict(zip(full[:, 0].view(_U).tolist(), full[:, 1].tolist(), strict=True))


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
        self.table = _BlockTable(num_blocks)
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
        return self.table.items()

    # -- prefix lookup ----------------------------------------------------------------------------------------------
    def _head(self, hashes: BlockHashes, limit: int) -> tuple[np.ndarray, np.ndarray]:
        """(keys of the first `limit` hashes, their GPU blocks or -1)."""
        keys = as_keys(hashes)
        if limit < len(keys):
            keys = keys[:limit]
        return keys, self.table.find(keys)

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
        this one may extend (the conversation's previous request): where the keys agree and a hinted block is still
        cached under its key (a block is `hashed` exactly while the table maps its key to it), that block is the
        answer, read from two arrays instead of probing the table; the keys past the first disagreement are looked
        up as usual. The same answer either way."""
        if not self.prefix_caching or limit <= 0:
            return _NO_BLOCKS, 0
        if hint is not None:
            keys = as_keys(hashes)
            if limit < len(keys):
                keys = keys[:limit]
            hinted = self._hinted(keys, hint)
            n = len(hinted)
            found = hinted if n == len(keys) else np.concatenate((hinted, self.table.find(keys[n:])))
        else:
            keys, found = self._head(hashes, limit)
        miss = np.flatnonzero(found < 0)
        if not len(miss):
            return found, 0
        g = int(miss[0])
        if not self.host_blocks:
            return found[:g], 0
        return found[:g], self._host_run(keys[g:])

    def _hinted(self, keys: np.ndarray, hint: Hint) -> np.ndarray:
        """The leading blocks of `hint` that still cache the leading `keys`."""
        hint_keys, hint_blocks = hint
        m = min(len(keys), len(hint_keys), len(hint_blocks))
        if not m:
            return _NO_BLOCKS
        blocks = hint_blocks[:m]
        head = keys[:m]
        ok = (head == hint_keys[:m]) & self.hashed[blocks] & (self.hash_of[blocks] == head)
        bad = np.flatnonzero(~ok)
        return blocks[:int(bad[0])] if len(bad) else blocks

    def acquire(self, blocks: Sequence[int] | np.ndarray) -> None:
        """Take a reference on cached blocks (from :meth:`lookup`)."""
        if not len(blocks):
            return
        arr = np.asarray(blocks, np.int64)
        ref = self.ref
        self.n_evictable -= int(np.count_nonzero(ref[arr] == 0))
        ref[arr] += 1

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

    def _evict(self, k: int) -> np.ndarray:
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
        # a block is `hashed` exactly while the cache maps its key to it (first writer wins, see register_many)
        self.table.remove(out)
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
        added = self.table.add(keys, blk)
        if len(added):
            fresh = blk[added]
            self.hash_of[fresh] = keys[added]
            self.hashed[fresh] = True
        if self.host_blocks:
            host = self.host
            for h in keys.tolist():
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
