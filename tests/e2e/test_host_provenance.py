"""`llmsweep run` records where a measured point ran: a local engine's summary carries the host's CPU model, its
logical and usable CPUs and the load average at the job's start (`provenance.hardware.host`), which `results show`
prints and the dashboard's drill-down shows with the rest of the provenance. A simulated point carries none of it
(nor any GPU state): it ran on no GPU, and the machine that simulated it is not the engine's host."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.fake_transformers import stand_in_env
from support.real_engine import tiny_transformers_recipe
from test_run_support import RECIPES, cli_env, cli_here, job_dirs, read_json, run_here

from llmsweep.host import cpu_model
from llmsweep.report.data import detail_payload
from llmsweep.results.point import points_from_run
from llmsweep.results.rundir import load_run


def test_a_local_engines_result_says_which_host_it_ran_on(tmp_path: Path, tiny_model_dir: Path) -> None:
    recipe = tmp_path / "tf.yaml"
    recipe.write_text(tiny_transformers_recipe(tiny_model_dir, concs="[1]", isl=32, osl=8, warmups=0,
                                               prompts_per_conc=2, health_timeout=60))
    out = tmp_path / "run"
    store = tmp_path / "store.sqlite"
    env = stand_in_env(tmp_path, LLMSWEEP_STORE=str(store))
    res = run_here([recipe, "--executor-option", "allow_image=true", "--out", out, "--no-report",
                    "--request-timeout", "10"], env)
    assert res.returncode == 0, res.stderr[-4000:]
    ((job_id, jdir),) = job_dirs(out).items()
    summary = read_json(jdir / "summary.json")
    assert summary["source"] == "measured"
    host = summary["provenance"]["hardware"]["host"]
    assert host.get("cpu_model") == cpu_model()  # absent on a machine whose /proc/cpuinfo names none
    assert host["logical_cpus"] == os.cpu_count() and host["usable_cpus"] == len(os.sched_getaffinity(0))
    assert isinstance(host["load_avg_1m"], float) and host["load_avg_1m"] >= 0
    assert "gpu_state" not in summary["provenance"]["hardware"]  # served on the CPU: no GPU was asked
    (said,) = [s for s in res.stderr.splitlines() if "server's machine: host " in s]  # and the run says so
    assert f"{os.cpu_count()} logical CPUs" in said

    shown = cli_here(["results", "show", job_id, "--store", store], env)
    assert shown.returncode == 0, shown.stderr
    (line,) = [s for s in shown.stdout.splitlines() if "server host" in s]
    assert f"{os.cpu_count()} logical CPUs" in line and "at the job's start" in line
    assert (cpu_model() or "CPU model unknown") in line

    (point,) = points_from_run(load_run(out))
    assert detail_payload(point)["provenance"]["hardware"]["host"] == host  # the dashboard's drill-down


def test_a_simulated_result_records_no_host_and_no_gpu_state(tmp_path: Path) -> None:
    out = tmp_path / "sim"
    res = run_here([RECIPES / "fixed-sim.yaml", "--live", "--out", out, "--no-report"], cli_env(tmp_path))
    assert res.returncode == 0, res.stderr[-4000:]
    for jdir in job_dirs(out).values():
        summary = read_json(jdir / "summary.json")
        assert summary["source"] == "simulated"
        hardware = summary["provenance"]["hardware"]
        assert hardware["sku"] == "mi300x" and "host" not in hardware and "gpu_state" not in hardware
        assert "host" not in json.loads((jdir / "run.json").read_text())["provenance"]["hardware"]
