"""Faults a docker-executor server meets, against the real Docker daemon (`scripts/ci/start_docker.sh`): the
container OOM-killed, killed from outside, or unable to start its command. What a user relies on: the failure says
what ended the container, as the daemon saw it, with the fix for that cause — not "read the log tail" over an empty
log, nor a model path when the engine's command is missing from the image.

The servers are plain shell commands in the imported image of `test_docker_daemon.py` (empty folders; the host's
/usr, /bin and /lib mounted read-only): each test takes seconds, and no engine is needed to fault the container."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import tarfile
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from support.procs import wait_for
from test_docker_daemon import IMAGE, SESSION, _containers, _daemon_answers, _docker, remove_left_behind

from llmsweep.engines.launch import LaunchSpec
from llmsweep.errors import LaunchError
from llmsweep.execute.docker import DockerLauncher, DockerOptions
from llmsweep.execute.handle import ProcessServerHandle
from llmsweep.execute.preflight import resolve_port
from llmsweep.execute.ready import check_alive, wait_ready

SYSTEM_MOUNTS = [f"{p}:{p}:ro" for p in ("/usr", "/bin", "/lib", "/lib64") if Path(p).is_dir()]
PREFIX = f"llmsweep-faults-{SESSION}"
"""Its own container names: `test_docker_daemon.py` may run beside this file (pytest-xdist), and each file's check
that nothing is left behind removes what it finds of its own prefix only (of this session: `SESSION`)."""


@pytest.fixture(scope="module")
def image() -> Iterator[str]:
    """The empty-folder image of test_docker_daemon.py (this session's tag), imported (never pulled); removed after
    the module if imported here."""
    if not _daemon_answers():
        pytest.skip("no Docker daemon answers (`.ci/run` starts one: scripts/ci/start_docker.sh)")
    imported_here = _docker("image", "inspect", IMAGE).returncode != 0
    if imported_here:
        proc = subprocess.run(["tar", "-c", "-T", "/dev/null"], capture_output=True, check=True)
        imported = subprocess.run(["docker", "import", "-", IMAGE], input=proc.stdout, capture_output=True,
                                  timeout=120)
        assert imported.returncode == 0, imported.stderr
    yield IMAGE
    if imported_here:
        _docker("rmi", IMAGE)


@pytest.fixture
def no_containers_after() -> Iterator[None]:
    yield
    remove_left_behind(PREFIX)


def _launch(image: str, tmp_path: Path, *argv: str, mounts: list[str] | None = None,
            extra_args: tuple[str, ...] = (), prefix: str = PREFIX, log_path: Path | None = None
            ) -> ProcessServerHandle:
    spec = resolve_port(LaunchSpec(engine="vllm", image=image, argv=argv, port=0, gpus=0))
    options = DockerOptions(gpu_vendor="none", name_prefix=prefix, extra_mounts=tuple(SYSTEM_MOUNTS if mounts is None
                                                                                       else mounts),
                            extra_args=extra_args)
    handle = DockerLauncher(options).launch(spec, log_path=log_path or tmp_path / "server.log")
    assert isinstance(handle, ProcessServerHandle)  # (its `cleanup` names the container)
    return handle


def _exited(handle: ProcessServerHandle) -> None:
    wait_for(lambda: not handle.is_alive(), timeout=20, what="the container's end")


def _death(handle: ProcessServerHandle) -> str:
    """What the job the container was serving fails with once the container has ended."""
    _exited(handle)
    with pytest.raises(LaunchError) as died:
        check_alive(handle, during="job x")
    return died.value.message


def _startup_failure(handle: ProcessServerHandle) -> LaunchError:
    """What a container that ends while its server starts fails the launch with (the container stopped after)."""
    try:
        with pytest.raises(LaunchError) as err:
            wait_ready(handle, timeout_s=30, poll_s=0.1)
    finally:
        handle.stop(grace_s=1)
    return err.value


# A shell that holds ~300 MB in a variable: far past a 64 MB limit.
_HOG = "x=$(head -c 300000000 /dev/zero | tr '\\0' a); sleep 60"


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_containers_after")
def test_an_oom_killed_container_is_named_out_of_memory_with_the_memory_fix(image: str, tmp_path: Path) -> None:
    """A container past its memory limit is killed by the kernel (exit 137) with nothing in its log: the start-up
    failure said "read the log tail above; fix the engine arguments, model path or image" over an empty log, and a
    death mid-job "(exit status 137)". Both now say the container ran out of memory (the container's own
    State.OOMKilled: it is kept until this run's stop removes it) and how to give it more."""
    limit = ("--memory=64m", "--memory-swap=64m")
    failed = _startup_failure(_launch(image, tmp_path, "/bin/sh", "-c", _HOG, extra_args=limit))
    assert "exited with status 137 while starting" in failed.message, failed.message
    assert "): the container ran out of memory: the kernel's OOM killer ended it" in failed.message, failed.message
    fix = failed.fix or ""
    assert "the container ran out of memory: the kernel's OOM killer ended it" in fix and "--memory" in fix, fix
    assert "engine arguments" not in fix

    # mid-job: the server was up, then the kernel killed it; the job's failure names the cause
    later = _launch(image, tmp_path, "/bin/sh", "-c", f"sleep 1; {_HOG}", extra_args=limit)
    try:
        message = _death(later)
    finally:
        later.stop(grace_s=1)
    assert "died during job x (exit status 137: the container ran out of memory" in message, message


BUSY_PREFIX = f"llmsweep-smallleft-{SESSION}"
"""The containers and volumes of the busy-daemon test: its own, so its left-behind check is its own."""


def _busy_daemon(events: int) -> None:
    """`events` daemon events of other work (volumes created and removed, eight at a time), as other jobs' containers,
    pulls and volumes give a busy host: the daemon keeps only its last 256 events."""
    names = [f"{BUSY_PREFIX}-busy-{uuid.uuid4().hex[:8]}-{k}" for k in range(events // 2)]
    try:
        with ThreadPoolExecutor(8) as pool:
            assert all(p.returncode == 0 for p in pool.map(lambda n: _docker("volume", "create", n), names))
    finally:
        _docker("volume", "rm", "-f", *names)


@pytest.mark.timeout(90)
def test_an_oom_kill_is_named_by_the_containers_own_state_however_busy_the_daemon(image: str, tmp_path: Path) -> None:
    """The daemon keeps its last 256 events: on a busy host its `oom` event of a container is gone by the time the
    failure is written, and `docker run --rm` removed the container's State.OOMKilled with it, so an OOM-killed server
    was put down to "the OOM killer or a kill from outside". The container is now kept (exited) until this run's stop
    removes it: its own State names the OOM kill, and nothing is left behind."""
    from llmsweep.execute.docker import container_end

    started = time.time()
    handle = _launch(image, tmp_path, "/bin/sh", "-c", _HOG, extra_args=("--memory=64m", "--memory-swap=64m"),
                     prefix=BUSY_PREFIX)
    name = handle.cleanup[-1]
    try:
        _exited(handle)
        _busy_daemon(300)
        assert container_end("docker", name, started) is None  # the daemon's log no longer names the OOM
        assert [line.split()[0] for line in _containers(BUSY_PREFIX)] == [name]  # exited, not yet removed
        with pytest.raises(LaunchError) as died:
            check_alive(handle, during="job x")
    finally:
        handle.stop(grace_s=1)
        left = _containers(BUSY_PREFIX)
        remove_left_behind(BUSY_PREFIX)
    assert "(exit status 137: the container ran out of memory: the kernel's OOM killer ended it (the container's " \
           "State.OOMKilled))" in died.value.message, died.value.message
    assert handle.gone() and left == []


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_containers_after")
def test_a_container_killed_from_outside_says_so_and_this_runs_own_stop_does_not(image: str, tmp_path: Path) -> None:
    """`docker kill` (or `docker stop`, `docker rm -f`) by someone else mid-job: the failure said only "exit status
    137"; it now says something outside the run stopped the container, from the daemon's `kill` event. The run's own
    teardown sends `kill` events too: a container this run stopped is given no such cause."""
    handle = _launch(image, tmp_path, "/bin/sleep", "60")
    try:
        wait_for(lambda: any(line.split()[0] == handle.cleanup[-1] for line in _containers(PREFIX)), timeout=20,
                 what="the container")
        assert _docker("kill", handle.cleanup[-1]).returncode == 0
        message = _death(handle)
    finally:
        handle.stop(grace_s=1)
    assert "(exit status 137: something outside this run stopped the container (the daemon's `kill` event, " \
           "signal 9" in message, message

    own = _launch(image, tmp_path, "/bin/sleep", "60")
    wait_for(lambda: any(line.split()[0] == own.cleanup[-1] for line in _containers(PREFIX)), timeout=20,
             what="the container")
    own.stop(grace_s=1)
    assert own.gone() and own.returncode is not None
    with pytest.raises(LaunchError) as stopped:
        check_alive(own, during="job y")
    message = stopped.value.message
    assert "outside" not in message and "(it was killed by SIGTERM (exit 143))" in message, message


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_containers_after")
def test_a_container_the_daemon_says_ended_is_dead_before_its_cli_exits(image: str, tmp_path: Path) -> None:
    """`docker kill`/`docker rm -f` mid-job: the attached `docker run` CLI outlives its container by a moment, and
    the job's load, stopped by the connection failures, ended inside it: the server was judged alive, the job
    `invalid` for its error ratio instead of failed with "the server died", and the next job was sent to the dead
    server (all its requests failed `connection`, no relaunch). The daemon's word now decides: a container it says
    ended is dead at once. The CLI is held stopped (SIGSTOP) here, so its lag is not left to timing."""
    handle = _launch(image, tmp_path, "/bin/sleep", "60")
    pid = handle.pid
    assert pid is not None
    try:
        name = handle.cleanup[-1]
        wait_for(lambda: any(line.split()[0] == name and " Up " in f" {line} " for line in _containers(PREFIX)),
                 timeout=20, what="the container running")
        assert handle.is_alive()
        os.kill(pid, signal.SIGSTOP)
        try:
            assert _docker("kill", name).returncode == 0
            t0 = time.monotonic()
            assert not handle.is_alive()
            assert time.monotonic() - t0 < 5
            with pytest.raises(LaunchError) as died:
                check_alive(handle, during="job x")
        finally:
            os.kill(pid, signal.SIGCONT)
    finally:
        handle.stop(grace_s=1)
    assert "died during job x" in died.value.message and "something outside this run" in died.value.message, \
        died.value.message
    assert handle.gone()


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_containers_after")
def test_an_engine_that_crashes_is_named_by_its_signal_not_an_exit_status_alone(image: str, tmp_path: Path) -> None:
    """An engine that segfaults (a native library of the image, a driver mismatch) ends its container with docker's
    exit status 128 + 11, and no daemon event: the failure said "(exit status 139)" and, while starting, to fix the
    engine arguments, model path or image. It now names the crash and its signal, mid-job and while starting."""
    crash = "exec sh -c 'kill -SEGV $$'"  # (a shell raising SIGSEGV against itself, as a crashing engine does)
    handle = _launch(image, tmp_path, "/bin/sh", "-c", f"sleep 2; {crash}")
    try:
        wait_for(lambda: any(line.split()[0] == handle.cleanup[-1] and " Up " in f" {line} "
                             for line in _containers(PREFIX)), timeout=20, what="the container running")
        message = _death(handle)
    finally:
        handle.stop(grace_s=1)
    assert "died during job x (exit status 139: the engine crashed (SIGSEGV, signal 11" in message, message

    failed = _startup_failure(_launch(image, tmp_path, "/bin/sh", "-c", crash))
    assert "exited with status 139 while starting" in failed.message, failed.message
    fix = failed.fix or ""
    assert fix.startswith("the engine crashed (SIGSEGV, signal 11") and "where it crashed" in fix, fix


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_containers_after")
def test_a_container_removed_from_outside_is_not_waited_for_as_one_being_created(image: str, tmp_path: Path) -> None:
    """`docker stop` answers "no such container" both while `docker run` still creates it and once someone removed it
    (`docker rm -f`) and its CLI has not yet exited: the stop waits out the first case, but a container it saw running
    is not being created, and its teardown must not wait `stop_timeout_s` for it (the CLI is held stopped here, as a
    busy host can hold it)."""
    handle = _launch(image, tmp_path, "/bin/sleep", "60")
    pid, name = handle.pid, handle.cleanup[-1]
    assert pid is not None
    wait_for(lambda: any(line.split()[0] == name and " Up " in f" {line} " for line in _containers(PREFIX)),
             timeout=20, what="the container running")
    assert handle.is_alive()
    os.kill(pid, signal.SIGSTOP)
    try:
        assert _docker("rm", "-f", name).returncode == 0
        t0 = time.monotonic()
        handle.stop(grace_s=1)
        took = time.monotonic() - t0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    assert handle.gone() and took < 15, f"{took:.1f} s"


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_containers_after")
def test_an_engine_command_the_image_lacks_is_named_not_the_model_path(image: str, tmp_path: Path) -> None:
    """An image without the engine (a wrong image, an engine's command misspelt): the container exits at once with
    127 ("exec python3 failed: No such file or directory"). The fix named the model path the container does not see
    (true, but not why it failed) and sent the user to mount it; it now names the missing command and how to check
    the image."""
    model = tmp_path / "model"
    model.mkdir()
    t0 = time.monotonic()
    handle = _launch(image, tmp_path, "no-such-engine", "serve", str(model), mounts=[])
    try:
        with pytest.raises(LaunchError) as err:
            wait_ready(handle, timeout_s=30, poll_s=0.1)
    finally:
        handle.stop(grace_s=1)
    assert time.monotonic() - t0 < 20
    assert "exited with status 127 while starting" in err.value.message, err.value.message
    fix = err.value.fix or ""
    assert "the image's `no-such-engine` was not found" in fix, fix
    assert f"docker run --rm --entrypoint no-such-engine {image} --help" in fix, fix
    assert "does not see" not in fix, fix


@pytest.mark.timeout(60)
def test_a_daemon_that_does_not_answer_is_named_with_how_to_start_it(image: str, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemon down (stopped, restarting, another DOCKER_HOST) when a server is about to start: the job failed in
    a second with docker's "Cannot connect" and "check the docker daemon (`docker info`)"; it now gives the daemon's
    fix (start it, DOCKER_HOST, the socket's group), as a `docker run` refused so already does."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path / 'no-daemon.sock'}")
    spec = LaunchSpec(engine="vllm", image=image, argv=("/bin/true",), port=0, gpus=0)
    t0 = time.monotonic()
    with pytest.raises(LaunchError) as err:
        DockerLauncher(DockerOptions(gpu_vendor="none", name_prefix=PREFIX)).prepare(
            spec, log_dir=tmp_path, event=lambda _: None)
    assert time.monotonic() - t0 < 20
    assert "Cannot connect to the Docker daemon" in err.value.message, err.value.message
    assert "systemctl start docker" in (err.value.fix or "") and "DOCKER_HOST" in (err.value.fix or ""), err.value.fix


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_containers_after")
def test_launch_files_under_an_out_folder_with_a_colon_reach_the_container(image: str, tmp_path: Path) -> None:
    """A launch's files (TensorRT-LLM's options file) are written under `--out` and mounted at the same path. A run
    folder named with the time (`--out runs/23:15`) holds a `:`, which `docker run -v` reads as a separator: docker
    refused the container (exit 125, "too many colons") and the fix sent the user to the executor's mount options,
    none of which they had set. The engine now reads its file, whatever the folder's name."""
    from llmsweep.engines.launch import LAUNCH_DIR, LaunchFile
    from llmsweep.execute.artifacts import write_launch_files

    spec = resolve_port(LaunchSpec(
        engine="trtllm", image=image, argv=("/bin/sh", "-c", f"cat '{LAUNCH_DIR}/opts.yaml'; exec sleep 60"), port=0,
        gpus=0, files=(LaunchFile(name="opts.yaml", content="read-from-the-launch-file\n"),)))
    spec = write_launch_files(spec, tmp_path / "runs" / "23:15,b" / "servers" / "g")
    launcher = DockerLauncher(DockerOptions(gpu_vendor="none", name_prefix=PREFIX,
                                            extra_mounts=tuple(SYSTEM_MOUNTS)))
    handle = launcher.launch(spec, log_path=tmp_path / "server.log")
    try:
        wait_for(lambda: "read-from-the-launch-file" in handle.tail() or not handle.is_alive(), timeout=20,
                 what="the file's text in the server's log")
        assert handle.is_alive(), handle.tail()
    finally:
        handle.stop(grace_s=1)
    assert handle.gone()


@pytest.fixture(scope="module")
def slow_to_create() -> Iterator[str]:
    """An image of 40,000 small files: on vfs storage (`scripts/ci/start_docker.sh`) the daemon copies them one by one
    for each container it creates, which takes seconds (here 2-9 s; a large engine image, or a busy daemon, takes
    as long on any storage). Imported once for the module's tests (~10 s)."""
    if not _daemon_answers():
        pytest.skip("no Docker daemon answers (`.ci/run` starts one: scripts/ci/start_docker.sh)")
    ref = f"llmsweep-test/many-files-{SESSION}:1"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        folders = ("etc", "tmp", "proc", "sys", "dev", "usr", "lib", "lib64", "bin", "many",
                   *(f"many/{d}" for d in range(100)))
        for name in folders:
            info = tarfile.TarInfo(name)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for d in range(100):
            for k in range(400):
                info = tarfile.TarInfo(f"many/{d}/{k}")
                info.size = 64
                tar.addfile(info, io.BytesIO(b"x" * 64))
    imported = subprocess.run(["docker", "import", "-", ref], input=buf.getvalue(), capture_output=True, timeout=300)
    assert imported.returncode == 0, imported.stderr
    try:
        yield ref
    finally:
        _docker("rmi", "-f", ref)


@pytest.mark.timeout(180)
@pytest.mark.usefixtures("no_containers_after")
def test_a_server_stopped_while_its_container_is_created_leaves_no_container(slow_to_create: str,
                                                                             tmp_path: Path) -> None:
    """Ctrl-C (or any stop) while `docker run` is still creating the container: `docker stop` and `docker rm -f`
    found no container yet and the CLI was killed, but the daemon finished the create, so every such interrupt left
    a container behind (`Created`, holding its name), and the run, having removed nothing, kept no pid file for
    `--resume` to remove it either. The stop now waits for the creation and removes what it made."""
    since = int(time.time()) - 1
    handle = _launch(slow_to_create, tmp_path, "/bin/sleep", "60")
    name = handle.cleanup[-1]
    time.sleep(0.3)
    if any(line.split()[0] == name for line in _containers(PREFIX)):
        handle.stop(grace_s=1)
        pytest.skip("this daemon created the container in under 0.3 s: there is no creation to interrupt")
    handle.stop(grace_s=1)
    assert handle.gone()

    def created() -> bool:  # the daemon's `create` event: the create the CLI asked for has ended
        said = _docker("events", "--since", str(since), "--until", f"{time.time():.3f}", "--filter",
                       f"container={name}", "--filter", "event=create", "--format", "{{.Action}}")
        return "create" in said.stdout

    wait_for(created, timeout=60, what="the daemon's end of the container's creation")
    assert not _containers(PREFIX)


def _names() -> list[str]:
    return [line.split()[0] for line in _containers(PREFIX)]


@pytest.mark.timeout(90)
@pytest.mark.usefixtures("no_containers_after")
def test_resume_removes_a_container_nothing_but_its_label_names(image: str, tmp_path: Path) -> None:
    """A run killed with its `docker run` CLI (an OOM kill or `kill -9` of the run's every process) before its pid
    file named the container: no pid file, no process marked with its folder, and `--resume` left the container
    running, holding its GPUs and port. Every container carries its server folder as a label; the run's leftover
    search finds it by that and removes it, and leaves a container of another run (a folder beside it) alone."""
    from llmsweep.execute.docker import LOG_LABEL, SERVER_DIR_LABEL
    from llmsweep.execute.lifecycle import stop_stale_servers

    run, other = tmp_path / "run", tmp_path / "run-other"  # (a sibling whose name starts like it: not this run's)
    ours = _launch(image, tmp_path, "/bin/sleep", "60", log_path=run / "servers" / "g1" / "prefill-0.log")
    theirs = _launch(image, tmp_path, "/bin/sleep", "60", log_path=other / "servers" / "g1" / "server.log")
    try:
        mine, not_mine = ours.cleanup[-1], theirs.cleanup[-1]
        wait_for(lambda: {mine, not_mine} <= set(_names()), timeout=30, what="both containers")
        labels = json.loads(_docker("container", "inspect", "--format", "{{json .Config.Labels}}", mine).stdout)
        folder = (run / "servers" / "g1").resolve()
        assert labels[SERVER_DIR_LABEL] == str(folder) and labels[LOG_LABEL] == str(folder / "prefill-0.log"), labels
        assert ours.pid is not None
        os.kill(ours.pid, signal.SIGKILL)  # the CLI dies with the run; the container runs on
        wait_for(lambda: not ours.process.is_alive(), timeout=10, what="the docker CLI's death")
        assert mine in _names()
        said: list[str] = []
        assert stop_stale_servers(run, said.append) == []  # no process of it left to stop
        assert mine not in _names() and not_mine in _names()
        assert any(f"removing container {mine}, which an earlier, interrupted run left" in s for s in said), said
    finally:
        theirs.stop(grace_s=1)
        _docker("rm", "-f", ours.cleanup[-1])


@pytest.mark.timeout(60)
@pytest.mark.usefixtures("no_containers_after")
def test_a_container_the_executor_starts_carries_its_group_and_role_labels(image: str, tmp_path: Path) -> None:
    """Every label key in one namespace (`docker.LABEL_NAMESPACE`), and the container names what it serves: its
    server group (`docker ps --filter label=llmsweep.group=…` finds a run's servers) and the role of a deployment
    launched role by role, a relaunch's as the first launch's, besides the folder `--resume` finds it by."""
    from llmsweep.execute.docker import GROUP_LABEL, LABEL_NAMESPACE, LOG_LABEL, ROLE_LABEL, SERVER_DIR_LABEL

    folder = tmp_path / "run" / "servers" / "sglang-roles-0a1b2c3d4e5f"
    handle = _launch(image, tmp_path, "/bin/sleep", "60", log_path=folder / "prefill-0.2.log")
    try:
        name = handle.cleanup[-1]
        wait_for(lambda: name in _names(), timeout=30, what="the container")
        labels = json.loads(_docker("container", "inspect", "--format", "{{json .Config.Labels}}", name).stdout)
        ours = {k: v for k, v in labels.items() if k.startswith(LABEL_NAMESPACE)}
        assert ours == {SERVER_DIR_LABEL: str(folder.resolve()), LOG_LABEL: str(folder.resolve() / "prefill-0.2.log"),
                        GROUP_LABEL: "sglang-roles-0a1b2c3d4e5f", ROLE_LABEL: "prefill-0"}, labels
        found = _docker("ps", "-a", "-q", "--no-trunc", "--filter", f"label={GROUP_LABEL}=sglang-roles-0a1b2c3d4e5f",
                        "--filter", f"label={ROLE_LABEL}=prefill-0").stdout.split()
        assert len(found) == 1, found
    finally:
        handle.stop(grace_s=1)


def _run_by_hand(image: str, labels: dict[str, str]) -> str:
    """A container started as a killed run's `docker run` left it: detached, labelled, named by nothing on disk."""
    name = f"{PREFIX}-{uuid.uuid4().hex[:10]}"
    argv = ["run", "-d", "--name", name]
    for key, value in labels.items():
        argv += ["--label", f"{key}={value}"]
    for mount in SYSTEM_MOUNTS:
        argv += ["-v", mount]
    started = _docker(*argv, image, "/bin/sleep", "600")
    assert started.returncode == 0, started.stderr
    return name


@pytest.mark.timeout(90)
@pytest.mark.usefixtures("no_containers_after")
def test_resume_removes_a_labelled_container_no_record_names_saying_its_group_and_role(image: str,
                                                                                        tmp_path: Path) -> None:
    """A run killed between `docker run` creating the container and its pid file naming it: no pid file, no CLI
    left, only the container with its labels. `--resume`'s leftover search removes it and says which container and
    what it served (the group's role), and leaves a container labelled with another run's folder running — one whose
    folder starts like this run's (`run-other`) too."""
    from llmsweep.execute.docker import GROUP_LABEL, ROLE_LABEL, SERVER_DIR_LABEL
    from llmsweep.execute.lifecycle import stop_stale_servers

    run, other = tmp_path / "run", tmp_path / "run-other"
    (run / "servers" / "g1").mkdir(parents=True)
    mine = _run_by_hand(image, {SERVER_DIR_LABEL: str((run / "servers" / "g1").resolve()), GROUP_LABEL: "g1",
                                ROLE_LABEL: "decode-1"})
    not_mine = _run_by_hand(image, {SERVER_DIR_LABEL: str((other / "servers" / "g1").resolve()), GROUP_LABEL: "g1",
                                    ROLE_LABEL: "decode-1"})
    try:
        said: list[str] = []
        assert stop_stale_servers(run, said.append) == []  # no process of it to stop: the container only
        assert mine not in _names() and not_mine in _names()
        assert any(f"removing container {mine}, which an earlier, interrupted run left: decode-1 of server group g1"
                   in s for s in said), said
        assert not any(not_mine in s for s in said), said
    finally:
        _docker("rm", "-f", mine, not_mine)


@pytest.mark.timeout(180)
@pytest.mark.usefixtures("no_containers_after")
@pytest.mark.parametrize("recorded", [True, False], ids=["pid-file", "unrecorded"])
def test_resume_waits_for_a_container_its_killed_run_was_still_creating_and_removes_it(
        slow_to_create: str, tmp_path: Path, recorded: bool) -> None:
    """A run SIGKILLed while `docker run` still created its container: `--resume` stopped the CLI (named by the pid
    file, or found by the folder its environment marks) and ran `docker rm -f NAME`, which found no container yet and
    counted that as done — then the daemon finished the create, and the container was left, holding its name and,
    on a GPU host, its GPUs. A fresh run's stop had the same race, fixed by waiting for the creation; the leftover
    search now waits the same way before it stops the CLI, and removes what the daemon made."""
    from llmsweep.execute.lifecycle import stop_stale_servers, write_pid_file

    since = int(time.time()) - 1
    run = tmp_path / "run"
    log_path = run / "servers" / "g1" / "server.log"
    handle = _launch(slow_to_create, tmp_path, "/bin/sleep", "60", log_path=log_path)
    name = handle.cleanup[-1]
    if recorded:
        write_pid_file(log_path.parent / "server.pid", handle, handle.spec)
    time.sleep(0.3)
    if name in _names():
        handle.stop(grace_s=1)
        pytest.skip("this daemon created the container in under 0.3 s: there is no creation to interrupt")
    # the run is killed here: its handle is never stopped, and the CLI (in a session of its own) creates on
    said: list[str] = []
    try:
        stop_stale_servers(run, said.append)
    finally:
        handle.process.stop(grace_s=1)

    def created() -> bool:  # the daemon's `create` event: the create the CLI asked for has ended
        events = _docker("events", "--since", str(since), "--until", f"{time.time():.3f}", "--filter",
                         f"container={name}", "--filter", "event=create", "--format", "{{.Action}}")
        return "create" in events.stdout

    wait_for(created, timeout=60, what="the daemon's end of the container's creation")
    assert name not in _names(), said
    assert not list(log_path.parent.glob("*.pid"))
