"""Signals beyond one SIGTERM or SIGKILL, and the terminal going away, sent to `llmsweep run` on the simulator.

- Ctrl-Z (SIGTSTP to the run's process group) held mid-job, then SIGCONT: the server answered on through the pause
  and the client's clocks counted it, so that job is judged invalid, saying why, and `--resume` runs it again.
- Ctrl-\\ (SIGQUIT to the group): the run unwinds as for Ctrl-C (exit 131), its server stopped. Its default action
  ended llmsweep at once, with the live server (in a session of its own) left running until a `--resume`.
  Under `--executor slurm` the batch job ran on in the queue; now it is cancelled.
- stdout and stderr whose reader left (`| head -1`): the run goes on and finishes, its output dropped. A progress line
  failed the job in flight ("internal error: BrokenPipeError") and stopped the sweep with exit 1.
- The terminal closed mid-job (SIGHUP to the group, then EIO on every write to it): exit 129, nothing left. The
  run's last lines, written to the dead terminal, turned it into exit 1 and a traceback.
"""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.procs import alive, children_of, ctrl_z, wait_for
from support.slurm import require_slurm
from test_run_signals import LIVE, cleanup, finish, group_members, pid_files, server_pgid
from test_run_support import RECIPES, cli_env, read_json, record_lines, run_argv

SLOW = RECIPES / "slow-fixed-sim.yaml"
WORKERS = ("--client-workers", "2")


def two_jobs(tmp: Path) -> Path:
    """slow-fixed-sim.yaml cut to two jobs (conc 1 and 2) of 100-token answers (about half a second a request): each
    job still has requests left when the test acts on its first record (the warm-up's)."""
    path = tmp / "two-jobs.yaml"
    text = SLOW.read_text()
    assert "osl: 400" in text and "conc-list: [1, 2, 3]" in text
    path.write_text(text.replace("osl: 400", "osl: 100").replace("conc-list: [1, 2, 3]", "conc-list: [1, 2]"))
    return path


def job_dir(out: Path, conc: int) -> Path:
    return next(p for p in (out / "jobs").iterdir() if f"_conc{conc}_" in p.name)


def has_records(out: Path, conc: int) -> bool:
    jobs = out / "jobs"
    return jobs.is_dir() and any(f"_conc{conc}_" in p.name and record_lines(p / "records.jsonl") > 0
                                 for p in jobs.iterdir())


@dataclass
class Ran:
    out: Path
    log: Path
    rc: int
    left: list[int]
    workers: list[int]
    """The run's child processes (client workers, multiprocessing's helpers) when Ctrl-\\ came."""
    outcomes: dict[int, Any]
    """Each job's outcome.json as the interrupted run left it (by concurrency)."""
    resume_rc: int
    resume_log: str


@pytest.fixture(scope="module")
def paused_then_quit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ran]:
    """One live run with two client worker processes, leading a process group of its own as a terminal's foreground
    job does: Ctrl-Z (SIGTSTP to the group) once the first job has its first record, held 1.5 s, then SIGCONT; Ctrl-\\
    (SIGQUIT to the group, the workers and multiprocessing's resource tracker too) once the second job has its first
    record. Then `--resume` of the same run, sent a SIGCONT alone mid-job."""
    tmp = tmp_path_factory.mktemp("paused")
    out, log, env = tmp / "out", tmp / "run.log", cli_env(tmp)
    recipe = two_jobs(tmp)
    with open(log, "wb") as fh:
        proc = subprocess.Popen(run_argv(recipe, "--out", out, *LIVE, *WORKERS), env=env, stdout=fh,
                                stderr=subprocess.STDOUT, process_group=0)
    pgid, resumed = None, None
    try:
        wait_for(lambda: has_records(out, 1), timeout=90, what="the first job's first record", proc=proc, log=log,
                 poll_s=0.02)
        pgid = server_pgid(out)
        assert pgid
        ctrl_z(proc.pid)
        wait_for(lambda: has_records(out, 2), timeout=60, what="the second job's first record", proc=proc, log=log,
                 poll_s=0.02)
        workers = [c for c in children_of(proc.pid) if c != pgid]
        os.killpg(proc.pid, signal.SIGQUIT)
        rc = finish(proc, log)
        # a worker's record helper ends when its pipe closes, a moment after the run: allowed that moment, never more
        wait_for(lambda: not [w for w in workers if alive(w)], timeout=10, what="the client workers to end")
        time.sleep(0.2)  # a server process that outlived the run would still be there: nothing waits for it
        left = group_members(pgid)
        outcomes = {conc: read_json(path) if (path := job_dir(out, conc) / "outcome.json").is_file() else None
                    for conc in (1, 2)}
        # (without the workers: what a resume must do does not depend on them, and they cost seconds to start)
        resume_log = tmp / "resume.log"
        with open(resume_log, "wb") as fh:
            resumed = subprocess.Popen(run_argv(recipe, "--out", out, *LIVE, "--resume"), env=env, stdout=fh,
                                       stderr=subprocess.STDOUT)
        first = job_dir(out, 1)
        wait_for(lambda: (first / "attempts").is_dir() and record_lines(first / "records.jsonl") > 0, timeout=90,
                 what="the resumed run's first record", proc=resumed, log=resume_log, poll_s=0.02)
        resumed.send_signal(signal.SIGCONT)  # as bash's `fg` sends a job that was running all along: no stop
        resume_rc = finish(resumed, resume_log)
        yield Ran(out, log, rc, left, workers, outcomes, resume_rc, resume_log.read_text())
    finally:
        cleanup(proc, pgid)
        if resumed is not None:
            cleanup(resumed, None)


def test_ctrl_backslash_mid_job_unwinds_as_ctrl_c_exits_131_and_leaves_no_server(paused_then_quit: Ran) -> None:
    s = paused_then_quit
    text = s.log.read_text()
    assert s.rc == 131, text[-4000:]
    assert s.left == [], f"the server's process group outlived the run:\n{text[-4000:]}"
    assert "interrupted by SIGQUIT" in text
    assert len(s.workers) >= 2, "two client worker processes (and multiprocessing's helpers)"
    # SIGQUIT to the group killed multiprocessing's resource tracker, whose relaunch printed warnings and tracebacks
    assert "resource_tracker" not in text and "Traceback" not in text, text[-4000:]
    assert s.outcomes[2] is not None and s.outcomes[2]["reasons"] == ["interrupted by SIGQUIT"], s.outcomes[2]


def test_a_job_measured_across_a_ctrl_z_is_invalid_and_says_why(paused_then_quit: Ran) -> None:
    outcome = paused_then_quit.outcomes[1]
    assert outcome is not None
    why = "llmsweep was stopped for "
    assert outcome["status"] == "invalid" and outcome["reasons"][0].startswith(why), outcome
    held = float(outcome["reasons"][0][len(why):].split(" s ")[0])
    assert held >= 1.4, outcome  # how long the Ctrl-Z held it (1.5 s), measured
    assert "(Ctrl-Z, SIGTSTP or SIGSTOP, then SIGCONT)" in outcome["reasons"][0]
    assert "its timings include the pause" in outcome["reasons"][0]
    attempt = job_dir(paused_then_quit.out, 1) / "attempts" / "1"  # the resumed run moved the paused attempt aside
    assert read_json(attempt / "outcome.json") == outcome
    summary = read_json(attempt / "summary.json")["validity"]
    assert summary["verdict"] == "invalid" and summary["reasons"][0].startswith(why), summary


def test_resume_after_the_pause_and_the_quit_runs_both_jobs_again_to_valid(paused_then_quit: Ran) -> None:
    """The resumed run gets a SIGCONT mid-job with no stop before it (bash's `fg` of a running job sends one): no
    pause, and its jobs stay valid."""
    s = paused_then_quit
    assert s.resume_rc == 0, s.resume_log[-4000:]
    for conc in (1, 2):
        outcome = read_json(job_dir(s.out, conc) / "outcome.json")
        assert outcome["status"] == "valid" and not outcome["resumed"], outcome
        assert (job_dir(s.out, conc) / "attempts" / "1").is_dir(), "measured again, its first attempt kept aside"
    assert pid_files(s.out) == []


def test_stdout_and_stderr_whose_reader_left_drop_the_output_and_the_run_finishes(tmp_path: Path) -> None:
    """`llmsweep run ... 2>&1 | head -1`: every write after the reader left is EPIPE (Python ignores SIGPIPE)."""
    out = tmp_path / "out"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run(run_argv(RECIPES / "fixed-sim.yaml", "--out", out, "--json"), env=cli_env(tmp_path),
                              stdout=write_end, stderr=write_end, timeout=120)
    finally:
        os.close(write_end)
    assert proc.returncode == 0
    outcomes = [read_json(p / "outcome.json") for p in sorted((out / "jobs").iterdir())]
    assert [o["status"] for o in outcomes] == ["valid", "valid"], outcomes
    assert (out / "report" / "index.html").is_file()


def test_the_terminal_closed_mid_job_exits_129_and_leaves_no_server(tmp_path: Path) -> None:
    """The run on a terminal of its own (a pty), closed once the first job has a record: the kernel sends SIGHUP to
    its foreground group, and every later write to it (the live display, the run's last lines) fails with EIO."""
    out = tmp_path / "out"
    argv = run_argv(two_jobs(tmp_path), "--out", out, *LIVE)
    pid, master = pty.fork()
    if pid == 0:  # the child: session leader, the pty its controlling terminal
        try:
            os.execve(argv[0], argv, cli_env(tmp_path))
        finally:
            os._exit(127)
    pgid, reaped = None, False
    try:
        deadline = time.monotonic() + 90
        while not has_records(out, 1) and time.monotonic() < deadline:
            if select.select([master], [], [], 0.02)[0]:
                os.read(master, 65536)  # the display, read so the terminal never fills
        pgid = server_pgid(out)
        assert pgid, "no record of the first job within 90 s"
        os.close(master)
        master = -1
        waited, status = 0, 0
        deadline = time.monotonic() + 60
        while not waited and time.monotonic() < deadline:
            waited, status = os.waitpid(pid, os.WNOHANG)
            time.sleep(0.05)
        assert waited, "the run did not exit within 60 s of its terminal closing"
        reaped = True
        assert os.waitstatus_to_exitcode(status) == 129
        assert group_members(pgid) == [], "the server's process group outlived the run"
        assert pid_files(out) == []
        assert read_json(job_dir(out, 1) / "outcome.json")["reasons"] == ["interrupted by SIGHUP"]
    finally:
        if master >= 0:
            os.close(master)
        if not reaped:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        if pgid and group_members(pgid):
            os.killpg(pgid, signal.SIGKILL)


def _slurm_ids(out: Path) -> list[str]:
    return [p.read_text().strip() for p in sorted((out / "servers").glob("*/slurm_job_id"))]


def _queued(job_id: str) -> bool:
    queue = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True, timeout=30)
    return bool(queue.stdout.strip())


@pytest.mark.slurm
def test_ctrl_backslash_to_a_slurm_run_cancels_its_batch_job_and_exits_131(tmp_path: Path) -> None:
    require_slurm()
    out, log = tmp_path / "out", tmp_path / "run.log"
    argv = run_argv(two_jobs(tmp_path), "--out", out, *LIVE, "--executor", "slurm", "--executor-option", "poll_s=0.5",
                    "--executor-option", "time_limit=00:05:00")
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, env=cli_env(tmp_path), stdout=fh, stderr=subprocess.STDOUT, process_group=0)
    ids: list[str] = []
    try:
        wait_for(lambda: has_records(out, 1), timeout=120, what="the first job's first record", proc=proc, log=log,
                 poll_s=0.05)
        ids = _slurm_ids(out)
        assert ids and _queued(ids[0])
        os.killpg(proc.pid, signal.SIGQUIT)
        assert finish(proc, log) == 131, log.read_text()[-4000:]
        assert not [i for i in ids if _queued(i)], f"the batch job outlived the run:\n{log.read_text()[-4000:]}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for job_id in ids:
            subprocess.run(["scancel", job_id], capture_output=True, timeout=30)
