"""`llmsweep changes`'s table is laid out as every table is (`cli.tables`): in a terminal the job ids are shortened to
their experiment name and hash and broken only between their segments (a raw rich table folded each over four lines
mid-word in 80 columns, `qwen3.5_256_64_fp8_sglang_tp` / `4-pp1-…`); piped, the ids are whole; either way the rows
are those `--json` lists."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from changes_scratch import write_recipe
from support.cli import run_main
from support.tables import as_terminal, fits, rows, shown

from llmsweep.plan import jobs_from_files


def _dirs(tmp_path: Path) -> tuple[Path, Path]:
    """A tp4 arm that gains conc 8 (added) and a tp8 arm whose env var changed (its two jobs changed)."""
    old, new = tmp_path / "old", tmp_path / "new"
    write_recipe(old)
    write_recipe(new, tp4_concs="[2, 4, 8]", arm_var="b")
    return old, new


def _json_rows(capsys: pytest.CaptureFixture[str], old: Path, new: Path) -> list[dict[str, Any]]:
    code, out, err = run_main(capsys, "changes", f"{old}..{new}", "--json")
    assert code == 0, err
    jobs: list[dict[str, Any]] = json.loads(out)["jobs"]
    assert [r["change"] for r in jobs] == ["added", "changed", "changed"]
    return jobs


@pytest.mark.parametrize("width", [80, 120])
def test_in_a_terminal_each_job_is_named_by_its_experiment_and_hash_never_folded_mid_word(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], width: int) -> None:
    old, new = _dirs(tmp_path)
    expected = _json_rows(capsys, old, new)
    names = {j.id: j.exp_name for j in jobs_from_files([new / "recipes" / "chg.yaml"])}
    as_terminal(monkeypatch, width)
    code, out, err = run_main(capsys, "changes", f"{old}..{new}")
    assert code == 0, err
    text = shown(out)
    fits(text, width)
    assert "job ids shortened to their experiment name and hash (--json lists them whole)" in text, text
    assert "1 added, 2 changed, 0 removed, 2 unchanged; 3 jobs to run" in text
    table = rows(text, starts=1)  # the job (the key) first, then the change that starts each row
    assert len(table) == len(expected), text
    for row, want in zip(table, expected, strict=True):
        job, change, recipe, cause, fields = row
        # a line of the id ends between its segments, never inside one
        assert all(piece[-1] in "_-…" for piece in job[:-1]), (job, text)
        label = "".join(job)
        job_id = str(want["job"])
        assert label.startswith(names[job_id] + "…") and label.endswith(job_id.rsplit("_", 1)[1]), (label, text)
        assert (change, recipe, " ".join(cause), " ".join(fields)) == (
            [want["change"]], [want["recipe_key"]], ", ".join(want["causes"]), ", ".join(want["fields"])), text


def test_piped_the_table_lists_each_job_whole_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Into a log or a pipe (no terminal): one table at its natural width, each row whole on its line, so a job id can
    be grepped; no id shortened."""
    old, new = _dirs(tmp_path)
    expected = _json_rows(capsys, old, new)
    code, out, err = run_main(capsys, "changes", f"{old}..{new}")
    assert code == 0, err
    assert "\x1b[" not in out and "shortened" not in out and "(continued)" not in out, out
    table = rows(out, starts=1)
    assert all(len(cell) <= 1 for row in table for cell in row), out  # no cell wrapped
    assert [[" ".join(cell) for cell in row] for row in table] == [
        [r["job"], r["change"], r["recipe_key"], ", ".join(r["causes"]), ", ".join(r["fields"])] for r in expected], out
