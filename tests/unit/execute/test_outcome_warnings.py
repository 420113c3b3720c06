"""A job's warnings (`pipeline.job_warnings`: a real engine would refuse it, the simulator does not model something
it sets) reach its outcome.json wherever its group runs: the group carries them, a Slurm batch job's worker reads
them from its group file (`pipeline.run_worker`), and the lifecycle writes them with the outcome. Only a result is
qualified: a refused job, or one that failed without a result, carries none."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llmsweep import engines
from llmsweep.execute import artifacts as art
from llmsweep.execute.lifecycle import JobOutcome, LifecycleSettings, ServerGroup
from llmsweep.execute.pipeline import run_worker
from llmsweep.plan import jobs_from_files

FIXED = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"
WARNING = "a real engine would refuse them: [engine.known-incompatibility] test"


def test_a_slurm_worker_writes_the_groups_warnings_into_each_outcome(tmp_path: Path) -> None:
    job = jobs_from_files([FIXED])[0]
    group = ServerGroup(id="sim-g", spec=engines.render(job, simulate=True, port=0), jobs=[job], source="simulated",
                        executor="slurm", warnings={job.id: [WARNING]})
    run_dir = tmp_path / "run"
    group_file = art.write_json(art.server_dir(run_dir, group.id) / art.GROUP_FILE,
                                group.to_json(run_dir, LifecycleSettings()))

    assert run_worker(group_file, event=lambda _: None) == 0

    outcome = json.loads((art.job_dir(run_dir, job.id) / art.OUTCOME_FILE).read_text())
    assert outcome["status"] == "valid" and outcome["warnings"] == [WARNING]


def test_warnings_qualify_results_only_and_are_said_once() -> None:
    def outcome(status: Any) -> JobOutcome:
        return JobOutcome(job_id="j", exp_name="e", status=status)

    for status in ("valid", "smoke", "invalid", "skipped"):
        assert outcome(status).with_warnings([WARNING, WARNING]).with_warnings([WARNING]).warnings == [WARNING]
    for status in ("refused", "failed"):
        assert outcome(status).with_warnings([WARNING]).warnings == []
