"""Which summaries count as done (`--resume` keeps them, the completeness line counts them) has one home,
`metrics.model.DONE_VERDICTS` (said as `DONE_WORDS`; with `skipped`, the statuses that leave a result,
`SUCCESS_STATUSES`): the outcome, the end-of-run line and the refusal to run over a finished --out read it, so a change
of the vocabulary reaches them all (changed here to show it does)."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.errors import ConfigError
from llmsweep.execute import artifacts as art
from llmsweep.execute import lifecycle, pipeline
from llmsweep.execute.lifecycle import JobOutcome
from llmsweep.execute.pipeline import RunOutcome, RunRequest


def _outcome(job: str, status: str) -> JobOutcome:
    return JobOutcome.model_validate({"job_id": job, "exp_name": job, "status": status})


def test_done_is_read_from_its_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(lifecycle, "SUCCESS_STATUSES", frozenset({"valid", "skipped"}))
    monkeypatch.setattr(pipeline, "DONE_WORDS", "valid")
    outcomes = [_outcome("a", "valid"), _outcome("b", "smoke"), _outcome("c", "skipped")]
    assert [o.ok for o in outcomes] == [True, False, True]
    line = RunOutcome(tmp_path, "r", outcomes).completeness().splitlines()[0]
    assert line.startswith("expected 3 jobs, 2 with a valid summary"), line
    (art.jobs_dir(tmp_path) / "a").mkdir(parents=True)
    (art.jobs_dir(tmp_path) / "a" / art.SUMMARY_FILE).write_text("{}")
    with pytest.raises(ConfigError) as refused:
        pipeline._refuse_finished(tmp_path, RunRequest(files=[], out=tmp_path))
    assert "jobs without a valid result" in str(refused.value.fix)
