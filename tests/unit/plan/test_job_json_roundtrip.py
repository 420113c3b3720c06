"""A job.json written by `run` is read back by `summarize`, `--resume` and the read-back: every job type round-trips
through its JSON document (strict recipe models must still accept the enum spellings JSON carries)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep.plan import jobs_from_files
from llmsweep.plan.job import Job

RUN = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run"


@pytest.mark.parametrize("name", ["fixed-sim.yaml", "agentic-sim.yaml", "replay-sim.yaml", "spec-fixed-sim.yaml"])
def test_every_job_reads_back_from_its_json_document(name: str) -> None:
    jobs = jobs_from_files([RUN / name])
    assert jobs
    for job in jobs:
        doc = json.loads(job.model_dump_json(by_alias=True))
        again = Job.model_validate(doc)
        assert again == job
        assert again.workload is not None and again.workload.scenario == job.workload.scenario
