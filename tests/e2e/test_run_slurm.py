"""`llmsweep run --executor slurm` against the real single-node Slurm (scripts/ci/start_slurm.sh): one batch job per
server group runs the lifecycle on the node, artifacts land in --out, job ids are recorded; Ctrl-C cancels them."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support.procs import alive, read_proc, wait_for
from support.slurm import leave_nothing, require_slurm
from test_run_support import (
    JOB_ARTIFACTS,
    RECIPES,
    cli_env,
    job_dirs,
    read_json,
    run_cli,
    server_pids,
    start_cli,
    verdict,
)

from llmsweep.execute.signals import interrupted_by

pytestmark = [pytest.mark.slurm, pytest.mark.slow]  # slow: xdist starts this file first (tests/conftest.py)

SLURM_OPTIONS = ("--executor", "slurm", "--executor-option", "poll_s=0.5", "--executor-option", "time_limit=00:05:00")


@pytest.fixture(scope="module", autouse=True)
def slurm_available() -> None:
    require_slurm()


def _in_queue(job_id: str) -> bool:
    out = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True, timeout=30)
    return bool(out.stdout.strip())


def _slurm_ids(out: Path) -> list[str]:
    return [p.read_text().strip() for p in sorted((out / "servers").glob("*/slurm_job_id"))]


def test_two_server_groups_run_as_two_batch_jobs_and_land_in_out(tmp_path: Path) -> None:
    out, store = tmp_path / "out", tmp_path / "store.sqlite"
    secret = "llmsweep-slurm-" + secrets.token_hex(12)
    env = cli_env(tmp_path, LLMSWEEP_TEST_SECRET=secret)
    proc = run_cli([RECIPES / "two-servers-sim.yaml", "--live", "--out", out, *SLURM_OPTIONS], env, timeout=280)
    assert proc.returncode == 0, proc.stderr[-4000:]
    ids = _slurm_ids(out)
    assert len(ids) == 2 and len(set(ids)) == 2 and all(i.isdigit() for i in ids)
    for job_id in ids:
        assert f"submitted Slurm job {job_id}" in proc.stderr
        assert f"Slurm job {job_id} ended COMPLETED (exit 0)" in proc.stderr
    jobs = job_dirs(out)
    assert len(jobs) == 3
    # Between "submitted" and "ended" the run is not silent: the worker's progress on the node is relayed as it comes
    # (the server's launch, each job's start and outcome), and each job is counted as the worker finishes it.
    lines = proc.stderr.splitlines()

    def at(pattern: str) -> int:
        return next(i for i, line in enumerate(lines) if re.search(pattern, line))

    for job_id in ids:
        ended = at(rf"Slurm job {job_id} ended COMPLETED")
        assert at(rf"Slurm job {job_id} is running") < at(rf"\[slurm {job_id}\] server ready in ") < ended
    for name in jobs:
        owner = next(i for i in ids if re.search(rf"\[slurm {i}\] job {name}: valid$", proc.stderr, re.MULTILINE))
        assert at(rf"\[slurm {owner}\] job {name}: conc \d+ ") < at(rf"\[slurm {owner}\] job {name}: valid$") \
            < at(rf"Slurm job {owner} ended COMPLETED")
    assert sorted(int(m) for m in re.findall(r"Slurm job \d+: (\d)/3 jobs done", proc.stderr)) == [1, 2, 3]
    # the driver shows each job as its worker on the node reports it: here its server launching
    assert re.search(r"job [123]/3 conc \d+ · launching · \d+s so far", proc.stderr)
    for name, jdir in jobs.items():
        for artifact in JOB_ARTIFACTS:
            assert (jdir / artifact).is_file(), f"{name} lacks {artifact}"
        assert verdict(jdir) == "valid"
        launch = read_json(jdir / "run.json")["provenance"]["launch"]
        assert launch["executor"] == "slurm" and launch["slurm_job_id"] in ids
        assert launch["image"] is None  # the simulator ran on the node's host Python, not in the recipe's image
        # The server was a job step, and the file shows the step exactly as launched (its unique step name).
        assert re.search(r"^srun .*--job-name=llmsweep-sim-[0-9a-f]{8} ", (jdir / "server_command.txt").read_text(),
                         re.MULTILINE)
    from llmsweep.results.store import Store

    with Store(store) as st:
        points = st.results(read_json(out / "run.json")["run_id"])
    assert sorted(p.job_id for p in points) == sorted(jobs)
    report = out / "report" / "index.html"
    assert report.is_file()
    assert proc.stdout.strip().splitlines()[-1] == str(report)
    assert not any(_in_queue(i) for i in ids)

    # The secret travelled to the node in the job's environment, but no file (batch script, Slurm logs, artifacts)
    # and not the store holds it.
    needle = secret.encode()
    files = [p for p in [*out.rglob("*"), *tmp_path.glob("store.sqlite*")] if p.is_file()]
    assert [p for p in files if needle in p.read_bytes()] == []

    # --resume of a finished run submits nothing: every job is already done. (This run and the next skip the
    # dashboard, which the first run proved is written: each would spend seconds rebuilding it.)
    again = run_cli([RECIPES / "two-servers-sim.yaml", "--live", "--out", out, "--resume", "--no-report",
                     *SLURM_OPTIONS], cli_env(tmp_path))
    assert again.returncode == 0, again.stderr[-4000:]
    assert "submitted Slurm job" not in again.stderr
    assert {o["status"] for o in read_json(out / "run.json")["outcomes"]} == {"skipped"}
    assert _slurm_ids(out) == ids

    # --force on nodes whose Python cannot run the worker: each batch job dies before its jobs write an outcome. They
    # fail with how the batch job ended, never reported with the last attempt's outcome (kept aside in attempts/1).
    broken = run_cli([RECIPES / "two-servers-sim.yaml", "--live", "--out", out, "--force", "--no-report",
                      *SLURM_OPTIONS, "--executor-option", f"python={tmp_path / 'no-python'}"], cli_env(tmp_path))
    assert broken.returncode == 1, broken.stderr[-4000:]
    outcomes = read_json(out / "run.json")["outcomes"]
    assert len(outcomes) == 3 and {o["status"] for o in outcomes} == {"failed"}, outcomes
    for o in outcomes:
        assert re.match(r"Slurm job \d+ ended FAILED \(exit 65\) before this job ran: the node's python \S+/no-python "
                        r"on \S+ does not exist \(no such file on this node, nor a command on its PATH\); .*"
                        r"--executor-option python=PATH",
                        o["reasons"][0]), o["reasons"][0]
    for jdir in jobs.values():
        assert not (jdir / "outcome.json").exists() and verdict(jdir) is None
        assert verdict(jdir / "attempts" / "1") == "valid"
        assert read_json(jdir / "attempts" / "1" / "outcome.json")["status"] == "valid"


def _half_length_recipe(tmp_path: Path) -> Path:
    """slow-fixed-sim.yaml at half its output length: the first job (a warm-up and 3 requests, one at a time) ends in
    ~4 s, not ~8; the second (a warm-up, then 3 requests two at a time) still runs ~3 s, seconds longer than an
    interrupt or a suspension takes."""
    recipe = tmp_path / "slow-fixed-sim.yaml"
    text = (RECIPES / "slow-fixed-sim.yaml").read_text()
    assert "osl: 400" in text
    recipe.write_text(text.replace("osl: 400", "osl: 200"))
    return recipe


def test_ctrl_c_during_a_slurm_run_stores_what_finished_and_leaves_no_job_in_the_queue(tmp_path: Path) -> None:
    """Ctrl-C while the worker runs the second job, its first one finished valid since the driver last looked at the
    queue (a poll interval the run never reaches): the first job is stored and counted, not left on disk for a later
    --resume while the run says it stored nothing; the batch job leaves the queue and its server step dies."""
    out, log = tmp_path / "out", tmp_path / "run.log"
    options = (*SLURM_OPTIONS, "--executor-option", "poll_s=600")  # the last one given wins
    env = cli_env(tmp_path)
    recipe = _half_length_recipe(tmp_path)
    proc = start_cli([recipe, "--live", "--out", out, *options], env, log)
    ids: list[str] = []
    try:
        ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                       what="a submitted Slurm job", proc=proc, log=log)
        # Interrupt while the job is really running on the node (its server started), not merely queued, after its
        # first job ended.
        # (its outcome.json, which the worker writes after the summary: what the driver reads back)
        first = wait_for(lambda: [j for j in job_dirs(out).values() if (j / "outcome.json").is_file()
                                  and read_json(j / "outcome.json")["status"] == "valid"]
                         if (out / "jobs").is_dir() else None,
                         timeout=120, what="the first job's valid outcome", proc=proc, log=log)
        assert len(first) == 1 and all(_in_queue(i) for i in ids)
        server = wait_for(lambda: server_pids(out), timeout=60, what="the server's pid file", proc=proc, log=log)[0]
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(timeout=180)
        assert rc != 0
        text = log.read_text()
        assert f"cancelling Slurm job {ids[0]}" in text
        assert "interrupted: 1 job finished and stored" in text, text[-4000:]
        stored = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "results", "list", "--all", "--json"],
                                env=env, capture_output=True, text=True, timeout=60)
        assert stored.returncode == 0 and [r["job_id"] for r in json.loads(stored.stdout)] == [first[0].name]
        assert not any(_in_queue(i) for i in ids), log.read_text()[-4000:]
        assert not alive(server), "the server step outlived its cancelled job"
        # The worker on the node heard the cancellation (scancel's SIGTERM) and recorded the interrupted job, named by
        # the signal the run exits for (Ctrl-C's SIGINT, exit 130), not scancel's: in its outcome and its summary.
        assert rc == 130, text[-4000:]
        said = [interrupted_by(signal.SIGINT)]
        interrupted = wait_for(lambda: [j for j in job_dirs(out).values() if (j / "outcome.json").exists()
                                        and read_json(j / "outcome.json")["reasons"] == said],
                               timeout=30, what="the interrupted job's outcome")
        assert len(interrupted) == 1
        if (interrupted[0] / "summary.json").exists():
            summary = read_json(interrupted[0] / "summary.json")
            assert summary["client_health"]["stop_reason"] == said[0], summary["client_health"]
        assert "SIGTERM" not in "".join(p.read_text() for p in interrupted[0].glob("*.json"))
    finally:
        leave_nothing(proc, ids)


def test_a_job_that_waits_for_a_node_says_why_and_ctrl_c_cancels_it(tmp_path: Path) -> None:
    """A batch job the cluster will not start yet (here: told to begin in an hour) is not a silent wait: the run says
    it is pending and Slurm's reason; an interrupt then cancels it from the queue."""
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start_cli([RECIPES / "slow-fixed-sim.yaml", "--live", "--out", out, *SLURM_OPTIONS,
                      "--executor-option", "extra_sbatch=[--begin=now+3600]",
                      "--executor-option", "pending_note_s=2"], cli_env(tmp_path), log)
    ids: list[str] = []
    try:
        ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                       what="a submitted Slurm job", proc=proc, log=log)
        note = wait_for(lambda: re.search(r"still waiting for a node after \d+ s: Slurm job (\d+) \((\w+)\) "
                                          r"pending", log.read_text()), timeout=30, what="a pending note", proc=proc,
                        log=log)
        assert note.group(1) == ids[0] and note.group(2) == "BeginTime"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130, log.read_text()[-4000:]
        assert not any(_in_queue(i) for i in ids), log.read_text()[-4000:]
    finally:
        leave_nothing(proc, ids)


def _failed_job() -> str:
    """The id of a batch job that has ended FAILED (a dependency on it can never be satisfied)."""
    job_id = subprocess.run(["sbatch", "--parsable", "--output=/dev/null", "--wrap=false"], capture_output=True,
                            text=True, timeout=30, check=True).stdout.strip().split(";")[0]
    wait_for(lambda: not _in_queue(job_id), timeout=60, what=f"batch job {job_id} to fail")
    return job_id


@pytest.mark.parametrize(("reason", "what", "fix"), [
    ("PartitionConfig", "it asks for more than a node of its partition has", "cpus_per_task="),
    ("DependencyNeverSatisfied", "a job its --dependency waits for ended", "--dependency in extra_sbatch"),
    # Slurm 22.05 pends a job whose --time exceeds its partition's MaxTime for PartitionConfig too: it was explained
    # as too many CPUs or too much memory, with a fix that never named the time limit.
    ("PartitionConfig", "its time limit, 00:05:00, is longer than its partition's MaxTime",
     "lower it to the partition's (`sinfo -o '%P %l'`)"),
])
def test_a_job_slurm_will_never_start_is_cancelled_and_its_jobs_fail_with_the_reason_and_the_fix(
        tmp_path: Path, reason: str, what: str, fix: str) -> None:
    """More CPUs per task than any node has (sbatch takes the job: the partition does not enforce its limits at
    submission), or a dependency on a job that failed: the job would pend (`PartitionConfig`,
    `DependencyNeverSatisfied`) until somebody killed the run. It is cancelled at once; its jobs fail with what that
    reason means and the fix, and the run ends."""
    partition = None
    if "time limit" in what:  # a partition of its own (a MaxTime on the shared one would hold other tests' jobs)
        partition = f"llmsweep-short-{secrets.token_hex(3)}"
        subprocess.run(["scontrol", "create", f"partitionname={partition}", f"nodes={_node()}", "maxtime=1"],
                       check=True, capture_output=True, timeout=30)
        option = f"partition={partition}"
    elif reason == "PartitionConfig":
        cpus = max(int(n.rstrip("+")) for n in subprocess.run(["sinfo", "-h", "-o", "%c"], capture_output=True,
                                                                text=True, timeout=30, check=True).stdout.split())
        option = f"cpus_per_task={cpus + 1}"
    else:
        option = f"extra_sbatch=[--dependency=afterok:{_failed_job()}]"
    out = tmp_path / "out"
    proc = start_cli([RECIPES / "fixed-sim.yaml", "--live", "--out", out, "--no-report", *SLURM_OPTIONS,
                      "--executor-option", option], cli_env(tmp_path), tmp_path / "run.log")
    ids: list[str] = []
    try:
        ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                       what="a submitted Slurm job", proc=proc, log=tmp_path / "run.log")
        code = proc.wait(timeout=60)  # before the fix: pending until killed
        text = (tmp_path / "run.log").read_text()
        assert code == 1, text[-4000:]
        assert not _in_queue(ids[0]), text[-4000:]
        # a time limit over MaxTime pends for PartitionConfig or, once the scheduler has looked, PartitionTimeLimit:
        # the same reason, said the same way
        reasons = (reason, "PartitionTimeLimit") if "time limit" in what else (reason,)
        assert any(f"Slurm job {ids[0]}: Slurm will never start batch job {ids[0]}: it pends for {r} ({what}" in text
                   for r in reasons), text[-4000:]
        assert "failed, 2 jobs: Slurm will never start" in text and fix in text, text[-4000:]
        assert "still waiting for a node" not in text
    finally:
        leave_nothing(proc, ids)
        if partition is not None:
            subprocess.run(["scontrol", "delete", f"partitionname={partition}"], capture_output=True, timeout=30)


def _node() -> str:
    return subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], capture_output=True, text=True, timeout=30,
                          check=True).stdout.split()[0]


_SLOW_SBATCH = """#!/bin/bash
# sbatch as a loaded controller answers it: the job is queued, its id comes back late
echo $$ > {dir}/shim.pid
out=$({real} "$@"); rc=$?
if [ $rc -eq 0 ] && [ "$1" = --parsable ]; then
  printf '%s\\n' "$out" > {dir}/submitted
  trap 'kill $sleeper; exit 1' TERM
  sleep 120 & sleeper=$!
  wait $sleeper
fi
printf '%s\\n' "$out"
exit $rc
"""


def test_a_job_submitted_by_an_sbatch_the_run_was_killed_in_is_cancelled_by_resume(tmp_path: Path) -> None:
    """SIGKILL while `sbatch` has queued the job but not yet answered with its id: the run never recorded it, and
    `--resume` finds it in the queue by its working directory (the server folder) and cancels it, instead of letting
    it run beside the resumed run, writing into the same folders."""
    real = shutil.which("sbatch")
    assert real is not None
    shim = tmp_path / "bin"
    shim.mkdir()
    (shim / "sbatch").write_text(_SLOW_SBATCH.format(dir=shim, real=real))
    (shim / "sbatch").chmod(0o755)
    out, log = tmp_path / "out", tmp_path / "run.log"
    env = cli_env(tmp_path)
    proc = start_cli([RECIPES / "slow-fixed-sim.yaml", "--live", "--out", out, "--no-report", *SLURM_OPTIONS],
                     {**env, "PATH": f"{shim}:{env['PATH']}"}, log)
    orphan = ""
    try:
        orphan = wait_for(lambda: (shim / "submitted").is_file() and (shim / "submitted").read_text().strip(),
                          timeout=60, what="a job queued by sbatch", proc=proc, log=log).split(";")[0]
        proc.kill()
        proc.wait(timeout=30)
        os.kill(int((shim / "shim.pid").read_text()), signal.SIGTERM)  # the slow answer nobody waits for any more
        assert _in_queue(orphan) and not _slurm_ids(out)  # queued, and never recorded
        resumed = run_cli([RECIPES / "slow-fixed-sim.yaml", "--live", "--out", out, "--no-report", "--resume",
                           *SLURM_OPTIONS], env, timeout=240)
        assert resumed.returncode == 0, resumed.stderr[-4000:]
        assert f"cancelling Slurm job {orphan} left by an earlier, interrupted run" in resumed.stderr, \
            resumed.stderr[-4000:]
        state = subprocess.run(["scontrol", "show", "job", "-o", orphan], capture_output=True, text=True, timeout=30)
        assert "JobState=CANCELLED" in state.stdout, state.stdout
        assert orphan not in _slurm_ids(out)
    finally:
        if proc.poll() is None:
            proc.kill()
        if orphan:
            subprocess.run(["scancel", orphan], capture_output=True, timeout=30)


@dataclass
class _TimeLimitRun:
    """The run `test_a_batch_job_that_hits_its_time_limit_…` asserts on, started when this file's first test starts."""

    proc: subprocess.Popen[bytes]
    out: Path
    log: Path
    ids: list[str] = field(default_factory=list)
    first: str = ""
    error: BaseException | None = None
    armed: threading.Thread | None = None


@pytest.fixture(scope="module", autouse=True)
def time_limit_run(slurm_available: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[_TimeLimitRun]:
    """Slurm stops a batch job at its time limit only at slurmctld's next time-limit check (every 30 s): the run is
    started before this file's other tests, and waits for that check while they run (a thread moves the batch job's
    end to now once its first job runs); its test, last in the file, then finds it done or nearly. The node has CPUs
    for it beside the other tests' batch jobs."""
    tmp_path = tmp_path_factory.mktemp("time-limit")
    recipe = tmp_path / "slow24.yaml"
    recipe.write_text((RECIPES / "slow-fixed-sim.yaml").read_text().replace("num-prompts: 3", "num-prompts: 24"))
    out, log = tmp_path / "out", tmp_path / "run.log"
    run = _TimeLimitRun(start_cli([recipe, "--live", "--out", out, "--no-report", *SLURM_OPTIONS], cli_env(tmp_path),
                                  log), out, log)

    def arm() -> None:
        try:
            run.ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                               what="a submitted Slurm job", proc=run.proc, log=log)
            # The worker's progress reaches the run's output while the batch job runs: the first job started.
            run.first = wait_for(lambda: re.search(rf"\[slurm {run.ids[0]}\] job (\S+): conc 1 ", log.read_text()),
                                 timeout=90, what="the first job's start, relayed", proc=run.proc, log=log).group(1)
            _end_now(run.ids[0])
        except BaseException as exc:  # re-raised by the test
            run.error = exc

    run.armed = threading.Thread(target=arm, name="time-limit-run", daemon=True)
    run.armed.start()
    try:
        yield run
    finally:
        if run.proc.poll() is None:  # its test did not run (deselected), or failed: the thread sees the run end
            run.proc.kill()
        run.armed.join(timeout=120)
        for job_id in run.ids:
            subprocess.run(["scancel", job_id], capture_output=True, timeout=30)


def test_a_group_whose_windows_exceed_the_time_limit_is_warned_about_before_it_waits(tmp_path: Path) -> None:
    """Two 100-s windows under a one-minute time limit: each batch job is said to be too short as it is submitted
    (the jobs here are told to begin in an hour, so nothing runs; Ctrl-C cancels them)."""
    recipe = tmp_path / "long-windows.yaml"
    recipe.write_text((RECIPES / "agentic-sim.yaml").read_text().replace("duration: 8", "duration: 100"))
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start_cli([recipe, "--live", "--out", out, "--executor", "slurm", "--executor-option", "poll_s=0.5",
                      "--executor-option", "time_limit=00:01:00",
                      "--executor-option", "extra_sbatch=[--begin=now+3600]"],
                     cli_env(tmp_path, LLMSWEEP_TEST_SECRET="x"), log)
    ids: list[str] = []
    try:
        wait_for(lambda: len(re.findall(r"submitted Slurm job", log.read_text())) == 2, timeout=60,
                 what="two submitted Slurm jobs", proc=proc, log=log)
        ids = _slurm_ids(out)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130, log.read_text()[-4000:]
    finally:
        leave_nothing(proc, ids)
    warnings = re.findall(r"warning: (\S+): its 1 job plans 1m40s of measurement windows alone, more than the "
                          r"Slurm time limit 00:01:00; Slurm will stop the batch job before it is done",
                          log.read_text())
    assert sorted(warnings) == sorted(p.name for p in (out / "servers").iterdir()), log.read_text()[-4000:]


def _end_now(job_id: str) -> None:
    """Move a running batch job's end to now. slurmctld, busy with the other tests' jobs, can refuse an update for a
    moment: it is tried again for up to 20 s, and a refusal that lasts says slurmctld's own words."""
    said = ""
    for _ in range(10):
        done = subprocess.run(["scontrol", "update", f"JobId={job_id}", "EndTime=now"], capture_output=True, text=True,
                              timeout=30)
        if done.returncode == 0:
            return
        said = (done.stderr or done.stdout).strip()
        time.sleep(2)
    raise AssertionError(f"scontrol could not move job {job_id}'s end to now: {said}")


def test_a_batch_job_that_hits_its_time_limit_fails_its_jobs_with_that_reason_and_the_fix(
        time_limit_run: _TimeLimitRun) -> None:
    """Slurm stops a batch job at its time limit with SIGTERM, which its worker takes for an interrupt: the job it was
    running and those it never reached fail with TIMEOUT, the time limit and the fix (raise time_limit, --resume), not
    with "interrupted by SIGTERM".

    A real TIMEOUT, made quick: the smallest time limit is a minute, so once the first job runs the batch job's end
    is moved to now (`scontrol update EndTime=now`); slurmctld enforces it at its next time-limit check (every 30 s),
    so the run takes about 15-40 s — spent while this file's other tests run (`time_limit_run`, started with the
    first of them). Its jobs are long (24 prompts, ~45 s each) so the first is still running then."""
    run = time_limit_run
    assert run.armed is not None
    run.armed.join(timeout=150)
    if run.error is not None:
        raise run.error
    assert run.first, "the run's batch job was never moved to its end"
    out, log, ids, first = run.out, run.log, run.ids, run.first
    try:
        rc = run.proc.wait(timeout=120)
    finally:
        leave_nothing(run.proc, ids)
    text = log.read_text()
    assert rc == 1, text[-4000:]
    assert re.search(rf"Slurm job {ids[0]} ended TIMEOUT \(exit 143\): Slurm stopped it because its time limit, "
                     r"00:05:00, ran out; 0 of 3 "
                     r"jobs finished, 1 interrupted, 2 not run — raise --executor-option time_limit=HH:MM:SS, "
                     "then rerun with --resume to run the rest", text), text[-4000:]
    assert f"[slurm {ids[0]}] slurmstepd" in text  # Slurm's own word on the node, relayed
    outcomes = {o["job_id"]: o for o in read_json(out / "run.json")["outcomes"]}
    assert len(outcomes) == 3 and {o["status"] for o in outcomes.values()} == {"failed"}, outcomes
    why = "Slurm stopped it because its time limit, 00:05:00, ran out"
    fix = "raise --executor-option time_limit=HH:MM:SS"
    assert outcomes.pop(first)["reasons"] == [
        f"interrupted: Slurm job {ids[0]} ended TIMEOUT while this job ran ({why}); {fix}, then rerun with --resume"]
    # The job folder says so too (the worker had written "interrupted by SIGTERM" there).
    assert read_json(out / "jobs" / first / "outcome.json")["reasons"][0].startswith(
        f"interrupted: Slurm job {ids[0]} ended TIMEOUT")
    for o in outcomes.values():
        assert o["reasons"] == [f"not run: Slurm job {ids[0]} ended TIMEOUT before it reached this job ({why}); {fix}, "
                                "then `--resume` runs it"]
    assert interrupted_by(signal.SIGTERM) not in (out / "run.json").read_text()
    assert not any(_in_queue(i) for i in ids)


def test_a_job_measured_while_slurm_suspended_its_batch_job_is_invalid_and_resume_runs_it_again(
        tmp_path: Path) -> None:
    """`scontrol suspend` (or preemption/gang scheduling by suspension) stops the batch job's processes, server and
    client alike, but not the client's clocks: the job in flight measured the pause as a slow server and was stored
    valid (31 % less throughput after a 12-s suspension). It is judged invalid with the reason and the fix (also for
    `summarize`), the jobs measured after the resume stay valid, and `--resume` runs only it again."""
    out, log = tmp_path / "out", tmp_path / "run.log"
    env = cli_env(tmp_path)
    recipe = _half_length_recipe(tmp_path)
    proc = start_cli([recipe, "--live", "--out", out, *SLURM_OPTIONS], env, log)
    ids: list[str] = []
    try:
        ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                       what="a submitted Slurm job", proc=proc, log=log)
        first = wait_for(lambda: [j for j in job_dirs(out).values() if (j / "job.json").is_file()]
                         if (out / "jobs").is_dir() else None, timeout=60, what="the first job's start", proc=proc,
                         log=log)
        assert len(first) == 1
        subprocess.run(["scontrol", "suspend", ids[0]], check=True, capture_output=True, timeout=30)
        try:
            wait_for(lambda: f"Slurm job {ids[0]} is suspended" in log.read_text(), timeout=30,
                     what="the driver's word on the suspension", proc=proc, log=log)
            time.sleep(1)  # a pause the job's timings feel
        finally:
            subprocess.run(["scontrol", "resume", ids[0]], capture_output=True, timeout=30)
        rc = proc.wait(timeout=120)
    finally:
        leave_nothing(proc, ids)
    said = log.read_text()
    assert rc == 1, said[-4000:]
    assert f"the job it was running ({first[0].name}) will be judged invalid" in said
    assert re.search(rf"Slurm job {ids[0]} resumed after \d+ s suspended", said), said[-4000:]
    outcomes = {o["job_id"]: o for o in read_json(out / "run.json")["outcomes"]}
    why = outcomes[first[0].name]["reasons"][0]
    held = re.search(r" for about (\d+) s in all ", why)
    assert held and int(held.group(1)) >= 1, why  # how long, as Slurm counts it
    assert why == (f"Slurm suspended batch job {ids[0]} for about {held.group(1)} s in all while this job ran "
                   "(`scontrol suspend`, or preemption or gang scheduling by suspension): its timings include the "
                   "pause; run where jobs are not suspended (--executor-option partition=NAME, or a --qos in "
                   "extra_sbatch), then `--resume` runs it again")
    assert outcomes.pop(first[0].name)["reasons"][0] == why  # run.json, the end table and the store say so
    suspended = read_json(first[0] / "outcome.json")
    assert suspended["status"] == "invalid" and suspended["reasons"][0] == why, suspended
    assert {o["status"] for o in outcomes.values()} == {"valid"} and len(outcomes) == 2, outcomes
    # `summarize` reaches the same verdict from the folder (its run.json keeps the note).
    again = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "summarize", str(first[0])], env=env,
                           capture_output=True, text=True, timeout=60)
    assert verdict(first[0]) == "invalid" and why in (first[0] / "summary.json").read_text(), again.stderr[-2000:]
    resumed = run_cli([recipe, "--live", "--out", out, *SLURM_OPTIONS, "--resume"], env)
    assert resumed.returncode == 0, resumed.stdout[-4000:] + resumed.stderr[-4000:]
    assert verdict(first[0]) == "valid"
    assert {o["status"] for o in read_json(out / "run.json")["outcomes"]} == {"valid", "skipped"}
    assert not any(_in_queue(i) for i in [*ids, *_slurm_ids(out)])


def _worker_pid(out: Path) -> int | None:
    """The node-side worker (`run --_worker`) of the run into `out`: this cluster's one node is this machine."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            argv = read_proc(int(entry.name), "cmdline").split(b"\0")
            if b"--_worker" in argv and any(str(out).encode() in arg for arg in argv):
                return int(entry.name)
    return None


def test_a_worker_killed_mid_job_fails_that_job_with_its_death_and_resume_runs_it_and_the_jobs_it_never_reached(
        tmp_path: Path) -> None:
    """The node-side worker SIGKILLed (as the kernel's OOM killer does where Slurm does not confine memory, or a
    `kill -9`) while the second of three jobs measures: every job it left read "Slurm job N ended FAILED (exit 137)
    before this job wrote its outcome", the one it died in and the one it never reached alike, with no fix. Now the
    first stays valid; the second says the worker died in it (SIGKILL, exit 137, Slurm's FAILED and node, its
    records cut short, the batch log's last lines) and the fix (the node's memory, then --resume); the third says it
    was never reached and why; and `--resume` runs the second and third."""
    out, log = tmp_path / "out", tmp_path / "run.log"
    env = cli_env(tmp_path)
    recipe = RECIPES / "slow-fixed-sim.yaml"  # three jobs of a few seconds each, one after the other
    proc = start_cli([recipe, "--live", "--out", out, "--no-report", *SLURM_OPTIONS], env, log)
    ids: list[str] = []

    def measuring_second() -> Path | None:
        found = [j for j in job_dirs(out).values() if "_conc2_" in j.name and (r := j / "records.jsonl").is_file()
                 and r.read_text().strip()] if (out / "jobs").is_dir() else []
        return found[0] if found else None

    try:
        ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                       what="a submitted Slurm job", proc=proc, log=log)
        second = wait_for(measuring_second, timeout=120, what="the second job's first record", proc=proc, log=log)
        os.kill(wait_for(lambda: _worker_pid(out), timeout=10, what="the worker's process"), signal.SIGKILL)
        rc = proc.wait(timeout=120)
    finally:
        leave_nothing(proc, ids)
    text = log.read_text()
    assert rc == 1, text[-4000:]
    outcomes = {o["job_id"]: o for o in read_json(out / "run.json")["outcomes"]}
    first, third = (next(name for name in outcomes if f"_conc{conc}_" in name) for conc in (1, 3))
    assert not (out / "jobs" / third).exists()  # never begun
    assert outcomes[first]["status"] == "valid", outcomes[first]
    assert outcomes[second.name]["status"] == outcomes[third]["status"] == "failed", outcomes
    batch_log = next((out / "servers").glob(f"*/slurm-{ids[0]}.err"))
    killed = ("was killed by SIGKILL (exit 137: the kernel's out-of-memory killer, or a `kill -9` from outside this "
              "run)")
    fix = (r"if the node ran out of memory \(`dmesg` on (\S+) says \"Out of memory: Killed process …\"\), give the "
           r"batch job more: --executor-option mem=SIZE \(it asked for none and shared the node's\), or "
           r"exclusive=true for the whole node, or have the engine use less; otherwise find what killed the worker "
           rf"\(its batch log: {re.escape(str(batch_log))}\)")
    died = outcomes[second.name]["reasons"]
    assert len(died) == 1 and re.fullmatch(
        rf"the worker of Slurm job {ids[0]} {re.escape(killed)} while this job ran, before it wrote its outcome "
        r"\(Slurm: FAILED on (\S+)\); its window had begun: (?:1 record|\d+ records) in records.jsonl, cut short, "
        r"no result\n"
        rf"--- last 20 lines of {re.escape(str(batch_log))} ---\n(.*\n)*.*Killed .*--_worker .*\n"
        rf"  fix: {fix}; then rerun with --resume", died[0]), died
    assert re.fullmatch(
        rf"not run: the worker of Slurm job {ids[0]} {re.escape(killed)} while it ran job {second.name}, before it "
        rf"reached this job \(Slurm: FAILED on \S+\); {fix}; then `--resume` runs it",
        outcomes[third]["reasons"][0]), outcomes[third]
    assert re.search(rf"Slurm job {ids[0]} ended FAILED: its worker {re.escape(killed)} while it ran job "
                     rf"{second.name}; 1 of 3 jobs finished, 1 died with the worker, 1 not run — {fix}; then "
                     "rerun with --resume to run the rest", text), text[-4000:]
    assert "before this job wrote its outcome" not in text
    assert not any(_in_queue(i) for i in ids)

    resumed = run_cli([recipe, "--live", "--out", out, "--no-report", "--resume", *SLURM_OPTIONS], env)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    again = {o["job_id"]: o["status"] for o in read_json(out / "run.json")["outcomes"]}
    assert again == {first: "skipped", second.name: "valid", third: "valid"}, again
    assert verdict(second) == verdict(out / "jobs" / third) == "valid"
    assert (second / "attempts" / "1" / "records.jsonl").is_file()  # the records cut short, kept aside
    assert not any(_in_queue(i) for i in _slurm_ids(out))


_DOWN_SQUEUE = """#!/bin/bash
# squeue while slurmctld is down (restarted, failing over): as Slurm 22.05 says it, until {flag} goes
if [ -e {flag} ]; then
  echo failed >> {flag}.calls
  echo "slurm_load_jobs error: Unable to contact slurm controller (connect failure)" >&2
  exit 1
fi
exec {real} "$@"
"""


def test_a_controller_that_stops_answering_for_a_while_does_not_lose_the_batch_job(tmp_path: Path) -> None:
    """slurmctld restarted mid-run: squeue fails (each call ~10-20 s on a real outage) while the batch job runs on.
    Five failures in a row gave the batch job up for lost: its jobs failed while they ran, the run ended, and the
    batch job ran on unstored. Now the run waits (`lost_track_s`, 10 min), reads back what finishes meanwhile, and
    stores every job valid. (squeue is a shim that fails for a few seconds: poll_s=0.5 makes that ten failures.)"""
    real = shutil.which("squeue")
    assert real is not None
    shim, flag = tmp_path / "shim", tmp_path / "controller-down"
    shim.mkdir()
    (shim / "squeue").write_text(_DOWN_SQUEUE.format(flag=flag, real=real))
    (shim / "squeue").chmod(0o755)
    out, log = tmp_path / "out", tmp_path / "run.log"
    env = cli_env(tmp_path)
    proc = start_cli([RECIPES / "slow-fixed-sim.yaml", "--live", "--out", out, "--no-report", *SLURM_OPTIONS],
                     {**env, "PATH": f"{shim}:{env['PATH']}"}, log)
    ids: list[str] = []
    try:
        ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                       what="a submitted Slurm job", proc=proc, log=log)
        wait_for(lambda: f"Slurm job {ids[0]} is running" in log.read_text(), timeout=60, what="the batch job to run",
                 proc=proc, log=log)
        flag.touch()
        try:
            calls = tmp_path / "controller-down.calls"
            wait_for(lambda: calls.is_file() and len(calls.read_text().split()) > 5, timeout=60,
                     what="more failed squeue calls than max_poll_failures", proc=proc, log=log)
        finally:
            flag.unlink()
        rc = proc.wait(timeout=120)
    finally:
        flag.unlink(missing_ok=True)
        leave_nothing(proc, ids)
    text = log.read_text()
    assert rc == 0, text[-4000:]
    assert "lost track" not in text
    assert f"Slurm job {ids[0]} ended COMPLETED" in text, text[-4000:]
    assert [o["status"] for o in read_json(out / "run.json")["outcomes"]] == ["valid"] * 3
    assert not _in_queue(ids[0])


def test_a_server_the_worker_starts_itself_records_the_batch_job_it_ran_in(tmp_path: Path) -> None:
    """With `node.use_srun: false` the worker on the node starts the server itself (no srun step): the result named
    the executor but not the Slurm job it ran in (`slurm_job_id: null`)."""
    out = tmp_path / "out"
    proc = run_cli([RECIPES / "fixed-sim.yaml", "--live", "--out", out, *SLURM_OPTIONS, "--executor-option",
                    "node={use_srun: false}", "--no-report"], cli_env(tmp_path), timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    (job_id,) = _slurm_ids(out)
    for jdir in job_dirs(out).values():
        launch = read_json(jdir / "run.json")["provenance"]["launch"]
        assert (launch["executor"], launch["launcher"], launch["slurm_job_id"]) == ("slurm", "local", job_id), launch
    assert not _in_queue(job_id)
