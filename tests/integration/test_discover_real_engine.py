"""`llmsweep discover` on a real engine: Hugging Face `transformers serve` on the CPU serving a 2-layer random-weight
Llama, launched by the local executor. The ladder's concurrencies and repeats share one server, every run is measured
(not simulated), and the proposal comes with its stage record. Skipped where no `python3` imports torch and
transformers[serving] (CI names one in LLMSWEEP_TRANSFORMERS_PYTHON).

The server computes in float32 (`--dtype float32`, and the recipe says fp32): on an AVX2-only CPU torch multiplies
bf16 about 20x slower than fp32."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.real_engine import tiny_transformers_recipe, transformers_path

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(300)
def test_discover_on_real_transformers_serve_shares_one_server_per_stage(tmp_path: Path,
                                                                         tiny_model_dir: Path) -> None:
    path = transformers_path()
    if path is None:
        pytest.skip("no python3 on PATH (or LLMSWEEP_TRANSFORMERS_PYTHON) imports torch + transformers[serving]")
    model_dir = tiny_model_dir
    recipe = tmp_path / "tf-discover.yaml"
    text = tiny_transformers_recipe(model_dir, key="tf-discover", concs="[1, 4]", prompts_per_conc=3,
                                    extra_args="\n      --dtype: float32")
    assert text.count("precision: bf16\n") == 1
    recipe.write_text(text.replace("precision: bf16\n", "precision: fp32\n"))
    out = tmp_path / "disc"
    env = {**os.environ, "PATH": path, "PYTHONPATH": str(REPO / "src"), "LLMSWEEP_STORE": str(tmp_path / "s.sqlite")}
    argv = [sys.executable, "-m", "llmsweep.cli.main", "discover", str(recipe), "--executor", "local",
            "--executor-option", "allow_image=true", "--repeats", "2", "--ladder-top", "4", "--refine", "1",
            "--out", str(out), "--json"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads((out / "discovery.json").read_text())
    assert result["executor"] == "local" and result["interrupted"] is None
    ladder = result["stages"][0]
    # conc 1, 2, 4 × 2 workload seeds on ONE transformers server, every run measured by the real client
    assert (ladder["name"], ladder["runs_planned"], ladder["server_launches"]) == ("ladder", 6, 1)
    assert ladder["runs_measured"] == 6 and ladder["sized_for"] == {}
    assert {r["source"] for r in result["runs"]} == {"measured"}
    commands = {p.read_text() for p in (out / "stages" / "ladder" / "jobs").glob("*/server_command.txt")}
    assert len(commands) == 1 and "transformers" in (command := commands.pop()) and "--dtype float32" in command
    jobs = (out / "stages" / "ladder" / "jobs").glob("*/job.json")
    assert {json.loads(p.read_text())["precision"] for p in jobs} == {"fp32"}  # the jobs say what the server ran
    (arm,) = result["arms"]
    assert arm["error"] is None and arm["proposed"][0]["conc"] == 1 and arm["knee"] is not None
    assert all(n["cv"] is not None for n in arm["noise"])  # the repeats measured a spread for every metric
    assert all(s["server_launches"] <= 1 for s in result["stages"])
