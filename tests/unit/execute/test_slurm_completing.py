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
