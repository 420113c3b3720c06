"""Stopping a server stops its whole tree: children in its group, children that left it, and SIGTERM-deaf ones."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from llmsweep.execute.process import read_proc, start_process
from llmsweep.execute.secrets import SecretScrubber

SPAWNER = """
import os, subprocess, sys, time, signal
if sys.argv[2] == "deaf":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
sleeper = ("import signal, sys, time\\nif sys.argv[1] == 'deaf': signal.signal(signal.SIGTERM, signal.SIG_IGN)"
           "\\nwhile True: time.sleep(1)")
a = subprocess.Popen([sys.executable, "-c", sleeper, sys.argv[2]])
b = subprocess.Popen([sys.executable, "-c", sleeper, sys.argv[2]], start_new_session=True)
with open(sys.argv[1], "w") as fh:
    fh.write(f"{a.pid} {b.pid}")
print("children started", flush=True)
while True:
    time.sleep(1)
"""


def alive(pid: int) -> bool:
    info = read_proc(pid)
    return info is not None and info.state not in ("Z", "X")


def wait_for_file(path: Path, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared")


def start_spawner(tmp_path: Path, mode: str):
    pids_file = tmp_path / "pids"
    proc = start_process([sys.executable, "-c", SPAWNER, str(pids_file), mode], log_path=tmp_path / "server.log",
                         env=dict(os.environ))
    children = [int(p) for p in wait_for_file(pids_file).split()]
    return proc, children


def test_stop_leaves_no_child_even_one_in_its_own_session(tmp_path: Path) -> None:
    proc, children = start_spawner(tmp_path, "polite")
    assert proc.is_alive() and all(alive(c) for c in children)
    rc = proc.stop(grace_s=5.0)
    assert rc is not None and rc < 0  # killed by a signal
    assert not proc.is_alive()
    assert [c for c in children if alive(c)] == []


def test_stop_kills_processes_that_ignore_sigterm_after_the_grace(tmp_path: Path) -> None:
    proc, children = start_spawner(tmp_path, "deaf")
    started = time.monotonic()
    proc.stop(grace_s=0.5)
    assert time.monotonic() - started >= 0.5
    assert not proc.is_alive() and [c for c in children if alive(c)] == []


def test_stop_is_idempotent_and_reports_exit_status(tmp_path: Path) -> None:
    proc = start_process(["sh", "-c", "echo bye; exit 7"], log_path=tmp_path / "log", env=dict(os.environ))
    assert proc.wait(timeout_s=10) == 7
    assert proc.stop(grace_s=0.1) == 7 and proc.stop(grace_s=0.1) == 7
    assert (tmp_path / "log").read_text() == "bye\n"


def test_log_gets_stdout_and_stderr_scrubbed_while_process_sees_the_secret(tmp_path: Path) -> None:
    secret = "s3cr3t-value-123"
    env = {**os.environ, "MY_TOKEN": secret}
    script = 'echo "out $MY_TOKEN"; echo "err $MY_TOKEN" >&2; test "$MY_TOKEN" = s3cr3t-value-123 && echo seen'
    proc = start_process(["sh", "-c", script], log_path=tmp_path / "server.log", env=env,
                         scrubber=SecretScrubber([secret]))
    assert proc.wait(timeout_s=10) == 0
    text = (tmp_path / "server.log").read_text()
    assert secret not in text
    assert sorted(text.splitlines()) == ["err ***", "out ***", "seen"]


ORPHANER = """
import subprocess, sys, time
b = subprocess.Popen([sys.executable, "-c", "import time\\nwhile True: time.sleep(1)"], start_new_session=True)
open(sys.argv[1], "w").write(str(b.pid))
time.sleep(1.0)
print("parent exits, child stays", flush=True)
"""


def test_children_of_a_server_that_exited_on_its_own_are_still_stopped(tmp_path: Path) -> None:
    pids_file = tmp_path / "pid"
    proc = start_process([sys.executable, "-c", ORPHANER, str(pids_file)], log_path=tmp_path / "log",
                         env=dict(os.environ))
    child = int(wait_for_file(pids_file))
    assert proc.is_alive()  # the lifecycle polls this while waiting; it records the tree
    assert proc.wait(timeout_s=20) == 0
    assert alive(child)  # re-parented away from the server, in its own session
    proc.stop(grace_s=2.0)
    assert not alive(child)
