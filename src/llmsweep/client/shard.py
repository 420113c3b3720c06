"""Splitting a shared prompt sequence across client worker processes.

`FixedLengthWorkload` hands out prompt indices from one in-process counter, so with several worker processes each
would replay the whole sequence. The interpreter calls an optional `bind_worker(worker, workers)` hook on every
workload; until the fixed-length workload implements it, this subclass strides its counter by worker.
"""

from __future__ import annotations

from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload


class ShardedFixedLengthWorkload(FixedLengthWorkload):
    """Worker w of n takes prompt indices w, w+n, w+2n, … (warmups included, in order)."""

    _stride = 1

    def bind_worker(self, worker: int, workers: int) -> None:
        self._next, self._stride = worker, workers

    def _take(self) -> int | None:
        with self._lock:
            total = self.config.total_requests
            if total is not None and self._next >= total:
                return None
            index = self._next
            self._next += self._stride
            return index


def sharded_fixed(config: FixedLengthConfig) -> FixedLengthWorkload:
    if hasattr(FixedLengthWorkload, "bind_worker"):
        return FixedLengthWorkload(config)
    return ShardedFixedLengthWorkload(config)
