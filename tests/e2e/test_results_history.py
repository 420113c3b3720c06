"""`compare`'s history: earlier stored runs join A's noise band only when they ran A's configuration.

Real runs on the simulator in virtual time into one store: the baseline configuration (history-base.yaml) and a pull
request's (history-pr.yaml: the same point identity, a tiny prefill chunk, ~10x the TTFT).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes" / "results"


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *(str(a) for a in args)], capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    return proc


def _run(recipe: str, out: Path, store: Path) -> str:
    doc = json.loads(_cli("run", RECIPES / recipe, "--out", out, "--store", store, "--no-report", "--json").stdout)
    run_id: str = doc["run_id"]
    return run_id


def _compare(a: Path, b: Path, store: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_cli("compare", a, b, "--store", store, "--json").stdout)
    return doc


def test_history_holds_only_valid_runs_of_the_baselines_configuration(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    _run("history-base.yaml", tmp_path / "a", store)
    _run("history-pr.yaml", tmp_path / "pr-earlier", store)  # the PR's configuration, measured before
    _run("history-pr.yaml", tmp_path / "b", store)

    doc = _compare(tmp_path / "a", tmp_path / "b", store)
    (point,) = doc["matched"]
    assert point["history_runs"] == 0 and point["history"] == []  # the PR's earlier run is not A's repeat
    ttft = {d["metric"]: d for d in point["deltas"]}["p90_ttft"]
    assert ttft["b"] > 5 * ttft["a"]
    assert ttft["verdict"] == "unverified"  # a single run of A: not "within noise" behind a band the PR widened

    again = _run("history-base.yaml", tmp_path / "a-again", store)  # a repeat of A's configuration
    doc = _compare(tmp_path / "a", tmp_path / "b", store)
    (point,) = doc["matched"]
    assert [h["run_id"] for h in point["history"]] == [again] and point["history_runs"] == 1
    assert {d["metric"]: d for d in point["deltas"]}["p90_ttft"]["verdict"] == "regression"

    table = _cli("compare", tmp_path / "a", tmp_path / "b", "--store", store).stdout
    assert f"history (A's configuration): {again}/" in table
