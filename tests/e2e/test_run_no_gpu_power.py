"""`llmsweep run` of a server on no GPU (`transformers serve --device cpu`, here its stand-in) with the default power
backend: nothing can be sampled, and what the run's start line announces (`power will not be recorded for N jobs`)
each job records too, once: its summary's power block (no backend, the reason in `error`), `--json`'s `power_error`,
the run's end lines and summary.md's *GPU power not recorded*."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.fake_transformers import stand_in_env
from support.real_engine import tiny_transformers_recipe

from llmsweep.power.sampler import NO_GPU_REASON


def test_a_server_on_no_gpu_records_in_each_job_that_its_power_was_not_recorded(tmp_path: Path,
                                                                                tiny_model_dir: Path) -> None:
    recipe = tmp_path / "cpu.yaml"
    recipe.write_text(tiny_transformers_recipe(tiny_model_dir, concs="[1, 2]", isl=32, osl=8, warmups=0,
                                               health_timeout=60))
    out = tmp_path / "run"
    env = stand_in_env(tmp_path, LLMSWEEP_STORE=str(tmp_path / "store.sqlite"))
    res = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "run", str(recipe), "--executor-option",
                          "allow_image=true", "--out", str(out), "--json", "--request-timeout", "10"],
                         env=env, capture_output=True, text=True, timeout=240)
    err = res.stderr
    assert res.returncode == 0, err[-4000:]
    rows = json.loads(res.stdout)["jobs"]
    assert len(rows) == 2
    note = "power will not be recorded for 2 jobs on "
    assert err.count(note) == 1 and NO_GPU_REASON in err  # said once, at the start
    for row in rows:
        assert row["verdict"] == "valid", row
        power = json.loads((out / "jobs" / row["job"] / "summary.json").read_text())["power"]
        assert power is not None, "the job does not say its power was not recorded"
        assert power["backend"] is None and power["required"] is False and power["power_valid"] is False
        assert power["source"] is None  # nothing was sampled: the block claims no source (it said `measured`)
        assert power["error"] == NO_GPU_REASON == row["power_error"]
        assert row["tokens_per_joule"] is None
    assert f"power not recorded for 2 jobs: {NO_GPU_REASON}" in err  # among the end lines
    md = (out / "report" / "summary.md").read_text()
    assert "### GPU power not recorded" in md and f"×2 {NO_GPU_REASON}" in md
