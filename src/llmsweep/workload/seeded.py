"""The first draws of many seeded numpy generators at once, equal to building each one.

A fixed-length prompt's lengths are two `Generator.integers` draws from `np.random.default_rng([seed, index, tag])`,
one generator per prompt (`FixedLengthWorkload.lengths`), and building a generator costs ~17 µs (the `SeedSequence`
hash and `PCG64`'s seeding): as much as encoding the prompt. :func:`bounded_pairs` gives the same two draws for a
whole range of indices: numpy's `SeedSequence` mixing in vectorised uint32 arithmetic, `PCG64`'s seeding and first
output in Python's 128-bit integers, and the 32-bit Lemire draw `integers` makes for a range below 2**32 (the first
draw reads the output's low half, the second its high half: `PCG64` hands out 32-bit words in halves). An index
whose draw could have been rejected and redrawn (Lemire's slow path) is left to the caller, who builds its generator.

`tests/unit/workload/test_seeded.py` compares it with numpy's generators; :func:`bounded_pairs`' callers check one
index against a real generator too, so a numpy that changed its streams costs speed, never a value.
"""

from __future__ import annotations

import numpy as np

_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1
_M128 = (1 << 128) - 1
# numpy.random.SeedSequence's constants (bit_generator.pyx)
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_POOL = 4
# PCG64's multiplier (pcg64.h: PCG_DEFAULT_MULTIPLIER_128)
_PCG_MULT = (2549297995355413924 << 64) + 4865540595714422341


def _states(seed: int, first: int, n: int, tag: int) -> np.ndarray:
    """`SeedSequence([seed, i, tag]).generate_state(4, np.uint64)` for i in [first, first + n), as (n, 4) uint64
    (every entropy word below 2**32: three words, no spawn key)."""
    u = np.uint32
    with np.errstate(over="ignore"):
        entropy = [np.full(n, seed, u), np.arange(first, first + n, dtype=np.int64).astype(u), np.full(n, tag, u),
                   np.zeros(n, u)]
        h = _INIT_A

        def hashmix(value: np.ndarray) -> np.ndarray:
            nonlocal h
            value = value ^ u(h)
            h = (h * _MULT_A) & _M32
            value = value * u(h)
            return value ^ (value >> u(16))

        pool = [hashmix(word) for word in entropy]
        for src in range(_POOL):
            for dst in range(_POOL):
                if src != dst:
                    mixed: np.ndarray = u(_MIX_L) * pool[dst] - u(_MIX_R) * hashmix(pool[src])
                    pool[dst] = mixed ^ (mixed >> u(16))
        out = np.empty((n, 2 * _POOL), u)
        h = _INIT_B
        for i in range(2 * _POOL):
            value = pool[i % _POOL] ^ u(h)
            h = (h * _MULT_B) & _M32
            value = value * u(h)
            out[:, i] = value ^ (value >> u(16))
    return out.astype("<u4").view("<u8").astype(np.uint64)


def first_outputs(seed: int, first: int, n: int, tag: int) -> list[int]:
    """The first 64-bit output (`random_raw`) of `PCG64(SeedSequence([seed, i, tag]))` for i in [first, first + n)."""
    out = []
    mult = _PCG_MULT
    for a, b, c, d in _states(seed, first, n, tag).tolist():
        inc = ((((c << 64) | d) << 1) | 1) & _M128  # pcg64_srandom_r: state 0, a step, + the seed, a step
        state = ((inc + ((a << 64) | b)) * mult + inc) & _M128
        state = (state * mult + inc) & _M128  # the first draw's step, then its XSL-RR output
        value = ((state >> 64) ^ state) & _M64
        rot = state >> 122
        out.append(((value >> rot) | (value << (-rot & 63))) & _M64)
    return out


def bounded_pairs(seed: int, first: int, n: int, tag: int, a: tuple[int, int], b: tuple[int, int]
                  ) -> tuple[list[int], list[int], list[bool]] | None:
    """For i in [first, first + n): what `g = np.random.default_rng([seed, i, tag])` then `g.integers(*a)` and
    `g.integers(*b)` give (ranges [low, high)), and whether each pair is known here (False: Lemire's draw may have
    been rejected and redrawn; build that index's generator). None when the ranges or the indices are outside what
    this replica covers (a range of one value draws nothing; one of 2**32 values or more takes other paths)."""
    spans = (a[1] - a[0], b[1] - b[0])
    if not 0 <= seed <= _M32 or first < 0 or first + n > _M32 or not all(2 <= s < _M32 for s in spans):
        return None
    xs, ys, known = [], [], []
    (low_a, _), (low_b, _) = a, b
    span_a, span_b = spans
    for raw in first_outputs(seed, first, n, tag):
        m_a = (raw & _M32) * span_a  # the first 32-bit word: the output's low half
        m_b = (raw >> 32) * span_b  # the second: its high half (PCG64 buffers it)
        known.append((m_a & _M32) >= span_a and (m_b & _M32) >= span_b)  # else Lemire may redraw
        xs.append(low_a + (m_a >> 32))
        ys.append(low_b + (m_b >> 32))
    return xs, ys, known
