"""`llmsweep run` and its results store: a store that cannot take the run stops it before any server starts (exit 2);
one that fails at the end fails the run (exit 1) with the run kept on disk; each job is stored as it finishes, so an
interrupted sweep keeps what completed. Fixed-length jobs of a few seconds on one simulator server."""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import sqlite3
from pathlib import Path

import pytest
from support.procs import wait_for
from test_run_support import RECIPES, cli_env, cli_here, job_dirs, run_here, start_cli, verdict

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

SHARED_RECIPE = RECIPES / "slow-fixed-sim.yaml"


def _recipe(tmp_path: Path, concs: str = "[1, 2, 3]") -> Path:
    """slow-fixed-sim.yaml at concurrencies `concs`, without its warm-up request (400 tokens, ~2 s, before each job's
    first record, which nothing here looks at) and with 200 output tokens (~1 s a request) for its 400: the first
    job (three requests in a row) still ends seconds before the last, so the store is swapped and the interrupt sent
    while later jobs run, and every job takes half as long."""
    text = SHARED_RECIPE.read_text()
    assert "num-warmups: 1\n" in text and "conc-list: [1, 2, 3]" in text and "osl: 400\n" in text
    path = tmp_path / SHARED_RECIPE.name
    path.write_text(text.replace("num-warmups: 1\n", "num-warmups: 0\n").replace("conc-list: [1, 2, 3]",
                                                                                  f"conc-list: {concs}")
                    .replace("osl: 400\n", "osl: 200\n"))
    return path


def _summaries(out: Path) -> list[Path]:
    jobs = out / "jobs"
    return sorted(jobs.glob("*/summary.json")) if jobs.is_dir() else []


def test_a_store_that_cannot_be_written_stops_the_run_before_any_server(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"not a database " * 300)
    folder = tmp_path / "folder.sqlite"
    folder.mkdir()
    for store in (corrupt, folder):
        out = tmp_path / f"out-{store.stem}"
        res = run_here([SHARED_RECIPE, "--live", "--out", out], cli_env(tmp_path, LLMSWEEP_STORE=str(store)))
        assert res.returncode == 2, res.stderr[-3000:]
        assert "error:" in res.stderr and str(store) in res.stderr and "fix:" in res.stderr
        assert "Traceback" not in res.stderr
        assert not out.exists(), "nothing is written (no server started) when the store cannot take the run"
    assert corrupt.read_bytes() == b"not a database " * 300


def test_an_interrupted_sweep_keeps_its_completed_jobs_in_the_store(tmp_path: Path) -> None:
    out, log, store = tmp_path / "out", tmp_path / "run.log", tmp_path / "store.sqlite"
    # six jobs: on two loaded cores the three of the shared recipe could all finish before the interrupt landed
    recipe = _recipe(tmp_path, "[1, 2, 3, 4, 5, 6]")
    proc = start_cli([recipe, "--live", "--out", out], cli_env(tmp_path), log)
    try:
        (first,) = wait_for(lambda: _summaries(out), timeout=120, what="the first job's summary", proc=proc, log=log)
        # stored as it finished, before the sweep ends
        stored = wait_for(lambda: store.exists() and sqlite3.connect(store).execute(
            "SELECT job_id FROM results").fetchall(), timeout=30, what="the first job in the store", proc=proc, log=log)
        assert stored == [(first.parent.name,)]
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 130, log.read_text()[-3000:]
    listed = cli_here(["results", "list", "--all", "--json", "--store", store])
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert first.parent.name in [r["job_id"] for r in rows]
    assert all(r["verdict"] == "valid" for r in rows)


def test_a_store_failing_at_the_end_fails_the_run_and_keeps_it_on_disk(tmp_path: Path) -> None:
    out, log, store = tmp_path / "out", tmp_path / "run.log", tmp_path / "store.sqlite"
    proc = start_cli([_recipe(tmp_path), "--live", "--out", out], cli_env(tmp_path), log)
    try:
        wait_for(lambda: _summaries(out) and store.exists(), timeout=120, what="the first job stored", proc=proc,
                 log=log)
        # the store becomes unusable mid-run (a full disk, a mount gone read-only, …): a folder where the file was;
        # the run stores each job as it ends, so it may open the file again between the two steps: retried
        for _ in range(100):
            store.unlink(missing_ok=True)
            with contextlib.suppress(FileExistsError):
                store.mkdir()
                break
        assert store.is_dir()
        rc = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert rc == 1, text[-3000:]
    assert "error: could not store the run" in text and "llmsweep results ingest" in text
    assert "not stored:" in text  # the completeness report says so too
    assert "Traceback" not in text
    jobs = job_dirs(out)
    assert len(jobs) == 3 and all(verdict(j) == "valid" for j in jobs.values())
    # the run is whole on disk: ingesting it later stores every job
    shutil.rmtree(store)
    ingest = cli_here(["results", "ingest", out, "--store", store])
    assert ingest.returncode == 0 and ": 3 results" in ingest.stdout, ingest.stderr


def test_a_resume_whose_folder_lacks_a_stored_result_still_stores_the_run_as_its_folder_holds_it(
        tmp_path: Path) -> None:
    """`results ingest` refuses a re-ingest that would drop stored results unless --force; `run`'s own end-of-run
    ingest stores its folder as it is (here a narrowed --resume after a job folder was removed), as before."""
    recipe, out, store = RECIPES / "fixed-sim.yaml", tmp_path / "out", tmp_path / "store.sqlite"
    env = cli_env(tmp_path)
    first = run_here([recipe, "--out", out], env)
    assert first.returncode == 0, first.stderr[-3000:]
    kept, gone = sorted(job_dirs(out))
    shutil.rmtree(out / "jobs" / gone)
    again = run_here([recipe, "--out", out, "--resume", "--job", kept], env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "stored 1 result" in again.stderr + again.stdout and "not stored:" not in again.stderr + again.stdout
    db = sqlite3.connect(store)
    assert [r[0] for r in db.execute("SELECT job_id FROM results")] == [kept]
    db.close()


def test_a_narrower_resume_keeps_the_whole_run_in_run_json(tmp_path: Path) -> None:
    """`--resume --job A` of a run whose job B never ran rewrote run.json to expect A alone: `expected 1 job(s)`,
    B's outcome gone, and a run with a job never run read as complete (0 missing, a 100 % success rate)."""
    from llmsweep.results.point import points_from_run
    from llmsweep.results.rundir import load_run
    from llmsweep.results.verdict import success_rate

    recipe, out = RECIPES / "fixed-sim.yaml", tmp_path / "out"
    env = cli_env(tmp_path)
    first = run_here([recipe, "--out", out, "--no-report"], env)
    assert first.returncode == 0, first.stderr[-3000:]
    a, b = sorted(job_dirs(out))
    again = run_here([recipe, "--out", out, "--resume", "--job", a, "--no-report", "--json"], env)
    assert again.returncode == 0, again.stderr[-3000:]
    meta = json.loads((out / "run.json").read_text())
    assert meta["expected_job_ids"] == [a, b] and set(meta["job_hardware"]) == {a, b}
    assert {o["job_id"]: o["status"] for o in meta["outcomes"]} == {a: "skipped", b: "valid"}
    # the end-of-run line says what this invocation did and where the whole run stands (it read `expected 1 job(s)`
    # alone, as if the run were one job), and so does --json
    assert "expected 1 job in this invocation (part of the run), 1 with a valid or smoke summary (1 resumed)\n" \
        "the whole run: 2 jobs, 2 with a valid or smoke summary (1 resumed, 1 valid)\n" in again.stderr, again.stderr
    assert json.loads(again.stdout)["counts"] == {
        "expected": 1, "done": 1, "by_status": {"resumed": 1},
        "run": {"expected": 2, "done": 2, "by_status": {"resumed": 1, "valid": 1}, "never_run": 0}}
    # what an interrupt leaves when B never started: no folder, no outcomes in run.json
    shutil.rmtree(out / "jobs" / b)
    meta.pop("outcomes")
    meta.pop("finished")
    (out / "run.json").write_text(json.dumps(meta))
    third = run_here([recipe, "--out", out, "--resume", "--job", a, "--no-report"], env)
    assert third.returncode == 0, third.stderr[-3000:]
    assert "the whole run: 2 jobs, 1 with a valid or smoke summary (1 resumed, 1 never run); a plain `--resume` " \
        "runs the rest\n" in third.stderr, third.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["expected_job_ids"] == [a, b]
    rate = success_rate(meta, points_from_run(load_run(out)))
    assert rate.total == 2 and rate.success == 1 and rate.by_status["missing"] == 1  # B never ran: not a success


def test_a_narrower_force_keeps_the_whole_run_in_run_json(tmp_path: Path) -> None:
    """`--force --job A` (run one job again) of a run whose job B was interrupted rewrote run.json to expect A
    alone, B's outcome gone, and the run read as complete (a 100 % success rate) while B had never finished (its
    folder held no summary, its outcome `interrupted by SIGTERM`)."""
    from llmsweep.results.point import points_from_run
    from llmsweep.results.rundir import load_run
    from llmsweep.results.verdict import success_rate

    recipe, out = RECIPES / "fixed-sim.yaml", tmp_path / "out"
    env = cli_env(tmp_path)
    first = run_here([recipe, "--out", out, "--no-report"], env)
    assert first.returncode == 0, first.stderr[-3000:]
    a, b = sorted(job_dirs(out))
    # B interrupted: its summary never written, its outcome says the signal (what `settle` writes)
    (out / "jobs" / b / "summary.json").unlink()
    (out / "jobs" / b / "outcome.json").write_text(json.dumps(
        {"job_id": b, "exp_name": "x", "status": "failed", "reasons": ["interrupted by SIGTERM"]}))
    meta = json.loads((out / "run.json").read_text())
    meta["outcomes"] = [o if o["job_id"] != b else json.loads((out / "jobs" / b / "outcome.json").read_text())
                        for o in meta["outcomes"]]
    (out / "run.json").write_text(json.dumps(meta))
    again = run_here([recipe, "--out", out, "--force", "--job", a, "--no-report"], env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "expected 1 job in this invocation (part of the run), 1 with a valid or smoke summary (1 valid)\n" \
        "the whole run: 2 jobs, 1 with a valid or smoke summary (1 failed, 1 valid); a plain `--resume` runs the " \
        "rest\n" in again.stderr, again.stderr
    meta = json.loads((out / "run.json").read_text())
    assert meta["expected_job_ids"] == [a, b] and set(meta["job_hardware"]) == {a, b}
    assert {o["job_id"]: o["status"] for o in meta["outcomes"]} == {a: "valid", b: "failed"}
    rate = success_rate(meta, points_from_run(load_run(out)))
    assert rate.total == 2 and rate.success == 1  # B never finished: not a success


def test_a_narrower_run_keeps_the_jobs_an_earlier_reuse_stood_on_stored_results(tmp_path: Path) -> None:
    """`--force --job A` (or `--resume --job A`) of a run whose job B `--reuse` stood on a stored result kept B's
    outcome (`reused`) but dropped run.json's `reused` entry that names the result: the store and the dashboard then
    took B for a job without a result ('1 expected job(s) without a result'), and its point left the run's frontier."""
    from llmsweep.results.point import points_from_run
    from llmsweep.results.rundir import load_run
    from llmsweep.results.verdict import success_rate

    recipe, env = RECIPES / "fixed-sim.yaml", cli_env(tmp_path)
    source, out = tmp_path / "source", tmp_path / "out"
    assert run_here([recipe, "--out", source, "--no-report"], env).returncode == 0
    stood = run_here([recipe, "--out", out, "--no-report", "--reuse"], env)
    assert stood.returncode == 0, stood.stderr[-3000:]
    a, b = sorted(json.loads((out / "run.json").read_text())["reused"])
    for flags in (["--force"], ["--resume"]):
        again = run_here([recipe, "--out", out, "--no-report", "--job", a, *flags], env)
        assert again.returncode == 0, again.stderr[-3000:]
        assert "without a result" not in again.stderr and "1 job reused stored results" in again.stderr, \
            again.stderr[-3000:]
        meta = json.loads((out / "run.json").read_text())
        assert meta["expected_job_ids"] == [a, b] and list(meta["reused"]) == [b], meta.get("reused")
        rate = success_rate(meta, points_from_run(load_run(out)))
        assert rate.total == 2 and rate.success == 2, rate
        frontier = cli_here(["results", "frontier", out, "--json"], env)
        assert frontier.returncode == 0, frontier.stderr[-3000:]
        assert sorted(p["job_id"] for points in json.loads(frontier.stdout).values() for p in points) == [a, b]
