"""The client's clock: absolute unix seconds read off `time.perf_counter()` (monotonic, fine-grained), anchored once
per process. A light module: the scraper, the runner and the transport stamp with it, and a run in virtual time
imports it without the HTTP stack."""

from __future__ import annotations

import time

_ANCHOR_UNIX = time.time()
_ANCHOR_PERF = time.perf_counter()


def to_unix(perf: float) -> float:
    """Convert a `time.perf_counter()` stamp to absolute unix seconds."""
    return _ANCHOR_UNIX + (perf - _ANCHOR_PERF)


def now_unix() -> float:
    """Now, in absolute unix seconds on this clock."""
    return to_unix(time.perf_counter())
