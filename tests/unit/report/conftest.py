"""A run with three series, an invalid point and a job that never ran, built from generated records."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.synthetic import SyntheticPoint, run_of_failures, synthetic_job, write_synthetic_run

from llmsweep.results.rundir import RunDir


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
    return run_of_failures(root, "all-failed", dict.fromkeys(ALL_FAILED_IDS, ALL_FAILED_WHY), status="launch_failed")
