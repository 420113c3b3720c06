"""A Slurm batch job's worker (`pipeline.run_worker`, the node side of `--executor slurm`) judges required power on
its node before the server starts: where the chosen backend cannot sample (NVML on this CPU host), a job that
requires power is refused there with what the probe found and the fix, in its outcome.json (which the driver reads
back), and no server is started for it."""

from __future__ import annotations

import json
from pathlib import Path

from support.real_engine import tiny_transformers_recipe

from llmsweep import engines
from llmsweep.execute import artifacts as art
from llmsweep.execute.lifecycle import LifecycleSettings, ServerGroup
from llmsweep.execute.pipeline import run_worker
from llmsweep.plan import jobs_from_files


def test_the_node_refuses_a_job_requiring_power_before_its_server_starts(tmp_path: Path) -> None:
    recipe = tmp_path / "powered.yaml"
    recipe.write_text(tiny_transformers_recipe(tmp_path / "model", key="powered", concs="[2]").replace(
        "  multinode: false\n", "  multinode: false\n  require-power: true\n"))
    (job,) = jobs_from_files([recipe])
    # a server on one GPU (transformers' CPU launch uses none, and a server on no GPU has no power to probe for)
    spec = engines.render(job, simulate=False, port=0).model_copy(update={"gpus": 1})
    group = ServerGroup(id="transformers-g", spec=spec, jobs=[job], executor="slurm")
    run_dir = tmp_path / "run"
    settings = LifecycleSettings.model_validate({"power": {"backend": "nvml"}})
    group_file = art.write_json(art.server_dir(run_dir, group.id) / art.GROUP_FILE, group.to_json(run_dir, settings))
    said: list[str] = []

    assert run_worker(group_file, event=said.append) == 1

    outcome = json.loads((art.job_dir(run_dir, job.id) / art.OUTCOME_FILE).read_text())
    assert outcome["status"] == "refused"
    (reason,) = outcome["reasons"]
    assert reason.startswith("power is required but cannot be sampled on ") and "nvml: " in reason
    assert "--no-require-power" in reason and "--power-backend amd-smi|nvidia-smi|dcgm" in reason
    assert said == [f"job {job.id}: refused — {reason}"]
    assert not (art.server_dir(run_dir, group.id) / art.SERVER_LOG).exists()  # no server was started
