"""What the cross-check tests of this folder share."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture
def aiperf(tmp_path: Path) -> Path:
    """An `--aiperf` that exists and fails if it is ever started: the cases here end before any client runs."""
    exe = tmp_path / "aiperf"
    exe.write_text("#!/bin/sh\nexit 1\n")
    exe.chmod(0o755)
    return exe
