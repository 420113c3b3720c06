"""`llmsweep run --executor slurm` where Slurm does what a poll cannot see or the user cannot fix from the run: a
suspension shorter than the poll interval, a controller that stays away past `lost_track_s`, an sbatch that refuses
the user's options, a held job. Against real Slurm: the single-node cluster (scripts/ci/start_slurm.sh), and for the
controller outage a private one-node cluster this file starts and removes itself (its own slurmctld and slurmd, ports
and state), so that stopping its controller never touches a cluster other tests use."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.procs import wait_for
from support.slurm import leave_nothing, require_slurm
from test_run_slurm import SLURM_OPTIONS, _half_length_recipe, _in_queue, _slurm_ids
from test_run_support import RECIPES, cli_env, read_json, run_cli, run_here, start_cli, verdict

from llmsweep.execute.slurm import _suspended_note

pytestmark = [pytest.mark.slurm, pytest.mark.slow]  # slow: xdist starts this file first (tests/conftest.py)


@pytest.fixture(scope="module", autouse=True)
def slurm_available() -> None:
    require_slurm()


def _outcomes(out: Path) -> dict[str, dict[str, Any]]:
    return {o["job_id"]: o for o in read_json(out / "run.json")["outcomes"]}


def test_a_suspension_between_two_polls_is_asked_of_slurm_and_its_job_judged_invalid(tmp_path: Path) -> None:
    """A 2-s `scontrol suspend` while the first job measures, between two looks at the queue (poll_s 20: the driver
    looks as it submits, then after the batch job's ~13 s): no poll sees SUSPENDED, and the job was stored valid with
    the pause in its timings. Slurm keeps the suspension (SuspendTime, RunTime): it is asked before the jobs are
    stored, and the job that measured through it is judged invalid with the reason a seen suspension gives; the jobs
    measured after the resume stay valid."""
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start_cli([_half_length_recipe(tmp_path), "--live", "--out", out, "--no-report", *SLURM_OPTIONS,
                      "--executor-option", "poll_s=20"], cli_env(tmp_path), log)
    ids: list[str] = []
    try:
        ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                       what="a submitted Slurm job", proc=proc, log=log)
        first = wait_for(lambda: [j for j in (out / "jobs").iterdir() if (j / "job.json").is_file()]
                         if (out / "jobs").is_dir() else None, timeout=60, what="the first job's start", proc=proc,
                         log=log)
        subprocess.run(["scontrol", "suspend", ids[0]], check=True, capture_output=True, timeout=30)
        try:
            time.sleep(2)  # a pause the job's timings feel
        finally:
            subprocess.run(["scontrol", "resume", ids[0]], capture_output=True, timeout=30)
        rc = proc.wait(timeout=120)
    finally:
        leave_nothing(proc, ids)
    said = log.read_text()
    assert rc == 1, said[-4000:]
    assert f"Slurm job {ids[0]} is suspended" not in said  # no poll saw it: Slurm told
    assert re.search(rf"Slurm job {ids[0]} was suspended between two looks at the queue \(about \d+ s in all; "
                     rf"`scontrol show job {ids[0]}`: SuspendTime=\S+\): the job it was running "
                     rf"\({first[0].name}\) will be judged invalid", said), said[-4000:]
    outcomes = _outcomes(out)
    why = _only_reason(outcomes.pop(first[0].name))
    assert 2 <= _suspended_for(why, ids[0]) <= 4, why  # the 2-s suspension, as Slurm counts it
    assert read_json(first[0] / "outcome.json")["status"] == "invalid"
    assert len(outcomes) == 2 and {o["status"] for o in outcomes.values()} == {"valid"}, outcomes
    assert not _in_queue(ids[0])


def _only_reason(outcome: dict[str, object]) -> str:
    reasons = outcome["reasons"]
    assert isinstance(reasons, list) and len(reasons) == 1, outcome
    return str(reasons[0])


def _suspended_for(reason: str, batch_id: str) -> int:
    """The seconds a job's reason says Slurm had its batch job suspended in all; the rest of it is the note's."""
    match = re.search(r" for about (\d+) s in all ", reason)
    assert match, reason
    seconds = int(match.group(1))
    assert reason == _suspended_note(batch_id, seconds), reason
    return seconds


def test_several_suspensions_between_two_polls_invalidate_every_job_they_hit_and_say_the_total(tmp_path: Path) -> None:
    """Two 1-s `scontrol suspend`s between two looks at the queue (poll_s 40: the driver looks as it submits, then
    after both jobs ended): the first while the first job measures, the second seconds into the second job. Slurm
    keeps only the last suspension's time (SuspendTime) and the total (the wall clock less RunTime): the driver placed
    one suspension of the total length before the last resume, missed the first job (it ended seconds before that),
    and stored it with the worker's own note only. Every job in flight since the last look and started before the
    last resume is now judged invalid with Slurm's reason, which says how long the batch job was suspended in all."""
    recipe = tmp_path / "two-slow-jobs.yaml"
    text = (RECIPES / "slow-fixed-sim.yaml").read_text()
    assert "conc-list: [1, 2, 3]" in text  # osl 400: the first job ~8 s (one at a time), the second ~6 s
    recipe.write_text(text.replace("conc-list: [1, 2, 3]", "conc-list: [1, 2]"))
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start_cli([recipe, "--live", "--out", out, "--no-report", *SLURM_OPTIONS, "--executor-option", "poll_s=40"],
                     cli_env(tmp_path), log)
    ids: list[str] = []

    def measuring(conc: int, records: int) -> Path | None:
        jobs = out / "jobs"
        found = [j for j in jobs.iterdir() if f"_conc{conc}_" in j.name and (r := j / "records.jsonl").is_file()
                 and len(r.read_text().splitlines()) >= records] if jobs.is_dir() else []
        return found[0] if found else None

    def suspend_for_a_second() -> None:
        subprocess.run(["scontrol", "suspend", ids[0]], check=True, capture_output=True, timeout=30)
        try:
            time.sleep(1)  # a pause the job's timings feel
        finally:
            subprocess.run(["scontrol", "resume", ids[0]], capture_output=True, timeout=30)

    try:
        ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                       what="a submitted Slurm job", proc=proc, log=log)
        first = wait_for(lambda: measuring(1, 1), timeout=60, what="the first job's first record", proc=proc, log=log,
                         poll_s=0.05)
        suspend_for_a_second()
        # its warm-up and two requests recorded: a request left, two seconds after the first job ended
        second = wait_for(lambda: measuring(2, 3), timeout=60, what="the second job's third record", proc=proc,
                          log=log, poll_s=0.05)
        assert not (second / "outcome.json").exists()
        suspend_for_a_second()
        rc = proc.wait(timeout=120)
    finally:
        leave_nothing(proc, ids)
    said = log.read_text()
    assert rc == 1, said[-4000:]
    assert f"Slurm job {ids[0]} is suspended" not in said  # no poll saw either: Slurm told
    assert re.search(rf"Slurm job {ids[0]} was suspended between two looks at the queue \(about \d+ s in all; "
                     rf"`scontrol show job {ids[0]}`: SuspendTime=\S+\): the jobs it was running "
                     rf"\({first.name}, {second.name}\) will be judged invalid", said), said[-4000:]
    outcomes = _outcomes(out)
    assert set(outcomes) == {first.name, second.name}
    totals = set()
    for job in (first, second):
        why = _only_reason(outcomes[job.name])
        totals.add(_suspended_for(why, ids[0]))
        assert read_json(job / "outcome.json") == outcomes[job.name] and outcomes[job.name]["status"] == "invalid"
        assert why in (job / "summary.json").read_text()  # `summarize` reaches the same verdict
    (total,) = totals
    assert 2 <= total <= 5, total  # both 1-s suspensions, as Slurm counts them (to the second)
    assert not _in_queue(ids[0])


def test_a_held_batch_job_says_who_holds_it_and_how_to_release_it_and_the_run_waits_for_it(tmp_path: Path) -> None:
    """A batch job submitted held (`--hold`: JobHeldUser), then held by an administrator (`scontrol hold` as root:
    JobHeldAdmin): the pending notes said "still waiting for a node (JobHeldAdmin)", as if the cluster were busy.
    They say who holds it and `scontrol release ID`; the run keeps waiting, and runs once it is released."""
    out, log = tmp_path / "out", tmp_path / "run.log"
    proc = start_cli([RECIPES / "fixed-sim.yaml", "--live", "--out", out, "--no-report", *SLURM_OPTIONS,
                      "--executor-option", "extra_sbatch=[--hold]", "--executor-option", "pending_note_s=1"],
                     cli_env(tmp_path), log)
    ids: list[str] = []
    try:
        ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                       what="a submitted Slurm job", proc=proc, log=log)
        release = f"it starts only once released, `scontrol release {ids[0]}`"
        wait_for(lambda: f"Slurm job {ids[0]} is held by its user (JobHeldUser): {release}" in log.read_text(),
                 timeout=30, what="the note of a job its user holds", proc=proc, log=log)
        subprocess.run(["scontrol", "hold", ids[0]], check=True, capture_output=True, timeout=30)
        wait_for(lambda: f"Slurm job {ids[0]} is held by an administrator (JobHeldAdmin): {release} (an "
                 "administrator may run it: ask one)" in log.read_text(), timeout=30,
                 what="the note of a job an administrator holds", proc=proc, log=log)
        subprocess.run(["scontrol", "release", ids[0]], check=True, capture_output=True, timeout=30)
        rc = proc.wait(timeout=120)
    finally:
        leave_nothing(proc, ids)
    text = log.read_text()
    assert rc == 0, text[-4000:]
    assert re.search(rf"still waiting after \d+ s: Slurm job {ids[0]} is held by", text)
    assert "JobHeld" not in "".join(re.findall(r"still waiting for a node .*", text))
    assert [o["status"] for o in _outcomes(out).values()] == ["valid"] * 2


@pytest.mark.parametrize(("option", "said", "fix"), [
    ("partition=no-such-partition", "invalid partition specified: no-such-partition",
     r"give a partition `sinfo` lists \(.*\(the default\)\): --executor-option partition=NAME"),
    ("mem=999999G", "Requested node configuration is not available",
     r"ask for what a node of the partition has \(`sinfo -N -o '%N %P %c %m %G'`: CPUs, memory, GPUs\)"),
], ids=["partition", "node-configuration"])
def test_an_sbatch_refusal_of_the_users_option_exits_2_naming_the_option(tmp_path: Path, option: str, said: str,
                                                                         fix: str) -> None:
    """sbatch refuses an option the user gave (a partition or GPU resource the cluster does not have): bad input,
    exit 2 as the design says ("exits 2 for bad input, 1 for a failed run or gate"), with Slurm's words and the
    option to change. It exited 1, as a failed run."""
    proc = run_here([RECIPES / "fixed-sim.yaml", "--live", "--out", tmp_path / "out", "--no-report", *SLURM_OPTIONS,
                     "--executor-option", option], cli_env(tmp_path))
    assert proc.returncode == 2, proc.stderr[-4000:]
    assert said in proc.stderr and re.search(r"fix: " + fix, proc.stderr), proc.stderr[-4000:]
    assert "start_slurm.sh" not in proc.stderr


def test_an_sbatch_that_cannot_reach_the_controller_stays_a_failed_run(tmp_path: Path) -> None:
    """The controller does not answer (here: a copy of the cluster's slurm.conf whose SlurmctldPort nobody listens
    on; sbatch retries for ~9 s, then says so): not the user's input, exit 1, and the fix is to bring slurmctld back,
    not an option to change."""
    conf = tmp_path / "slurm.conf"
    conf.write_text(re.sub(r"(?m)^SlurmctldPort=\d+$", f"SlurmctldPort={_free_port()}",
                           Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).read_text()))
    proc = run_here([RECIPES / "fixed-sim.yaml", "--live", "--out", tmp_path / "out", "--no-report", *SLURM_OPTIONS],
                    cli_env(tmp_path, SLURM_CONF=str(conf)))
    assert proc.returncode == 1, proc.stderr[-4000:]
    assert "Unable to contact slurm controller" in proc.stderr, proc.stderr[-4000:]
    assert "fix: check that slurmctld answers (`scontrol ping`" in proc.stderr, proc.stderr[-4000:]


def test_resume_cancels_a_recorded_batch_job_only_while_it_still_works_in_its_folder(tmp_path: Path) -> None:
    """A run SIGKILLed while its batch job pended leaves the job's id in servers/<group>/slurm_job_id and no
    slurm-<id>.rc (the job never ran). Cancelled by hand since, its number may name another job by the time the run is
    resumed: a controller whose state was reset numbers its jobs from the start again (as a CI cluster's does), and a
    --resume against another cluster (SLURM_CONF) finds that cluster's job of the number. `--resume` scancelled
    whatever job the queue listed under the recorded number, saying it was the earlier run's; it now cancels only a
    job still working in the folder it was submitted into, and leaves any other alone, saying so."""
    out, log = tmp_path / "out", tmp_path / "run.log"
    env = cli_env(tmp_path)
    proc = start_cli([RECIPES / "fixed-sim.yaml", "--live", "--out", out, "--no-report", *SLURM_OPTIONS,
                      "--executor-option", "extra_sbatch=[--begin=now+3600]"], env, log)
    ids: list[str] = []
    other = ""
    try:
        ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                       what="a submitted Slurm job", proc=proc, log=log)
        proc.kill()  # SIGKILL: the run cancels nothing, its batch job stays queued
        proc.wait(timeout=30)
        subprocess.run(["scancel", ids[0]], check=True, capture_output=True, timeout=30)  # cleaned up by hand
        wait_for(lambda: not _in_queue(ids[0]), timeout=60, what="the cancelled job to leave the queue")
        # another job, working in another folder, now goes by the number the run recorded
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        other = subprocess.run(["sbatch", "--parsable", "--begin=now+3600", f"--chdir={elsewhere}",
                                "--output=/dev/null", "--wrap", "sleep 600"], check=True, capture_output=True,
                               text=True, timeout=30).stdout.strip().split(";")[0]
        (record,) = (out / "servers").glob("*/slurm_job_id")
        record.write_text(other + "\n")
        resumed = run_here([RECIPES / "fixed-sim.yaml", "--live", "--out", out, "--no-report", "--resume",
                            *SLURM_OPTIONS], env)
        assert resumed.returncode == 0, resumed.stderr[-4000:]
        assert _in_queue(other), f"--resume cancelled Slurm job {other}, which is not its own"
        assert f"cancelling Slurm job {other}" not in resumed.stderr, resumed.stderr[-4000:]
        assert f"Slurm job {other}" in resumed.stderr and str(elsewhere) in resumed.stderr, resumed.stderr[-4000:]
    finally:
        leave_nothing(proc, [*ids, *([other] if other else [])])


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# ---- a controller that stays away past lost_track_s: a private one-node cluster, its controller stopped and started


class _Cluster:
    """A one-node Slurm of this file's own: the single-node cluster's slurm.conf with its own name, ports, state,
    spool, pid and log files (munge shared); its daemons are started and stopped by pid."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.conf = root / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        base = Path(os.environ.get("SLURM_CONF", "/etc/slurm/slurm.conf")).read_text()
        own = {"ClusterName": "llmsweep-outage", "SlurmctldPort": str(_free_port()), "SlurmdPort": str(_free_port()),
               "StateSaveLocation": root / "state", "SlurmdSpoolDir": root / "spool",
               "SlurmctldPidFile": root / "slurmctld.pid", "SlurmdPidFile": root / "slurmd.pid",
               "SlurmctldLogFile": root / "slurmctld.log", "SlurmdLogFile": root / "slurmd.log"}
        for key, value in own.items():
            base, n = re.subn(rf"(?m)^{key}=.*$", f"{key}={value}", base)
            assert n == 1, f"{key} not in the cluster's slurm.conf"
        (root / "state").mkdir()
        (root / "spool").mkdir()
        self.conf.write_text(base)
        self.started: dict[str, int] = {}
        """Each daemon's pid as first read: a slurmd whose pid file went (a node set down and back) is still
        stopped by it, not left running past the tests."""

    def pid(self, daemon: str) -> int | None:
        try:
            pid = int((self.root / f"{daemon}.pid").read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        self.started[daemon] = pid
        return pid

    def _steps(self) -> list[int]:
        """The slurmstepd processes of this cluster's jobs (a step left behind when its slurmd went first)."""
        mine = f"SLURM_CONF={self.conf}".encode()
        found = []
        for proc in Path("/proc").iterdir():
            try:
                if proc.name.isdigit() and (proc / "cmdline").read_bytes().startswith(b"slurmstepd") and \
                        mine in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
        return found

    def reap(self) -> None:
        """Every daemon this cluster started that still runs, ended (SIGKILL after 10 s of SIGTERM); a pid now
        another program's (reused) is left alone."""
        ours = [pid for pid in self.started.values() if _slurm_daemon(pid)] + self._steps()
        for pid in ours:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for pid in ours:
            while time.monotonic() < deadline and _alive(pid):
                time.sleep(0.1)
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)

    def answers(self) -> bool:
        try:
            return subprocess.run(["sinfo", "-h", "-o", "%T"], env=self.env, capture_output=True, text=True,
                                  timeout=5).stdout.strip() in ("idle", "mixed", "allocated")
        except subprocess.TimeoutExpired:
            return False

    def start_controller(self) -> None:
        if self.pid("slurmctld") is None:
            subprocess.run(["/usr/sbin/slurmctld", "-f", str(self.conf)], check=True, timeout=30)
        wait_for(self.answers, timeout=60, what="the private cluster's slurmctld to answer")

    def stop(self, daemon: str) -> None:
        pid = self.pid(daemon)
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
            wait_for(lambda: self.pid(daemon) is None, timeout=30, what=f"the private cluster's {daemon} to stop")

    def reconfigure(self, key: str, value: str) -> str:
        """Set `key` in its slurm.conf and have its controller read it again; returns the value it had."""
        text = self.conf.read_text()
        match = re.search(rf"(?m)^{key}=(.*)$", text)
        assert match is not None, f"{key} not in the cluster's slurm.conf"
        self.conf.write_text(text[:match.start()] + f"{key}={value}" + text[match.end():])
        subprocess.run(["scontrol", "reconfigure"], env=self.env, check=True, capture_output=True, timeout=30)
        return match.group(1)


@pytest.fixture(scope="module")
def private_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[_Cluster]:
    if os.geteuid() != 0 or not Path("/usr/sbin/slurmctld").is_file() or not Path("/usr/sbin/slurmd").is_file():
        pytest.skip("a private Slurm cluster needs root and /usr/sbin/slurmctld and slurmd")
    cluster = _Cluster(tmp_path_factory.mktemp("slurm-outage"))
    try:
        subprocess.run(["/usr/sbin/slurmd", "-f", str(cluster.conf)], check=True, timeout=30)
        cluster.pid("slurmd")  # remembered for the end, whatever becomes of its pid file
        cluster.start_controller()
        yield cluster
    finally:
        if cluster.pid("slurmctld") is not None:
            subprocess.run(["scancel", "-u", str(os.getuid())], env=cluster.env, capture_output=True,
                           timeout=30)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and subprocess.run(
                    ["squeue", "-h"], env=cluster.env, capture_output=True, text=True, timeout=30).stdout.strip():
                time.sleep(0.5)
        cluster.stop("slurmctld")
        cluster.stop("slurmd")
        cluster.reap()


def _slurm_daemon(pid: int) -> bool:
    try:
        return b"slurm" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


_OUTAGE_OPTIONS = (*SLURM_OPTIONS, "--executor-option", "lost_track_s=2", "--executor-option", "max_poll_failures=2",
                   "--executor-option", "command_timeout_s=3")


def _lose_the_controller(cluster: _Cluster, tmp_path: Path, cancel_wait_s: float
                         ) -> tuple[subprocess.Popen[bytes], Path, Path, str]:
    """A run of three ~18-s jobs on the private cluster, whose slurmctld is stopped once the server answers (the server
    step started: a step needs the controller): the run gives its batch job up for lost ~7 s later. Returns with the
    controller down and the run told so. The jobs are long enough that the batch job still runs when the tests
    bring the controller back: with ~8-s jobs (the shared recipe's) it sometimes finished all three during the
    outage on a quiet machine, and a finished batch job is rightly not cancelled."""
    out, log = tmp_path / "out", tmp_path / "run.log"
    env = {**cli_env(tmp_path), "SLURM_CONF": str(cluster.conf)}
    recipe = tmp_path / "slow-fixed-sim.yaml"
    text = (RECIPES / "slow-fixed-sim.yaml").read_text()
    assert "osl: 400" in text
    recipe.write_text(text.replace("osl: 400", "osl: 900"))
    proc = start_cli([recipe, "--live", "--out", out, "--no-report", *_OUTAGE_OPTIONS,
                      "--executor-option", f"cancel_wait_s={cancel_wait_s}"], env, log)
    try:
        (job_id,) = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                             what="a submitted Slurm job", proc=proc, log=log)
        wait_for(lambda: f"[slurm {job_id}] server ready in " in log.read_text(), timeout=60,
                 what="the server on the node", proc=proc, log=log)
        cluster.stop("slurmctld")
        wait_for(lambda: f"lost track of Slurm job {job_id}" in log.read_text(), timeout=60,
                 what="the run to give the batch job up for lost", proc=proc, log=log)
    except BaseException:
        proc.kill()
        raise
    return proc, out, log, job_id


def _job_state(cluster: _Cluster, job_id: str) -> str:
    shown = subprocess.run(["scontrol", "show", "job", "-o", job_id], env=cluster.env, capture_output=True,
                           text=True, timeout=30).stdout
    match = re.search(r"JobState=(\w+)", shown)
    return match.group(1) if match else shown


def test_a_batch_job_lost_while_slurmctld_was_away_is_cancelled_once_it_answers_again(
        private_cluster: _Cluster, tmp_path: Path) -> None:
    """slurmctld stopped past `lost_track_s`: the run gives the batch job up for lost and fails its jobs. It never
    cancelled it (its scancel failed while slurmctld was away, and was not sent again), so the batch job and its
    server ran on after the run had moved on. Now the run says it may still run and how to cancel it, and the scancel
    it missed is sent as soon as slurmctld answers again, within the run's cancel wait."""
    cluster = private_cluster
    proc, out, log, job_id = _lose_the_controller(cluster, tmp_path, cancel_wait_s=30)
    try:
        # back only once the run's own scancel has failed (sbatch's clients retry: one started just before the
        # controller came back would go through on its own)
        wait_for(lambda: f"could not cancel Slurm job {job_id}" in log.read_text(), timeout=60,
                 what="the run's scancel to fail", proc=proc, log=log)
        cluster.start_controller()
        rc = proc.wait(timeout=90)
    finally:
        cluster.start_controller()
        if proc.poll() is None:
            proc.kill()
        subprocess.run(["scancel", job_id], env=cluster.env, capture_output=True, timeout=30)
    text = log.read_text()
    assert rc == 1, text[-4000:]
    assert (f"warning: Slurm job {job_id} may still be running, its servers with it: it is cancelled as soon as "
            f"slurmctld answers again (in this run, or by the next run into this --out, `--resume`); by hand: scancel "
            f"{job_id}") in text, text[-4000:]
    assert f"cancelling Slurm job {job_id} now that slurmctld answers again" in text, text[-4000:]
    assert _job_state(cluster, job_id) == "CANCELLED", text[-4000:]
    # the jobs the lost batch job had not finished fail; one its worker finished before the run gave it up (on a loaded
    # machine a job can end within the ~7 s the loss takes) is read back as the worker wrote it
    statuses = {o["status"] for o in _outcomes(out).values()}
    assert "failed" in statuses and statuses <= {"failed", "valid"}, statuses


def test_a_batch_job_slurmctld_never_let_the_run_cancel_is_named_and_resume_cancels_it(
        private_cluster: _Cluster, tmp_path: Path) -> None:
    """slurmctld still away when the run ends: the batch job could not be cancelled. The run says so, naming the job
    and `scancel ID` (it said the job was "still listed after scancel; check the node", when no scancel had reached
    Slurm); its id stays recorded, and once slurmctld is back the next run into the --out (`--resume`) cancels it
    before it runs the jobs again."""
    cluster = private_cluster
    proc, out, log, job_id = _lose_the_controller(cluster, tmp_path, cancel_wait_s=1)
    try:
        rc = proc.wait(timeout=90)
        text = log.read_text()
        cluster.start_controller()
        left = _job_state(cluster, job_id)
        resumed = run_cli([tmp_path / "slow-fixed-sim.yaml", "--live", "--out", out, "--no-report", "--resume",
                           *_OUTAGE_OPTIONS], {**cli_env(tmp_path), "SLURM_CONF": str(cluster.conf)}, timeout=240)
    finally:
        cluster.start_controller()
        if proc.poll() is None:
            proc.kill()
        for one in [job_id, *_slurm_ids(out)]:
            subprocess.run(["scancel", one], env=cluster.env, capture_output=True, timeout=30)
    assert rc == 1, text[-4000:]
    assert (f"Slurm job {job_id} could not be cancelled (slurmctld did not answer) and may still be running, "
            "its servers with it: the next `llmsweep run` into this --out (`--resume`) cancels it first") in text, \
        text[-4000:]
    assert f"or cancel it by hand once `sinfo` answers: scancel {job_id}" in text
    assert "still listed after scancel" not in text
    assert left == "RUNNING"  # what the warning said: left running
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert f"cancelling Slurm job {job_id} left by an earlier, interrupted run" in resumed.stderr
    assert _job_state(cluster, job_id) == "CANCELLED"
    # the jobs the lost batch job finished while slurmctld was away stand (`skipped`: done); the rest ran again
    outcomes = _outcomes(out)
    assert len(outcomes) == 3 and {o["status"] for o in outcomes.values()} <= {"valid", "skipped"}, outcomes
    assert "valid" in {o["status"] for o in outcomes.values()}, outcomes
    assert {verdict(out / "jobs" / job) for job in outcomes} == {"valid"}


# ---- what Slurm says of a batch job it ended: the node that failed, and a state it no longer knows


def test_a_batch_job_whose_node_fails_names_the_node_in_its_jobs_reasons(private_cluster: _Cluster,
                                                                          tmp_path: Path) -> None:
    """The node of a running batch job set down (`scontrol update state=down`, as slurmctld does when a node stops
    answering): Slurm ends the job NODE_FAIL. Its jobs' reasons said "its node failed" and sent the user to `scontrol
    show job` for the name to exclude; they name the node and give the exclude option with it."""
    cluster = private_cluster
    cluster.start_controller()
    out, log = tmp_path / "out", tmp_path / "run.log"
    env = {**cli_env(tmp_path), "SLURM_CONF": str(cluster.conf)}
    proc = start_cli([_half_length_recipe(tmp_path), "--live", "--out", out, "--no-report", *SLURM_OPTIONS], env, log)
    (node,) = subprocess.run(["sinfo", "-h", "-N", "-o", "%N"], env=cluster.env, capture_output=True, text=True,
                             timeout=30).stdout.split()
    ids: list[str] = []
    try:
        ids = wait_for(lambda: _slurm_ids(out) if (out / "servers").is_dir() else None, timeout=60,
                       what="a submitted Slurm job", proc=proc, log=log)
        wait_for(lambda: f"[slurm {ids[0]}] server ready in " in log.read_text(), timeout=90,
                 what="the server on the node", proc=proc, log=log)
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=llmsweep-test-node-fail"],
                       env=cluster.env, check=True, capture_output=True, timeout=30)
        rc = proc.wait(timeout=120)
    finally:
        subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], env=cluster.env,
                       capture_output=True, timeout=30)  # (back already where ReturnToService brought it)
        if proc.poll() is None:
            proc.kill()
        for job_id in ids:
            subprocess.run(["scancel", job_id], env=cluster.env, capture_output=True, timeout=30)
    text = log.read_text()
    assert rc == 1, text[-4000:]
    reasons = [o["reasons"][0] for o in _outcomes(out).values() if o["status"] == "failed"]
    assert reasons, text[-4000:]
    for reason in reasons:
        assert f"Slurm job {ids[0]} ended NODE_FAIL" in reason and f"because its node {node}" in reason, reason
        assert f"leave {node} out if it fails again (--executor-option 'exclude=[{node}]'" in reason, reason
        assert "`scontrol show job` names it" not in reason
    # the step's srun said which node failed, in the words `SRUN_NODE_FAILURE` reads (a multi-node job's reason names
    # the node by them where `sinfo` has it back in service already: ReturnToService=2)
    from llmsweep.execute.slurm import SRUN_NODE_FAILURE

    logs = "".join(path.read_text(errors="replace") for path in (out / "servers").glob("*/server*.log"))
    assert [m.group(1) for m in SRUN_NODE_FAILURE.finditer(logs)] == [node], logs[-2000:]


def test_a_batch_job_the_controller_forgot_is_said_to_end_in_a_state_slurm_cannot_give(
        private_cluster: _Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch job the controller forgot (MinJobAge: 2 s here) before the driver read its end, on a cluster without
    accounting (as both CI clusters are): its state came from its rc file alone and was said as Slurm's ("ended
    FAILED"). The real sacct is asked, and its answer ("Slurm accounting storage is disabled") said with the state
    being unknown."""
    from llmsweep.engines.launch import LaunchSpec
    from llmsweep.execute.slurm import SlurmExecutor, SlurmOptions

    cluster = private_cluster
    cluster.start_controller()
    if subprocess.run(["sacct", "-n", "-j", "1"], env=cluster.env, capture_output=True, timeout=30).returncode == 0:
        pytest.skip("this cluster keeps accounting: sacct says the state")
    monkeypatch.setenv("SLURM_CONF", str(cluster.conf))  # the driver's squeue, scontrol and sacct
    before = cluster.reconfigure("MinJobAge", "2")
    try:
        executor = SlurmExecutor(SlurmOptions(worker_command=("/bin/sh", "-c", "exit 3"), poll_s=0.5,
                                              time_limit="00:05:00"))
        out = tmp_path / "servers" / "g"
        job = executor.submit(LaunchSpec(engine="sim", argv=("sim",), port=1), group_file=tmp_path / "group.json",
                              out_dir=out, name="forgot", environ=cluster.env)
        wait_for(lambda: "Invalid job id" in subprocess.run(
            ["scontrol", "show", "job", job.job_id], env=cluster.env, capture_output=True, text=True,
            timeout=30).stderr, timeout=90, what="the controller to forget the job", poll_s=0.5)
        result = job.wait(timeout_s=30)
    finally:
        cluster.reconfigure("MinJobAge", before)
    assert result.exit_code == 3 and result.unknown_state is not None
    assert result.ended == (
        "ended with exit status 3 (Slurm's final state of it is unknown: scontrol no longer knows the job and sacct "
        "cannot say, `sacct` exited with status 1: Slurm accounting storage is disabled; the exit status is its batch "
        f"script's, from slurm-{job.job_id}.rc)"), result.ended
