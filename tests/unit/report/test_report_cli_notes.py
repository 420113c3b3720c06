"""`llmsweep report`'s notes are `note: …` lines on stderr, as the CLI's other notes are: an overlay point not drawn
a second time (`--with` of the run a `run --reuse` stood on) reached stderr as a log record, `WARNING
llmsweep.report: …`, in no other command's voice (and not at all where the log is not stderr's)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_main
from support.synthetic import write_reusing_run


def test_an_overlay_point_drawn_already_is_said_as_a_note_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               caplog: pytest.LogCaptureFixture) -> None:
    store = tmp_path / "store.sqlite"
    run = write_reusing_run(tmp_path, store)
    code, out, err = run_main(capsys, "report", run.path, "--with", "earlier-run", "--store", store, "--no-png",
                              "--out", tmp_path / "report", "--json")
    assert code == 0, err
    notes = json.loads(out)["overlay_notes"]
    assert len(notes) == len(run.reused) and all("is not drawn again" in n for n in notes), notes
    # each on stderr in the CLI's voice, once; none as a log record
    said = [line for line in err.splitlines() if line.startswith("note: ")]
    assert [line for line in said if "is not drawn again" in line] == [f"note: {n}" for n in notes], err
    assert not [r for r in caplog.records if r.name.startswith("llmsweep.report") and r.levelname == "WARNING"]
    # the page and summary.md keep them
    assert all(f"> note: {n}" in (tmp_path / "report" / "summary.md").read_text() for n in notes)
    assert json.loads((tmp_path / "report" / "data.json").read_text())["overlay_notes"] == notes
