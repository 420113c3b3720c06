"""How far below an --out `run` looks for another run (`results.rundir.out_within`): a folder of runs is shallow, and
an --out such as a home folder must not cost a walk of its whole tree."""

from __future__ import annotations

import json
from pathlib import Path

from llmsweep.results.rundir import OUT_WITHIN_DEPTH, out_within


def _a_run(folder: Path) -> Path:
    (folder / "jobs").mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"recipes": []}))
    return folder


def test_a_run_as_deep_as_a_folder_of_runs_goes_is_found(tmp_path: Path) -> None:
    run = _a_run(tmp_path.joinpath(*["level"] * OUT_WITHIN_DEPTH))
    assert out_within(tmp_path) == (run, "run")


def test_a_run_below_the_depth_is_not_looked_for(tmp_path: Path) -> None:
    """The walk stops at the depth: what lies below it (a home folder's whole tree) is never entered."""
    _a_run(tmp_path.joinpath(*["level"] * (OUT_WITHIN_DEPTH + 1)))
    assert out_within(tmp_path) is None
