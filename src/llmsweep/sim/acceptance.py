"""Seeded draws of the tokens one speculative verify step emits, with a mean equal to the configured AL.

Model: each of the K draft tokens is accepted with probability p, independently, until the first rejection; the
verify step always adds one bonus (or correction) token. Emitted tokens per step then lie in [1, K+1] with mean
(1 - p^(K+1)) / (1 - p); p is solved so that mean equals the target acceptance length. This is the i.i.d. acceptance
model the speculative-decoding papers use, and it meets SGLang's `match-expected` contract (right mean, right range).

A read-back gate compares the acceptance length a reader computes from `/metrics` over a short window with the pinned
one, so the engine core steps with :class:`AcceptanceController` instead of i.i.d. draws: a dithered error-diffusion
rule that emits floor or ceil of (AL + debt) per verify step and carries the difference. The engine's own counting
enters the debt — SGLang's formula (generation tokens / verify calls) also counts each request's first token, which
comes from prefill, and the tokens a max_tokens cut drops from a last step; vLLM's (1 + accepted / drafts) counts the
drafted step before the cut. With i.i.d. draws those made a 20-second run read ~+0.2 at conc 1 and ~−0.1 at conc 8–12;
the controller keeps the realised AL within a few tokens / verify-steps of the pinned value, at the cost of a
narrower per-step spread than the i.i.d. model (the mean and the range [1, K+1] are unchanged).
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

    __slots__ = ("cdf", "k", "p", "rng")

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


DEBT_STEPS = 2
"""Surplus or deficit carried between steps is bounded to this many full steps (2 (K+1) tokens): enough to pay back
the cut last steps of a batch of requests that finish together, small enough that a burst of 1-token warmup requests
(a first token, no verify step) moves a 100-step window's reading by well under the 0.10 read-back tolerance."""


class AcceptanceController:
    """Tokens per verify step such that the engine's own acceptance formula reads back the configured AL."""

    __slots__ = ("acceptance_length", "bound", "counts_first_token", "debt", "k", "rng")

    def __init__(self, k: int, acceptance_length: float, seed: int, *, counts_first_token: bool) -> None:
        self.k = k
        self.acceptance_length = acceptance_length
        self.counts_first_token = counts_first_token
        self.debt = 0.0
        self.bound = float(DEBT_STEPS * (k + 1))
        self.rng = random.Random(seed)

    def step(self) -> int:
        """Tokens the next verify step emits (accepted drafts + 1) before any max_tokens cut; in [1, K+1]."""
        n = int(self.acceptance_length + self.debt + self.rng.random())
        return 1 if n < 1 else self.k + 1 if n > self.k + 1 else n

    def settle(self, drawn: int, emitted: int) -> None:
        """Book one verify step: `drawn` from :meth:`step`, `emitted` after the max_tokens cut."""
        counted = emitted if self.counts_first_token else drawn
        self._carry(self.acceptance_length - counted)

    def first_token(self) -> None:
        """Book a token emitted by prefill (no verify call), which SGLang's formula counts."""
        if self.counts_first_token:
            self._carry(-1.0)

    def _carry(self, delta: float) -> None:
        debt, bound = self.debt + delta, self.bound
        self.debt = bound if debt > bound else -bound if debt < -bound else debt
