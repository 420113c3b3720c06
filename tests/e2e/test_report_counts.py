"""`llmsweep report`'s own line and `--json` count what the page counts: a point that is the mean of its repeats
once (its line said `6 point(s)` where the page said 2, its smoke count in the page's unit beside them), and a run
without a result says so even with other runs drawn beside it (`--with` dropped the statement)."""

from __future__ import annotations

import json
from pathlib import Path

from test_run_support import RECIPES, cli_env, cli_here, read_json, run_here


def test_report_counts_repeats_once_and_an_empty_run_says_so_beside_others(tmp_path: Path) -> None:
    env = cli_env(tmp_path)
    repeated = tmp_path / "repeated"
    done = run_here([RECIPES / "fixed-sim.yaml", "--repeats", "3", "--out", repeated, "--no-report"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    report = cli_here(["report", repeated, "--no-png", "--json"], env)
    assert report.returncode == 0, report.stderr[-3000:]
    files = json.loads(report.stdout)
    page = read_json(repeated / "report" / "data.json")["counts"]
    assert files["points"] == page["points"] == 2 and page["repeat_results"] == 6
    assert files["smoke"] == page["smoke"] and files["invalid"] == page["invalid"] == 0

    (tmp_path / "no-traces").mkdir()
    empty = tmp_path / "empty"  # every agentic job refused: the trace folder holds no trace
    refused = run_here([RECIPES / "agentic-sim.yaml", "--traces", tmp_path / "no-traces", "--out", empty,
                        "--no-report"], env)
    assert refused.returncode != 0 and not list(empty.glob("jobs/*/summary.json")), refused.stderr[-3000:]
    beside = read_json(repeated / "run.json")["run_id"]
    drawn = cli_here(["report", empty, "--with", beside, "--no-png", "--json"], env)
    assert drawn.returncode == 0, drawn.stderr[-3000:]
    out = json.loads(drawn.stdout)
    assert out["points"] == 0 and out["overlaid"] == 2
    assert out["empty"] and out["empty"].startswith("No result in this run"), out
