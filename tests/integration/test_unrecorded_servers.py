"""A run SIGKILLed after starting a server and before writing its pid file (a few milliseconds, which `shielded`
cannot cover for SIGKILL) left the server running with nothing on disk naming it, and `--resume` never stopped it: on
a real engine it held the GPUs the resumed run's server needed. Every server process now carries its folder in its
environment, and `stop_stale_servers` stops the ones under the run's folder that no pid file names."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from llmsweep.execute.lifecycle import stop_stale_servers
from llmsweep.execute.process import SERVER_DIR_ENV, marked_processes, read_proc, start_process

RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes"
CONTAINER = "llmsweep-sim-0a1b2c3d4e"  # as `docker.container_name` makes them
DOCKER_RUN = ("run", "--network=host", "--name", CONTAINER)  # as `docker.render_docker_run` starts them
DAEMON = ('if [ "$1" = container ]; then echo \'{"Status": "running"}\'; exit 0; fi\n'  # it has the container
          'if [ "$1" = ps ]; then exit 0; fi\n')  # and no other


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


def test_a_run_never_stops_the_servers_of_another_run_inside_its_folder(tmp_path: Path) -> None:
    """`run --out sweeps` beside a live run whose `--out` is `sweeps/x`: the leftover search looked at every mark
    under the new run's folder, at any depth, and stopped the live run's servers. It looks in the run's `servers/`
    folder only, where its own servers mark theirs."""
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    run = tmp_path / "sweeps"
    live = start_process(sleeper, log_path=run / "x" / "servers" / "g1" / "server.log", env=dict(os.environ))
    ours = start_process(sleeper, log_path=run / "servers" / "g1" / "server.log", env=dict(os.environ))
    try:
        assert stop_stale_servers(run) == [ours.pid]
        assert _alive(live.pid)
    finally:
        ours.stop(grace_s=1)
        live.stop(grace_s=1)


def test_only_a_docker_run_of_ours_has_a_container_removed() -> None:
    """A leftover's command line names a container of ours only as `render_docker_run` writes it: `conda run --name
    vllm …` (a wrapper in an engine's argv) had been taken for one, and `conda rm -f vllm` run."""
    from llmsweep.execute.docker import removal_of

    assert removal_of(["docker", *DOCKER_RUN, "img"]) == ["docker", "rm", "-f", CONTAINER]
    assert removal_of(["/bin/sh", "/opt/podman-wrap", *DOCKER_RUN, "img"]) == ["/opt/podman-wrap", "rm", "-f",
                                                                               CONTAINER]
    assert removal_of(["conda", "run", "--name", "vllm", "vllm", "serve", "m"]) is None
    assert removal_of(["docker", "run", "--network=host", "--name", "mine", "img"]) is None  # not our name
    assert removal_of(["docker", "run"]) is None


def test_an_unrecorded_docker_run_has_its_container_removed(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    docker = tmp_path / "docker"
    docker.write_text(f'#!/bin/sh\nif [ "$1" = rm ]; then echo "$@" >> {calls}; exit 0; fi\n{DAEMON}sleep 120\n')
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    run = tmp_path / "run"
    client = start_process([str(docker), *DOCKER_RUN, "img"],
                           log_path=run / "servers" / "g1" / "server.log", env=dict(os.environ))
    try:
        assert SERVER_DIR_ENV not in os.environ
        assert stop_stale_servers(run) == [client.pid]
        assert calls.read_text().split() == ["rm", "-f", CONTAINER]  # by the CLI the run started
    finally:
        client.stop(grace_s=1)


def test_al_collect_stops_a_marked_server_of_a_cell_a_killed_collection_never_recorded(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`al collect` looked for leftover servers only in the cells that hold a pid file, and there only for marks
    below the cell (a cell's server marks the cell itself): a collection killed between starting a cell's server and
    writing its pid file left that server running, and the next collection into the same folder never stopped it
    (on a GPU host it held the GPUs every later cell's server needs)."""
    import subprocess

    from support.cli import run_main

    from llmsweep.alcollect.collect import COLLECTOR_FILE

    golden = tmp_path / "golden"
    cell = golden / "llama-1b_ngram.runs" / "thinking_off-k1"  # the cell the collection below measures again
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    cell.mkdir(parents=True)
    (cell / COLLECTOR_FILE).write_text(f'{{"pid": {int(dead.stdout)}, "start_ticks": 1}}')  # its collector: gone
    log = cell / "server.log"
    server = start_process([sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--port", "0"], log_path=log,
                           env={**os.environ, "PYTHONUNBUFFERED": "1"})
    # a live run whose --out lies in the evidence folder, and a server marking a folder below the cell: neither is
    # this curve's leftover (every subfolder had been swept, at any depth, and a live run's server stopped)
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    others = [start_process(sleeper, log_path=where / "server.log", env=dict(os.environ))
              for where in (golden / "llama-1b_ngram.runs" / "sweep" / "servers" / "g1", cell / "servers" / "g1")]
    try:
        deadline = time.monotonic() + 60
        while not log.is_file() or "running on http://" not in log.read_text(errors="replace"):  # serving
            assert _alive(server.pid) and time.monotonic() < deadline, "the simulator did not start"
            time.sleep(0.1)
        assert not list(cell.glob("*.pid"))  # killed before its pid file, as the collection was
        assert server.pid in dict(marked_processes(cell))  # it marks the cell itself, not a folder below it
        code, _, err = run_main(capsys, "al", "collect", RECIPES / "alcollect" / "llama-1b-ngram.yaml", "--simulate",
                                "--prompts", "builtin", "--num-prompts", "1", "--output-len", "32", "-k", "1",
                                "--out", golden)
        assert code == 0, err
        assert f"stopping server process group {server.pid} " in err and "had not yet recorded it" in err, err
        deadline = time.monotonic() + 10
        while _alive(server.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(server.pid)
        assert all(_alive(p.pid) for p in others)
    finally:
        server.stop(grace_s=1)
        for p in others:
            p.stop(grace_s=1)


def test_a_container_two_marked_docker_processes_name_is_removed_once(tmp_path: Path) -> None:
    """Two processes of one group with one `docker run … --name NAME` command line (a CLI or wrapper that forks
    itself; a shell between fork and exec) each had the container removed: `docker rm -f NAME` ran twice, the second
    on a container already gone (and the docker test above failed now and then)."""
    calls = tmp_path / "calls"
    docker = tmp_path / "docker"
    docker.write_text(f'#!/bin/sh\nif [ "$1" = rm ]; then echo "$@" >> {calls}; exit 0; fi\n{DAEMON}'
                      'if [ -z "$FORKED" ]; then FORKED=1 "$0" "$@" & fi\nsleep 120\n')
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    run = tmp_path / "run"
    client = start_process([str(docker), *DOCKER_RUN, "img"],
                           log_path=run / "servers" / "g1" / "server.log", env=dict(os.environ))
    try:
        deadline = time.monotonic() + 10
        while sum(str(docker) in argv for _, argv in marked_processes(run)) < 2:  # the fork is there too
            assert time.monotonic() < deadline, marked_processes(run)
            time.sleep(0.05)
        assert stop_stale_servers(run) == [client.pid]
        assert calls.read_text().split() == ["rm", "-f", CONTAINER]
    finally:
        client.stop(grace_s=1)


def test_a_labelled_container_that_cannot_be_removed_refuses_the_run(tmp_path: Path) -> None:
    """A container of the run's (its label names a server folder of the run) that the daemon will not remove: the
    run went on and started its servers beside it (on its GPUs, a port it may hold). It is refused, naming the
    container and how to remove it. The docker CLI asked is the one given (the run's executor's: podman, a path),
    and a container of another run's folder is not touched."""
    from llmsweep.errors import LaunchError
    from llmsweep.execute.docker import SERVER_DIR_LABEL

    run = tmp_path / "run"
    (run / "servers" / "g1").mkdir(parents=True)
    ours = json.dumps({SERVER_DIR_LABEL: str((run / "servers" / "g1").resolve())})
    theirs = json.dumps({SERVER_DIR_LABEL: str((tmp_path / "run-other" / "servers" / "g1").resolve())})
    calls = tmp_path / "calls"
    docker = tmp_path / "podman-wrap"
    docker.write_text(f"""#!/bin/sh
echo "$*" >> {calls}
case "$1" in
  ps) echo aaa; echo bbb ;;
  container) echo '/{CONTAINER} {ours}'; echo '/llmsweep-sim-ffffffffff {theirs}' ;;
  rm) echo "Error response from daemon: container {CONTAINER}: driver failed to remove root filesystem" >&2; exit 1 ;;
esac
""")
    docker.chmod(docker.stat().st_mode | stat.S_IEXEC)
    said: list[str] = []
    with pytest.raises(LaunchError) as err:
        stop_stale_servers(run, said.append, docker=[str(docker)])
    assert f"container {CONTAINER} (`{docker} rm -f {CONTAINER}` failed)" in err.value.message, err.value.message
    assert "this run's servers would start beside them" in err.value.message
    assert "docker rm -f NAME" in (err.value.fix or "")
    assert calls.read_text().splitlines() == [
        f"ps -a -q --no-trunc --filter label={SERVER_DIR_LABEL}",
        "container inspect --format {{.Name}} {{json .Config.Labels}} aaa bbb", f"rm -f {CONTAINER}"]
