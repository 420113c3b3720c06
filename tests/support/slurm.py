"""What the Slurm tests share: skip cleanly where no Slurm answers, and leave no run or job behind."""

from __future__ import annotations

import shutil
import subprocess

import pytest


def require_slurm() -> None:
    """Skip the calling test (module) unless Slurm's client commands are installed and a controller answers."""
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        pytest.skip("Slurm client commands are not installed (apt-get install slurm-client)")
    try:
        ok = subprocess.run(["sinfo", "-h"], capture_output=True, timeout=15).returncode == 0
    except subprocess.TimeoutExpired:
        ok = False
    if not ok:
        pytest.skip("no Slurm controller answers `sinfo` (start one with scripts/ci/start_slurm.sh)")


def leave_nothing(proc: subprocess.Popen[bytes], job_ids: list[str]) -> None:
    """A test's `finally`: the run it started killed if still running, and each Slurm job it submitted cancelled,
    even when an assertion failed (never a job left behind for the next test)."""
    if proc.poll() is None:
        proc.kill()
    for job_id in job_ids:
        subprocess.run(["scancel", job_id], capture_output=True, timeout=30)
