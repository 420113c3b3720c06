"""`llmsweep bench` whose --out fills up mid-run (a real tmpfs of 40 KiB, mounted for the test) ends with one error
and its fix, exit 1, as `run` does (`lifecycle.settle`): it ended in an `OSError: [Errno 28] No space left on device`
traceback from wherever the client was writing (its records, its /metrics scrapes)."""

from __future__ import annotations

import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.stream_server import ServerConfig, run_in_subprocess


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    """A 40-KiB tmpfs at tmp_path/disk (root only: skipped where mount is not permitted)."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount(8)")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=40k", "tmpfs", str(disk)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_a_bench_whose_out_fills_up_ends_with_the_fix_not_a_traceback(full_disk: Path) -> None:
    server, url = run_in_subprocess(ServerConfig())
    try:
        res = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "bench", "fixed", "--url", url, "--model", "m",
                              "--isl", "16", "--osl", "8", "--concurrency", "2", "--num-prompts", "3000",
                              "--num-warmups", "0", "--stall-timeout", "1", "--request-timeout", "5", "--grace", "1",
                              "--out", str(full_disk / "b")], capture_output=True, text=True, timeout=240)
    finally:
        server.kill()
        server.wait()
    assert res.returncode == 1, res.stderr[-3000:]
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    assert "error: cannot write the measurement under --out: No space left on device" in res.stderr, res.stderr[-3000:]
    assert "fix: free space on that disk" in res.stderr
    assert (full_disk / "b" / "records.jsonl").stat().st_size > 0  # what was written before stays


def test_a_bench_whose_records_pass_a_file_size_limit_stops_at_once_with_the_errno(tmp_path: Path) -> None:
    """Any failed write of its records (here a file-size limit, EFBIG; no root needed) stops the load at once and ends
    the bench with the errno's words and a fix, exit 1: it sent the rest of its window first (120 s here), then ended
    in a traceback."""
    def limited() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (48 * 1024, 48 * 1024))

    server, url = run_in_subprocess(ServerConfig(itl_s=0.0005))
    try:
        res = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "bench", "fixed", "--url", url, "--model", "m",
                              "--isl", "16", "--osl", "64", "--concurrency", "1", "--duration", "120",
                              "--num-warmups", "0", "--out", str(tmp_path / "b")], capture_output=True, text=True,
                             timeout=100, preexec_fn=limited)
    finally:
        server.kill()
        server.wait()
    assert res.returncode == 1, res.stderr[-3000:]
    assert "Traceback" not in res.stderr, res.stderr[-3000:]
    records = tmp_path / "b" / "records.jsonl"
    assert (f"error: the client could not write {records}: File too large (EFBIG); the run stopped at once; what was "
            f"written before is in {tmp_path / 'b'}") in res.stderr, res.stderr[-3000:]
    assert "fix: fix what stopped the write (a file-size limit: `ulimit -f`" in res.stderr
    assert records.stat().st_size > 0
