"""Open-loop arrival processes: seeded session start times for a target rate."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import numpy as np


def arrival_times(rate: float, process: Literal["poisson", "constant"], seed: int) -> Iterator[float]:
    """Start offsets (seconds from run start) of successive sessions; the first session starts at 0.

    Poisson draws exponential gaps in blocks from a seeded generator, so the schedule depends only on the seed.
    """
    if process == "constant":
        i = 0
        while True:
            yield i / rate
            i += 1
    rng = np.random.default_rng(seed)
    t = 0.0
    yield t
    while True:
        for gap in rng.exponential(1.0 / rate, size=1024).tolist():
            t += gap
            yield t
