"""What the command line names and is not there is bad input: exit 2 with what to pass instead, never a silent empty
answer (exit 0) and never the exit 1 of a failed result."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from test_run_support import cli_here

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "fixed-sim.yaml"


def _cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return cli_here(args)


def test_unknown_runs_results_and_folders_exit_2_naming_what_to_pass(tmp_path: Path) -> None:
    out, store = tmp_path / "run", tmp_path / "store.sqlite"
    first = _cli("run", RECIPE, "--out", out, "--store", store, "--no-report", "--json")
    assert first.returncode == 0, first.stderr[-3000:]
    job_dir = next((out / "jobs").iterdir())
    cases = {
        "report of a job folder": ("report", job_dir, "--out", tmp_path / "rep"),
        "ingest of a job folder": ("results", "ingest", job_dir, "--store", tmp_path / "other.sqlite"),
        "compare with a job folder": ("compare", out, job_dir, "--store", store),
        "unknown result": ("results", "show", "nope", "--store", store),
        "unknown run, list": ("results", "list", "--run", "run-nope", "--store", store),
        "unknown run, export": ("results", "export", "--run", "run-nope", "--store", store),
        "neither folder nor run": ("compare", out, tmp_path / "missing", "--store", store),
        "not an export": ("results", "import", RECIPE, "--store", tmp_path / "imp.sqlite"),
    }
    for what, args in cases.items():
        proc = _cli(*args)
        assert proc.returncode == 2, (what, proc.returncode, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and "fix:" in proc.stderr, (what, proc.stderr[-2000:])
    assert f"is a job folder of the run {out}" in _cli("report", job_dir, "--out", tmp_path / "rep2").stderr
    assert not (tmp_path / "other.sqlite").exists() or json.loads(
        _cli("results", "runs", "--store", tmp_path / "other.sqlite", "--json").stdout) == []


def test_the_fixes_for_a_cut_summary_run_json_and_job_json_mend_the_run(tmp_path: Path) -> None:
    """What each refusal of a cut file says to do works: `summarize JOBDIR` rebuilds summary.json; a run.json or a
    job.json (which nothing rebuilds) comes back from `run … --resume` (a job whose job.json does not read runs anew:
    its folder no longer needs moving aside first)."""
    out, store = tmp_path / "run", tmp_path / "store.sqlite"
    first = _cli("run", RECIPE, "--out", out, "--store", store, "--no-report")
    assert first.returncode == 0, first.stderr[-3000:]
    job_dir = sorted((out / "jobs").iterdir())[0]
    for cut in (job_dir / "summary.json", out / "run.json", job_dir / "job.json"):
        cut.write_text(cut.read_text()[:40])
        refused = _cli("report", out, "--no-png")
        if cut.name == "summary.json":  # report draws the rest, the job listed as unreadable with the fix
            assert refused.returncode == 0 and f"note: job {job_dir.name} is not drawn" in refused.stderr, \
                refused.stderr[-2000:]
            assert f"cannot read {cut}" in refused.stderr and f"`llmsweep summarize {job_dir}`" in refused.stderr
            mend = _cli("summarize", job_dir)
        else:
            assert refused.returncode == 2 and f"cannot read {cut}" in refused.stderr, refused.stderr[-2000:]
            mend = _cli("run", RECIPE, "--out", out, "--store", store, "--resume", "--no-report")
        assert mend.returncode == 0, mend.stderr[-3000:]
        again = _cli("report", out, "--no-png")
        assert again.returncode == 0 and "unreadable" not in again.stdout + again.stderr, again.stderr[-2000:]
