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
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np

from llmsweep.workload.base import Deferred, MessageShape, TokenRun
from llmsweep.workload.blocks import BlockText, common_prefix

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
    key: int = field(default_factory=_PART_KEYS.__next__)
    """Unique per part (its content never changes): the memo key of its shape."""
    _runs: list[TokenRun] | None = None

    def runs(self, conv: Conversation) -> list[TokenRun]:
        """The part's text as token runs (see `MessageShape`): the marker's words, then each block's tokens — the
        source of a block is (namespace, id), as `BlockText.text` draws it, so a partial block is a prefix run."""
        if self._runs is None:
            ns, bs = conv.namespace, conv.block_size
            out: list[TokenRun] = [(w, 1) for w in self.marker.split()]
            ids = self.ids[self.start : self.end]
            out += [((ns, b), bs) for b in ids]
            if ids and self.last_size is not None:
                out[-1] = ((ns, ids[-1]), self.last_size)
            self._runs = out
        return self._runs

    def text(self, conv: Conversation) -> str:
        if self.cached is None:
            if self.literal is not None:
                body = self.literal
            else:
                body = conv.blocks.join(conv.namespace, self.ids[self.start : self.end], conv.block_size,
                                        self.last_size)
            self.cached = self.marker + body
        return self.cached


class Conversation:
    """The message layout of one stream within one play."""

    def __init__(self, blocks: BlockText, *, namespace: str, marker: str, block_size: int) -> None:
        self.blocks = blocks
        self.namespace = namespace
        self.marker = marker
        self.block_size = block_size
        self._parts: list[_Part] = []
        self._prev_keys: np.ndarray | None = None
        self._prev_out = 0

    def advance(
        self, ids: list[int], in_tokens: int, out: int, keys: np.ndarray, *, live_answer: str | None = None,
        tail_key: str = "",
    ) -> tuple[Deferred, tuple[MessageShape, ...] | None]:
        """Lay out the next turn (hash ids `ids`, `in_tokens` long); return its messages, deferred, and their shape
        (None when a message is a live answer: its tokens are known only as text)."""
        n = len(ids)
        bs = self.block_size
        last_size = in_tokens - bs * (n - 1) if n and 0 < in_tokens - bs * (n - 1) < bs else None
        tail = max(0, in_tokens - bs * n)
        parts = self._parts
        prev = self._prev_keys
        if prev is None or not parts:
            parts[:] = [_Part("user", ids, 0, n, last_size, marker=self.marker)]
        else:
            p = common_prefix(prev, keys)
            if p == len(prev):
                self._extend(ids, p, n, last_size, live_answer)
            else:
                self._cut(ids, p, n, last_size)
        self._prev_keys = keys
        self._prev_out = out
        snapshot = tuple(parts)
        messages = Deferred(lambda: self._render(snapshot, tail_key, tail))
        return messages, self._shape(snapshot, tail_key, tail)

    def _shape(self, parts: tuple[_Part, ...], tail_key: str, tail: int) -> tuple[MessageShape, ...] | None:
        """The messages of `_render` as token runs; the tail's source is the one `BlockText.filler` draws from."""
        if any(part.literal is not None for part in parts):
            return None
        shapes = [MessageShape(part.key, part.role, partial(part.runs, self)) for part in parts]
        if tail:
            last = parts[-1]
            source = (f"{self.namespace}|tail|{tail_key}", 0)
            shapes[-1] = MessageShape((last.key, source, tail), last.role,
                                      lambda: [*last.runs(self), (source, tail)])
        return tuple(shapes)

    def _extend(self, ids: list[int], p: int, n: int, last_size: int | None, live_answer: str | None) -> None:
        delta = n - p
        if delta == 0:
            return  # same prompt again (a retry in the recording): resend it
        answer = min(math.ceil(self._prev_out / self.block_size), delta - 1) if delta >= 2 else 0
        if live_answer:
            self._parts.append(_Part("assistant", ids, p, p + answer, literal=live_answer))
        elif answer > 0:
            self._parts.append(_Part("assistant", ids, p, p + answer))
        self._parts.append(_Part("user", ids, p + answer, n, last_size))

    def _cut(self, ids: list[int], p: int, n: int, last_size: int | None) -> None:
        keep = 0
        for i, part in enumerate(self._parts):
            if part.end > p:
                break
            if part.role == "assistant":
                keep = i + 1
        if keep == 0:
            self._parts[:] = [_Part("user", ids, 0, n, last_size, marker=self.marker)]
            return
        start = self._parts[keep - 1].end
        del self._parts[keep:]
        self._parts.append(_Part("user", ids, start, n, last_size))

    def _render(self, parts: tuple[_Part, ...], tail_key: str, tail_tokens: int) -> tuple[dict[str, Any], ...]:
        messages = [{"role": part.role, "content": part.text(self)} for part in parts]
        tail = self.blocks.filler(self.namespace, tail_key, tail_tokens) if tail_tokens else ""
        if tail:
            messages[-1] = {"role": messages[-1]["role"], "content": messages[-1]["content"] + tail}
        return tuple(messages)
