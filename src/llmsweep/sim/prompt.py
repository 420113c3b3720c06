"""From what a request carries (chat messages, prompt text or token ids) to a token count and prompt-block hashes.

Tokens follow the workload's built-in rule (`llmsweep.workload.tokenizer`): every whitespace-separated word is one
token, and the ChatML template adds 3 tokens per message plus 2 for the generation prompt — so the count here equals
the client's `count_chat_tokens` / `count_tokens`. Token ids given on `/v1/completions` are used as they are.

Block hashes are chained (each block's hash covers its tokens and the previous block's hash), computed only from the
received content, so two requests share cached blocks exactly as far as their prompts share a prefix. Python's
`hash` is salted per process, but nothing observable depends on hash values, only on their equality.

Speed: an agentic prompt repeats the previous turn's messages and appends a few. A memo keyed by (parent state,
message) remembers each message's tokens-so-far state, so a request costs the work of its *new* messages only.

Without text: a workload that knows its prompt's structure hands over :class:`~llmsweep.workload.base.MessageShape`s
(token runs of deterministic sources) and :meth:`PromptEncoder.shaped` gives each token a 64-bit code from its
(source, position) and each block the rolling hash of the prompt through it, in closed form per source and block
(never per token) — no text is built or split. Token counts equal the text path's, and two blocks hash alike exactly
when their prefixes are equal, so the engine sees the same prefix reuse (hash values differ between the paths; nothing
depends on them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from llmsweep.workload.base import MessageShape, TokenRun

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
_ROOT_HASH = 0x5F3759DF
_IDS_ROOT = _ROOT_HASH ^ 1
"""The root of a prompt given as tokens (ids, or a completions shape): its blocks never equal a chat prompt's."""
_IM_START_CODE = hash(IM_START)
_IM_END_CODE = hash(IM_END)
_PROMPT_CODES = (_IM_START_CODE, hash("assistant"))
"""The sources of the generation prompt (`<|im_start|>assistant`), codes before `_mix` (as `_add_runs` gives)."""


def content_text(message: dict[str, Any]) -> str:
    """A message's text: a string, or the text parts of an OpenAI content list joined by spaces."""
    content = message.get("content", "")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def words(text: str) -> list[str]:
    """The built-in tokenizer's tokens of `text` (non-empty whitespace-only text is one token)."""
    pieces = text.split()
    if not pieces and text:
        return ["<unk>"]
    return pieces


class _State:
    """Tokens-so-far of a message prefix: the blocks it completed (their chain hashes as a uint64 array), the partial
    tail, the running chain hash. `through`: the chain hashes of the whole prefix, kept only on the last message a
    shaped prompt encoded until a later prompt extends it (the next turn of its conversation then copies it instead of
    walking the parents; one array per conversation, not one per message)."""

    __slots__ = ("hashes", "last_hash", "parent", "sid", "tail", "through", "tokens")

    def __init__(self, parent: _State | None, hashes: np.ndarray, tail: tuple[Any, ...], last_hash: int,
                 tokens: int, sid: int) -> None:
        self.parent = parent
        self.hashes = hashes
        self.tail = tail
        self.last_hash = last_hash
        self.tokens = tokens
        self.sid = sid
        self.through: np.ndarray | None = None


def _extend(block_size: int, last_hash: int, tail: tuple[Any, ...], pieces: Sequence[Any]
            ) -> tuple[np.ndarray, tuple[Any, ...], int]:
    """Append tokens to a partial block; returns (hashes of newly completed blocks as uint64, new tail, last chain
    hash)."""
    tokens = tail + tuple(pieces) if tail else tuple(pieces)
    full = len(tokens) // block_size
    out = []
    h = last_hash
    for j in range(full):
        h = hash((h, tokens[j * block_size:(j + 1) * block_size]))
        out.append(h)
    return np.array(out, np.int64).view(_U), tokens[full * block_size:], h


_NO_HASHES = np.empty(0, np.uint64)
_P = 0x100000001B3  # odd: invertible modulo 2^64
_P_INV = pow(_P, -1, 1 << 64)
_U = np.uint64


_ONE = np.array(1, np.int64)
_S30, _S27, _S31 = (np.array(k, _U) for k in (30, 27, 31))
_M1, _M2 = np.array(0xBF58476D1CE4E5B9, _U), np.array(0x94D049BB133111EB, _U)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser, elementwise on uint64 (wrapping)."""
    x = x ^ (x >> _S30)
    x *= _M1
    x ^= x >> _S27
    x *= _M2
    x ^= x >> _S31
    return x


def _geometric(ratio: int, n: int) -> np.ndarray:
    """ratio^j modulo 2^64 for j < n (n >= 1), as uint64 (array arithmetic wraps silently; only numpy scalars warn)."""
    out = np.full(n, ratio, _U)
    out[0] = 1
    return np.multiply.accumulate(out)


def _power_table(base: int, n: int) -> np.ndarray:
    """base^j modulo 2^64 for j < n: base^(ik + j) = (base^k)^i · base^j, a column of k-th powers times a row of the
    first k, in one vectorised product (a cumulative product over all n, sequential, is ~6x slower: the one-hour
    AgentX point grows these tables to ~600k entries)."""
    k = 1024
    table: np.ndarray = (_geometric(pow(base, k, 1 << 64), -(-n // k))[:, None] * _geometric(base, k)).ravel()
    return table[:n]


class _Powers:
    """P^j and P^-j modulo 2^64 for j < n, grown on demand (shared by every encoder of the process)."""

    pw: np.ndarray = np.ones(1, _U)
    inv: np.ndarray = np.ones(1, _U)

    @classmethod
    def upto(cls, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(cls.pw) < n:
            size = max(n, 2 * len(cls.pw), 4096)
            cls.pw = _power_table(_P, size)
            cls.inv = _power_table(_P_INV, size)
        return cls.pw, cls.inv


class _Sums:
    """For a source's first k + 1 tokens (positions x <= k): R[k] = sum of P^-(x+1) and W[k] = sum of Q(x)·P^-(x+1),
    Q(x) = mix(x + 1) the position's code; grown on demand (shared by every encoder of the process)."""

    r: np.ndarray = np.empty(0, _U)
    w: np.ndarray = np.empty(0, _U)

    @classmethod
    def upto(cls, n: int) -> tuple[np.ndarray, np.ndarray]:
        if len(cls.r) < n:
            size = max(n, 2 * len(cls.r), 1024)
            inv = _Powers.upto(size + 1)[1][1:size + 1]
            cls.r = np.cumsum(inv, dtype=_U)
            cls.w = np.cumsum(_mix(np.arange(1, size + 1, dtype=_U)) * inv, dtype=_U)
        return cls.r, cls.w


def _add_runs(runs: Sequence[TokenRun], raw: list[int], lens: list[int], xors: list[tuple[int, int, int]], t: int
              ) -> tuple[int, int]:
    """Append `runs` as sources that start at token offset `t`: each source's code before `_mix` to `raw`, as a signed
    64-bit word (a block run's ids as they are, with the slice of `raw` they fill and the code of their namespace, to
    be xor-ed in, in `xors`), its length to `lens`. A word is a source of one token (its code from the word); a block
    run's block `ids[i]` is one of `size` tokens (the last `last`), its code from (namespace, id). The token at
    position x of a source has the code mix(code) + Q(x) (see `_Sums`): a function of (source, position) only, so
    equal runs give equal codes. Returns (the offset after them, a bound on their sources' lengths: at least 1)."""
    longest = 1
    for run in runs:
        if isinstance(run, str):
            raw.append(hash(run))
            lens.append(1)
            t += 1
            continue
        ids = run.ids
        n = len(ids)
        size, last = run.size, run.last
        a = len(raw)
        raw += ids
        xors.append((a, a + n, hash(run.namespace)))
        if n > 1:
            lens += [size] * (n - 1)
        lens.append(last)
        t += (n - 1) * size + last
        longest = max(longest, size, last)
    return t, longest


def _extend_sources(block_size: int, acc: int, done: int, raw: list[int], lens: list[int],
                    xors: list[tuple[int, int, int]], longest: int, cuts: Sequence[int]
                    ) -> tuple[np.ndarray, list[int], list[int]]:
    """Append sources (`_add_runs`) to a prefix of `done` tokens whose rolling hash is `acc`, in pieces that end at the
    token offsets `cuts` (the last is their total length): the prefix hash at every block boundary they complete (the
    chain hashes of their blocks), the prefix hash at each cut, and how many of those boundaries lie at or before
    each cut.

    The prefix hash is H(t+1) = H(t)·P + c(t) modulo 2^64, so H(t0+j) = P^j · (H(t0) + Σ_{i<j} c_i·P^-(i+1)). A source
    of code S at offset o adds P^-o · (S·R[x] + W[x]) to that sum through its position x (`_Sums`), so a hash costs a
    few operations per block and source, not per token. (A turn's new sources and blocks number tens to hundreds, so
    numpy's cost is per operation, not per element: every pass counts, scalars are 0-d arrays, the cheapest operand,
    and the Python lists are read by `np.fromiter`, the cheapest reader.)"""
    n = len(raw)
    signed = np.fromiter(raw, np.int64, n)
    for a, b, code in xors:
        signed[a:b] ^= np.array(code, np.int64)
    codes = _mix(signed.view(_U))
    last = np.fromiter(lens, np.int64, n)
    offsets = np.add.accumulate(last)
    offsets -= last  # the offset of each source's first token
    last -= _ONE  # and its last token's position in the source
    m = cuts[-1]
    pw = _Powers.pw
    if len(pw) <= m:
        pw = _Powers.upto(m + 1)[0]
    inv = _Powers.inv
    r, w = _Sums.r, _Sums.w
    if len(r) < longest:
        r, w = _Sums.upto(longest)
    scale = inv[offsets]
    totals = codes * r[last]
    totals += w[last]
    totals *= scale
    base = np.add.accumulate(totals)
    base -= totals  # the sum through the sources before each
    base += np.array(acc, _U)
    first = block_size - done % block_size  # j of the first boundary (1..block_size)
    n_blocks = (m - first) // block_size + 1 if m >= first else 0
    # the last token of every block the sources complete, then of every cut
    at = np.arange(first - 1, first - 1 + (n_blocks + len(cuts)) * block_size, block_size)
    at[n_blocks:] = cuts
    at[n_blocks:] -= _ONE
    src = offsets.searchsorted(at, "right")  # the source that holds it: the last one that starts at or before it
    src -= _ONE
    x = at - offsets[src]  # its position in that source
    sums = codes[src] * r[x]
    sums += w[x]
    sums *= scale[src]
    sums += base[src]
    sums *= pw[1:][at]
    return sums[:n_blocks], sums[n_blocks:].tolist(), [(c - first) // block_size + 1 for c in cuts]


class PromptEncoder:
    """Counts tokens and hashes prompt blocks; memoises message prefixes (bounded LRU)."""

    def __init__(self, block_size: int, *, memo_size: int = 65536) -> None:
        self.block_size = block_size
        self.memo_size = memo_size
        self._memo: OrderedDict[tuple[int, str, str], _State] = OrderedDict()
        self._shaped: dict[Hashable, _State] = {}
        """State through each shaped message, by its key (insertion-ordered, oldest dropped first)."""
        self._root = _State(None, _NO_HASHES, (), _ROOT_HASH, 0, 0)
        self._next_sid = 1

    def chat(self, messages: Sequence[dict[str, Any]]) -> tuple[int, np.ndarray]:
        """(prompt tokens, block hashes) of `messages` rendered with ChatML and the generation prompt."""
        state = self._root
        memo = self._memo
        for m in messages:
            role = str(m.get("role", "user"))
            text = content_text(m)
            key = (state.sid, role, text)
            nxt = memo.get(key)
            if nxt is None:
                pieces = [IM_START, role, *words(text), IM_END]
                hashes, tail, h = _extend(self.block_size, state.last_hash, state.tail, pieces)
                nxt = _State(state, hashes, tail, h, state.tokens + len(pieces), self._next_sid)
                self._next_sid += 1
                memo[key] = nxt
                if len(memo) > self.memo_size:
                    memo.popitem(last=False)
            else:
                memo.move_to_end(key)
            state = nxt
        final, _, _ = _extend(self.block_size, state.last_hash, state.tail, (IM_START, "assistant"))
        return state.tokens + 2, self._chain(state, final)

    def shaped(self, messages: Sequence[MessageShape], *, template: bool = True) -> tuple[int, np.ndarray]:
        """:meth:`chat` from message shapes instead of text: the same token count, the same prefix equality. A block's
        hash is the rolling hash of the whole prefix through it (`_extend_sources`); a state's `last_hash` is the
        rolling hash of its whole prefix, partial block included. A shape's key names the conversation through it, so
        the memo is searched from the last message back and only the messages after the deepest known one are encoded.

        `template=False`: a completions prompt, the runs of `messages` as they are (:meth:`ids`: no chat template, its
        own root, nothing memoised)."""
        if not template:
            raw: list[int] = []
            lens: list[int] = []
            xors: list[tuple[int, int, int]] = []
            total, longest = 0, 1
            for m in messages:
                total, bound = _add_runs(m.runs(), raw, lens, xors, total)
                longest = max(longest, bound)
            hashes, _, _ = _extend_sources(self.block_size, _IDS_ROOT, 0, raw, lens, xors, longest, [total])
            return total, hashes
        memo = self._shaped
        start = len(messages)
        state = self._root
        while start:
            known = memo.get(messages[start - 1].key)
            if known is not None:
                state = known
                break
            start -= 1
        new = messages[start:]
        # the sources of the new messages, each in the template: <|im_start|> role content <|im_end|>
        raw, lens, xors = [], [], []
        cuts: list[int] = []
        t, longest = 0, 1
        for m in new:
            raw += (_IM_START_CODE, hash(m.role))
            lens += (1, 1)
            t, bound = _add_runs(m.runs(), raw, lens, xors, t + 2)
            longest = max(longest, bound)
            raw.append(_IM_END_CODE)
            lens.append(1)
            t += 1
            cuts.append(t)
        raw += _PROMPT_CODES  # the generation prompt: hashed, never memoised
        lens += (1, 1)
        cuts.append(t + 2)
        hashed, ends, counts = _extend_sources(self.block_size, state.last_hash, state.tokens, raw, lens, xors,
                                               longest, cuts)
        through = state.through
        if through is None:
            through = self._chain(state, _NO_HASHES) if state.parent is not None else _NO_HASHES
        state.through = None  # handed on to this prompt's last message
        out = np.concatenate((through, hashed)) if len(through) else hashed  # (a prompt from the root: no copy)
        done = state.tokens
        lo = 0
        sid = self._next_sid
        for m, acc, cut, hi in zip(new, ends, cuts, counts, strict=False):
            state = _State(state, hashed[lo:hi], (), acc, done + cut, sid)
            sid += 1
            lo = hi
            memo[m.key] = state
            if len(memo) > self.memo_size:
                del memo[next(iter(memo))]
        self._next_sid = sid
        state.through = out[:len(through) + lo]
        return state.tokens + 2, out

    def _chain(self, state: _State, final: np.ndarray) -> np.ndarray:
        """The chain hashes of the prompt through `state` and then `final` (uint64)."""
        parts: list[np.ndarray] = [final]
        s: _State | None = state
        while s is not None:
            if len(s.hashes):
                parts.append(s.hashes)
            s = s.parent
        parts.reverse()
        return np.concatenate(parts)

    def text(self, prompt: str) -> tuple[int, np.ndarray]:
        """(prompt tokens, block hashes) of a completions prompt string."""
        pieces = words(prompt)
        hashes, _, _ = _extend(self.block_size, _ROOT_HASH, (), pieces)
        return len(pieces), hashes

    def ids(self, token_ids: Sequence[int]) -> tuple[int, np.ndarray]:
        """(prompt tokens, block hashes) of a completions prompt given as token ids."""
        hashes, _, _ = _extend(self.block_size, _IDS_ROOT, (), list(token_ids))
        return len(token_ids), hashes

    def encode(self, *, messages: Sequence[dict[str, Any]] | None = None,
               prompt: str | Sequence[int] | None = None) -> tuple[int, np.ndarray]:
        """Dispatch on what the request carries (exactly one of `messages` / `prompt`)."""
        if messages is not None:
            return self.chat(messages)
        if isinstance(prompt, str):
            return self.text(prompt)
        if prompt is None:
            return 0, _NO_HASHES
        return self.ids(prompt)
