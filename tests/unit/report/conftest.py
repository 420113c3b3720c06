"""A run with three series, an invalid point and a job that never ran, built from generated records."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

from llmsweep.results.rundir import RunDir, load_run


def three_series_run(root: Path, requests: int = 40) -> RunDir:
    points = []
    for fw, hw, speed in (("sglang", "mi300x", 1.0), ("vllm", "mi300x", 0.8), ("sglang", "mi355x", 1.6)):
        for conc in (1, 4, 16):
            points.append(SyntheticPoint(synthetic_job(conc=conc, framework=fw, hardware=hw), speed=speed,
                                         requests=requests))
    points.append(SyntheticPoint(synthetic_job(conc=8, framework="vllm", hardware="mi300x"), speed=0.8,
                                 requests=requests, invalid_reason="realised TP 4 differs from the job's tp 8"))
    return write_synthetic_run(root, points, run_id="report-run", expected_extra=("never-ran",))


@pytest.fixture(scope="module")
def report_run(tmp_path_factory: pytest.TempPathFactory) -> RunDir:
    return three_series_run(tmp_path_factory.mktemp("runs") / "run")


@pytest.fixture
def failed_run(tmp_path: Path) -> RunDir:
    return all_failed_run(tmp_path / "failed")


ALL_FAILED_WHY = "trace source hf:agentx/traces is not available offline (fix: pass --traces synthetic)"
ALL_FAILED_IDS = [f"job-conc{c}" for c in (1, 2, 4, 8, 16, 32, 64, 128, 256)]


def all_failed_run(root: Path) -> RunDir:
    """Nine jobs that each left a folder with the executor's outcome and no summary, all for the same reason."""
    for jid in ALL_FAILED_IDS:
        (root / "jobs" / jid).mkdir(parents=True)
        (root / "jobs" / jid / "job.json").write_text(json.dumps(synthetic_job(conc=1, job_id=jid)))
        (root / "jobs" / jid / "outcome.json").write_text(json.dumps(
            {"job_id": jid, "exp_name": "x", "status": "launch_failed", "reasons": [ALL_FAILED_WHY]}))
    (root / "run.json").write_text(json.dumps({"run_id": "all-failed", "expected_job_ids": ALL_FAILED_IDS}))
    return load_run(root)
