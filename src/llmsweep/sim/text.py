"""Deterministic output text: one vocabulary word per generated token, chosen from (seed, request number, position).

Each piece is " word", so a client counting with the built-in tokenizer sees exactly `completion_tokens` tokens, and
the same seed and request order give byte-identical streams.
"""

from __future__ import annotations

import functools

_SYL = [c + v for c in "bcdfghjklmnprstvz" for v in "aeiou"]


@functools.cache
def _vocab() -> tuple[str, ...]:
    return tuple(" " + a + b for a in _SYL for b in _SYL)


def token_text(seed: int, request_no: int, start: int, n: int) -> str:
    """Text of tokens [start, start + n) of request `request_no` (a cheap multiplicative hash, no RNG state)."""
    vocab = _vocab()
    size = len(vocab)
    base = (seed * 1_000_003 + request_no * 7_919) & 0xFFFFFFFF
    return "".join(vocab[((base + (start + i) * 2_654_435_761) >> 7) % size] for i in range(n))
