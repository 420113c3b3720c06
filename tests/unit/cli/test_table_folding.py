"""A line too narrow for a word in it breaks at the word's own joints (`_`, `-`, `/`), never mid-name: a long title
over a narrow continuation table, and `compare`'s lists of ids ("only in B: …"), which rich folded at the console's
width (`…conc64-with-a-long-n` / `ame`, `…mi355x_79` / `501af65b18`)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console
from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

from llmsweep.cli import results as results_cli
from llmsweep.cli.main import cli
from llmsweep.cli.tables import Column, break_long_words, fit_tables

MODEL_ARM = "qwen3.5-397b-a17b-fp8_sglang_mi355x_tp8_conc64-with-hicache-offload"
LONG_ID = "qwen3.5_1024_1024_tp8_conc4_kvnone_spec-mtp_sglang_mi355x_with_hicache_offload_79501af65b18"


def _pieces(word: str) -> list[str]:
    """The names a word joins with `_`, `-` or `/`: each must stay whole on one line."""
    return [p for p in re.split(r"[_\-/]", word) if p]


def _printed(tables: list, width: int) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=width, soft_wrap=False)
    for table in tables:
        console.print(table)
    return buf.getvalue()


@pytest.mark.parametrize("width", [44, 56, 64])
def test_a_long_title_over_a_narrow_continuation_table_breaks_between_its_parts(width: int) -> None:
    columns = [Column("job", kind="key", justify="left"), *(Column(f"m{i}") for i in range(6))]
    rows = [[LONG_ID, *(f"{1234567.5 * (i + 1):.1f}" for i in range(6))]]
    tables = fit_tables(f"predicted (simulated engine) for {MODEL_ARM}", columns, rows, width=width)
    assert len(tables) > 1  # the numbers do not fit beside the key: a continuation table, narrower than the title
    text = _printed(tables, width)
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), text
    titles = [line.strip() for line in lines if not re.match(r"^[┏┃┡│└]", line)]
    assert sum("(continued)" in line for line in titles) == len(tables) - 1, text
    for piece in _pieces(MODEL_ARM):  # each name of the model/arm whole in every title, its joints the line ends
        assert sum(piece in line for line in titles) >= len(tables), (piece, text)


def test_a_title_that_fits_is_left_to_rich() -> None:
    assert break_long_words("runs in /tmp/store.sqlite", 40) == "runs in /tmp/store.sqlite"


def test_compare_lists_the_ids_only_in_one_run_whole_between_their_parts(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    a = write_synthetic_run(tmp_path / "a", [SyntheticPoint(synthetic_job(conc=4), requests=20)], run_id="run-a")
    b = write_synthetic_run(tmp_path / "b", [SyntheticPoint(synthetic_job(conc=4), requests=20),
                                             SyntheticPoint(synthetic_job(conc=8, job_id=LONG_ID), requests=20)],
                            run_id="run-b")
    width = 60
    buf = io.StringIO()
    monkeypatch.setattr(results_cli, "table_console", lambda: Console(file=buf, width=width, soft_wrap=False))
    res = CliRunner().invoke(cli, ["compare", str(a.path), str(b.path), "--no-history"])
    assert res.exit_code == 0, res.output
    text = buf.getvalue()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("only in B:"))
    said = []  # the line and the lines its ids went on to (nothing is printed after them)
    for line in lines[start:]:
        if not line.strip():
            break
        said.append(line)
    assert all(len(line) <= width for line in said), text
    for piece in _pieces(LONG_ID):
        assert any(piece in line for line in said), (piece, text)
    assert "".join(said).replace("only in B: ", "").replace(" ", "") == LONG_ID, text
