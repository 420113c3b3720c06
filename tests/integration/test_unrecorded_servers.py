"""A run SIGKILLed after starting a server and before writing its pid file (a few milliseconds, which `shielded`
cannot cover for SIGKILL) left the server running with nothing on disk naming it, and `--resume` never stopped it: on
a real engine it held the GPUs the resumed run's server needed. Every server process now carries its folder in its
environment, and `stop_stale_servers` stops the ones under the run's folder that no pid file names."""

from __future__ import annotations

import os
import stat
import sys
import time
from pathlib import Path

from llmsweep.execute.lifecycle import stop_stale_servers
from llmsweep.execute.process import SERVER_DIR_ENV, marked_processes, read_proc, start_process


def _alive(pid: int) -> bool:
    info = read_proc(pid)
    return info is not None and info.state != "Z"


def test_a_server_no_pid_file_names_is_found_by_its_folder_and_stopped(tmp_path: Path) -> None:
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    run, other = tmp_path / "run", tmp_path / "run-other"  # a sibling whose name starts like it: not ours
    ours = start_process(sleeper, log_path=run / "servers" / "g1" / "server.log", env=dict(os.environ))
    theirs = start_process(sleeper, log_path=other / "servers" / "g1" / "server.log", env=dict(os.environ))
    try:
        assert not list((run / "servers" / "g1").glob("*.pid"))  # killed before its pid file, as the run was
        found = dict(marked_processes(run))
        assert ours.pid in found and theirs.pid not in found
        said: list[str] = []
        assert stop_stale_servers(run, said.append) == [ours.pid]
        assert any("left running by an earlier, interrupted run that had not yet recorded it" in s for s in said)
        deadline = time.monotonic() + 10
        while _alive(ours.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(ours.pid) and _alive(theirs.pid)
        assert stop_stale_servers(run, said.append) == []  # nothing left: nothing said again
    finally:
        ours.stop(grace_s=1)
        theirs.stop(grace_s=1)


def test_an_unrecorded_docker_run_has_its_container_removed(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    docker = tmp_path / "docker"
    docker.write_text(f'#!/bin/sh\nif [ "$1" = rm ]; then echo "$@" >> {calls}; exit 0; fi\nsleep 120\n')
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    run = tmp_path / "run"
    client = start_process([str(docker), "run", "--name", "llmsweep-sim-abc", "img"],
                           log_path=run / "servers" / "g1" / "server.log", env=dict(os.environ))
    try:
        assert SERVER_DIR_ENV not in os.environ
        assert stop_stale_servers(run) == [client.pid]
        assert calls.read_text().split() == ["rm", "-f", "llmsweep-sim-abc"]  # by the CLI the run started
    finally:
        client.stop(grace_s=1)
