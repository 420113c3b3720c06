"""Hash-id blocks → deterministic text, and the ideal prefix cache that says how much of a prompt is reusable.

Traces carry no text, only block ids (64 tokens each in Weka traces, 512 in Mooncake). Replay needs text such that
*identical ids give identical text* — so the server's prefix cache sees exactly the reuse the trace recorded — and
each block is exactly its token size. `BlockText` draws a block's words from the tokenizer's filler words (each one
token after a space, never merging with neighbours) with a hash of (seed, namespace, id), so a block of n words is n
tokens wherever it lands. Text is cached per block; nothing is built until a consumer reads a prompt.

`PrefixCache` is the "theoretical" cache of one play: prefixes of everything sent so far, keyed by a rolling 64-bit
hash of the id sequence computed with numpy, so the longest cached prefix of a request is a binary search.
"""

from __future__ import annotations

import hashlib
import struct
from collections import OrderedDict
from collections.abc import Sequence
from typing import Annotated, Any

import numpy as np
from pydantic import BeforeValidator, Field, Strict
from pydantic_core import PydanticCustomError

from llmsweep.workload.tokenizer import Tokenizer

_ONE = np.array(1, np.uint64)
_P = 0x100000001B3  # FNV prime: odd, so it has an inverse modulo 2^64
_P_INV = pow(_P, -1, 1 << 64)


CHUNK = 8
"""Words per pre-joined chunk: a block of 64 tokens is 8 chunks drawn by its hash (65,536^8 distinct blocks)."""
POOL = 1 << 16


_Pool = tuple[list[list[str]], list[str], list[list[int]]]
_POOLS: OrderedDict[tuple[int, int], tuple[Tokenizer, _Pool]] = OrderedDict()


def _chunk_pool(tokenizer: Tokenizer, seed: int) -> _Pool:
    """The seeded chunk pool of a (tokenizer, seed), built once per process: every point of a sweep shares it
    (read-only). Keyed by the tokenizer object itself (kept alive with its pool, so its id is never reused)."""
    key = (id(tokenizer), seed)
    hit = _POOLS.get(key)
    if hit is not None and hit[0] is tokenizer:
        return hit[1]
    fillers = tokenizer.filler_words()
    rng = np.random.default_rng([seed & 0xFFFFFFFF, 0xB10C])
    picks = rng.integers(0, len(fillers), size=(POOL, CHUNK)).tolist()
    words = [" " + w for w, _ in fillers]
    ids = [i for _, i in fillers]
    chunk_words = [[words[i] for i in row] for row in picks]
    pool = (chunk_words, ["".join(row) for row in chunk_words], [[ids[i] for i in row] for row in picks])
    _POOLS[key] = (tokenizer, pool)
    while len(_POOLS) > 8:
        _POOLS.popitem(last=False)
    return pool


class BlockText:
    """Deterministic text (and token ids) for blocks; same (namespace, id, size) → same text, always.

    Speed matters (a replayed hour touches hundreds of thousands of blocks), so a block is assembled from a seeded
    pool of 65,536 pre-joined chunks of `CHUNK` filler words, picked by a 16-bit slice of the block's hash each: one
    small hash, one `struct.unpack` and one `join` per block.
    """

    def __init__(self, tokenizer: Tokenizer, *, seed: int = 0, cache_blocks: int = 200_000) -> None:
        self.tokenizer = tokenizer
        self._seed = seed
        self._chunk_words, self._chunk_text, self._chunk_ids = _chunk_pool(tokenizer, seed)
        self._cache: OrderedDict[tuple[str, int, int], str] = OrderedDict()
        self._cache_blocks = cache_blocks

    def _chunks(self, namespace: str, block_id: int, tokens: int) -> tuple[int, ...]:
        """Pool indices of the ⌈tokens / CHUNK⌉ chunks of a block (a partial block uses a prefix of them)."""
        n = -(-tokens // CHUNK)
        digest = hashlib.blake2b(f"{self._seed}|{namespace}|{block_id}".encode(), digest_size=64).digest()
        while len(digest) < 2 * n:
            digest += hashlib.blake2b(digest, digest_size=64).digest()
        return struct.unpack_from(f"<{n}H", digest)

    def text(self, namespace: str, block_id: int, tokens: int) -> str:
        """`tokens` words (" w1 w2 …"); a partial block is a prefix of the full block's text."""
        key = (namespace, block_id, tokens)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        chunks = self._chunks(namespace, block_id, tokens)
        full, rest = divmod(tokens, CHUNK)
        pool = self._chunk_text
        text = "".join([pool[c] for c in chunks[:full]])
        if rest:
            text += "".join(self._chunk_words[chunks[full]][:rest])
        self._cache[key] = text
        if len(self._cache) > self._cache_blocks:
            self._cache.popitem(last=False)
        return text

    def token_ids(self, namespace: str, block_id: int, tokens: int) -> list[int]:
        """The block's token ids (for `/v1/completions` prompts sent as ids), matching `text` word for word."""
        out: list[int] = []
        for c in self._chunks(namespace, block_id, tokens):
            out.extend(self._chunk_ids[c])
        return out[:tokens]

    def join(self, namespace: str, block_ids: Sequence[int], block_size: int, last_size: int | None = None) -> str:
        """Text of consecutive blocks; the final block gets `last_size` tokens when given (a partial block)."""
        n = len(block_ids)
        text = self.text
        parts = [text(namespace, b, block_size) for b in block_ids[: n - 1]] if n else []
        if n:
            parts.append(text(namespace, block_ids[-1], block_size if last_size is None else last_size))
        return "".join(parts)

    def filler(self, namespace: str, key: str, tokens: int) -> str:
        """Deterministic text of `tokens` tokens that belongs to no block (a request's unhashed tail)."""
        if tokens <= 0:
            return ""
        return self.text(f"{namespace}|tail|{key}", 0, tokens)


def bust_marker(*parts: object) -> str:
    """`[rid:<12 hex>]` + blank line, derived from the play's identity (AgentX `first_turn_prefix`)."""
    digest = hashlib.sha256("|".join(str(p) for p in parts).encode()).hexdigest()[:12]
    return f"[rid:{digest}]\n\n"


# ---------------------------------------------------------------------------------------------------------------
# Ideal prefix cache

_POW: np.ndarray = np.ones(1, dtype=np.uint64)
_POW_INV: np.ndarray = np.ones(1, dtype=np.uint64)


def _powers(n: int) -> tuple[np.ndarray, np.ndarray]:
    global _POW, _POW_INV
    if len(_POW) < n:
        size = max(n, 2 * len(_POW), 1024)
        with np.errstate(over="ignore"):
            _POW = np.cumprod(np.full(size, _P, dtype=np.uint64), dtype=np.uint64)
            _POW_INV = np.cumprod(np.full(size, _P_INV, dtype=np.uint64), dtype=np.uint64)
    return _POW[:n], _POW_INV[:n]


def _json_number(value: Any) -> Any:
    """JSON's `true`/`false`, or a number written as a string, where a trace row holds a number: refused with its row,
    as a NaN or a decimal length is (pydantic's lax mode read `true` as 1, a one-token request, and `"5"` as 5)."""
    if isinstance(value, bool):
        raise PydanticCustomError("bool_not_number", "`{value}` is a boolean, not a number",
                                  {"value": str(value).lower()})
    if isinstance(value, str):
        raise PydanticCustomError("str_not_number", "`\"{value}\"` is a string, not a number: write it without quotes",
                                  {"value": value[:40]})
    return value


JsonNumber = BeforeValidator(_json_number)
"""A number of an external trace (Weka traces, Mooncake rows): a JSON number, never a boolean or a quoted figure."""

BlockId = Annotated[int, Field(ge=0, le=(1 << 63) - 1), Strict()]
"""A prefix-block id as a trace may give it (Weka `hash_ids`, Mooncake `hash_ids`): a non-negative 64-bit integer.
Ids are hashed as unsigned 64-bit words (`prefix_keys`) and digested as signed ones; a negative or larger id is a
damaged row, refused with its line when the trace loads (it used to stop a run with an OverflowError mid-replay)."""


def prefix_keys(block_ids: Sequence[int]) -> np.ndarray:
    """keys[k] = rolling hash of block_ids[: k + 1] (mod 2^64), vectorised: P^k · Σ (id_i + 1) · P^-i."""
    n = len(block_ids)
    if n == 0:
        return np.zeros(0, dtype=np.uint64)
    pw, pinv = _powers(n)
    with np.errstate(over="ignore"):
        ids = np.asarray(block_ids, dtype=np.uint64) + np.uint64(1)
        return pw * np.cumsum(ids * pinv, dtype=np.uint64)


def extend_keys(prev_ids: list[int], prev_keys: np.ndarray, block_ids: list[int]) -> np.ndarray:
    """`prefix_keys(block_ids)`, given `prev_keys` = `prefix_keys(prev_ids)`: the keys of the leading ids the two
    share are taken from `prev_keys` and only the rest are hashed (a turn's ids usually extend the turn before's)."""
    return extend_shared_keys(prev_keys, block_ids, common_prefix(prev_ids, block_ids))


def extend_shared_keys(prev_keys: np.ndarray, block_ids: list[int], p: int) -> np.ndarray:
    """`prefix_keys(block_ids)`, given `prev_keys` = `prefix_keys(prev_ids)` and `p` = `common_prefix(prev_ids,
    block_ids)`: the first `p` keys are `prev_keys`'s, only the rest are hashed. The same keys, bit for bit: the rolling
    sum through the shared ids is `prev_keys[p - 1]` times the inverse of the power of P it was scaled by (mod 2^64).
    (A turn adds tens of ids to thousands: numpy's cost is per pass here, so the passes are few, in place, and the
    ids are read by `np.fromiter` as signed words, which they are: `BlockId`.)"""
    n = len(block_ids)
    if p == 0:
        return prefix_keys(block_ids)
    if p == n:
        return prev_keys[:n]
    pw, pinv = _powers(n)
    keys = np.empty(n, dtype=np.uint64)
    keys[:p] = prev_keys[:p]
    terms = keys[p:]  # array arithmetic wraps modulo 2^64 without a warning
    terms[:] = np.fromiter(block_ids[p:], np.int64, n - p).view(np.uint64)
    terms += _ONE
    terms *= pinv[p:]
    terms[:1] += prev_keys[p - 1:p] * pinv[p - 1:p]
    np.add.accumulate(terms, out=terms)
    terms *= pw[p:]
    return keys


class PrefixCache:
    """Every prefix sent so far (one play): `observe` returns how many leading blocks were already cached."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: set[int] = set()

    def observe(self, keys: np.ndarray, known: int = 0) -> int:
        """Longest cached prefix of a request (in blocks), then remember all its prefixes. `known`: a prefix length
        the caller knows is cached (its keys are those of a request observed before), where the search starts."""
        seen = self._seen
        if known >= len(keys):
            return known
        rest = keys[known:].tolist()  # the keys past `known` as ints, read by the search and then remembered
        lo, hi = 0, len(rest)  # invariant: prefix of length known + lo is cached; prefixes are prefix-closed
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if rest[mid - 1] in seen:
                lo = mid
            else:
                hi = mid - 1
        if lo < len(rest):
            seen.update(rest[lo:] if lo else rest)
        return known + lo


def common_prefix(a: list[int] | np.ndarray, b: list[int] | np.ndarray) -> int:
    """Length of the common leading run of two key arrays or two id lists, never an element at a time in Python:
    arrays compared elementwise in numpy; lists a slice at a time (a request usually extends the one before it: one
    comparison; else a bisection over slices)."""
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        m = min(len(a), len(b))
        if m == 0:
            return 0
        eq = np.asarray(a[:m]) == np.asarray(b[:m])
        return m if bool(eq.all()) else int(eq.argmin())
    if len(a) > len(b):
        a, b = b, a
    n = len(a)
    if a == b[:n]:
        return n
    lo, hi = 0, n  # a[:lo] == b[:lo]; a[:hi] != b[:hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid
    return lo
