"""Review of the metrics merge: a record whose times no request can have is left out of every figure of the summary
(`requests.implausible`); compare's per-request samples (its noise bands and point estimates, "the metrics room's
definitions") kept it, so the same job's throughput and latency differed between `results show` and `compare`."""

from __future__ import annotations

from typing import Any

import pytest

from llmsweep.metrics import summarise
from llmsweep.results.samples import point_estimate, samples_from_records


def _record(i: int, sent: float, first: float, end: float, n: int = 10) -> dict[str, Any]:
    return {"id": str(i), "phase": "profiling", "sent_at": sent, "first_token_at": first, "end_at": end,
            "chunk_times": [first + k * (end - first) / (n - 1) for k in range(n)], "chunk_tokens": [1] * n,
            "completion_tokens": n, "prompt_tokens": 100, "worker": 0}


def test_compare_samples_leave_out_the_records_the_summary_calls_implausible() -> None:
    records = [_record(i, 1000.0 + i, 1000.1 + i, 1001.0 + i) for i in range(20)]
    records.append(_record(99, 1005.0, 1003.0, 1030.0))  # its first token 2 s before its send, its end far out
    summary = summarise(records, gpus=1)
    assert summary.requests.implausible == 1 and summary.requests.successful == 20
    samples = samples_from_records(records)
    assert (samples.n, samples.total) == (20, 20)
    assert point_estimate(samples, "output_tput_per_gpu", 1) == pytest.approx(summary.throughput.output_tps, rel=1e-9)
