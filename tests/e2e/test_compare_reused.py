"""`compare A B` where B stood jobs on A's stored results (`run --reuse`): its JSON and its table say what B reused.

Real runs on the simulator in virtual time into one store: fixed-sim.yaml (conc 2 and 4) as A, then the same recipe
with conc 8 added, run with `--reuse` as B: B stands conc 2 and 4 on A's results and measures conc 8.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_run_support import RECIPES, cli_exits

_cli = cli_exits


def test_what_b_reused_from_a_is_reused_in_the_json_and_the_table_not_only_in_a(tmp_path: Path) -> None:
    """The table listed A's points B reused as "reused by B from A", but `--json` (without --baseline) listed them
    under `only_a`, with nothing saying B stands on them; and the table ended with "no point of A matches a point of
    B (identity must match exactly; see --ignore)", sending the reader to --ignore for points B had reused."""
    store = tmp_path / "store.sqlite"
    wider = tmp_path / "wider.yaml"
    wider.write_text((RECIPES / "fixed-sim.yaml").read_text().replace("conc-list: [2, 4]", "conc-list: [2, 4, 8]"))
    _cli("run", RECIPES / "fixed-sim.yaml", "--out", tmp_path / "a", "--store", store, "--no-report")
    run_b = json.loads(_cli("run", wider, "--reuse", "--out", tmp_path / "b", "--store", store, "--no-report",
                            "--json").stdout)
    assert sorted(bool(j["reused"]) for j in run_b["jobs"]) == [False, True, True], run_b["jobs"]
    a_jobs = {p.name for p in (tmp_path / "a" / "jobs").iterdir()}

    doc = json.loads(_cli("compare", tmp_path / "a", tmp_path / "b", "--store", store, "--json").stdout)
    assert {p["job_id"] for p in doc["reused"]} == a_jobs and doc["only_a"] == []
    assert [p["job_id"].split("_conc")[1].split("_")[0] for p in doc["only_b"]] == ["8"]
    baseline = json.loads(_cli("compare", "--baseline", tmp_path / "a", tmp_path / "b", "--store", store,
                               "--json").stdout)
    assert baseline["reused"] == doc["reused"] and sorted(baseline["verdict"]["reused"]) == sorted(a_jobs)

    table = _cli("compare", tmp_path / "a", tmp_path / "b", "--store", store).stdout
    assert "reused by B from A, not measured again" in table and "only in A" not in table
    assert "no point of A matches" not in table


def test_a_baseline_that_stood_its_jobs_on_stored_results_compares_as_the_points_it_stands_on(tmp_path: Path) -> None:
    """A baseline run made with `run --reuse` measured nothing itself: its dashboard and frontier draw the stored
    results it stood on, but `compare A B` said "A has no result: nothing of it to compare", listed every point of B
    as only in B, and sent the reader to `compare A <source run>` — which said the same."""
    store = tmp_path / "store.sqlite"
    wider = tmp_path / "wider.yaml"
    wider.write_text((RECIPES / "fixed-sim.yaml").read_text().replace("conc-list: [2, 4]", "conc-list: [2, 4, 8]"))
    first = json.loads(_cli("run", RECIPES / "fixed-sim.yaml", "--out", tmp_path / "first", "--store", store,
                            "--no-report", "--json").stdout)["run_id"]
    _cli("run", RECIPES / "fixed-sim.yaml", "--reuse", "--out", tmp_path / "a", "--store", store, "--no-report")
    assert not any((job / "summary.json").exists() for job in (tmp_path / "a" / "jobs").iterdir())  # all reused
    # C: conc 8 added, its conc 2 and 4 stood on the stored results A stands on (the only ones of them yet)
    _cli("run", wider, "--reuse", "--out", tmp_path / "c", "--store", store, "--no-report")
    _cli("run", RECIPES / "fixed-sim.yaml", "--out", tmp_path / "b", "--store", store, "--no-report")

    doc = json.loads(_cli("compare", tmp_path / "a", tmp_path / "b", "--store", store, "--json").stdout)
    assert len(doc["matched"]) == 2 and doc["only_a"] == doc["only_b"] == []
    assert all(m["a"][0]["run_id"] == first for m in doc["matched"])
    assert not any("has no result" in n or "more than once" in n for n in doc["notes"])  # not A's history too
    assert any(f"stood 2 jobs on stored results of run {first}" in n for n in doc["notes"]), doc["notes"]
    # --no-history with two folders opens the store still: the baseline's points are in it
    quiet = json.loads(_cli("compare", tmp_path / "a", tmp_path / "b", "--store", store, "--no-history",
                            "--json").stdout)
    assert len(quiet["matched"]) == 2

    # C stood its conc 2 and 4 on the very results A stands on: reused from A, not "left out" as another run's
    doc = json.loads(_cli("compare", tmp_path / "a", tmp_path / "c", "--store", store, "--json").stdout)
    assert len(doc["reused"]) == 2 and doc["only_a"] == [] and len(doc["only_b"]) == 1
    assert not any("this comparison leaves them out" in n for n in doc["notes"]), doc["notes"]
