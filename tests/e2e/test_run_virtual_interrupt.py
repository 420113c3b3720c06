"""`llmsweep run` in virtual time stopped by SIGTERM while its job is simulated: it exits 143, the job's folder keeps
what it wrote so far and no summary, its outcome names the signal (`interrupted by SIGTERM`, as a benchmark's stop
reason does), and `--resume` runs the job again, keeping the interrupted attempt's files under `attempts/1`."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from support.procs import wait_for
from test_run_support import RECIPES, cli_env, job_dirs, read_json, run_argv, run_cli, start_cli, verdict

from llmsweep.execute.signals import interrupted_by


def test_sigterm_during_a_virtual_time_job_names_the_signal_and_resume_reruns_the_job(tmp_path: Path) -> None:
    recipe = _long_jobs(tmp_path, [64])
    out, log, env = tmp_path / "out", tmp_path / "run.log", cli_env(tmp_path)
    _sigterm_in_job(1, [recipe, "--out", out, "--no-report"], out, log, env)
    (job,) = job_dirs(out).values()
    outcome = read_json(job / "outcome.json")
    assert outcome["status"] == "failed" and outcome["reasons"] == [interrupted_by(signal.SIGTERM)], outcome
    assert not (job / "summary.json").exists()
    assert "interrupted: 0 jobs finished" in log.read_text() and "llmsweep report" not in log.read_text()

    again = run_cli([recipe, "--out", out, "--no-report", "--resume"], env, timeout=120)
    assert again.returncode == 0, again.stderr[-4000:]
    assert verdict(job) == "valid" and read_json(job / "outcome.json")["status"] == "valid"
    assert read_json(job / "attempts" / "1" / "outcome.json")["reasons"] == [interrupted_by(signal.SIGTERM)]


def test_a_sweep_interrupted_after_a_job_finished_says_how_to_draw_its_dashboard(tmp_path: Path) -> None:
    """An interrupted run writes no dashboard on its way out; the line it ends with says how to get one for the jobs
    that finished, and that `llmsweep report` draws it."""
    recipe = _long_jobs(tmp_path, [64, 65])
    out, log, env = tmp_path / "out", tmp_path / "run.log", cli_env(tmp_path)
    _sigterm_in_job(2, [recipe, "--out", out], out, log, env)
    said = log.read_text()
    assert "interrupted: 1 job finished" in said and f"`llmsweep report {out}` writes their dashboard" in said, said
    drawn = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "report", str(out), "--no-png"], env=env,
                           capture_output=True, text=True, timeout=120)
    assert drawn.returncode == 0, drawn.stderr[-3000:]
    assert (out / "report" / "index.html").is_file()


def _long_jobs(tmp_path: Path, concs: list[int]) -> Path:
    """slow-fixed-sim.yaml as jobs of 2000 prompts at these concurrencies: a few seconds of wall time each to
    simulate, so a signal sent once a job has started finds it running."""
    recipe = tmp_path / "long.yaml"
    text = (RECIPES / "slow-fixed-sim.yaml").read_text()
    for old, new in (("conc-list: [1, 2, 3]", f"conc-list: {concs}"), ("num-prompts: 3\n", "num-prompts: 2000\n"),
                     ("num-warmups: 1", "num-warmups: 0")):
        assert old in text
        text = text.replace(old, new)
    recipe.write_text(text)
    return recipe


def _sigterm_in_job(n: int, args: list[str | Path], out: Path, log: Path, env: dict[str, str]) -> None:
    """`llmsweep run ARGS`, sent SIGTERM once its n-th job has started; it must exit 143."""
    proc = start_cli(args, env, log)
    try:
        wait_for(lambda: (out / "jobs").is_dir() and len(list((out / "jobs").glob("*/job.json"))) >= n, timeout=120,
                 what=f"job {n}'s start", proc=proc, log=log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143, log.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()


def test_an_interrupted_run_json_prints_no_partial_table_and_says_where_the_finished_jobs_are(tmp_path: Path) -> None:
    """`run --json` stopped by SIGINT printed nothing on stdout and nothing said why: stdout stays empty (a table of
    part of the run would read as the whole run's end table to a script that does not check the exit status), and
    stderr names the command that lists the finished jobs as JSON."""
    import json

    from test_run_support import cli_here

    recipe = _long_jobs(tmp_path, [64, 65])
    recipe.write_text(recipe.read_text().replace("num-prompts: 2000\n", "num-prompts: 20000\n"))  # seconds each
    out, env = tmp_path / "out", cli_env(tmp_path)
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with open(stdout, "wb") as so, open(stderr, "wb") as se:
        proc = subprocess.Popen(run_argv(recipe, "--out", out, "--no-report", "--json"), env=env, stdout=so,
                                stderr=se)
    try:
        wait_for(lambda: (out / "jobs").is_dir() and len(list((out / "jobs").glob("*/job.json"))) >= 2, timeout=120,
                 what="job 2's start", proc=proc, log=stderr)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130, stderr.read_text()[-4000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    said = stderr.read_text()
    assert stdout.read_text() == "", stdout.read_text()
    assert "interrupted: 1 job finished" in said, said
    assert f"`llmsweep results list --run {out} --json` lists the jobs that finished" in said, said
    listed = cli_here(["results", "list", "--run", out, "--json"], env)
    assert listed.returncode == 0, listed.stderr
    assert len(json.loads(listed.stdout)) == 1
