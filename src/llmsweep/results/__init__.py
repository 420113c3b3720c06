"""Results: the store, Pareto frontiers, and comparison with noise bands.

Public entry points the `run` pipeline and the CLI use:
- :class:`Store` (`Store(path).ingest_run(run_dir)`), :func:`default_store_path`;
- :func:`load_run`, :func:`points_from_run` (run directory → :class:`ResultPoint`);
- :func:`compute_frontiers` (AgentX north-star rule), :func:`pareto_front`;
- :func:`compare_points` (noise-banded deltas).
"""

from __future__ import annotations

from llmsweep.results.compare import Comparison, compare_points
from llmsweep.results.extract import HOT_METRICS, extract_hot
from llmsweep.results.frontier import X_AXES, compute_frontiers
from llmsweep.results.pareto import XY, agentx_frontier, pareto_front
from llmsweep.results.point import ResultPoint, points_from_run
from llmsweep.results.rundir import RunDir, load_run
from llmsweep.results.store import Store, default_store_path

__all__ = [
    "HOT_METRICS",
    "XY",
    "X_AXES",
    "Comparison",
    "ResultPoint",
    "RunDir",
    "Store",
    "agentx_frontier",
    "compare_points",
    "compute_frontiers",
    "default_store_path",
    "extract_hot",
    "load_run",
    "pareto_front",
    "points_from_run",
]
