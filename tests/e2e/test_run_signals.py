"""Signal sequences sent to a `llmsweep run` of three slow jobs on one live simulator server: whatever arrives, and
whenever (starting, mid-job, mid-teardown), the run exits 130 (SIGINT), 143 (SIGTERM) or 138 (SIGUSR1), no process of
the server's process group is left, and its pid file stays until the group is gone, so a `--resume` after a SIGKILL
of the harness finds and stops what was left."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from support.procs import alive, children_of, read_proc, stat_fields, wait_for
from test_run_support import (
    RECIPES,
    cli_env,
    kill_quietly,
    read_json,
    record_lines,
    run_argv,
)

from llmsweep.client.config import RECORD_PROCESS_LANES

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

SLOW = RECIPES / "slow-fixed-sim.yaml"


def recipe(tmp_path: Path) -> Path:
    """slow-fixed-sim.yaml with 200 output tokens (~1 s a request) for its 400: the runs wait for the first job's
    first record (its warm-up) before most signals, and each job still has seconds of requests left after it."""
    path = tmp_path / "slow.yaml"
    if not path.exists():
        text = SLOW.read_text()
        assert "osl: 400" in text
        path.write_text(text.replace("osl: 400", "osl: 200"))
    return path

LIVE: tuple[str, ...] = ("--live",)
"""Options that keep a simulated run on the live HTTP path (its server a real process to signal)."""
SIGTERM_BIT = 1 << (signal.SIGTERM - 1)


def start(args: list[str | Path], env: dict[str, str], log: Path, *,
          sigint: signal.Handlers = signal.SIG_DFL, own_group: bool = False) -> subprocess.Popen[bytes]:
    """`llmsweep run` in the background, started with SIGINT at `sigint` (a script's `cmd &` starts it ignored);
    `own_group`: leading a process group of its own, which a test signals whole as `timeout` or a terminal does."""
    fh = open(log, "wb")  # noqa: SIM115 - the child's; closed with the test's tmp dir
    return subprocess.Popen(run_argv(*args, *LIVE), env=env, stdout=fh, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, sigint), process_group=0 if own_group
                            else None)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes of process group `pgid`, read from /proc."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (fields := stat_fields(int(entry))) and int(fields[2]) == pgid \
                and fields[0] not in "ZX":
            members.append(int(entry))
    return members


def pid_files(out: Path) -> list[Path]:
    return sorted((out / "servers").glob("*/server.pid")) if (out / "servers").is_dir() else []


def server_pgid(out: Path) -> int | None:
    """The server's process group (its pid: it leads its own session) once its pid file is written."""
    files = pid_files(out)
    try:
        return int(read_json(files[0])["pid"]) if files and files[0].stat().st_size else None
    except FileNotFoundError:  # removed between the listing and the read (the resumed run stops the left server)
        return None


def first_job_has_records(out: Path) -> bool:
    jobs = out / "jobs"
    return jobs.is_dir() and any(record_lines(p / "records.jsonl") > 0 for p in jobs.iterdir())


def sigterm_pending(pid: int) -> bool:
    """The (stopped) process has a SIGTERM waiting: the run's teardown has begun."""
    status = read_proc(pid, "status").decode()
    if not status:
        return False
    shd = next(line for line in status.splitlines() if line.startswith("ShdPnd:"))
    return bool(int(shd.split()[1], 16) & SIGTERM_BIT)


def finish(proc: subprocess.Popen[bytes], log: Path) -> int:
    try:
        return proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise AssertionError("the run did not exit within 60 s of the signal:\n" + log.read_text()[-4000:]) from None


def assert_nothing_left(out: Path, pgid: int, log: Path) -> None:
    assert group_members(pgid) == [], f"the server's process group lives on:\n{log.read_text()[-4000:]}"
    assert pid_files(out) == [], "the pid file outlived its server's teardown"


def cleanup(proc: subprocess.Popen[bytes], pgid: int | None) -> None:
    if proc.poll() is None:
        proc.kill()
    if pgid and group_members(pgid):
        kill_quietly(pgid)


def test_sigterm_mid_job_exits_143_and_leaves_no_process_of_the_servers_group(tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start([recipe(tmp_path), "--out", out], cli_env(tmp_path), log)
    pgid = None
    try:
        wait_for(lambda: first_job_has_records(out), timeout=90, what="a record of the first job", proc=proc, log=log)
        pgid = server_pgid(out)
        assert pgid and group_members(pgid)
        proc.send_signal(signal.SIGTERM)
        assert finish(proc, log) == 143, log.read_text()[-4000:]
        assert_nothing_left(out, pgid, log)
    finally:
        cleanup(proc, pgid)


def test_sigint_twice_quickly_while_the_server_starts_exits_130_and_leaves_nothing(tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "run.log"
    # Started as a shell script's background job is (SIGINT ignored): an explicit `kill -INT` still stops it.
    proc = start([recipe(tmp_path), "--out", out], cli_env(tmp_path), log, sigint=signal.SIG_IGN)
    pgid = None
    try:
        pgid = wait_for(lambda: server_pgid(out), timeout=90, what="the server's pid file", proc=proc, log=log)
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)
        assert finish(proc, log) == 130, log.read_text()[-4000:]
        assert_nothing_left(out, pgid, log)
    finally:
        cleanup(proc, pgid)


def _teardown_under_way(tmp_path: Path) -> tuple[subprocess.Popen[bytes], Path, Path, int]:
    """A run mid-job whose server is frozen (SIGSTOP) and then asked to stop (SIGTERM to the run): the teardown
    waits out its grace on a server that cannot exit, as an engine stuck freeing its GPUs would."""
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start([recipe(tmp_path), "--out", out], cli_env(tmp_path), log)
    wait_for(lambda: first_job_has_records(out), timeout=90, what="a record of the first job", proc=proc, log=log)
    pgid = server_pgid(out)
    assert pgid
    os.killpg(pgid, signal.SIGSTOP)
    proc.send_signal(signal.SIGTERM)
    wait_for(lambda: sigterm_pending(pgid), timeout=30, what="the teardown's SIGTERM to the server", proc=proc, log=log)
    assert group_members(pgid) and pid_files(out), "the pid file must stay while the server's group lives"
    return proc, out, log, pgid


def test_sigterm_then_sigint_during_the_teardown_kills_the_server_now_and_exits_143(tmp_path: Path) -> None:
    proc, out, log, pgid = None, tmp_path, tmp_path / "run.log", 0
    try:
        proc, out, log, pgid = _teardown_under_way(tmp_path)
        proc.send_signal(signal.SIGINT)  # the second signal: no more grace
        rc = finish(proc, log)
        assert_nothing_left(out, pgid, log)
        assert rc == 143, log.read_text()[-4000:]
        assert "still stopping at a second interrupt" in log.read_text()
    finally:
        if proc is not None:
            cleanup(proc, pgid)


def test_resume_after_the_harness_is_sigkilled_mid_teardown_stops_the_server_it_left(tmp_path: Path) -> None:
    proc, out, pgid = None, tmp_path, 0
    resumed = None
    try:
        proc, out, _, pgid = _teardown_under_way(tmp_path)
        proc.kill()
        proc.wait(timeout=30)
        assert group_members(pgid) == [pgid] and pid_files(out), "the killed run's server and its pid file remain"

        resume_log = tmp_path / "resume.log"
        resumed = start([recipe(tmp_path), "--out", out, "--resume"], cli_env(tmp_path), resume_log)
        wait_for(lambda: not group_members(pgid), timeout=60, what="the left server to be stopped", proc=resumed,
                 log=resume_log)
        assert f"stopping server pid {pgid} left running" in resume_log.read_text()
        new_pgid = wait_for(lambda: (g := server_pgid(out)) != pgid and g, timeout=60,
                            what="the resumed run's own server", proc=resumed, log=resume_log)
        resumed.send_signal(signal.SIGINT)
        assert finish(resumed, resume_log) == 130
        assert_nothing_left(out, new_pgid, resume_log)
    finally:
        if proc is not None:
            cleanup(proc, pgid)
        if resumed is not None:
            cleanup(resumed, None)


def test_sigint_with_client_worker_processes_stops_them_too(tmp_path: Path) -> None:
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start([recipe(tmp_path), "--out", out, "--client-workers", "2"], cli_env(tmp_path), log)
    pgid = None
    try:
        wait_for(lambda: first_job_has_records(out), timeout=90, what="a record of the first job", proc=proc, log=log)
        pgid = server_pgid(out)
        workers = [c for c in children_of(proc.pid) if c != pgid]
        assert len(workers) >= 2, "two client worker processes (and multiprocessing's helpers)"
        proc.send_signal(signal.SIGINT)
        assert finish(proc, log) == 130, log.read_text()[-4000:]
        assert pgid
        assert_nothing_left(out, pgid, log)
        # A worker's record helper ends when its pipe closes, a moment after the run: allow it that moment, never more.
        wait_for(lambda: not [w for w in workers if alive(w)], timeout=10, what="the client workers to end (they "
                 "outlived the run)")
    finally:
        cleanup(proc, pgid)


def test_sigusr1_to_the_whole_group_unwinds_the_run_as_sigterm_does_and_resume_runs_the_rest(tmp_path: Path) -> None:
    """Slurm sends SIGUSR1 ahead of a time limit to get a graceful stop (`sbatch --signal=USR1@120`; `scancel -s USR1`
    signals every process of the step). It ended the run at once, exit 138 and not a word, its server left running
    until a later `--resume` stopped it (SIGALRM alike, 142). Now it unwinds the run as SIGTERM does, and the run's
    client workers, which got it too, leave their stop to the run (their requests recorded, no traceback)."""
    out, log = tmp_path / "out", tmp_path / "run.log"
    env = cli_env(tmp_path)
    proc = start([recipe(tmp_path), "--out", out, "--client-workers", "2"], env, log, own_group=True)
    pgid = None
    try:
        wait_for(lambda: first_job_has_records(out), timeout=90, what="a record of the first job", proc=proc, log=log)
        pgid = server_pgid(out)
        workers = [c for c in children_of(proc.pid) if c != pgid]
        assert pgid and group_members(pgid) and len(workers) >= 2
        os.killpg(proc.pid, signal.SIGUSR1)
        assert finish(proc, log) == 138, log.read_text()[-4000:]
        assert_nothing_left(out, pgid, log)
        text = log.read_text()
        assert text.rstrip().splitlines()[-1] == "interrupted by SIGUSR1" and "Traceback" not in text, text[-4000:]
        job = next(j for j in (out / "jobs").iterdir() if (j / "outcome.json").exists())
        assert read_json(job / "outcome.json")["reasons"] == ["interrupted by SIGUSR1"], text[-4000:]
        assert read_json(job / "run.json")["client"]["stop_reason"] == "interrupted by SIGUSR1"
        wait_for(lambda: not [w for w in workers if alive(w)], timeout=10, what="the client workers to end (they "
                 "outlived the run)")

        resumed = subprocess.run(run_argv(recipe(tmp_path), "--out", out, "--resume", *LIVE), env=env,
                                 capture_output=True, text=True, timeout=240)
        assert resumed.returncode == 0, resumed.stderr[-4000:]
        assert "expected 3 jobs, 3 with a valid or smoke summary" in resumed.stderr, resumed.stderr[-4000:]
    finally:
        cleanup(proc, pgid)


def test_sigint_to_the_process_group_as_a_jobs_record_helper_starts_stops_the_run_not_just_the_job(
        tmp_path: Path) -> None:
    """`timeout -s INT` signals the run's whole process group, the client's record helper too (a process of its own,
    started for each job). Landing while the helper's interpreter booted, before it ignores the signals, it killed the
    helper; the job failed with "the record helper process ended before it was ready", that error replaced the
    interrupt, and the sweep ran its other jobs with the signal spent (a CI failure: `timeout -k` killed it)."""
    out, log = tmp_path / "out", tmp_path / "run.log"
    busy = tmp_path / "busy.yaml"  # concurrencies whose streams go to a record helper (their 3 prompts run alike)
    text = recipe(tmp_path).read_text()
    assert "conc-list: [1, 2, 3]" in text
    busy.write_text(text.replace("conc-list: [1, 2, 3]", f"conc-list: {[RECORD_PROCESS_LANES + i for i in range(3)]}"))
    proc = start([busy, "--out", out], cli_env(tmp_path), log, own_group=True)
    pgid = None
    try:
        helper = wait_for(lambda: _record_helper(proc.pid), timeout=90, what="the first job's record helper",
                          proc=proc, log=log, poll_s=0.002)
        os.killpg(proc.pid, signal.SIGINT)
        rc = finish(proc, log)
        text = log.read_text()
        pgid = server_pgid(out)
        assert rc == 130, text[-4000:]
        assert not alive(helper), "the record helper outlived the run"
        (job, *others) = sorted((out / "jobs").iterdir(), key=lambda j: not (j / "outcome.json").exists())
        assert read_json(job / "outcome.json")["reasons"] == ["interrupted by SIGINT"], text[-4000:]
        assert not [j for j in others if (j / "outcome.json").exists()], "the sweep ran on after the signal"
        # the helper lived through the signal: the client wound down in order, saying why, rather than crashing
        assert read_json(job / "run.json")["client"]["stop_reason"] == "interrupted by SIGINT"
        assert "record helper" not in text, text[-4000:]
    finally:
        cleanup(proc, pgid)


def _record_helper(pid: int) -> int | None:
    """The record helper process `pid` started (the client's, one per job), once its interpreter runs."""
    return next((c for c in children_of(pid) if b"llmsweep.client._record_helper" in read_proc(c, "cmdline")), None)
