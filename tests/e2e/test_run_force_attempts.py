"""`--force` over a finished run in virtual time keeps the earlier results and calls them an earlier attempt — not
"unfinished" (they were valid) — in the words every executor uses (`artifacts.keep_earlier_attempt`)."""

from __future__ import annotations

import os
from pathlib import Path

from test_run_support import RECIPES, cli_env, job_dirs, run_here


def test_force_calls_finished_results_an_earlier_attempt(tmp_path: Path) -> None:
    out, env = tmp_path / "out", cli_env(tmp_path)
    first = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report"], env)
    assert first.returncode == 0, first.stderr[-4000:]
    forced = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", "--force"], env)
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
        proc = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", *extra], env)
        assert proc.returncode == 0, proc.stderr[-4000:]
    # each attempts/1/ now holds a whole attempt (job.json and summary.json): still not a point of its own
    assert sorted(calibration_points([out])) == sorted(job_dirs(out).values())


def test_an_interrupted_force_rerun_leaves_no_superseded_result_in_the_store(tmp_path: Path) -> None:
    """`--force` moves a job's earlier attempt aside as it runs it again; a Ctrl-C in that job left the earlier
    result stored (`results list` showed it) while the folder and the report said the job was interrupted."""
    import json
    import signal
    import sqlite3

    from support.procs import wait_for
    from test_run_support import record_lines, start_cli

    recipe = tmp_path / "slow.yaml"
    # no warm-up, and 200 output tokens (~1 s a request) for 400: the interrupt still finds two of the first job's
    # three requests to come
    recipe.write_text((RECIPES / "slow-fixed-sim.yaml").read_text().replace("num-warmups: 1\n", "num-warmups: 0\n")
                      .replace("osl: 400\n", "osl: 200\n"))
    assert "osl: 200\n" in recipe.read_text()
    out, env, log = tmp_path / "out", cli_env(tmp_path), tmp_path / "force.log"
    first = run_here([recipe, "--out", out, "--no-report"], env)  # virtual time: seconds
    assert first.returncode == 0, first.stderr[-4000:]
    store = tmp_path / "store.sqlite"

    def stored() -> set[str]:
        with sqlite3.connect(store) as db:
            return {job for (job,) in db.execute("SELECT job_id FROM results")}

    assert stored() == set(job_dirs(out))
    proc = start_cli([recipe, "--live", "--out", out, "--force", "--no-report"], env, log)
    try:
        conc1 = next(d for n, d in job_dirs(out).items() if "_conc1_" in n)
        wait_for(lambda: (conc1 / "attempts" / "1").is_dir() and record_lines(conc1 / "records.jsonl") > 0,
                 timeout=90, what="a record of the rerun's first job", proc=proc, log=log)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    assert json.loads((conc1 / "outcome.json").read_text())["status"] != "valid"
    assert conc1.name not in stored()  # its earlier result is in attempts/1, not the job's result any more
    assert stored() == {n for n in job_dirs(out) if "_conc1_" not in n}  # the others' results not rerun yet stay


def _frontier_repeats(out: Path, env: dict[str, str]) -> dict[int, int]:
    """Each frontier point of the run in `out`: its concurrency -> how many results it is the mean of."""
    import json

    from test_run_support import cli_here

    proc = cli_here(["results", "frontier", out, "--json"], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {p["conc"]: (p["repeats"] or {}).get("n", 1) for points in json.loads(proc.stdout).values()
            for p in points}


def test_force_reuse_moves_the_earlier_result_aside_and_never_stands_on_its_own(tmp_path: Path) -> None:
    """`--force --reuse` left the run's earlier results in the job folders beside the stored result each job stood
    on: the store held both, and every frontier point of a run planned without `--repeats` was the "mean of 2
    repeats" of two runs (sd 0 where it stood on its own result, which the store still held under the run's id)."""
    import json

    env = cli_env(tmp_path)
    forced, other = tmp_path / "forced", tmp_path / "other"
    for out in (forced, other):  # `other` stored last: the newest result of each key, what --reuse stands on
        proc = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report"], env)
        assert proc.returncode == 0, proc.stderr[-4000:]
    again = run_here([RECIPES / "fixed-sim.yaml", "--out", forced, "--no-report", "--force", "--reuse", "--json"],
                     env)
    assert again.returncode == 0, again.stderr[-4000:]
    other_id = json.loads((other / "run.json").read_text())["run_id"]
    rows = json.loads(again.stdout)["jobs"]
    assert rows and all(row["reused"] and other_id in row["reason"] for row in rows), rows
    for d in job_dirs(forced).values():
        assert not (d / "summary.json").exists() and (d / "reused.json").is_file(), sorted(os.listdir(d))
        assert (d / "attempts" / "1" / "summary.json").is_file()  # the earlier attempt, kept
    assert set(_frontier_repeats(forced, env).values()) == {1}
    # `other` is now the newest run holding those keys: a --force --reuse of it finds only its own results there,
    # which it is to measure again, not to stand on
    own = run_here([RECIPES / "fixed-sim.yaml", "--out", other, "--no-report", "--force", "--reuse", "--json"], env)
    assert own.returncode == 0, own.stderr[-4000:]
    assert not any(row["reused"] for row in json.loads(own.stdout)["jobs"])
    assert "whose stored result is this run's own" in own.stderr
    assert set(_frontier_repeats(other, env).values()) == {1}


def test_force_reuse_stands_on_an_older_run_when_the_newest_result_is_its_own(tmp_path: Path) -> None:
    """The reuse lookup found only the newest result under a job's key; where that was the run's own (what `--force`
    measures again), the job ran again, though an older run held a valid result it could stand on. The lookup now
    passes over the run's own result to the newest one it can stand on, and says so."""
    import json

    env = cli_env(tmp_path)
    older, forced = tmp_path / "older", tmp_path / "forced"
    for out in (older, forced):  # `forced` stored last: its own results are the newest under each key
        proc = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report"], env)
        assert proc.returncode == 0, proc.stderr[-4000:]
    older_id, forced_id = (json.loads((out / "run.json").read_text())["run_id"] for out in (older, forced))
    again = run_here([RECIPES / "fixed-sim.yaml", "--out", forced, "--no-report", "--force", "--reuse", "--json"],
                     env)
    assert again.returncode == 0, again.stderr[-4000:]
    rows = json.loads(again.stdout)["jobs"]
    assert rows and all(row["reused"] and older_id in row["reason"] for row in rows), rows
    assert "whose stored result is this run's own" not in again.stderr
    for row in rows:
        assert (f"note: job {row['job']} stands on run {older_id}'s valid result, though its newest, run "
                f"{forced_id}'s, is this run's own, which --force measures again") in again.stderr, again.stderr
    assert set(_frontier_repeats(forced, env).values()) == {1}


def test_a_force_of_one_job_keeps_what_the_runs_other_jobs_were_measured_by(tmp_path: Path) -> None:
    """A `--force --job` of a fixed-length job planned no job that replays traces, and run.json lost the run's
    `traces` (the corpus its kept agentic jobs replayed): a later `--resume` under the recipes' own sources was then
    not refused. Through the CLI: the fields stay, and the resume is refused naming the corpus."""
    import json

    out, env = tmp_path / "out", cli_env(tmp_path)
    recipes = [RECIPES / "fixed-sim.yaml", RECIPES / "agentic-sim.yaml"]
    first = run_here([*recipes, "--traces", "synthetic", "--out", out, "--no-report"], env)
    assert first.returncode == 0, first.stderr[-4000:]
    before = json.loads((out / "run.json").read_text())
    fixed = next(j for j in job_dirs(out) if "_256_64_" in j)
    forced = run_here([*recipes, "--out", out, "--no-report", "--force", "--job", fixed], env)
    assert forced.returncode == 0, forced.stderr[-4000:]
    after = json.loads((out / "run.json").read_text())
    for name in ("traces", "simulated_clock", "power_backend", "run_id", "started"):
        assert after.get(name) == before.get(name), name
    assert sorted(after["expected_job_ids"]) == sorted(before["expected_job_ids"])
    resumed = run_here([*recipes, "--out", out, "--no-report", "--resume"], env)
    assert resumed.returncode == 2 and "--traces synthetic" in resumed.stderr, resumed.stderr[-3000:]
