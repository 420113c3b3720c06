"""How one replayed stream lays its hash-id blocks out as chat messages, turn after turn.

A turn's prompt is its full hash-id list. When turn k+1 extends turn k (the normal case), the new blocks become the
assistant's recorded answer (its first ⌈out_k/64⌉ new blocks) followed by a user message with the rest (the tool
result) — so the history is the *recorded* assistant output synthesised to the recorded block structure, and the
prompt is exactly the trace's `in` tokens of block text. In live-assistant mode the assistant message is the text the
server actually returned instead. A prefix cut (compaction) keeps the messages wholly inside the common prefix, up to
the last assistant message, and puts the rest in one user message. The play's cache-bust marker opens the first
user message.

Message texts are cached on their parts and shared by every later turn; a turn's message tuple is built only when
someone reads `RequestSpec.messages`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from llmsweep.workload.base import BlockRun, Deferred, MessageShape, TokenRun
from llmsweep.workload.blocks import BlockText, common_prefix, extend_shared_keys, prefix_keys

_PART_KEYS = itertools.count()


@dataclass(slots=True)
class _Part:
    role: str
    ids: list[int]
    start: int
    end: int
    """Block range [start, end) of `ids` this message holds (nominal for a live assistant message)."""
    last_size: int | None = None
    literal: str | None = None
    marker: str = ""
    cached: str | None = None
    namespace: str = ""
    block_size: int = 0
    key: int = field(default_factory=_PART_KEYS.__next__)
    """Unique per part: names the conversation through this part (`MessageShape.key`), as neither the part's content
    nor the parts before it ever change (a cut drops whole parts after the kept ones)."""

    def runs(self) -> list[TokenRun]:
        """The part's text as token runs: the marker's words, then its blocks (`BlockText.text`'s sources)."""
        out: list[TokenRun] = list(self.marker.split())
        if self.end > self.start:
            last = self.block_size if self.last_size is None else self.last_size
            out.append(BlockRun(self.namespace, self.ids[self.start : self.end], self.block_size, last))
        return out

    def text(self, conv: Conversation) -> str:
        if self.cached is None:
            if self.literal is not None:
                body = self.literal
            else:
                body = conv.blocks.join(conv.namespace, self.ids[self.start : self.end], conv.block_size,
                                        self.last_size)
            self.cached = self.marker + body
        return self.cached


@dataclass(frozen=True, slots=True)
class _Tailed:
    """A turn's last message with its unhashed tail (filler text of `tokens` tokens from `namespace`, block 0)."""

    part: _Part
    namespace: str
    tokens: int

    @property
    def key(self) -> tuple[int, str, int]:
        return (self.part.key, self.namespace, self.tokens)

    @property
    def role(self) -> str:
        return self.part.role

    def runs(self) -> list[TokenRun]:
        return [*self.part.runs(), BlockRun(self.namespace, (0,), self.tokens, self.tokens)]


class Conversation:
    """The message layout of one stream within one play."""

    def __init__(self, blocks: BlockText, *, namespace: str, marker: str, block_size: int) -> None:
        self.blocks = blocks
        self.namespace = namespace
        self.marker = marker
        self.block_size = block_size
        self._parts: list[_Part] = []
        self._prev_ids: list[int] | None = None
        self._prev_keys: np.ndarray | None = None
        self._prev_out = 0
        self._next: tuple[np.ndarray, int] | None = None
        """The keys `keys()` made last and how many leading ids they share with the previous turn's."""
        self._literals = False
        """A live answer was ever laid out (only then can a part be literal text: `_shape` looks only then)."""

    def keys(self, ids: list[int]) -> np.ndarray:
        """`prefix_keys(ids)` of the next turn, hashing only the ids past those it shares with the previous turn."""
        prev_ids, prev_keys = self._prev_ids, self._prev_keys
        if prev_ids is None or prev_keys is None:
            keys, p = prefix_keys(ids), 0
        else:
            p = common_prefix(prev_ids, ids)
            keys = extend_shared_keys(prev_keys, ids, p)
        self._next = (keys, p)
        return keys

    def shared(self, keys: np.ndarray) -> int:
        """How many leading keys the next turn's `keys` share with the previous turn's (`common_prefix`): from the ids
        `keys()` compared when it made them, checked past that by one key (only a hash collision would share more)."""
        prev = self._prev_keys
        if prev is None:
            return 0
        made = self._next
        if made is None or made[0] is not keys:
            return common_prefix(prev, keys)
        p = made[1]
        if p < len(prev) and p < len(keys) and prev[p] == keys[p]:
            return common_prefix(prev, keys)
        return p

    def advance(
        self, ids: list[int], in_tokens: int, out: int, keys: np.ndarray, *, live_answer: str | None = None,
        tail_key: str = "",
    ) -> tuple[Deferred, tuple[MessageShape, ...] | None]:
        """Lay out the next turn (hash ids `ids`, `in_tokens` long, `keys` = `prefix_keys(ids)`); return its messages,
        deferred, and their shape (None when a message is a live answer: its tokens are known only as text)."""
        n = len(ids)
        bs = self.block_size
        last_size = in_tokens - bs * (n - 1) if n and 0 < in_tokens - bs * (n - 1) < bs else None
        tail = max(0, in_tokens - bs * n)
        parts = self._parts
        prev = self._prev_keys
        if prev is None or not parts:
            parts[:] = [self._part("user", ids, 0, n, last_size, marker=self.marker)]
        else:
            p = self.shared(keys)
            if p == len(prev):
                self._extend(ids, p, n, last_size, live_answer)
            else:
                self._cut(ids, p, n, last_size)
        self._prev_ids = ids
        self._prev_keys = keys
        self._prev_out = out
        self._next = None
        snapshot = tuple(parts)
        messages = Deferred(lambda: self._render(snapshot, tail_key, tail))
        return messages, self._shape(snapshot, tail_key, tail)

    def _shape(self, parts: tuple[_Part, ...], tail_key: str, tail: int) -> tuple[MessageShape, ...] | None:
        """The messages of `_render` as token runs; the tail's source is the one `BlockText.filler` draws from."""
        if self._literals and any(part.literal is not None for part in parts):
            return None
        if not tail:
            return parts
        return (*parts[:-1], _Tailed(parts[-1], f"{self.namespace}|tail|{tail_key}", tail))

    def _part(self, role: str, ids: list[int], start: int, end: int, last_size: int | None = None, *,
              literal: str | None = None, marker: str = "") -> _Part:
        return _Part(role, ids, start, end, last_size, literal=literal, marker=marker, namespace=self.namespace,
                     block_size=self.block_size)

    def _extend(self, ids: list[int], p: int, n: int, last_size: int | None, live_answer: str | None) -> None:
        delta = n - p
        if delta == 0:  # same blocks again (a retry in the recording): resend them, their last cut to this `in`
            self._end_block(last_size)
            return
        self._end_block(None)  # the previous turn's last block, partial or not, is whole inside this prompt
        answer = min(math.ceil(self._prev_out / self.block_size), delta - 1) if delta >= 2 else 0
        if live_answer:
            self._literals = True
            self._parts.append(self._part("assistant", ids, p, p + answer, literal=live_answer))
        elif answer > 0:
            self._parts.append(self._part("assistant", ids, p, p + answer))
        self._parts.append(self._part("user", ids, p + answer, n, last_size))

    def _end_block(self, last_size: int | None) -> None:
        """Cut the last block the parts hold to `last_size` tokens (None: whole). A resized part is a new part: the
        old one is still in the previous turn's messages (its snapshot), and its key named other content. (A live
        answer's text is what the server said: left as it is.)"""
        parts = self._parts
        for i in range(len(parts) - 1, -1, -1):
            part = parts[i]
            if part.end > part.start:
                if part.literal is None and part.last_size != last_size:
                    parts[i] = replace(part, last_size=last_size, cached=None, key=next(_PART_KEYS))
                return

    def _cut(self, ids: list[int], p: int, n: int, last_size: int | None) -> None:
        keep = 0
        for i, part in enumerate(self._parts):
            if part.end > p:
                break
            if part.role == "assistant":
                keep = i + 1
        if keep == 0:
            self._parts[:] = [self._part("user", ids, 0, n, last_size, marker=self.marker)]
            return
        start = self._parts[keep - 1].end
        del self._parts[keep:]
        if start == n:  # the prompt ends with a kept message: its last block is the prompt's, cut to this `in`
            self._end_block(last_size)
            last_size = None
        self._parts.append(self._part("user", ids, start, n, last_size))

    def _render(self, parts: tuple[_Part, ...], tail_key: str, tail_tokens: int) -> tuple[dict[str, Any], ...]:
        messages = [{"role": part.role, "content": part.text(self)} for part in parts]
        tail = self.blocks.filler(self.namespace, tail_key, tail_tokens) if tail_tokens else ""
        if tail:
            messages[-1] = {"role": messages[-1]["role"], "content": messages[-1]["content"] + tail}
        return tuple(messages)
