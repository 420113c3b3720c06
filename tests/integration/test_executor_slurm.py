"""The Slurm executor against a real single-node Slurm (scripts/ci/start_slurm.sh): jobs run the worker on the node,
start a real server as an srun step, run a client, leave artifacts in the out dir; exit codes and cancellation hold."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.slurm import require_slurm

import llmsweep
from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import ConfigError
from llmsweep.execute.slurm import (
    SlurmExecutor,
    SlurmJobResult,
    SlurmOptions,
    cancel_on_interrupt,
    python_check_reason,
)

HELPERS = Path(__file__).resolve().parents[1] / "unit" / "execute" / "helpers"
TINY_SERVER = HELPERS / "tiny_server.py"
WORKER = HELPERS / "slurm_worker.py"
TOKEN = "hf_SLURMintegrationSECRET9"
# The client: a Python one-liner (no curl needed) that prints the body of a GET, or of a POST when given a body.
HTTP_CLIENT = (
    "import sys, urllib.request as u\n"
    "data = sys.argv[2].encode() if len(sys.argv) > 2 else None\n"
    "req = u.Request(sys.argv[1], data=data, headers={'Content-Type': 'application/json'})\n"
    "print(u.build_opener(u.ProxyHandler({})).open(req, timeout=30).read().decode())"
)

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module", autouse=True)
def slurm_available() -> None:
    require_slurm()


def options(**kw: object) -> SlurmOptions:
    return SlurmOptions(
        worker_command=("{python}", str(WORKER), "{group}", "{out}"),
        poll_s=0.5,
        time_limit="00:05:00",
        **kw,
    )


def write_group(out_dir: Path, spec: LaunchSpec, client: list[str]) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "group.json"
    path.write_text(json.dumps({"spec": spec.model_dump(mode="json"), "client": client}))
    return path


def tiny(*extra: str, **kw: object) -> LaunchSpec:
    return LaunchSpec(engine="tiny", argv=(sys.executable, str(TINY_SERVER), "--port", "0", *extra), port=0,
                      startup_timeout_s=60, **kw)


def in_queue(job_id: str) -> bool:
    out = subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True, timeout=30)
    return bool(out.stdout.strip())


def test_two_jobs_start_servers_on_the_node_and_report_their_own_exit_codes(tmp_path: Path) -> None:
    executor = SlurmExecutor(options())
    client = [sys.executable, "-c", HTTP_CLIENT, "{base_url}/v1/models"]
    good_spec = tiny("--delay", "0.5", "--echo-env", "HF_TOKEN", ready_log_markers=("tiny server ready",),
                     secret_env=("HF_TOKEN",))
    bad_spec = tiny("--exit-after", "0.2")
    environ = {**os.environ, "HF_TOKEN": TOKEN}
    with cancel_on_interrupt([]) as jobs:
        for name, spec in (("good", good_spec), ("bad", bad_spec)):
            out = tmp_path / name
            jobs.append(executor.submit(spec, group_file=write_group(out, spec, client), out_dir=out, name=name,
                                        environ=environ))
        good, bad = jobs
        assert good.job_id != bad.job_id and good.job_id.isdigit() and bad.job_id.isdigit()
        results = [job.wait(timeout_s=150) for job in jobs]

    good_result, bad_result = results
    # The good job: COMPLETED with exit 0; the server ran as an srun step on the node; the client got its answer.
    assert good_result.ok and good_result.state == "COMPLETED" and good_result.exit_code == 0
    out = tmp_path / "good"
    assert (out / "slurm_job_id").read_text().strip() == good.job_id
    record = json.loads((out / "result.json").read_text())
    assert record["job_id"] == good.job_id and record["launcher"] == "srun" and record["command"][0] == "srun"
    assert record["client_rc"] == 0
    assert json.loads((out / "client_output.txt").read_text())["path"] == "/v1/models"
    server_log = (out / "server.log").read_text()
    assert "tiny server got SIGTERM, shutting down" in server_log  # the step got a graceful SIGTERM, not SIGKILL
    assert "env HF_TOKEN=***" in server_log  # the secret reached the server on the node ...
    for written in out.iterdir():  # ... and no file the job wrote holds its value
        assert TOKEN not in written.read_text(errors="replace"), written
    assert good_result.stdout_path.is_file()

    # The bad job: its server died during start-up; the failure propagates as the job's exit code, with the reason.
    assert not bad_result.ok and bad_result.state == "FAILED" and bad_result.exit_code == 1
    bad_record = json.loads((tmp_path / "bad" / "result.json").read_text())
    assert "exited with status 3" in bad_record["error"] and "simulated CUDA out of memory" in bad_record["error"]
    with pytest.raises(Exception, match=f"Slurm job {bad.job_id} ended FAILED with exit code 1"):
        bad_result.raise_for_status()
    assert not in_queue(good.job_id) and not in_queue(bad.job_id)


def _submitter(out: Path, *args: str, env: dict[str, str] | None = None, sigint: signal.Handlers = signal.SIG_DFL,
               sighup: signal.Handlers = signal.SIG_DFL) -> tuple[subprocess.Popen[str], list[str]]:
    """helpers/submit_and_wait.py running, and the ids of the jobs it submitted (once it wrote them).

    It starts as from a terminal, SIGINT at its default (Python makes it raise KeyboardInterrupt), however pytest
    itself was started: a script's `pytest ... &` and every xdist worker under it ignore SIGINT, a disposition a
    child inherits, and a Python started with SIGINT ignored never raises on it. `sigint=signal.SIG_IGN` starts it
    the way a script's background job starts, `sighup=signal.SIG_IGN` the way `nohup` starts it. Should it fail to
    say which jobs it submitted, it is stopped (SIGTERM first, so that it cancels what it did submit)."""

    def dispositions() -> None:
        signal.signal(signal.SIGINT, sigint)
        signal.signal(signal.SIGHUP, sighup)

    driver = subprocess.Popen([sys.executable, str(HELPERS / "submit_and_wait.py"), str(out), *args],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                              preexec_fn=dispositions)
    submitted = out / "submitted"
    try:
        deadline = time.monotonic() + 60
        while not submitted.exists() and time.monotonic() < deadline:
            if driver.poll() is not None:
                raise AssertionError(driver.communicate()[0])
            time.sleep(0.1)
        return driver, submitted.read_text().split()
    except BaseException:
        if driver.poll() is None:
            driver.terminate()
            try:
                driver.wait(timeout=60)
            except subprocess.TimeoutExpired:
                driver.kill()
        raise


def _stuck(driver: subprocess.Popen[str], what: str, job_ids: list[str]) -> str:
    """Why a submitter did not exit: its signal dispositions and mask, and its threads' stacks (SIGURG makes the
    helper dump them), then it is killed and its jobs cancelled (they would hold the node's CPUs for minutes)."""
    status = Path(f"/proc/{driver.pid}/status")
    signals_seen = [line for line in status.read_text().splitlines() if line.startswith("Sig")] \
        if status.exists() else []
    driver.send_signal(signal.SIGURG)
    time.sleep(1)
    driver.kill()
    output, _ = driver.communicate(timeout=30)
    subprocess.run(["scancel", *job_ids], capture_output=True, timeout=30)
    return f"the submitter did not exit after {what}; {' '.join(signals_seen)}\n{output}"


def _signal_and_wait(driver: subprocess.Popen[str], sig: signal.Signals, job_ids: list[str]) -> str:
    """Send `sig` to the submitter and wait for it to exit (its output); a submitter still running after two minutes
    fails the test with why (:func:`_stuck`)."""
    driver.send_signal(sig)
    try:
        return driver.communicate(timeout=120)[0]
    except subprocess.TimeoutExpired:
        pytest.fail(_stuck(driver, sig.name, job_ids))


@pytest.mark.parametrize(("sig", "sigint", "args"), [
    pytest.param(signal.SIGTERM, signal.SIG_DFL, (), id="SIGTERM"),
    pytest.param(signal.SIGINT, signal.SIG_DFL, (), id="SIGINT"),
    # Started as a script's background job (SIGINT ignored), with the CLI's signal handling (`llmsweep run` installs
    # it): an explicit `kill -INT` still cancels the job.
    pytest.param(signal.SIGINT, signal.SIG_IGN, ("1", "--install"), id="SIGINT-background-cli"),
    # The library used from Python, without the CLI's `install()`: what `sbatch --signal=B:USR1@120` sends a batch
    # script's submitter ahead of its time limit killed it at once, its job left queued.
    pytest.param(signal.SIGUSR1, signal.SIG_DFL, (), id="SIGUSR1-library"),
])
def test_interrupting_the_submitter_cancels_its_job(tmp_path: Path, sig: signal.Signals, sigint: signal.Handlers,
                                                   args: tuple[str, ...]) -> None:
    driver, (job_id,) = _submitter(tmp_path, *args, sigint=sigint)
    try:
        assert in_queue(job_id)
        output = _signal_and_wait(driver, sig, [job_id])
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode != 0
    assert f"cancelling Slurm job {job_id}" in output
    assert not in_queue(job_id)
    assert (tmp_path / "slurm_job_id").read_text().strip() == job_id


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_sbatch_runs_cancels_the_job_it_submitted(tmp_path: Path, sig: signal.Signals) -> None:
    """`sbatch` has queued the job but not yet returned (a slow controller, here a wrapper that waits after
    submitting) when the interrupt comes. The submission is shielded: the job id is still recorded (what `run
    --resume` reads) and the job is cancelled, never left queued with no record of it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    marker = tmp_path / "sbatch-submitted"
    real = shutil.which("sbatch")
    (bin_dir / "sbatch").write_text(f"#!/bin/sh\nout=$({real} \"$@\") || exit $?\necho \"$out\" > {marker}.tmp\n"
                                    f"mv {marker}.tmp {marker}\nsleep 1\necho \"$out\"\n")
    (bin_dir / "sbatch").chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = tmp_path / "out"
    out.mkdir()
    driver = subprocess.Popen([sys.executable, str(HELPERS / "submit_and_wait.py"), str(out)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    job_id = ""
    try:
        deadline = time.monotonic() + 60
        while not marker.exists() and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert marker.exists(), driver.communicate()[0] if driver.poll() is not None else "sbatch never submitted"
        job_id = marker.read_text().strip().split(";")[0]
        assert in_queue(job_id)
        output = _signal_and_wait(driver, sig, [job_id])
    finally:
        if driver.poll() is None:
            driver.kill()
        if job_id and in_queue(job_id):
            subprocess.run(["scancel", job_id], capture_output=True, timeout=30)
    assert driver.returncode != 0, output
    assert (out / "slurm_job_id").read_text().strip() == job_id
    assert f"cancelling Slurm job {job_id}" in output and not in_queue(job_id)
    assert not (out / "submitted").exists()  # the interrupt came before the submitter went on


def test_under_nohup_a_closed_terminal_leaves_the_job_running(tmp_path: Path) -> None:
    """`nohup llmsweep run ... &` on a login node: the terminal closing sends SIGHUP, which nohup ignores so that the
    run goes on. The Slurm guard used to catch SIGHUP regardless and cancel every job; it keeps nohup's setting as the
    CLI's handlers do (`signals.taken_over`), and SIGTERM still cancels."""
    driver, (job_id,) = _submitter(tmp_path, "1", "--install", sighup=signal.SIG_IGN)
    try:
        assert in_queue(job_id)
        driver.send_signal(signal.SIGHUP)
        time.sleep(2.0)
        assert driver.poll() is None and in_queue(job_id), "SIGHUP under nohup stopped the run"
        output = _signal_and_wait(driver, signal.SIGTERM, [job_id])
    finally:
        if driver.poll() is None:
            driver.kill()
    assert driver.returncode != 0 and f"cancelling Slurm job {job_id}" in output
    assert not in_queue(job_id)


def test_a_signal_during_the_cancellation_does_not_abandon_the_jobs_left_to_cancel(tmp_path: Path) -> None:
    """SIGTERM starts the cancellation; a Ctrl-C while the first scancel is still running (made slow here, as a
    loaded controller is) must not leave the second job queued: later signals only hurry the shutdown."""
    slow = tmp_path / "bin"
    slow.mkdir()
    real = shutil.which("scancel")
    (slow / "scancel").write_text(f"#!/bin/sh\nsleep 1.2\nexec {real} \"$@\"\n")
    (slow / "scancel").chmod(0o755)
    env = {**os.environ, "PATH": f"{slow}:{os.environ['PATH']}"}
    driver, ids = _submitter(tmp_path, "2", "--install", env=env)
    try:
        assert len(ids) == 2 and all(in_queue(i) for i in ids)
        driver.send_signal(signal.SIGTERM)
        time.sleep(0.6)  # inside the first (slow, 1.2-s) scancel
        driver.send_signal(signal.SIGINT)
        output, _ = driver.communicate(timeout=120)
        assert driver.returncode != 0, output
        for job_id in ids:
            assert f"cancelling Slurm job {job_id}" in output, output
        deadline = time.monotonic() + 30  # the hurried shutdown does not wait for the queue to empty
        while any(in_queue(i) for i in ids) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not any(in_queue(i) for i in ids)
    finally:
        if driver.poll() is None:
            driver.kill()
        for job_id in ids:
            subprocess.run(["scancel", job_id], capture_output=True, timeout=30)


def test_leaving_the_guard_early_cancels_a_running_job(tmp_path: Path) -> None:
    executor = SlurmExecutor(SlurmOptions(worker_command=("sleep", "300"), poll_s=0.5))
    spec = LaunchSpec(engine="tiny", argv=("true",), port=1)
    (tmp_path / "group.json").write_text("{}")
    with pytest.raises(RuntimeError, match="client crashed"), cancel_on_interrupt([]) as jobs:
        jobs.append(executor.submit(spec, group_file=tmp_path / "group.json", out_dir=tmp_path, name="early"))
        deadline = time.monotonic() + 60  # running its worker on the node, not merely queued
        while time.monotonic() < deadline and not (
                jobs[0].stdout_path.exists() and "started" in jobs[0].stdout_path.read_text()):
            time.sleep(0.2)
        raise RuntimeError("client crashed")
    assert not in_queue(jobs[0].job_id)
    # The batch script records how it ended, for when scontrol has forgotten the job: killed by the cancellation's
    # SIGTERM, 143 (it used to record the last command's 0, which read as COMPLETED).
    rc = tmp_path / f"slurm-{jobs[0].job_id}.rc"
    deadline = time.monotonic() + 30
    while not (rc.exists() and rc.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert rc.read_text().strip() == "143"


def test_the_batch_script_records_a_sigquit_as_131(tmp_path: Path) -> None:
    """`scancel -s QUIT --full` (Ctrl-\\'s signal, which unwinds llmsweep itself as 131) is recorded as 131, as the
    README says of the signals that end a batch job. The script traps the signals llmsweep unwinds on
    (`signals.INTERRUPT_SIGNALS`), so a worker that handles SIGQUIT and exits otherwise is still recorded by it."""
    executor = SlurmExecutor(SlurmOptions(worker_command=("sleep", "300"), poll_s=0.5))
    spec = LaunchSpec(engine="tiny", argv=("true",), port=1)
    (tmp_path / "group.json").write_text("{}")
    job = executor.submit(spec, group_file=tmp_path / "group.json", out_dir=tmp_path, name="quit")
    try:
        deadline = time.monotonic() + 60  # running its worker on the node, not merely queued
        while time.monotonic() < deadline and not (
                job.stdout_path.exists() and "started" in job.stdout_path.read_text()):
            time.sleep(0.2)
        # --full: the batch shell and its children too (a signal other than KILL reaches job steps only by default)
        subprocess.run(["scancel", "-s", "QUIT", "--full", job.job_id], check=True, capture_output=True, timeout=30)
        rc = tmp_path / f"slurm-{job.job_id}.rc"
        deadline = time.monotonic() + 30
        while not (rc.exists() and rc.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert rc.read_text().strip() == "131"
    finally:
        subprocess.run(["scancel", job.job_id], capture_output=True, timeout=30)


def _failed_python_check(tmp_path: Path, slurm: SlurmOptions, name: str, timeout_s: float = 60) -> SlurmJobResult:
    """A tiny job submitted under `slurm`, whose node Python the batch script's check refuses: it ends before the
    job ran (exit 65) and launched nothing."""
    spec = tiny()
    job = SlurmExecutor(slurm).submit(spec, group_file=write_group(tmp_path, spec, ["true"]), out_dir=tmp_path,
                                      name=name)
    with cancel_on_interrupt([job]):
        result = job.wait(timeout_s=timeout_s)
    assert not result.ok and result.exit_code == 65, result.stderr_path.read_text()[-2000:]
    assert not (tmp_path / "server.log").exists()  # nothing was launched
    return result


def test_a_node_without_a_modern_python_fails_fast_with_a_reason(tmp_path: Path) -> None:
    old_python = tmp_path / "python3.10"
    old_python.write_text("#!/bin/sh\necho 3.10.12\nexit 1\n")  # answers the version check as Python 3.10 does
    old_python.chmod(0o755)
    result = _failed_python_check(tmp_path, options(python=str(old_python)), "old-python")
    assert f"{old_python} on " in (said := result.stderr_path.read_text()) and (
        "is Python 3.10.12, older than 3.11" in said and "--executor-option python=PATH" in said), said


def test_a_node_python_that_does_not_exist_is_said_missing_not_old(tmp_path: Path) -> None:
    """`python=/nonexistent/python3` was said "missing or older than Python 3.11 … set python in the slurm executor
    options": which of the two, and the option's spelling on the command line."""
    missing = tmp_path / "no-such" / "python3"
    reason = python_check_reason(_failed_python_check(tmp_path, options(python=str(missing)), "no-python"))
    assert reason is not None and re.search(
        rf"the node's python {re.escape(str(missing))} on \S+ does not exist \(no such file on this node, nor a "
        r"command on its PATH\); the client cannot run; give a Python >= 3.11 with llmsweep and its dependencies "
        r"installed: --executor-option python=PATH", reason), reason
    assert "older" not in reason


def test_a_node_python_without_llmsweeps_dependencies_fails_fast_naming_the_missing_module(tmp_path: Path) -> None:
    """A Python >= 3.11 that lacks llmsweep's dependencies (Debian's /usr/bin/python3: no click) passed the version
    check and died in the worker's import, the job's reason only "ended FAILED (exit 1)": it fails the same check,
    and the reason names the module it cannot import and the fix."""
    system = Path("/usr/bin/python3")
    if not system.is_file() or subprocess.run([system, "-c", "import click"], capture_output=True).returncode == 0:
        pytest.skip("needs a /usr/bin/python3 >= 3.11 without click")
    # the real worker (`{python} -m llmsweep.cli.main ...`, the default): what the check imports (a script worker,
    # as this file's other tests use, is checked for the version only)
    bare = SlurmOptions(python=str(system), poll_s=0.5, time_limit="00:05:00")
    reason = python_check_reason(_failed_python_check(tmp_path, bare, "bare-python"))
    assert reason is not None and re.search(
        r"ended FAILED \(exit 65\) before this job ran: the node's python /usr/bin/python3 on \S+ cannot import "
        r"(\w+, which )?llmsweep\.cli\.main (needs )?\(ModuleNotFoundError: No module named '\w+'\); the worker "
        r"cannot run; give a Python >= 3.11 with llmsweep and its dependencies installed: --executor-option "
        r"python=PATH", reason), reason


def test_a_node_python_that_imports_the_cli_but_lacks_a_jobs_dependency_fails_the_check(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python >= 3.11 with click but not the rest of llmsweep's dependencies (the transformers venv: no aiohttp, no
    prometheus_client) imported the worker's module (the driver's PYTHONPATH made `llmsweep` importable), passed the
    check, and every job failed with `internal error: ModuleNotFoundError`, exit 1, no Python, node or fix named.
    The check imports what a job runs (`WORKER_IMPORTS`): exit 65, naming the module it lacks and the fix."""
    given = os.environ.get("LLMSWEEP_TRANSFORMERS_PYTHON")
    lacking = [m for m in ("aiohttp", "prometheus_client")
               if given and subprocess.run([given, "-c", f"import {m}"], capture_output=True).returncode != 0]
    if not given or not lacking or subprocess.run([given, "-c", "import click, pydantic, yaml"],
                                                  capture_output=True).returncode != 0:
        pytest.skip("needs a Python >= 3.11 with click but without aiohttp or prometheus_client "
                    "(LLMSWEEP_TRANSFORMERS_PYTHON: the transformers venv)")
    # the driver's PYTHONPATH (the batch script runs with --export=ALL) makes this checkout's `llmsweep` importable
    # by that Python, as a suite run from the source tree has it; an editable install (CI's) does not set it
    src = Path(llmsweep.__file__).resolve().parent.parent
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")])))
    reason = python_check_reason(_failed_python_check(
        tmp_path, SlurmOptions(python=given, poll_s=0.5, time_limit="00:05:00"), "tf-python", timeout_s=90))
    assert reason is not None and re.search(
        rf"the node's python {re.escape(given)} on \S+ cannot import ({'|'.join(lacking)}), which llmsweep\.\S+ "
        r"needs \(ModuleNotFoundError: No module named '\w+'\); the worker cannot run; .*--executor-option "
        r"python=PATH", reason), reason


def test_a_rejected_submission_names_the_command(tmp_path: Path) -> None:
    executor = SlurmExecutor(options(partition="no-such-partition"))
    spec = tiny()
    with pytest.raises(Exception, match=r"sbatch --parsable .*failed with exit status"):
        executor.submit(spec, group_file=write_group(tmp_path, spec, ["true"]), out_dir=tmp_path, name="rejected")


@pytest.mark.parametrize(("option", "gpus", "fix"), [
    ({"partition": "no-such-partition"}, 0, r"give a partition `sinfo` lists \({default} \(the default\)\): "
                                            r"--executor-option partition=NAME"),
    ({"gpu_type": "no-such-gpu"}, 1, r"give a GPU type the nodes have \(`sinfo -o '%P %G'`\): --executor-option "
                                     r"gpu_type=TYPE"),
], ids=["partition", "gpu_type"])
def test_a_submission_slurm_refuses_says_which_option_to_change(tmp_path: Path, option: dict[str, str], gpus: int,
                                                                fix: str) -> None:
    """sbatch refuses a misspelt partition or GPU type: the fix names the option and what the cluster offers, not the
    check of a controller that answered."""
    default = next(name.rstrip("*") for name in subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True,
                                                               text=True, timeout=30, check=True).stdout.split()
                   if name.endswith("*"))
    executor = SlurmExecutor(options(**option))
    spec = tiny(gpus=gpus)
    # the user's input: ConfigError, exit 2 (a controller that does not answer stays a LaunchError, exit 1)
    with pytest.raises(ConfigError, match=r"sbatch --parsable .*failed with exit status") as raised:
        executor.submit(spec, group_file=write_group(tmp_path, spec, ["true"]), out_dir=tmp_path, name="refused")
    assert raised.value.fix is not None and re.search(fix.format(default=re.escape(default)), raised.value.fix), \
        raised.value.fix
    assert "start_slurm.sh" not in raised.value.fix


def test_a_partition_sbatch_refuses_from_its_environment_names_the_variable(tmp_path: Path) -> None:
    """`SBATCH_PARTITION=nosuch llmsweep run ...` (no partition option): sbatch takes the variable, refuses it, and
    the fix said "--executor-option partition=NAME, or leave it out" of an option the user never gave. It names the
    variable the partition came from, and what `sinfo` lists."""
    executor = SlurmExecutor(options())
    spec = tiny()
    with pytest.raises(ConfigError, match=r"sbatch --parsable .*failed with exit status") as raised:
        executor.submit(spec, group_file=write_group(tmp_path, spec, ["true"]), out_dir=tmp_path, name="env-part",
                        environ={**os.environ, "SBATCH_PARTITION": "no-such-partition"})
    fix = raised.value.fix or ""
    assert fix.startswith("SBATCH_PARTITION=no-such-partition in the environment gave it, not the executor options"), \
        fix
    assert "unset it, or give a partition `sinfo` lists (" in fix and "--executor-option partition=NAME" in fix, fix
    assert "leave it out" not in fix, fix


def test_simulator_served_under_slurm_answers_a_chat_request(tmp_path: Path) -> None:
    pytest.importorskip("llmsweep.sim.server", reason="the simulated engine is not in this checkout yet")
    spec = LaunchSpec(
        engine="sim",
        argv=(sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--port", "0", "--timing", "constant",
              "--engine-style", "sglang", "--served-model-name", "sim-model"),
        port=0,
        ready_log_markers=("The server is fired up and ready to roll!",),
        startup_timeout_s=90,
    )
    body = json.dumps({"model": "sim-model", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
    client = [sys.executable, "-c", HTTP_CLIENT, "{base_url}/v1/chat/completions", body]
    job = SlurmExecutor(options()).submit(spec, group_file=write_group(tmp_path, spec, client), out_dir=tmp_path,
                                          name="sim")
    with cancel_on_interrupt([job]):
        result = job.wait(timeout_s=150)
    assert result.ok, (tmp_path / "result.json").read_text() if (tmp_path / "result.json").exists() else result
    answer = json.loads((tmp_path / "client_output.txt").read_text())
    assert answer["model"] == "sim-model" and answer["usage"]["completion_tokens"] == 8
    assert "The server is fired up and ready to roll!" in (tmp_path / "server.log").read_text()
