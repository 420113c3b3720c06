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


def test_a_corrupt_summary_is_listed_as_unreadable_and_the_rest_is_drawn(tmp_path: Path) -> None:
    """One job's summary.json overwritten with garbage stopped `report RUN` (exit 2, the `summarize` fix) where a
    summary without job.json is listed as an unreadable job: the rest is drawn, the job listed as unreadable with its
    reason and fix on the page, in summary.md and in --json, a `note:` on stderr, exit 0."""
    env = cli_env(tmp_path)
    run = tmp_path / "run"
    done = run_here([RECIPES / "fixed-sim.yaml", "--out", run, "--no-report"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    jobs = sorted(p for p in (run / "jobs").iterdir() if p.is_dir())
    assert len(jobs) == 2
    bad = jobs[0]
    (bad / "summary.json").write_text("garbage{{ not json", encoding="utf-8")
    drawn = cli_here(["report", run, "--no-png", "--json"], env)
    assert drawn.returncode == 0, drawn.stderr[-3000:]
    files = json.loads(drawn.stdout)
    assert (files["points"], files["failed"], files["missing"]) == (1, 1, 0), files
    (listed,) = files["unreadable"]
    fix = f"`llmsweep summarize {bad}` rebuilds it"
    assert listed["job_id"] == bad.name and f"cannot read {bad / 'summary.json'}" in listed["reason"], listed
    assert fix in listed["reason"], listed
    notes = [line for line in drawn.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and bad.name in notes[0] and fix in notes[0], drawn.stderr
    page = read_json(run / "report" / "data.json")
    assert [p["job_id"] for p in page["points"]] == [jobs[1].name]
    (missing,) = page["missing"]
    assert (missing["job_id"], missing["status"]) == (bad.name, "unreadable") and fix in missing["reason"]
    md = (run / "report" / "summary.md").read_text(encoding="utf-8")
    assert f"`{bad.name}`: unreadable: cannot read {bad}/summary.json" in md and fix in md  # its folder, not JOBDIR
    html = (run / "report" / "index.html").read_text(encoding="utf-8")
    assert bad.name in html and "unreadable" in html
    text = cli_here(["report", run, "--no-png"], env)  # the table's own line counts it
    assert text.returncode == 0 and "1 failed (1 unreadable), 0 missing" in text.stdout, text.stdout + text.stderr


def test_an_overlay_with_a_corrupt_summary_is_drawn_without_that_job_and_says_so(tmp_path: Path) -> None:
    """`report RUN --with OTHER` where one of OTHER's summaries does not read stopped the report (exit 2) although
    `report OTHER` itself draws the rest: the overlay's other points are drawn, the job left out with its reason."""
    env = cli_env(tmp_path)
    run, other = tmp_path / "run", tmp_path / "other"
    for out in (run, other):
        done = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report"], env)
        assert done.returncode == 0, done.stderr[-3000:]
    bad = sorted(p for p in (other / "jobs").iterdir() if p.is_dir())[0]
    (bad / "summary.json").write_text("garbage{{ not json", encoding="utf-8")
    drawn = cli_here(["report", run, "--with", other, "--no-png", "--json"], env)
    assert drawn.returncode == 0, drawn.stderr[-3000:]
    files = json.loads(drawn.stdout)
    assert (files["points"], files["overlaid"], files["unreadable"]) == (2, 1, []), files
    left = [line for line in drawn.stderr.splitlines() if line.startswith("warning: left out: ")]
    assert len(left) == 1 and str(other) in left[0] and f"cannot read {bad / 'summary.json'}" in left[0], drawn.stderr
