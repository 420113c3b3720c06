"""`run --reuse` stands a job on a stored smoke result too: the same job earns the same kind of verdict (a short
window's point is smoke again), as the README says; it measured every smoke job again, silently."""

from __future__ import annotations

import json
from pathlib import Path

from test_run_support import RECIPES, cli_env, run_cli


def test_a_stored_smoke_result_is_reused_by_the_same_job(tmp_path: Path) -> None:
    env = cli_env(tmp_path, LLMSWEEP_TEST_SECRET="s3cret")
    first = run_cli([RECIPES / "agentic-sim.yaml", "--out", tmp_path / "a", "--no-report", "--json"], env)
    assert first.returncode == 0, first.stderr[-3000:]
    done = json.loads(first.stdout)
    measured = {row["job"]: row for row in done["jobs"]}
    assert measured and {row["verdict"] for row in measured.values()} == {"smoke"}
    again = run_cli([RECIPES / "agentic-sim.yaml", "--out", tmp_path / "b", "--no-report", "--json", "--reuse"], env)
    assert again.returncode == 0, again.stderr[-3000:]
    rows = {row["job"]: row for row in json.loads(again.stdout)["jobs"]}
    assert rows.keys() == measured.keys()
    for job, row in rows.items():
        assert row["reused"] is True and row["verdict"] == "smoke", row
        # the figures it stands on are the first run's
        assert row["total_tps_per_gpu"] == measured[job]["total_tps_per_gpu"], (row, measured[job])
        assert row["reason"].startswith(f"reused: smoke result of run {done['run_id']} (job {job})"), row
