"""Resolve what the user named (a run directory or a stored run id) into result points.

`compare`, `report` and the CLI accept either form; a run directory is read directly (nothing is written to the
store as a side effect), a run id is read from the store.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from llmsweep.errors import ResultInputError
from llmsweep.results.point import ResultPoint, points_from_run
from llmsweep.results.rundir import is_job_dir, is_run_dir, load_run
from llmsweep.results.store import Store


def resolve_points(ref: str, store: Store | None) -> tuple[str, list[ResultPoint]]:
    """(run id, points) of a run directory path or a stored run id."""
    path = Path(ref)
    if is_run_dir(path) or (path.is_dir() and is_job_dir(path)):  # a job folder: load_run says which run it is of
        run = load_run(path)
        return run.run_id, points_from_run(run)
    if store is not None and store.has_run(ref):
        return ref, store.results(ref)
    raise ResultInputError(f"{ref!r} is neither a run directory nor a run id in the store"
                           + (f" {store.path}" if store is not None else ""),
                           fix="pass the folder `llmsweep run` wrote, or a run id from `llmsweep results runs`")


def history_from_store(store: Store, exclude_runs: Iterable[str]) -> list[ResultPoint]:
    """Earlier valid llmsweep results in the store (never imported rows, never invalid or smoke ones): candidates for
    run-to-run variance. `compare` keeps only those of A's point *and* configuration
    (`results.compare.same_configuration`)."""
    skip = set(exclude_runs)
    return [p for p in store.results() if p.run_id not in skip and p.origin == "llmsweep" and p.verdict == "valid"]
