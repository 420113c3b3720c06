"""llmsweep's command line as tests drive it: in this process as a user runs it (`main`, which prints an error once
with its exit status), or a simulator served in a child process for the length of a `with` block."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from llmsweep.cli.main import main


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
    """`llmsweep sim serve ARGS --port 0` in a child process, ready (its /health answers) for the block; yields the
    base URL it says it serves on (the port the child bound: no port picked here that another test could take first)
    and stops it after."""
    proc = subprocess.Popen([sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", *args, "--port", "0"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stderr is not None
        said: list[str] = []
        url = ""
        for line in proc.stderr:
            said.append(line)
            if match := re.search(r"running on (http://\S+)", line):
                url = match.group(1)
                break
        assert url, f"the simulator did not say where it serves: {''.join(said)[-2000:]}"
        # the rest of its log is read and dropped, so that a full pipe never stalls it
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                urllib.request.urlopen(f"{url}/health", timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, "the simulator did not start"
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def walk(command: click.Command, path: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    """Every command under `command` (itself first) with its path (`"sim serve"`), as click lists them: what the CLI
    contract tests run over, so a command added later is covered without editing them."""
    yield " ".join(path), command
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            assert sub is not None, f"llmsweep {' '.join((*path, name))} is listed but cannot be loaded"
            yield from walk(sub, (*path, name))
