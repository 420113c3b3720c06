"""The fixed-length workload's lengths drawn many prompts at once are the values a generator per prompt draws.

A prompt's lengths are defined by `np.random.default_rng([seed, index, 1])` and two `integers` draws;
`workload.seeded` replicates numpy's seeding and first draws for a range of indices without building a generator each.
"""

from __future__ import annotations

import numpy as np
import pytest

from llmsweep.workload import seeded
from llmsweep.workload.fixed import LENGTHS_CHUNK, FixedLengthConfig, FixedLengthWorkload


def _per_prompt(config: FixedLengthConfig, index: int) -> tuple[int, int]:
    """The lengths as drawn before: a generator per prompt."""
    low = config.isl if config.range_ratio >= 1.0 else max(1, int(config.isl * config.range_ratio))
    if config.range_ratio >= 1.0:
        return config.isl, config.osl
    rng = np.random.default_rng([config.seed & 0xFFFFFFFF, index, 1])
    return (int(rng.integers(low, config.isl + 1)),
            int(rng.integers(max(1, int(config.osl * config.range_ratio)), config.osl + 1)))


@pytest.mark.parametrize(("seed", "isl", "osl", "ratio", "prompts"), [
    (0, 8192, 1024, 0.8, 2 * LENGTHS_CHUNK + 7),  # InferenceX's 8k/1k rows, past two chunks
    (0, 1024, 1024, 0.8, 300),
    (12345, 2000, 200, 0.5, 900),
    (-3, 100, 2, 0.5, 400),  # a negative seed (masked to 32 bits), an output range of two values
    ((1 << 40) + 5, 300, 1, 0.5, 50),  # an output range of one value: numpy draws nothing for it (per prompt here)
    (7, 8192, 1024, 1.0, 20),  # no range: the lengths themselves
    (3, 8192, 1024, 0.8, None),  # open-ended: chunks of LENGTHS_CHUNK
])
def test_lengths_are_the_per_prompt_generators_draws(seed: int, isl: int, osl: int, ratio: float,
                                                     prompts: int | None) -> None:
    config = FixedLengthConfig(isl=isl, osl=osl, seed=seed, range_ratio=ratio, num_prompts=prompts, num_warmups=2)
    workload = FixedLengthWorkload(config)
    n = (prompts or LENGTHS_CHUNK) + 2
    order = list(range(n))[::-1] if seed % 2 else list(range(n))  # any order of reads
    assert {i: workload.lengths(i) for i in order} == {i: _per_prompt(config, i) for i in order}
    assert workload._bulk


def test_pairs_equal_numpy_generators_and_leave_possible_redraws_to_them() -> None:
    """A range near 2**31 rejects often enough to see: those indices are marked, every other pair is numpy's."""
    for a, b in (((6553, 8193), (819, 1025)), ((1, 2**31 + 12345), (5, 7))):
        pairs = seeded.bounded_pairs(99, 500, 3000, 1, a, b)
        assert pairs is not None
        xs, ys, known = pairs
        for k, ok in enumerate(known):
            rng = np.random.default_rng([99, 500 + k, 1])
            want = (int(rng.integers(*a)), int(rng.integers(*b)))
            if ok:
                assert (xs[k], ys[k]) == want
        if a[1] > 2**31:
            assert 0 < known.count(False) < len(known)
        else:
            assert all(known)
    raw = seeded.first_outputs(5, 0, 50, 2)
    assert raw == [int(np.random.PCG64(np.random.SeedSequence([5, i, 2])).random_raw()) for i in range(50)]


def test_a_numpy_that_draws_otherwise_costs_speed_not_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chunk's first prompt is checked against its generator: a replica that disagrees is dropped."""
    def wrong(*args: object, **kwargs: object) -> tuple[list[int], list[int], list[bool]] | None:
        pairs = seeded.bounded_pairs(*args, **kwargs)  # type: ignore[arg-type]
        assert pairs is not None
        return [x + 1 for x in pairs[0]], pairs[1], pairs[2]

    import llmsweep.workload.fixed as fixed

    monkeypatch.setattr(fixed, "bounded_pairs", wrong)
    config = FixedLengthConfig(isl=8192, osl=1024, range_ratio=0.8, num_prompts=50)
    workload = FixedLengthWorkload(config)
    assert [workload.lengths(i) for i in range(50)] == [_per_prompt(config, i) for i in range(50)]
    assert not workload._bulk
