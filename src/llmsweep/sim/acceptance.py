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

import numpy as np


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
    """Tokens per verify step such that the engine's own acceptance formula reads back the configured AL.

    The uniforms come from one seeded stream that :meth:`step` reads one at a time and :meth:`plan` reads as an array,
    so a block of steps planned at once (the core's coalesced path) draws exactly what the same steps taken one by
    one would.
    """

    __slots__ = ("_buf", "_gen", "_list", "_lo", "_pos", "_ramp", "acceptance_length", "bound", "counts_first_token",
                 "debt", "k")

    CHUNK = 1 << 16
    WINDOW = 64
    """Uniforms :meth:`step` and :meth:`verify` read as Python floats at a time (`_list`, from `_lo`): most of the
    stream is read by :meth:`plan` as an array, so converting a refill whole would be mostly wasted."""

    def __init__(self, k: int, acceptance_length: float, seed: int, *, counts_first_token: bool) -> None:
        self.k = k
        self.acceptance_length = acceptance_length
        self.counts_first_token = counts_first_token
        self.debt = 0.0
        self.bound = float(DEBT_STEPS * (k + 1))
        self._gen = np.random.default_rng(seed)
        self._buf: np.ndarray = np.empty(0)
        self._list: list[float] = []
        """`_buf[_lo:_lo + len(_list)]` as Python floats (`_lo` <= `_pos` while it is read; see :meth:`_window`)."""
        self._lo = 0
        self._pos = 0
        self._ramp: tuple[np.ndarray, np.ndarray] = (np.empty(0), np.empty(0))

    def _ensure(self, n: int) -> None:
        """At least `n` unread uniforms in the buffer."""
        rest = self._buf[self._pos:]
        if len(rest) >= n:
            return
        self._buf = np.concatenate((rest, self._gen.random(max(self.CHUNK, n - len(rest)))))
        self._pos = self._lo = 0
        self._list = []

    def _window(self) -> list[float]:
        """The uniforms from `_pos` on as Python floats (at least one; the buffer refilled first where it ends)."""
        self._ensure(1)
        pos = self._lo = self._pos
        lst: list[float] = self._buf[pos:pos + self.WINDOW].tolist()
        self._list = lst
        return lst

    def step(self) -> int:
        """Tokens the next verify step emits (accepted drafts + 1) before any max_tokens cut; in [1, K+1]."""
        i = self._pos - self._lo
        lst = self._list
        if i >= len(lst):
            lst = self._window()
            i = 0
        self._pos += 1
        n = int(self.acceptance_length + self.debt + lst[i])
        return 1 if n < 1 else self.k + 1 if n > self.k + 1 else n

    def settle(self, drawn: int, emitted: int) -> None:
        """Book one verify step: `drawn` from :meth:`step`, `emitted` after the max_tokens cut."""
        counted = emitted if self.counts_first_token else drawn
        self._carry(self.acceptance_length - counted)

    def verify(self, left: int) -> tuple[int, int]:
        """:meth:`step` then :meth:`settle` in one call (the step path's hot loop): (tokens drawn, tokens emitted after
        the cut to `left`), booked. The same float operations in the same order."""
        i = self._pos - self._lo
        lst = self._list
        if i >= len(lst):
            lst = self._window()
            i = 0
        self._pos += 1
        al = self.acceptance_length
        n = int(al + self.debt + lst[i])
        k1 = self.k + 1
        drawn = 1 if n < 1 else k1 if n > k1 else n
        emitted = drawn if drawn <= left else left
        debt, bound = self.debt + (al - (emitted if self.counts_first_token else drawn)), self.bound
        self.debt = bound if debt > bound else -bound if debt < -bound else debt
        return drawn, emitted

    def first_token(self) -> None:
        """Book a token emitted by prefill (no verify call), which SGLang's formula counts."""
        if self.counts_first_token:
            self._carry(-1.0)

    def _carry(self, delta: float) -> None:
        debt, bound = self.debt + delta, self.bound
        self.debt = bound if debt > bound else -bound if debt < -bound else debt

    # -- a block of verify steps at once ----------------------------------------------------------------------------
    def plan(self, rows: int, cols: int) -> np.ndarray:
        """Tokens of up to `rows` verify steps of `cols` sequences each (draws in row-major order), as :meth:`step` and
        :meth:`settle` one by one would give them when no max_tokens cut occurs; consumes nothing (see :meth:`commit`).

        Fewer rows come back when a draw would meet the lower clamp or push the debt past its bound (after a burst of
        first tokens): the caller then takes that step one by one. Without clamps the recurrence has a closed form —
        after j draws the tokens emitted are N(j) = floor(d0 + j AL + u_(j-1)) — and the upper clamp (at most K + 1
        per draw) makes it N(j+1) = min(T(j), N(j) + K + 1), a running minimum.
        """
        total = rows * cols
        if total <= 0:
            return np.empty((0, cols), np.int64)
        self._ensure(total)
        u = self._buf[self._pos:self._pos + total]
        if len(self._ramp[0]) < total:
            j = np.arange(1, max(total, self.CHUNK) + 1, dtype=np.float64)
            self._ramp = (j * self.acceptance_length, j * (self.k + 1))
        j_al, j_k1 = self._ramp[0][:total], self._ramp[1][:total]
        base = j_al + self.debt  # d0 + j AL
        slack = np.floor(base + u)
        slack -= j_k1
        np.minimum.accumulate(slack, out=slack)
        np.minimum(slack, 0.0, out=slack)
        n_cum = slack
        n_cum += j_k1  # N(j) = j (K + 1) + min(0, min_(i <= j) (T(i) - i (K + 1)))
        tokens = np.empty(total, np.int64)
        tokens[0] = n_cum[0]
        np.subtract(n_cum[1:], n_cum[:-1], out=tokens[1:], casting="unsafe")
        debt = base - n_cum
        if tokens.min() < 1 or debt.max() > self.bound or debt.min() < -self.bound:
            bad = (tokens < 1) | (debt > self.bound) | (debt < -self.bound)
            total = int(np.argmax(bad)) // cols * cols
            tokens = tokens[:total]
        return tokens.reshape(-1, cols)

    def commit(self, draws: int, emitted: int) -> None:
        """Book `draws` verify steps planned by :meth:`plan` that emitted `emitted` tokens in all."""
        self._pos += draws
        self.debt = self.debt + draws * self.acceptance_length - emitted
