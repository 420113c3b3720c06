"""`llmsweep run` when things go wrong mid-sweep: the driver is SIGKILLed (then --resume), the server dies under a
job, the user presses Ctrl-C. Three fixed-length jobs of a few seconds share one simulator server."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from support.procs import alive, wait_for
from test_run_support import (
    RECIPES,
    cli_env,
    job_dirs,
    kill_quietly,
    read_json,
    record_lines,
    run_cli,
    server_pids,
    start_cli,
    verdict,
)

from llmsweep.execute.signals import interrupted_by

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

SHARED_RECIPE = RECIPES / "slow-fixed-sim.yaml"


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    """slow-fixed-sim.yaml without its warm-up request (400 tokens, ~2 s, before each job's first record, which
    nothing here looks at) and with 200 output tokens (~1 s a request) for its 400: each interrupt still lands with
    a request of the job in flight (conc 1: two of three left after its first record; conc 2: its third prompt starts
    only when the first two end) while every job takes half as long (the Ctrl-C test keeps the shared recipe, warm-up
    and all: it starts a second CLI between the first record and the interrupt)."""
    path = tmp_path / SHARED_RECIPE.name
    text = SHARED_RECIPE.read_text()
    assert "num-warmups: 1\n" in text and "osl: 400\n" in text
    path.write_text(text.replace("num-warmups: 1\n", "num-warmups: 0\n").replace("osl: 400\n", "osl: 200\n"))
    return path


def _job(out: Path, conc: int) -> Path:
    return out / "jobs" / next(n for n in job_dirs(out) if f"_conc{conc}_" in n)


def _jobs_exist(out: Path, conc: int) -> Path | None:
    jobs = out / "jobs"
    if not jobs.is_dir():
        return None
    found = [p for p in jobs.iterdir() if f"_conc{conc}_" in p.name]
    return found[0] if found else None


def test_after_the_driver_is_sigkilled_a_refused_rerun_stops_the_orphan_and_resume_finishes_the_rest(
    tmp_path: Path, recipe: Path,
) -> None:
    out, log = tmp_path / "out", tmp_path / "first.log"
    env = cli_env(tmp_path)
    proc = start_cli([recipe, "--live", "--out", out], env, log)
    orphan = 0
    try:
        first = wait_for(lambda: (j := _jobs_exist(out, 1)) and (j / "summary.json").exists() and j,
                         timeout=90, what="the first job's summary", proc=proc, log=log)
        second = wait_for(lambda: (j := _jobs_exist(out, 2)) and record_lines(j / "records.jsonl") > 0 and j,
                          timeout=60, what="a record of the second job", proc=proc, log=log)
        (orphan,) = server_pids(out)
        os.kill(proc.pid, signal.SIGKILL)  # the driver alone dies, as a crashed one would
        proc.wait(timeout=30)
        assert alive(orphan), "the server should outlive its killed driver (own session)"
        kept = record_lines(second / "records.jsonl")
        assert kept > 0
        assert verdict(first) == "valid" and verdict(second) is None

        # The same command again, without --resume, is refused (exit 2, nothing moved); the server the killed run
        # left is stopped all the same (under the --out lock no live run owns it; a user told to pick another --out
        # would otherwise leave it holding its port and GPUs for good).
        again = run_cli([recipe, "--live", "--out", out], env)
        assert again.returncode == 2 and "already holds an unfinished run" in again.stderr, again.stderr[-4000:]
        assert f"stopping server pid {orphan}" in again.stderr
        assert not alive(orphan)
        assert verdict(first) == "valid" and not (second / "attempts").exists()

        resumed = run_cli([recipe, "--live", "--out", out, "--resume"], env)
        assert resumed.returncode == 0, resumed.stderr[-4000:]
        assert not list((out / "servers").glob("*/server.pid"))
        outcomes = {o["job_id"]: o for o in read_json(out / "run.json")["outcomes"]}
        assert outcomes[first.name]["status"] == "skipped"
        assert outcomes[second.name]["status"] == "valid"
        assert all(verdict(j) == "valid" for j in job_dirs(out).values())
        # The half-done attempt's raw records are kept beside the rerun's.
        assert record_lines(second / "attempts" / "1" / "records.jsonl") == kept
        assert record_lines(second / "records.jsonl") > 0
        assert resumed.stdout.strip().splitlines()[-1] == str(out / "report" / "index.html")
    finally:
        if proc.poll() is None:
            proc.kill()
        if orphan and alive(orphan):
            kill_quietly(orphan)


def test_a_server_killed_mid_job_fails_that_job_with_its_log_and_the_group_relaunches(tmp_path: Path,
                                                                                    recipe: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start_cli([recipe, "--live", "--out", out], cli_env(tmp_path), log)
    try:
        wait_for(lambda: (j := _jobs_exist(out, 1)) and record_lines(j / "records.jsonl") > 0,
                 timeout=90, what="a record of the first job", proc=proc, log=log)
        (server,) = server_pids(out)
        os.kill(server, signal.SIGKILL)
        rc = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = log.read_text()
    assert rc == 1, text[-4000:]
    first = _job(out, 1)
    outcome = read_json(first / "outcome.json")
    assert outcome["status"] == "failed"
    reason = outcome["reasons"][0]
    assert "died during job" in reason
    (group,) = [p for p in (out / "servers").iterdir() if p.is_dir()]
    first_log = (group / "server.log").read_text().strip().splitlines()
    assert first_log and first_log[-1] in reason  # the tail of the server's log is in the reason
    # The run went on: the next jobs got a relaunched server and finished.
    assert (group / "server.2.log").is_file()
    assert verdict(_job(out, 2)) == "valid" and verdict(_job(out, 3)) == "valid"
    assert f"failed: {first.name}" in text  # the completeness report names it
    assert "expected 3 jobs, 2 with a valid or smoke summary" in text


def test_ctrl_c_stops_the_run_tears_the_server_down_and_keeps_the_records(tmp_path: Path) -> None:
    # The shared recipe, warm-up and all: the first job must outlast a second CLI start on a loaded machine
    recipe = SHARED_RECIPE
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start_cli([recipe, "--live", "--out", out], cli_env(tmp_path), log)
    server = 0
    try:
        job = wait_for(lambda: (j := _jobs_exist(out, 1)) and record_lines(j / "records.jsonl") > 0 and j,
                       timeout=90, what="a record of the first job", proc=proc, log=log)
        (server,) = server_pids(out)
        # Meanwhile a second run into the same --out is turned away (it would stop this one's server as stale).
        second = run_cli([recipe, "--live", "--out", out], cli_env(tmp_path), timeout=60)
        assert second.returncode == 2 and "another `llmsweep run` is using" in second.stderr
        assert alive(server)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=60)
        assert rc == 130, log.read_text()[-4000:]
        assert not alive(server), "Ctrl-C left the server running"
        assert not list((out / "servers").glob("*/server.pid"))
        assert record_lines(job / "records.jsonl") > 0
        assert read_json(job / "outcome.json")["reasons"] == [interrupted_by(signal.SIGINT)]
        said = log.read_text()
        assert "interrupted: 0 jobs finished and stored in" in said and f"--out {out} --resume" in said
    finally:
        if proc.poll() is None:
            proc.kill()
        if server and alive(server):
            kill_quietly(server)


def test_sigterm_to_the_driver_also_tears_the_server_down(tmp_path: Path, recipe: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start_cli([recipe, "--live", "--out", out], cli_env(tmp_path), log)
    server = 0
    try:
        wait_for(lambda: server_pids(out) if (out / "servers").is_dir() else None,
                 timeout=90, what="the server's pid file", proc=proc, log=log)
        (server,) = server_pids(out)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        assert proc.returncode != 0
        assert not alive(server), "SIGTERM left the server running"
    finally:
        if proc.poll() is None:
            proc.kill()
        if server and alive(server):
            kill_quietly(server)
