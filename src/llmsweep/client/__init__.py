"""The load generator: interprets workload lane programs in wall-clock time over streaming HTTP.

Public API: `run_benchmark(workload, endpoint, options, out_dir) -> BenchResult` (and `run_benchmark_async`),
`Endpoint`, `RunOptions`, `RequestRecord`. The client knows nothing of recipes: it takes a workload and an endpoint.
"""

from __future__ import annotations

from llmsweep.client.config import Endpoint, RunOptions
from llmsweep.client.records import RequestRecord
from llmsweep.client.runner import BenchResult, Progress, run_benchmark, run_benchmark_async, summarise_dir

__all__ = [
    "BenchResult",
    "Endpoint",
    "Progress",
    "RequestRecord",
    "RunOptions",
    "run_benchmark",
    "run_benchmark_async",
    "summarise_dir",
]
