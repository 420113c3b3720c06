"""A cancelled batch job Slurm lists as COMPLETING (its node cleaning up) when the driver stops waiting (a second
signal hurries it) is ending, not stuck: the driver said ERROR and told the user to `scancel -f` it."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from llmsweep.execute import slurm


class _Job:
    def __init__(self, job_id: str, state: str | None) -> None:
        self.job_id, self.state, self.result = job_id, state, None
        self.options = slurm.SlurmOptions()
        self.cancel_sent = True  # its scancel reached slurmctld (`SlurmJob.cancel_sent`)

    def queue_state(self) -> str | None:
        return self.state


def test_a_job_completing_after_scancel_is_said_to_be_ending_not_to_be_forced(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    ending, stuck = _Job("684", "COMPLETING"), _Job("685", "RUNNING")

    def cancel_jobs(jobs: Any, *, wait_s: float, announced: bool = False) -> list[Any]:
        return [ending, stuck]  # both still listed when the wait was cut short

    monkeypatch.setattr(slurm, "cancel_jobs", cancel_jobs)
    with caplog.at_level(logging.WARNING, logger=slurm.__name__), slurm.cancel_on_interrupt([]) as jobs:
        jobs += [ending, stuck]  # type: ignore[list-item]
    said = {r.getMessage(): r.levelno for r in caplog.records}
    (completing,) = [m for m in said if "684" in m]
    assert said[completing] == logging.WARNING and "completing after scancel" in completing
    assert "scancel -f" not in completing
    (forced,) = [m for m in said if "685" in m]
    assert said[forced] == logging.ERROR and "scancel -f 685" in forced


def test_a_controller_too_slow_to_show_a_pending_jobs_limits_does_not_end_the_run(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A job pending for PartitionConfig is checked against its partition's MaxTime with `scontrol`: one that timed
    out raised out of the wait loop and ended the whole run. Not known is `False` (the pending note says Slurm's
    reason as it is)."""
    from llmsweep.errors import LaunchError

    def slow(*what: str, **_: Any) -> dict[str, str]:
        raise LaunchError("`scontrol show job 7` timed out after 30 s", fix="check slurmctld")

    monkeypatch.setattr(slurm, "scontrol_show", slow)
    job = slurm.SlurmJob(job_id="7", name="g", out_dir=tmp_path, script_path=tmp_path / "job.sbatch",
                         options=slurm.SlurmOptions())
    assert job.over_partition_time() is False
