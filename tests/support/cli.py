"""llmsweep's command line as tests drive it: in this process as a user runs it (`main`, which prints an error once
with its exit status), or a simulator served in a child process for the length of a `with` block."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmsweep.cli.main import main
from support.stream_server import free_port


def run_main(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, str, str]:
    """`llmsweep ARGS` through `main`: (exit status, stdout, stderr)."""
    try:
        main([str(a) for a in args])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    out = capsys.readouterr()
    return code, out.out, out.err


@contextlib.contextmanager
def sim_serve(*args: str, timeout_s: float = 60.0) -> Iterator[str]:
    """`llmsweep sim serve ARGS --port P` in a child process, ready (its /health answers) for the block; yields its
    base URL and stops it after."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", *args, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=1)
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the simulator did not start"
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)
