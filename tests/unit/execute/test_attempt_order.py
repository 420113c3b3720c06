"""Moving an earlier attempt aside moves its summary first: a kill between two moves must leave a job that runs again
(no summary), never one `--resume` counts as done whose records were already moved away."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from llmsweep.execute import artifacts as art


def test_a_kill_between_two_moves_leaves_no_summary_without_its_records(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    job = tmp_path / "jobs" / "j1"
    job.mkdir(parents=True)
    for name in (art.RECORDS_FILE, art.SERVER_METRICS_FILE, art.RUN_FILE, art.SUMMARY_FILE, art.JOB_FILE):
        (job / name).write_text("{}\n")
    real = os.replace
    moved: list[str] = []

    def killed_after_one(src: Any, dst: Any) -> None:
        if moved:
            raise KeyboardInterrupt  # the signal lands between the first move and the second
        real(src, dst)
        moved.append(Path(src).name)

    monkeypatch.setattr(art.os, "replace", killed_after_one)
    with pytest.raises(KeyboardInterrupt):
        art.keep_previous_attempt(job)
    assert moved == [art.SUMMARY_FILE]
    assert not (job / art.SUMMARY_FILE).exists() and (job / art.RECORDS_FILE).exists()
    monkeypatch.setattr(art.os, "replace", real)
    kept = art.keep_previous_attempt(job)  # the next attempt moves the rest aside, whole
    assert kept is not None and not any((job / n).exists() for n in (art.RECORDS_FILE, art.JOB_FILE))


def test_what_a_kill_mid_write_left_goes_with_its_attempt(tmp_path: Path) -> None:
    """A run killed while it wrote a job's summary left `summary.json.tmp` (half of it) beside the attempt's files:
    `--resume` moves it into that attempt's `attempts/N/` with the rest, never leaving it beside the next attempt's
    files (where it outlived a rerun that wrote no summary of its own, and a rerun's summary overwrote it)."""
    job = tmp_path / "jobs" / "j1"
    job.mkdir(parents=True)
    for name in (art.RECORDS_FILE, art.RUN_FILE, art.JOB_FILE):
        (job / name).write_text("{}\n")
    half = '{\n  "schema_version": 3,\n  "validity": {"verd'
    (job / (art.SUMMARY_FILE + ".tmp")).write_text(half)
    (job / (art.OUTCOME_FILE + ".tmp")).write_text("{")
    kept = art.keep_previous_attempt(job)
    assert kept == job / art.ATTEMPTS_DIR / "1"
    assert (kept / (art.SUMMARY_FILE + ".tmp")).read_text() == half
    assert (kept / (art.OUTCOME_FILE + ".tmp")).exists() and (kept / art.RECORDS_FILE).exists()
    assert sorted(p.name for p in job.iterdir()) == [art.ATTEMPTS_DIR]


def test_an_attempt_that_left_only_half_a_file_is_kept(tmp_path: Path) -> None:
    job = tmp_path / "jobs" / "j1"
    job.mkdir(parents=True)
    (job / (art.SUMMARY_FILE + ".tmp")).write_text("{")
    kept = art.keep_previous_attempt(job)
    assert kept is not None and (kept / (art.SUMMARY_FILE + ".tmp")).exists()
    assert not list(job.glob("*.tmp"))
