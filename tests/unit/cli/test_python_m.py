"""`python -m llmsweep` is the `llmsweep` command (an environment whose scripts directory is not on PATH)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_python_m_llmsweep_is_the_command_with_its_exit_codes(tmp_path: Path) -> None:
    version = subprocess.run([sys.executable, "-m", "llmsweep", "--version"], capture_output=True, text=True,
                             timeout=60)
    assert version.returncode == 0 and version.stdout.startswith("llmsweep, version"), version.stderr
    missing = subprocess.run([sys.executable, "-m", "llmsweep", "validate", str(tmp_path / "none.yaml")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "[schema.file]" in missing.stdout + missing.stderr
