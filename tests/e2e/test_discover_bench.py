"""`bench/discover_efficiency.py` runs end to end on a tiny ladder and prints its figures (it asserts nothing itself:
this smoke checks that the figures it prints are there and consistent)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_run_support import cli_env

BENCH = Path(__file__).resolve().parents[2] / "bench" / "discover_efficiency.py"


@pytest.mark.timeout(300)
def test_the_efficiency_bench_prints_the_ratio_and_the_frontier_distance(tmp_path: Path) -> None:
    argv = [sys.executable, str(BENCH), "--ladder-top", "8", "--repeats", "2", "--refine", "1", "--duration", "120",
            "--out", str(tmp_path / "b"), "--json"]
    proc = subprocess.run(argv, env=cli_env(tmp_path), capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout)
    (arm,) = report["arms"]
    assert arm["dense_runs"] == 8 and arm["discover_runs"] >= 2 * 4
    assert arm["ratio"] == pytest.approx(arm["discover_runs"] / arm["dense_runs"], abs=1e-3)
    frontier = arm["frontier"]
    assert frontier["dense_frontier_points"] == len(frontier["points"]) >= 1
    assert all({"conc", "shortfall", "noise", "within_noise"} <= set(p) for p in frontier["points"])
