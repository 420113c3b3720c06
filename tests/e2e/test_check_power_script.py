"""`scripts/gpu/check_power.py` (the H200 evidence's cross-check) on runs made here: a simulated agentic run's
integrated energy agrees with the modelled energy counter within 5 %, a counter that disagrees fails the check with
its difference, and a run without power samples says that nothing was compared."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from test_run_support import RECIPES, cli_env, job_dirs, run_cli

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "gpu" / "check_power.py"


def _check(run_dir: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run([sys.executable, str(SCRIPT), str(run_dir), *extra], env=env, capture_output=True,
                          text=True, timeout=120)


def test_check_power_agrees_on_a_simulated_run_and_catches_a_wrong_counter(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli([RECIPES / "agentic-sim.yaml", "--out", out, "--no-report"], cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    done = _check(out, "--json", "--per-gpu")
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    totals = [r for r in doc["rows"] if r["gpu"] == "all"]
    assert doc["ok"] is True and len(totals) == 2 and not doc["skipped"]
    assert all(abs(r["diff_pct"]) <= 5 and r["backend"] == "sim" and r["source"] == "simulated" for r in totals)
    assert len(doc["rows"]) == 2 + 2 * 8  # TP 8: a row per GPU as well

    # A counter that ran 20 % fast is caught, with its difference.
    jdir = next(iter(job_dirs(out).values()))
    lines = (jdir / "gpu_metrics.jsonl").read_text().splitlines()
    fast = [lines[0]] + [json.dumps({**s, "energy_j": s["energy_j"] * 1.2}) for s in map(json.loads, lines[1:])]
    (jdir / "gpu_metrics.jsonl").write_text("\n".join(fast) + "\n")
    done = _check(out)
    assert done.returncode == 1, done.stdout
    assert "1 outside" in done.stdout
    doc = json.loads(_check(out, "--json").stdout)
    diffs = sorted(r["diff_pct"] for r in doc["rows"] if r["gpu"] == "all")
    assert doc["ok"] is False and abs(diffs[0]) <= 5 and abs(diffs[1] - 20) < 0.5, diffs  # the 20 %, and the other job

    # No samples at all: nothing compared (exit 2), never a pass.
    for j in job_dirs(out).values():
        (j / "gpu_metrics.jsonl").unlink()
    shutil.rmtree(out / "servers", ignore_errors=True)
    done = _check(out)
    assert done.returncode == 2 and "nothing compared" in done.stdout
