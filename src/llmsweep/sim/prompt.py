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
(token runs of deterministic sources) and :meth:`PromptEncoder.shaped` hashes each block as the tuple of
(source, first, last) slices it covers — no text is built or split. Token counts equal the text path's, and two
blocks hash alike exactly when their tokens are equal, so the engine sees the same prefix reuse (hash values differ
between the paths; nothing depends on them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmsweep.workload.base import MessageShape, TokenRun

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
_ROOT_HASH = 0x5F3759DF


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
    """Tokens-so-far of a message prefix: the blocks it completed, the partial tail, the running chain hash."""

    __slots__ = ("hashes", "last_hash", "parent", "sid", "tail", "tokens")

    def __init__(self, parent: _State | None, hashes: tuple[int, ...], tail: tuple[Any, ...], last_hash: int,
                 tokens: int, sid: int) -> None:
        self.parent = parent
        self.hashes = hashes
        self.tail = tail
        self.last_hash = last_hash
        self.tokens = tokens
        self.sid = sid


def _extend(block_size: int, last_hash: int, tail: tuple[Any, ...], pieces: Sequence[Any]
            ) -> tuple[tuple[int, ...], tuple[Any, ...], int]:
    """Append tokens to a partial block; returns (hashes of newly completed blocks, new tail, last chain hash)."""
    tokens = tail + tuple(pieces) if tail else tuple(pieces)
    full = len(tokens) // block_size
    out = []
    h = last_hash
    for j in range(full):
        h = hash((h, tokens[j * block_size:(j + 1) * block_size]))
        out.append(h)
    return tuple(out), tokens[full * block_size:], h


def _extend_runs(block_size: int, last_hash: int, tail: tuple[Any, ...], runs: Sequence[TokenRun]
                 ) -> tuple[tuple[int, ...], tuple[Any, ...], int]:
    """`_extend` over token runs: a block is the tuple of (source, first, last) slices that fill it."""
    window = list(tail)
    fill = sum(hi - lo for _, lo, hi in window)
    out = []
    h = last_hash
    for source, n in runs:
        lo = 0
        while lo < n:
            take = min(n - lo, block_size - fill)
            window.append((source, lo, lo + take))
            lo += take
            fill += take
            if fill == block_size:
                h = hash((h, tuple(window)))
                out.append(h)
                window = []
                fill = 0
    return tuple(out), tuple(window), h


class PromptEncoder:
    """Counts tokens and hashes prompt blocks; memoises message prefixes (bounded LRU)."""

    def __init__(self, block_size: int, *, memo_size: int = 65536) -> None:
        self.block_size = block_size
        self.memo_size = memo_size
        self._memo: OrderedDict[tuple[int, str, str], _State] = OrderedDict()
        self._root = _State(None, (), (), _ROOT_HASH, 0, 0)
        self._next_sid = 1

    def chat(self, messages: Sequence[dict[str, Any]]) -> tuple[int, list[int]]:
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

    def shaped(self, messages: Sequence[MessageShape]) -> tuple[int, list[int]]:
        """:meth:`chat` from message shapes instead of text: the same token count, the same prefix equality."""
        state = self._root
        memo = self._memo
        bs = self.block_size
        for m in messages:
            key = (state.sid, "shape", m.key)
            nxt = memo.get(key)
            if nxt is None:
                role = m.role
                runs = m.runs()
                head = ((IM_START, 1), (role, 1))
                hashes, tail, h = _extend_runs(bs, state.last_hash, state.tail, (*head, *runs, (IM_END, 1)))
                tokens = state.tokens + 3 + sum(n for _, n in runs)
                nxt = _State(state, hashes, tail, h, tokens, self._next_sid)
                self._next_sid += 1
                memo[key] = nxt
                if len(memo) > self.memo_size:
                    memo.popitem(last=False)
            else:
                memo.move_to_end(key)
            state = nxt
        final, _, _ = _extend_runs(bs, state.last_hash, state.tail, ((IM_START, 1), ("assistant", 1)))
        return state.tokens + 2, self._chain(state, final)

    def _chain(self, state: _State, final: tuple[int, ...]) -> list[int]:
        parts: list[tuple[int, ...]] = [final]
        s: _State | None = state
        while s is not None:
            if s.hashes:
                parts.append(s.hashes)
            s = s.parent
        chain: list[int] = []
        for p in reversed(parts):
            chain.extend(p)
        return chain

    def text(self, prompt: str) -> tuple[int, list[int]]:
        """(prompt tokens, block hashes) of a completions prompt string."""
        pieces = words(prompt)
        hashes, _, _ = _extend(self.block_size, _ROOT_HASH, (), pieces)
        return len(pieces), list(hashes)

    def ids(self, token_ids: Sequence[int]) -> tuple[int, list[int]]:
        """(prompt tokens, block hashes) of a completions prompt given as token ids."""
        hashes, _, _ = _extend(self.block_size, _ROOT_HASH ^ 1, (), list(token_ids))
        return len(token_ids), list(hashes)

    def encode(self, *, messages: Sequence[dict[str, Any]] | None = None,
               prompt: str | Sequence[int] | None = None) -> tuple[int, list[int]]:
        """Dispatch on what the request carries (exactly one of `messages` / `prompt`)."""
        if messages is not None:
            return self.chat(messages)
        if isinstance(prompt, str):
            return self.text(prompt)
        if prompt is None:
            return 0, []
        return self.ids(prompt)
