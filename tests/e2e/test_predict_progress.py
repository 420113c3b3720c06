"""`predict` says which point it is on (k/N, with an ETA from the points so far) on stderr; stdout stays the result."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from test_run_support import RECIPES, cli_env


def test_predict_prints_one_timestamped_line_per_point(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "predict", str(RECIPES / "fixed-sim.yaml"),
                           "--duration", "3", "--json"], env=cli_env(tmp_path), capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0, proc.stderr
    assert len(json.loads(proc.stdout)) == 2
    lines = [line for line in proc.stderr.splitlines() if " point " in line]
    assert re.match(r"^\[\d\d:\d\d:\d\d\] point 1/2: \S+_conc2_\S+ conc 2$", lines[0]), lines
    assert re.match(r"^\[\d\d:\d\d:\d\d\] point 2/2: \S+ conc 4 \(ETA \d+ s\)$", lines[1]), lines
