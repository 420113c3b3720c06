"""The load generator: interprets workload lane programs in wall-clock time over streaming HTTP.

Public API: `run_benchmark(workload, endpoint, options, out_dir) -> BenchResult` (and `run_benchmark_async`),
`Endpoint`, `RunOptions`, `RequestRecord`. The client knows nothing of recipes: it takes a workload and an endpoint.

The names are loaded when first used (PEP 562): importing a light module of the package (`client.files`,
`client.records`) does not load the runner and its HTTP stack.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmsweep.client.config import Endpoint as Endpoint
    from llmsweep.client.config import RunOptions as RunOptions
    from llmsweep.client.folder import summarise_dir as summarise_dir
    from llmsweep.client.records import RequestRecord as RequestRecord
    from llmsweep.client.runner import BenchResult as BenchResult
    from llmsweep.client.runner import Progress as Progress
    from llmsweep.client.runner import run_benchmark as run_benchmark
    from llmsweep.client.runner import run_benchmark_async as run_benchmark_async

_HOME = {"Endpoint": "config", "RunOptions": "config", "RequestRecord": "records", "BenchResult": "runner",
         "Progress": "runner", "run_benchmark": "runner", "run_benchmark_async": "runner", "summarise_dir": "folder"}

__all__ = sorted(_HOME)


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
