"""`compare`'s history pools only measurements of the same thing: an earlier stored run of A's recipe and launch with
another profiling window is not a repeat of A's point (a 900 s window next to an 1,800 s one widened the band of the
quickstart's conc-8 point fourfold, labelled "between-run"); a run with A's window is.

Real runs of a small agentic recipe on the simulator in virtual time into one store.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_run_support import cli_exits

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "agentic-sim.yaml"


_cli = cli_exits


def _recipe(tmp_path: Path, duration: int, seed: int | None = None) -> Path:
    """agentic-sim.yaml, its first arm only at concurrency 1 (one point: a third of the simulation time at its 8, and
    which point it is does not matter here), with a `duration`-second window."""
    doc = yaml.safe_load(RECIPE.read_text())
    (recipe,) = doc.values()
    entry = recipe["scenarios"]["agentic-coding"][0]
    entry["search-space"] = [{**entry["search-space"][0], "conc-list": [1]}]
    recipe["workload"]["duration"] = duration
    if seed is not None:  # the client's seed: another sample of the same configuration
        recipe["workload"]["seed"] = seed
    path = tmp_path / f"agentic-{duration}s{'' if seed is None else f'-seed{seed}'}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _run(recipe: Path, out: Path, store: Path) -> str:
    doc = json.loads(_cli("run", recipe, "--out", out, "--store", store, "--no-report", "--json").stdout)
    # valid (a window of at least 900 s): only valid results join a history, so a smoke run would prove nothing
    (summary,) = (out / "jobs").glob("*/summary.json")
    assert json.loads(summary.read_text())["validity"]["verdict"] == "valid"
    run_id: str = doc["run_id"]
    return run_id


def _point(a: Path, b: Path, store: Path) -> dict[str, Any]:
    doc = json.loads(_cli("compare", a, b, "--store", store, "--json").stdout)
    (point,) = doc["matched"]
    return dict(point)


@pytest.mark.timeout(300)
def test_history_pools_runs_of_a_windows_length_only(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    # 960 s and 900 s: both valid (900 s is the minimum), and any two lengths are two windows (1,200 s cost a
    # quarter more simulation in each of three runs for nothing more)
    window, shorter = _recipe(tmp_path, 960), _recipe(tmp_path, 900)
    _run(window, tmp_path / "a", store)
    _run(shorter, tmp_path / "short", store)  # the same recipe and launch fingerprints, a shorter window
    # A's window again, with another client seed (in virtual time A's seed would give A's numbers again): a repeat;
    # stored before B, as history must be (a run started after both compared runs is not theirs)
    again = _run(_recipe(tmp_path, 960, seed=7), tmp_path / "a-again", store)
    # B: A's window with a seed of its own (B of A's very inputs would be A's figures again in virtual time, which
    # `compare` says instead of banding them: `same inputs`)
    _run(_recipe(tmp_path, 960, seed=8), tmp_path / "b", store)

    point = _point(tmp_path / "a", tmp_path / "b", store)
    # the short window is not a repeat of A's point; A's window is
    assert [h["run_id"] for h in point["history"]] == [again] and point["history_runs"] == 1
    tput = {d["metric"]: d for d in point["deltas"]}["tput_per_gpu"]
    assert tput["band"]["kind"] == "between-run"
