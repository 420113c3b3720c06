"""`compare` of a baseline against a run whose change made A's jobs end without a result: those points are lost — a
regression, as a point B measured invalid is — not points "only in A".

Real runs on the simulator in virtual time: fixed-sim.yaml (conc 2 and 4) as A, and as B the same recipe with
`--mem-fraction-static 0.2`, where the model's weights do not fit: the simulator refuses both jobs.
"""

from __future__ import annotations

import json
from pathlib import Path

from test_run_support import RECIPES, cli_exits

_cli = cli_exits


def test_a_point_whose_job_b_ran_without_a_result_is_a_regression_not_only_in_a(tmp_path: Path) -> None:
    """B's change left no job with a result (refused: the weights no longer fit). compare listed A's points as
    "only in A" / "Only in the baseline" — points B did not have — and `--fail-on-regression` exited 0, where the
    same change leaving an invalid result would have failed it."""
    store = tmp_path / "store.sqlite"
    tight = tmp_path / "tight.yaml"
    tight.write_text((RECIPES / "fixed-sim.yaml").read_text().replace(
        "    engine: { name: sim }\n", "    engine: { name: sim }\n    args:\n      --mem-fraction-static: 0.2\n"))
    _cli("run", RECIPES / "fixed-sim.yaml", "--out", tmp_path / "a", "--store", store, "--no-report")
    _cli("run", tight, "--out", tmp_path / "b", "--store", store, "--no-report", ok=1)  # every job refused
    outcomes = json.loads((tmp_path / "b" / "run.json").read_text())["outcomes"]
    assert {o["status"] for o in outcomes} == {"refused"} and len(outcomes) == 2
    a_jobs = sorted(p.name for p in (tmp_path / "a" / "jobs").iterdir())

    doc = json.loads(_cli("compare", "--baseline", tmp_path / "a", tmp_path / "b", "--store", store,
                          "--json").stdout)
    assert sorted(p["job_id"] for p in doc["lost"]) == a_jobs and doc["only_a"] == []
    assert all(p["b_status"] == "refused" and "does not fit" in p["b_reasons"][0] for p in doc["lost"])
    assert sorted(doc["verdict"]["lost"]) == a_jobs
    assert any("B ran 2 of A's valid points without a result" in n for n in doc["notes"])

    table = _cli("compare", tmp_path / "a", tmp_path / "b", "--store", store).stdout
    assert "B ran A's valid points without a result (a regression): refused (" in table
    assert "only in A" not in table
    # the pull request's verdict counts them where it counts the regressions, not only in a note below
    md = _cli("compare", "--baseline", tmp_path / "a", tmp_path / "b", "--store", store, "--format",
              "markdown").stdout
    assert "over 0 matched points, and **2 points lost** (B ran them without a result" in md, md[:800]
    gate = _cli("compare", tmp_path / "a", tmp_path / "b", "--store", store, "--fail-on-regression", ok=1)
    assert "2 points B ran without a result where A's is valid" in gate.stderr
