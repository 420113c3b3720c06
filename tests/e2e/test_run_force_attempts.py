"""`--force` over a finished run in virtual time keeps the earlier results and calls them an earlier attempt — not
"unfinished" (they were valid) — in the words every executor uses (`artifacts.keep_earlier_attempt`)."""

from __future__ import annotations

from pathlib import Path

from test_run_support import RECIPES, cli_env, job_dirs, run_cli


def test_force_calls_finished_results_an_earlier_attempt(tmp_path: Path) -> None:
    out, env = tmp_path / "out", cli_env(tmp_path)
    first = run_cli([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report"], env)
    assert first.returncode == 0, first.stderr[-4000:]
    forced = run_cli([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", "--force"], env)
    assert forced.returncode == 0, forced.stderr[-4000:]
    kept = [line for line in forced.stderr.splitlines() if "are kept in" in line]
    assert len(kept) == 2 and all(": the artifacts of an earlier attempt are kept in " in line for line in kept), kept
    assert "unfinished" not in forced.stderr
    for d in job_dirs(out).values():
        # the whole attempt moves aside: its job, its launch and its power samples with its results, so `summarize`
        # on attempts/1 reads that attempt as it ran (its power block included)
        kept_files = {p.name for p in (d / "attempts" / "1").iterdir()}
        assert {"summary.json", "records.jsonl", "job.json", "server_command.txt", "gpu_metrics.jsonl"} <= kept_files
        assert {"job.json", "server_command.txt", "gpu_metrics.jsonl", "summary.json"} <= {p.name for p in d.iterdir()}


def test_calibration_reads_each_point_once_not_its_superseded_attempts(tmp_path: Path) -> None:
    from llmsweep.sim.calibrate import job_dirs as calibration_points

    out, env = tmp_path / "out", cli_env(tmp_path)
    for extra in ([], ["--force"]):
        proc = run_cli([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", *extra], env)
        assert proc.returncode == 0, proc.stderr[-4000:]
    # each attempts/1/ now holds a whole attempt (job.json and summary.json): still not a point of its own
    assert sorted(calibration_points([out])) == sorted(job_dirs(out).values())
