"""`compare`'s history: earlier stored runs join A's noise band only when they ran A's configuration.

Real runs on the simulator in virtual time into one store: the baseline configuration (history-base.yaml) and a pull
request's (history-pr.yaml: the same point identity, a tiny prefill chunk, ~10x the TTFT).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_run_support import cli_exits

RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes" / "results"


_cli = cli_exits


def _run(recipe: str | Path, out: Path, store: Path) -> str:
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

    # A's configuration with another workload seed: a repeat of A (in virtual time only the seed draws a sample)
    again = _run(_reseeded(tmp_path), tmp_path / "a-again", store)
    _run("history-base.yaml", tmp_path / "a-same", store)  # A's configuration and seed: A's numbers again
    doc = _compare(tmp_path / "a", tmp_path / "b", store)
    (point,) = doc["matched"]
    assert point["history"] == []  # both started after A and B: no part of their history

    _run("history-pr.yaml", tmp_path / "b2", store)  # the PR measured again, after both
    doc = _compare(tmp_path / "a", tmp_path / "b2", store)
    (point,) = doc["matched"]
    assert [h["run_id"] for h in point["history"]] == [again] and point["history_runs"] == 1  # a-same counted once
    assert any("counted once" in n for n in doc["notes"])
    assert {d["metric"]: d for d in point["deltas"]}["p90_ttft"]["verdict"] == "regression"

    table = _cli("compare", tmp_path / "a", tmp_path / "b2", "--store", store).stdout
    assert f"history (A's configuration): {again}/" in table


def _reseeded(tmp_path: Path, seed: int = 7) -> Path:
    """history-base.yaml with another workload seed: the same configuration (recipe and launch fingerprints,
    measurement), another sample."""
    text = (RECIPES / "history-base.yaml").read_text()
    path = tmp_path / f"history-base-seed{seed}.yaml"
    path.write_text(text.replace("    num-warmups: 1\n", f"    num-warmups: 1\n    seed: {seed}\n"))
    return path
