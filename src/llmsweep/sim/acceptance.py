"""Seeded draws of the tokens one speculative verify step emits, with a mean equal to the configured AL.

Model: each of the K draft tokens is accepted with probability p, independently, until the first rejection; the
verify step always adds one bonus (or correction) token. Emitted tokens per step then lie in [1, K+1] with mean
(1 - p^(K+1)) / (1 - p); p is solved so that mean equals the target acceptance length. This is the i.i.d. acceptance
model the speculative-decoding papers use, and it meets SGLang's `match-expected` contract (right mean, right range).
"""

from __future__ import annotations

import bisect
import random
from itertools import accumulate


def expected_length(p: float, k: int) -> float:
    """Mean tokens per verify step when each draft is accepted with probability `p`."""
    if p >= 1.0:
        return float(k + 1)
    return (1.0 - p ** (k + 1)) / (1.0 - p)


def solve_acceptance_rate(acceptance_length: float, k: int) -> float:
    """Per-draft acceptance probability whose expected step length equals `acceptance_length` (bisection)."""
    if acceptance_length <= 1.0:
        return 0.0
    if acceptance_length >= k + 1:
        return 1.0
    lo, hi = 0.0, 1.0
    for _ in range(80):
        mid = (lo + hi) / 2
        if expected_length(mid, k) < acceptance_length:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


class AcceptanceSampler:
    """Draws emitted tokens per verify step in [1, K+1] from a seeded RNG; one uniform draw per step (fast)."""

    __slots__ = ("k", "p", "cdf", "rng")

    def __init__(self, k: int, acceptance_length: float, seed: int) -> None:
        self.k = k
        self.p = solve_acceptance_rate(acceptance_length, k)
        # P(emit = j) for j = 1..K+1: accept j-1 drafts then reject (or accept all K).
        probs = [(self.p ** (j - 1)) * (1 - self.p) for j in range(1, k + 1)] + [self.p**k]
        self.cdf = list(accumulate(probs))
        self.cdf[-1] = 1.0
        self.rng = random.Random(seed)

    def draw(self) -> int:
        """Tokens emitted by one verify step (accepted drafts + 1)."""
        return bisect.bisect_right(self.cdf, self.rng.random()) + 1

    @property
    def mean(self) -> float:
        return expected_length(self.p, self.k)
