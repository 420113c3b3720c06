"""A pull request's verdict names the hardware of every job it counts, and `--json` carries it.

Real runs on the simulator in virtual time into one store: a recipe with a refused multinode arm (mi355x) and a
fixed-length arm that runs (mi300x).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "results" / "verdict-mix.yaml"


def _cli(*args: str | Path, ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *(str(a) for a in args)], capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode in ok, proc.stderr[-4000:]
    return proc


def test_a_refused_job_counts_under_its_hardware_and_the_json_carries_the_verdict(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    for name in ("a", "b"):  # exit 1: the refused arm's jobs are failures of the sweep
        _cli("run", RECIPE, "--out", tmp_path / name, "--store", store, "--no-report", ok=(1,))
    doc: dict[str, Any] = json.loads(_cli("compare", "--baseline", tmp_path / "a", tmp_path / "b", "--store", store,
                                          "--format", "json").stdout)
    verdict = doc["verdict"]
    assert verdict["success_rate"]["by_hardware"] == {"mi300x": {"n_success": 2, "total": 2},
                                                      "mi355x": {"n_success": 0, "total": 2}}
    assert (verdict["success_rate"]["success"], verdict["success_rate"]["total"]) == (2, 4)
    assert sum(verdict["counts"].values()) == len(verdict["points"]) == len(doc["matched"]) == 2
    assert {p["verdict"] for p in verdict["points"]} <= {"improvement", "regression", "no change", "unverified"}
    markdown = _cli("compare", "--baseline", tmp_path / "a", tmp_path / "b", "--store", store, "--format",
                    "markdown").stdout
    assert "| mi355x | 0 | 2 |" in markdown and "unknown" not in markdown
