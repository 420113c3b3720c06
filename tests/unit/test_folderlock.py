"""One live llmsweep process per output folder: a claim is refused while another holds the folder, names who holds
it, and is free again once the holder lets go (or dies); looking at a folder changes nothing in it."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

from llmsweep.errors import ConfigError
from llmsweep.folderlock import LOCK_FILE, claim, holder, refuse_held


def test_a_second_claim_is_refused_naming_the_holder_and_free_once_it_lets_go(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with claim(out, "llmsweep bench", fix="use another folder"):
        held = holder(out)
        assert held is not None and held.pid == os.getpid() and held.command == "llmsweep bench"
        with pytest.raises(ConfigError) as err, claim(out, "llmsweep run", fix="use another folder"):
            pass  # pragma: no cover - the claim is refused before the block runs
        assert str(err.value).startswith(f"another `llmsweep bench` is using {out} (pid {os.getpid()})")
        assert err.value.fix == "use another folder"
        with pytest.raises(ConfigError, match="another `llmsweep bench` is using"):
            refuse_held(out, fix="wait")
    assert holder(out) is None  # let go: free, the lock file stays as the lock's home
    refuse_held(out, fix="wait")
    with claim(out, "llmsweep run", fix="x"):
        assert holder(out) == type(held)(os.getpid(), "llmsweep run")


def test_a_claim_dies_with_its_process(tmp_path: Path) -> None:
    """A bench killed outright (SIGKILL, OOM) leaves its folder free: the kernel drops the lock with the process."""
    code = ("import sys, time; from pathlib import Path; from llmsweep.folderlock import claim\n"
            "with claim(Path(sys.argv[1]), 'llmsweep bench', fix='x'):\n"
            "    print('held', flush=True); time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "held"
        held = holder(tmp_path)
        assert held is not None and held.pid == child.pid
    finally:
        child.kill()
        child.wait()
    assert holder(tmp_path) is None


def test_a_claim_dies_with_its_process_though_forked_workers_live_on(tmp_path: Path) -> None:
    """A run killed outright while forked workers (its parse pool) still run: the folder is free at once. A flock
    belongs to the open file, which a fork shares, so the workers held the claim until they noticed and exited
    (~2.6 s), and a `--resume` in that time was refused as if the run were alive. The worker keeps running here."""
    code = ("import os, sys, time; from pathlib import Path; from llmsweep.folderlock import claim\n"
            "with claim(Path(sys.argv[1]), 'llmsweep run', fix='x'):\n"
            "    worker = os.fork()\n"
            "    if worker == 0:\n"
            "        os.write(1, b'worker\\n'); time.sleep(30); os._exit(0)\n"
            "    os.write(1, f'{worker}\\n'.encode()); time.sleep(60)\n")
    # one write(2) per line: print's text and newline are two, and the two processes' lines interleaved under load
    child = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    worker = None
    try:
        assert child.stdout is not None
        said = {child.stdout.readline().strip() for _ in range(2)}  # the worker runs (past its fork) and its pid
        worker = int(next(line for line in said if line != "worker"))
        child.kill()
        child.wait()
        os.kill(worker, 0)  # alive
        assert holder(tmp_path) is None
        with claim(tmp_path, "llmsweep run --resume", fix="x"):
            pass
    finally:
        child.kill()
        child.wait()
        if worker is not None:
            os.kill(worker, 9)


def test_looking_at_a_folder_never_claimed_changes_nothing(tmp_path: Path) -> None:
    assert holder(tmp_path) is None and holder(tmp_path / "missing") is None
    assert not (tmp_path / LOCK_FILE).exists()


def test_a_claim_waits_out_a_look_that_holds_the_lock_for_an_instant(tmp_path: Path) -> None:
    """`holder` (a `summarize` looking) takes the lock shared for an instant: a bench claiming then is not refused."""
    import fcntl
    import threading

    with claim(tmp_path, "llmsweep bench", fix="x"):
        pass  # the lock file, as a finished bench leaves it
    with open(tmp_path / LOCK_FILE) as looking:
        fcntl.flock(looking.fileno(), fcntl.LOCK_SH | fcntl.LOCK_NB)
        threading.Timer(0.03, fcntl.flock, (looking.fileno(), fcntl.LOCK_UN)).start()
        with claim(tmp_path, "llmsweep bench", fix="x"):
            assert holder(tmp_path) is not None


@pytest.mark.parametrize("errno_", [errno.ENOSYS,  # Lustre mounted without -o flock
                                    errno.ENOLCK,  # NFS without its lock daemon
                                    errno.EOPNOTSUPP])
def test_a_folder_on_a_file_system_without_locks_is_refused_with_the_reason(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, errno_: int) -> None:
    """A claim the file system cannot lock is a clear refusal (exit 2) naming the folder and what to do, not a
    traceback from flock: the folder cannot be kept to one run there."""
    import fcntl

    def no_locks(fd: int, op: int) -> None:
        raise OSError(errno_, os.strerror(errno_))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with pytest.raises(ConfigError) as err, claim(tmp_path / "out", "llmsweep run", fix="use another folder"):
        pass  # pragma: no cover - refused before the block runs
    assert str(tmp_path / "out") in err.value.message and os.strerror(errno_) in err.value.message
    assert "file system that takes flock locks" in (err.value.fix or "")
