from __future__ import annotations

import subprocess
import sys


def test_help_lists_commands_and_exits_zero() -> None:
    out = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "--help"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "llmsweep" in out.stdout
