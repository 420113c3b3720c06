"""`llmsweep run` where power cannot be sampled: a job that requires power (`require-power: true`) is refused before
any server starts, with why and the fix, while its sibling that does not require power runs on the engine, and the
run says once, at its start and at its end, in the job's summary, in summary.md and in `--json`, that power was not
recorded and why. The engine here is transformers on the CPU with `--power-backend nvml` named: a server on no GPU
has no GPU power, whatever backend is named (a named backend had read the host's GPUs, which the server never used;
what a backend that cannot sample says is `tests/unit/power/test_probe.py`'s and `test_power_gate_node.py`'s)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.fake_transformers import stand_in_env
from support.real_engine import tiny_transformers_recipe

from llmsweep.plan import jobs_from_files
from llmsweep.power.sampler import NO_GPU_REASON


def test_a_job_requiring_power_is_refused_before_launch_and_its_sibling_runs(tmp_path: Path,
                                                                             tiny_model_dir: Path) -> None:
    recipe = tmp_path / "power.yaml"
    # one launch for both keys (one server group): only the powered job is refused; the group still runs the other
    powered = tiny_transformers_recipe(tiny_model_dir, key="powered", concs="[2]", isl=32, osl=8, warmups=0,
                                       health_timeout=60)
    plain = tiny_transformers_recipe(tiny_model_dir, key="plain", concs="[2]", isl=32, osl=8, warmups=0,
                                     health_timeout=60)
    recipe.write_text(powered.replace("  multinode: false\n", "  multinode: false\n  require-power: true\n")
                      + plain)
    out = tmp_path / "run"
    env = stand_in_env(tmp_path, LLMSWEEP_STORE=str(tmp_path / "store.sqlite"))
    res = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "run", str(recipe), "--executor-option",
                          "allow_image=true", "--power-backend", "nvml", "--out", str(out), "--json",
                          "--request-timeout", "10"], env=env, capture_output=True, text=True, timeout=240)
    err = res.stderr
    assert res.returncode == 1, err[-4000:]  # a refused job: the run is not ok
    assert "Traceback" not in err
    rows = {r["job"]: r for r in json.loads(res.stdout)["jobs"]}
    keys = {job.id: job.recipe_key for job in jobs_from_files([recipe])}
    assert sorted(keys) == sorted(rows)
    (refused_id,) = [j for j in rows if keys[j] == "powered"]
    (plain_id,) = [j for j in rows if keys[j] == "plain"]

    # Refused up front, with what the probe found and the fix, before the one server started (for the sibling only).
    refusal = rows[refused_id]
    assert refusal["verdict"] == "refused" and refusal["summary_file"] is None
    assert refusal["reason"].startswith("power is required but cannot be sampled on ")
    assert NO_GPU_REASON in refusal["reason"] and "--no-require-power" in refusal["reason"]
    assert "nvml" not in refusal["reason"]  # no GPU to read: not NVML's failure, and no other backend to try
    said = err.index(f"job {refused_id}: refused — power is required")
    launched = err.index("launching transformers server for 1 job")
    assert said < launched
    assert not (out / "jobs" / refused_id / "summary.json").exists()
    assert not (out / "jobs" / refused_id / "server_command.txt").exists()  # no server was started for it

    # The sibling ran on the engine; its power was not recorded, and everything says why and how to get it.
    ran = rows[plain_id]
    assert ran["verdict"] == "valid", ran
    assert ran["tokens_per_joule"] is None and ran["power_error"] == NO_GPU_REASON
    summary = json.loads((out / "jobs" / plain_id / "summary.json").read_text())
    power = summary["power"]
    assert power["backend"] is None and power["required"] is False and power["power_valid"] is False
    assert power["error"] == ran["power_error"]
    note = "power will not be recorded for 1 job on "
    assert err.count(note) == 1 and err.index(note) < launched  # said once, at the start
    assert f"power not recorded for 1 job: {power['error']}" in err  # and among the end lines
    assert f"refused: {refused_id}: power is required" in err
    md = (out / "report" / "summary.md").read_text()
    assert "### GPU power not recorded" in md and power["error"] in md
