"""A second signal while `llmsweep` exits after the first: the interpreter's finalisation puts every handler back to
the default action, so a Ctrl-C (or SIGTERM, SIGQUIT) in the last few tenths of a second killed the process by that
signal (status -2, -15, -3 with a core file) instead of the 128 + first signal the run had decided and said. Held
in the main thread only, a signal went to a library's native thread instead (numpy's OpenBLAS pool), whose default
action in the C library's exit (where OpenBLAS joins that pool, up to most of a second) killed the process all the
same."""

from __future__ import annotations

import platform
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from support.procs import alive, wait_for
from test_run_support import RECIPES, cli_env, run_argv, server_pids

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"

EXITING = "llmsweep's C exit"
NATIVE_EXIT = f"""
# `llmsweep ARGS` with what numpy's OpenBLAS brings to a process's exit: a thread of its own that blocks no signal,
# alive to the end, and a step of the C library's exit that takes time (OpenBLAS joins that thread there). The step
# here says on stderr that it began, then waits for stdin's end: the test's second signal lands exactly in it.
import ctypes, sys, threading, time
libc = ctypes.CDLL(None)
libc.strdup.restype = ctypes.c_void_p
threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
# the C exit runs its handlers last registered first: perror's line, then fgetc's wait
libc.__cxa_atexit(ctypes.cast(libc.fgetc, ctypes.c_void_p), ctypes.c_void_p.in_dll(libc, "stdin"), None)
libc.__cxa_atexit(ctypes.cast(libc.perror, ctypes.c_void_p), ctypes.c_void_p(libc.strdup(b"{EXITING}")), None)
from llmsweep.cli.entry import main
main()
"""
"""Run as `python -c NATIVE_EXIT llmsweep-args...` (glibc: `__cxa_atexit` is the C library's own `atexit`)."""


class Stderr:
    """The lines a process writes on stderr, read by a thread of their own as they come."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc, self.lines = proc, queue.Queue[str]()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.put(line)

    def until(self, text: str, timeout: float) -> None:
        """Wait for a line holding `text`; fail when `timeout` seconds pass first, or the process exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if text in self.lines.get(timeout=0.5):
                    return
            except queue.Empty:
                assert self.proc.poll() is None, f"the run exited ({self.proc.returncode}) before {text!r}"
        raise AssertionError(f"no {text!r} within {timeout} s")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGQUIT], ids=["INT", "QUIT"])
def test_a_signal_after_the_interrupted_line_keeps_the_first_signals_status(tmp_path: Path,
                                                                             second: signal.Signals) -> None:
    proc = subprocess.Popen(run_argv(QUICKSTART, "--out", tmp_path / "out", "--no-report"), env=cli_env(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    stderr = Stderr(proc)
    try:
        stderr.until("job 1/", 60)
        proc.send_signal(signal.SIGTERM)
        stderr.until("interrupted by SIGTERM", 60)
        while proc.poll() is None:  # the second signal, again and again, for as long as the process is exiting
            proc.send_signal(second)
            time.sleep(0.01)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()


@pytest.mark.timeout(120)
@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's __cxa_atexit")
@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGQUIT], ids=["INT", "QUIT"])
def test_a_signal_a_native_thread_takes_in_the_c_exit_keeps_the_first_signals_status(tmp_path: Path,
                                                                                     second: signal.Signals) -> None:
    """SIGTERM mid-job of a live run, then `second` in the C library's exit (where OpenBLAS joins its threads), which
    a native thread with no signal blocked takes: the run still exits 143, its server stopped."""
    out = tmp_path / "out"
    argv = [sys.executable, "-c", NATIVE_EXIT, "run", str(RECIPES / "slow-fixed-sim.yaml"), "--out", str(out),
            "--live", "--no-report"]
    proc = subprocess.Popen(argv, env=cli_env(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert proc.stdin is not None
    stderr = Stderr(proc)
    try:
        stderr.until("job 1/", 60)
        servers = wait_for(lambda: server_pids(out), 60, "the live job's server", proc)
        proc.send_signal(signal.SIGTERM)
        stderr.until(EXITING, 60)
        proc.send_signal(second)
        time.sleep(0.2)  # delivered: a thread that takes it with its default action ends the process now
        proc.stdin.close()
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
        assert not any(alive(pid) for pid in servers)
        assert server_pids(out) == []
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
