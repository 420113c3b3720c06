"""Signals in-process: the first one unwinds, later ones only hurry a teardown, a shielded step is never cut short,
and the exit status is 128 + the first signal. Also what `--resume` does with what a killed run left: a pid file is
kept until its server is gone, a container `docker rm` could not remove is retried, unfinished Slurm jobs are
scancelled."""

from __future__ import annotations

import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmsweep.execute import signals
from llmsweep.execute.lifecycle import stop_stale_servers
from llmsweep.execute.process import read_proc, start_process, stop_process_tree, tree_alive


@pytest.fixture(autouse=True)
def fresh_signals() -> Iterator[None]:
    # As in a terminal: Ctrl-C raises. A test process started in the background (`pytest ... &`, and every
    # pytest-xdist worker under it) inherits SIGINT ignored, which `interrupting()` rightly leaves alone.
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    signals.reset()
    yield
    signals.reset()
    signal.signal(signal.SIGINT, before)


def test_the_first_signal_raises_with_its_number_and_later_ones_only_hurry() -> None:
    with pytest.raises(signals.Interrupted) as err, signals.interrupting():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(1)
    assert err.value.signum == signal.SIGTERM and signals.exit_code(err.value) == 143
    assert not signals.hurried()
    with signals.interrupting():
        os.kill(os.getpid(), signal.SIGINT)  # a second signal during the unwinding: recorded, not raised
        time.sleep(0.05)
    assert signals.hurried()
    assert signals.received() == [signal.SIGTERM, signal.SIGINT]
    assert signals.exit_code() == 143  # the first signal decides


def test_a_shielded_step_runs_to_its_end_and_then_raises_the_signal_it_held() -> None:
    steps: list[str] = []
    with pytest.raises(signals.Interrupted) as err, signals.interrupting(), signals.shielded():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)
        steps.append("after the signal")
    assert steps == ["after the signal"]
    assert err.value.signum == signal.SIGINT and signals.exit_code(err.value) == 130


def test_a_signal_held_by_a_shield_wins_over_an_error_but_not_over_an_interrupt_already_unwinding() -> None:
    with pytest.raises(signals.Interrupted), signals.interrupting(), signals.shielded():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.05)
        raise ValueError("the launch's own error")  # the user's stop must not be lost with it
    signals.reset()
    with pytest.raises(signals.Interrupted) as err, signals.interrupting():
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1)
        finally:
            with signals.shielded():  # the teardown, while the first interrupt unwinds
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
    assert err.value.signum == signal.SIGINT
    assert signals.received() == [signal.SIGINT, signal.SIGTERM] and signals.hurried()


def test_plain_keyboard_interrupt_is_130() -> None:
    assert signals.exit_code(KeyboardInterrupt()) == 130


def test_a_second_signal_makes_the_teardown_kill_a_server_that_ignores_sigterm_at_once(tmp_path: Path) -> None:
    proc = start_process([sys.executable, "-c", "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                          "print('ready', flush=True)\ntime.sleep(120)"], log_path=tmp_path / "log", env=os.environ)
    try:
        deadline = time.monotonic() + 20
        log = tmp_path / "log"  # created by the log pump once it runs
        while not (log.exists() and "ready" in log.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        signals.record(signal.SIGTERM)
        signals.record(signal.SIGINT)
        started = time.monotonic()
        killed = stop_process_tree(proc.pid, pgid=proc.pgid, grace_s=60.0)
        assert killed == [proc.pid]
        assert time.monotonic() - started < 30  # not the 60 s grace
    finally:
        proc.stop(grace_s=0)
    assert proc.alive_pids() == []


# ------------------------------------------------------------------------------------------------ --resume
def _pid_file(run_dir: Path, doc: str, name: str = "server.pid") -> Path:
    path = run_dir / "servers" / "g" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc)
    return path


def _sleeping_group(tmp_path: Path) -> subprocess.Popen[bytes]:
    """A server whose leader is gone and whose worker lives on in its process group."""
    leader = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, sys\n"
         "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)'])\nprint('started', flush=True)"],
        start_new_session=True, stdout=subprocess.PIPE)
    assert leader.stdout is not None and leader.stdout.readline().strip() == b"started"
    leader.wait(timeout=20)
    return leader


def test_resume_stops_the_workers_left_in_a_dead_servers_process_group(tmp_path: Path) -> None:
    leader = _sleeping_group(tmp_path)
    try:
        assert tree_alive([], pgid=leader.pid), "the worker should outlive its leader"
        # Kept under the name a relaunch gives the pid file of a server that could not be stopped.
        pid_file = _pid_file(tmp_path, f'{{"pid": {leader.pid}, "argv0": "python3", "start_ticks": 1}}',
                             "server.1.pid")
        events: list[str] = []
        stop_stale_servers(tmp_path, events.append)
        assert tree_alive([], pgid=leader.pid) == []
        assert not pid_file.exists()
        assert any("process group" in e for e in events)
    finally:
        stop_process_tree(leader.pid, pgid=leader.pid, grace_s=1)


def test_resume_stops_a_server_that_execd_another_program_since_its_pid_file_was_written(tmp_path: Path) -> None:
    """A launcher that execs the engine (a wrapper script; the GPU rehearsal's `vllm` stand-in execs
    `python -m llmsweep.cli.main sim serve`) keeps its pid and start time but not its program's name: the pid file's
    start time says it is ours, and `--resume` stops it. It was left running, its pid file deleted."""
    wrapper = tmp_path / "engine"
    wrapper.write_text(f"#!/bin/sh\necho started\nexec {sys.executable} -c 'import time; time.sleep(120)'\n")
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IEXEC)
    proc = subprocess.Popen([str(wrapper)], start_new_session=True, stdout=subprocess.PIPE)
    try:
        info = read_proc(proc.pid)
        assert info is not None and proc.stdout is not None and proc.stdout.readline().strip() == b"started"
        deadline = time.monotonic() + 10
        while b"engine" in Path(f"/proc/{proc.pid}/cmdline").read_bytes() and time.monotonic() < deadline:
            time.sleep(0.01)  # until the exec
        pid_file = _pid_file(tmp_path, json.dumps({"pid": proc.pid, "argv0": "engine",
                                                   "start_ticks": info.start_ticks}))
        events: list[str] = []
        assert stop_stale_servers(tmp_path, events.append) == [proc.pid]
        assert proc.wait(timeout=10) is not None and not pid_file.exists()
        assert any(f"stopping server pid {proc.pid}" in e for e in events)
        # a recycled pid (another start time) is someone else's: neither stopped nor kept
        other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
        try:
            pid_file = _pid_file(tmp_path, json.dumps({"pid": other.pid, "argv0": "python3", "start_ticks": 1}))
            assert stop_stale_servers(tmp_path, events.append) == [] and other.poll() is None
            assert not pid_file.exists()
        finally:
            other.kill()
            other.wait()
    finally:
        proc.kill()
        proc.wait()


def test_a_pid_file_records_the_start_time_that_tells_the_server_from_a_process_that_took_its_pid(
        tmp_path: Path) -> None:
    """The pid file holds the process's start time, /proc/PID/stat's field 22, which `--resume` requires to match."""
    from types import SimpleNamespace
    from typing import Any, cast

    from llmsweep.execute.lifecycle import write_pid_file

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        stat_line = Path(f"/proc/{proc.pid}/stat").read_text()
        field_22 = int(stat_line[stat_line.rindex(")") + 2:].split()[22 - 3])  # fields 1-2: pid, (comm)
        path = tmp_path / "server.pid"
        write_pid_file(path, cast(Any, SimpleNamespace(pid=proc.pid, command=[sys.executable, "-c", "…"], cleanup=())),
                       cast(Any, None))
        doc = json.loads(path.read_text())
        assert doc["pid"] == proc.pid and doc["start_ticks"] == field_22
    finally:
        proc.kill()
        proc.wait()


def test_a_server_two_pid_files_name_is_stopped_and_said_once(tmp_path: Path) -> None:
    """A role-by-role deployment's router is named by two pid files: `--resume` after a killed run said `stopping
    server pid N left running …` twice for it and stopped it twice. Once, and both files go."""
    from types import SimpleNamespace
    from typing import Any, cast

    from llmsweep.execute.lifecycle import write_pid_file

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        files = [tmp_path / "servers" / g / "server.pid" for g in ("a", "b")]
        for path in files:
            path.parent.mkdir(parents=True)
            write_pid_file(path, cast(Any, SimpleNamespace(pid=proc.pid, command=[sys.executable, "-c", "…"],
                                                           cleanup=())), cast(Any, None))
        events: list[str] = []
        assert stop_stale_servers(tmp_path, events.append) == [proc.pid]
        assert [e for e in events if "stopping server pid" in e] == [
            f"stopping server pid {proc.pid} left running by an earlier, interrupted run"], events
        assert proc.wait(timeout=10) is not None and not any(p.exists() for p in files)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_an_older_pid_file_without_a_start_time_never_gets_a_process_it_cannot_identify_signalled(
        tmp_path: Path) -> None:
    """A pid file an older llmsweep wrote has no start time, only the program's name (`python`): after the pid was
    reused, `--resume` took an unrelated python process for the old server and stopped it. Such a process may be
    either, so it is left running, the pid file kept, and the log says so and what to do; a pid that no longer runs,
    or runs another program, is not the server, and its pid file goes without a signal sent."""
    unrelated = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
    try:
        pid_file = _pid_file(tmp_path, json.dumps({"pid": unrelated.pid, "host": __import__("platform").node(),
                                                   "argv0": os.path.basename(sys.executable), "cleanup": []}))
        events: list[str] = []
        assert stop_stale_servers(tmp_path, events.append) == []
        time.sleep(0.2)
        assert unrelated.poll() is None, "a process the pid file cannot identify was signalled"
        assert pid_file.exists()
        (said,) = events
        assert said.startswith(f"warning: {pid_file} names pid {unrelated.pid}, which now runs `{sys.executable} -c "
                               "import time; time.sleep(120)`, but records no start time"), said
        assert "not stopped" in said and f"kill -TERM -- -{unrelated.pid}" in said
        # the same pid file naming another program: a recycled pid, not the server — no signal, the file goes
        pid_file.write_text(json.dumps({"pid": unrelated.pid, "argv0": "vllm", "cleanup": []}))
        events.clear()
        assert stop_stale_servers(tmp_path, events.append) == [] and unrelated.poll() is None
        assert not pid_file.exists() and events == []
    finally:
        unrelated.kill()
        unrelated.wait()
    # and naming a pid that no longer runs: nothing to stop, the file goes
    pid_file = _pid_file(tmp_path, json.dumps({"pid": unrelated.pid, "argv0": "python", "cleanup": []}))
    assert stop_stale_servers(tmp_path, events.append) == [] and not pid_file.exists()


def test_resume_keeps_the_pid_file_when_the_container_cannot_be_removed(tmp_path: Path) -> None:
    docker = tmp_path / "docker"  # a docker stand-in whose daemon is down
    docker.write_text("#!/bin/sh\necho 'Cannot connect to the Docker daemon' >&2\nexit 1\n")
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    pid_file = _pid_file(tmp_path, f'{{"pid": 0, "argv0": "docker", "cleanup": ["{docker}", "rm", "-f", "llm-x"]}}')
    events: list[str] = []
    stop_stale_servers(tmp_path, events.append)
    assert pid_file.exists(), "the container may still run: the next --resume must try again"
    assert any("Cannot connect to the Docker daemon" in e for e in events)

    docker.write_text("#!/bin/sh\necho 'Error: No such container: llm-x' >&2\nexit 1\n")  # already gone: done
    stop_stale_servers(tmp_path, events.append)
    assert not pid_file.exists()


def test_resume_asks_a_docker_cli_once_however_its_path_is_spelt(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A pid file names its CLI by the path it ran (`/usr/bin/docker rm -f NAME`) and `docker` is asked too: the same
    program, told apart by its spelling, asked the daemon twice for the run's containers and removed each twice (a
    second `rm -f` of one gone fails on a daemon that says so, refusing the run)."""
    bin_dir, calls, run_dir = tmp_path / "bin", tmp_path / "calls", tmp_path / "run"
    bin_dir.mkdir()
    server = (run_dir / "servers" / "g").resolve()
    labels = json.dumps({"llmsweep.server-dir": str(server)})
    docker = bin_dir / "docker"
    docker.write_text(f"""#!/bin/sh
echo "$*" >> "{calls}"
case "$1" in
  ps) echo 0123abcd ;;
  container) echo '/llm-x {labels}' ;;
  *) exit 0 ;;
esac
""")
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    _pid_file(run_dir, f'{{"pid": 0, "argv0": "docker", "cleanup": ["{docker}", "rm", "-f", "llm-y"]}}')
    events: list[str] = []
    stop_stale_servers(run_dir, events.append)
    asked = calls.read_text().splitlines()
    assert [line.split()[0] for line in asked].count("ps") == 1, asked
    assert asked.count("rm -f llm-x") == 1 and sum("removing container llm-x" in e for e in events) == 1, events


def _slurm_stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, queue: str | None) -> Path:
    """scancel and squeue stand-ins on PATH: scancel records what it was asked to cancel (the returned file); squeue
    lists `queue` (lines `ID|WORKDIR`) for the user's jobs — or fails there, as a controller that does not answer,
    when `queue` is None — and no job for `-j` (each cancelled job has left)."""
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    (bin_dir / "scancel").write_text(f'#!/bin/sh\necho "$*" >> "{calls}"\n')
    listing = ("echo 'squeue: error: Unable to contact slurm controller' >&2; exit 1" if queue is None
               else f'printf "%s" "{queue}"')
    (bin_dir / "squeue").write_text(f'#!/bin/sh\ncase " $* " in *" -u "*) {listing} ;; esac\n')
    for tool in ("scancel", "squeue"):
        (bin_dir / tool).chmod((bin_dir / tool).stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return calls


def _recorded(run_dir: Path, *jobs: tuple[str, str, bool]) -> dict[str, Path]:
    folders = {}
    for group, job_id, finished in jobs:
        gdir = run_dir / "servers" / group
        gdir.mkdir(parents=True)
        (gdir / "slurm_job_id").write_text(job_id + "\n")
        if finished:
            (gdir / f"slurm-{job_id}.rc").write_text("0\n")
        folders[group] = gdir.resolve()
    return folders


def test_resume_scancels_slurm_jobs_that_never_finished(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recorded batch job with no slurm-<id>.rc that the queue lists in its folder is cancelled; one that ended
    (its .rc) is not; one gone from the queue is not, and nothing is said of it; one the queue lists working in
    another folder is another job that took the number since, left alone and said so."""
    run_dir = tmp_path / "run"
    folders = _recorded(run_dir, ("a", "101", False), ("b", "102", True), ("c", "103", False), ("d", "104", False))
    calls = _slurm_stand_ins(tmp_path, monkeypatch,
                             f"101|{folders['a']}\n102|{folders['b']}\n104|{tmp_path / 'elsewhere'}\n")
    events: list[str] = []
    stop_stale_servers(run_dir, events.append)
    assert calls.read_text().split() == ["101"]
    assert any("cancelling Slurm job 101" in e for e in events)
    # (a temp path may hold 103)
    assert not any(re.search(r"\b103\b", e.replace(str(tmp_path), "")) for e in events), events
    assert any(e.startswith("Slurm job 104, which ") and str(tmp_path / "elsewhere") in e and "left alone" in e
               for e in events), events


def test_resume_scancels_every_recorded_job_when_the_queue_cannot_be_read(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """squeue does not answer for the listing (slurmctld away): whether a recorded job still runs cannot be told, and
    a scancel of one that has ended is a no-op, so each recorded job without its .rc is cancelled (the scancel it may
    be owed)."""
    run_dir = tmp_path / "run"
    _recorded(run_dir, ("a", "101", False), ("b", "102", True), ("c", "103", False))
    calls = _slurm_stand_ins(tmp_path, monkeypatch, None)
    events: list[str] = []
    stop_stale_servers(run_dir, events.append)
    assert sorted(calls.read_text().split()) == ["101", "103"]


BROKEN_RM_DOCKER = """#!/bin/sh
# A docker stand-in: `run` serves; `stop` works; `rm` fails as with a daemon gone away.
case "$1" in
  run) exec python3 -m http.server --bind 127.0.0.1 "{port}" ;;
  rm) echo "Cannot connect to the Docker daemon" >&2; exit 1 ;;
  *) exit 0 ;;
esac
"""


def test_a_container_that_could_not_be_removed_keeps_the_pid_file_for_resume(tmp_path: Path) -> None:
    from llmsweep.engines.launch import LaunchSpec
    from llmsweep.execute.docker import DockerLauncher, DockerOptions
    from llmsweep.execute.lifecycle import LifecycleSettings, ServerGroup, _Server, write_pid_file
    from llmsweep.execute.preflight import pick_free_port
    from llmsweep.execute.ready import wait_ready

    port = pick_free_port()
    docker = tmp_path / "docker"
    docker.write_text(BROKEN_RM_DOCKER.format(port=port))
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    spec = LaunchSpec(engine="sglang", image="lmsysorg/sglang:v0.5.6-cu129", argv=("python3", "-m", "x"), port=port,
                      health_path="/")
    launcher = DockerLauncher(DockerOptions(docker=str(docker), gpu_vendor="none"))
    server = _Server(ServerGroup(id="g", spec=spec, jobs=[]), launcher, tmp_path / "run", LifecycleSettings(),
                     lambda _: None)
    server.dir.mkdir(parents=True)
    handle = launcher.launch(spec, log_path=server.dir / "server.log")
    server.handle = handle
    write_pid_file(server.dir / "server.pid", handle, spec)
    try:
        wait_ready(handle, timeout_s=20, poll_s=0.1)
        server.stop()
        assert handle.process.alive_pids() == []  # the docker CLI is gone...
        assert not handle.gone()  # ...but the container may not be
        assert (server.dir / "server.pid").exists()
    finally:
        handle.process.stop(grace_s=1)


FIXED = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


def interrupted_outcome(tmp_path: Path, interrupt: KeyboardInterrupt) -> dict[str, object]:
    """The outcome.json `lifecycle.settle` leaves in a job's folder when `interrupt` stops the job (it re-raises)."""
    import json

    from llmsweep.execute.lifecycle import settle
    from llmsweep.metrics.model import Summary
    from llmsweep.plan import jobs_from_files

    job = jobs_from_files([FIXED])[0]

    def measure() -> Summary:
        raise interrupt

    with pytest.raises(KeyboardInterrupt):
        settle(job, tmp_path, time.monotonic(), measure)
    outcome: dict[str, object] = json.loads((tmp_path / "outcome.json").read_text())
    return outcome


@pytest.mark.parametrize(("interrupt", "name"), [
    (signals.Interrupted(signal.SIGTERM), "SIGTERM"),  # on a Slurm node: a scancel, or the batch job's time limit
    (signals.Interrupted(signal.SIGHUP), "SIGHUP"),
    (KeyboardInterrupt(), "SIGINT"),  # plain Ctrl-C, no handler of ours: the run exits 130 for it
])
def test_a_job_a_signal_stops_names_the_signal_in_its_outcome(tmp_path: Path, interrupt: KeyboardInterrupt,
                                                               name: str) -> None:
    """The outcome names the signal, as a benchmark's stop reason does; the Slurm driver knows it for an
    interruption (and gives the state Slurm ended the batch job in as the reason instead)."""
    from llmsweep.execute.lifecycle import JobOutcome
    from llmsweep.execute.slurm import _interrupted

    doc = interrupted_outcome(tmp_path, interrupt)
    assert doc["status"] == "failed" and doc["reasons"] == [f"interrupted by {name}"]
    outcome = JobOutcome.model_validate(doc)
    assert _interrupted(outcome)
    assert not _interrupted(outcome.model_copy(update={"reasons": ["server died during the load"]}))


def test_resume_cancels_the_stale_slurm_jobs_while_their_nodes_pid_files_are_still_there(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A batch job's exit trap stops the servers its worker started outside srun by the pid files in its folder; a
    pid file naming a process on another node is removed by `--resume` once it has done what it can. It was removed
    before the stale Slurm jobs were cancelled, so the trap found no pid file and left those servers running."""
    from llmsweep.execute import lifecycle

    remote = _pid_file(tmp_path, json.dumps({"pid": 4242, "argv0": "vllm", "host": "node-elsewhere",
                                             "start_ticks": 1}))
    seen: list[bool] = []
    monkeypatch.setattr(lifecycle, "_cancel_stale_slurm_jobs", lambda run_dir, event: seen.append(remote.exists()))
    stop_stale_servers(tmp_path)
    assert seen == [True]  # cancelled while the trap could still read it
    assert not remote.exists()  # then removed, as before


def test_a_slurm_workers_sigterm_is_named_as_the_drivers_signal_where_the_driver_wrote_it(tmp_path: Path) -> None:
    """scancel stops a worker with SIGTERM whatever stopped its driver: the worker's records name the driver's signal
    (Ctrl-C's SIGINT, the one the run exits for) where the driver wrote it beside the batch job, else SIGTERM (the
    time limit's, a scancel from outside)."""
    from llmsweep.execute.signals import interrupted_by, named_for
    from llmsweep.execute.slurm import driver_signal, driver_signal_file

    stands_for = driver_signal(tmp_path, "42")
    with named_for(stands_for):
        assert interrupted_by(signal.SIGTERM) == "interrupted by SIGTERM"  # nothing written: the signal received
        driver_signal_file(tmp_path, "42").write_text("SIGINT\n")
        assert interrupted_by(signal.SIGTERM) == "interrupted by SIGINT"
        assert interrupted_by(signal.SIGHUP) == "interrupted by SIGHUP"  # a signal of its own is its own
    assert interrupted_by(signal.SIGTERM) == "interrupted by SIGTERM"  # outside the block
    assert driver_signal(tmp_path, "43")(signal.SIGTERM) is None  # another batch job's
