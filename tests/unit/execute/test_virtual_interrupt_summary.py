"""A virtual-time job a signal stops leaves no summary beside its failed outcome (README: "in virtual time it has no
summary"), even when the signal lands while the finished simulation is being summarised: a `summary.json` saying
`valid` beside an `outcome.json` saying `interrupted by SIGINT` told a reader of the job folder it was good."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import pytest

from llmsweep.execute import signals

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "slow-fixed-sim.yaml"


@pytest.mark.usefixtures("installed")
def test_a_virtual_job_interrupted_while_summarising_leaves_no_summary(tmp_path: Path) -> None:
    from llmsweep.execute.pipeline import RunRequest, run_sweep
    from llmsweep.execute.progress import JobState, SweepProgress, use_progress

    class Progress(SweepProgress):
        sent = False

        def line(self, message: str) -> None:
            pass

        def phase_changed(self, job: JobState) -> None:
            super().phase_changed(job)
            if job.phase == "summarising" and not self.sent:  # the simulation is done; its summary not yet made
                self.sent = True
                signal.raise_signal(signal.SIGINT)

    recipe = tmp_path / "one.yaml"
    text = RECIPE.read_text()
    assert "conc-list: [1, 2, 3]" in text
    recipe.write_text(text.replace("conc-list: [1, 2, 3]", "conc-list: [1]"))
    out = tmp_path / "out"
    with use_progress(Progress()), pytest.raises(signals.Interrupted) as caught:
        run_sweep(RunRequest(files=[recipe], out=out, store=tmp_path / "store.sqlite", report=False),
                  event=lambda _: None)
    assert caught.value.signum == signal.SIGINT
    (job,) = (out / "jobs").iterdir()
    outcome = json.loads((job / "outcome.json").read_text())
    assert outcome["status"] == "failed" and outcome["reasons"] == [signals.interrupted_by(signal.SIGINT)]
    assert not (job / "summary.json").exists()
