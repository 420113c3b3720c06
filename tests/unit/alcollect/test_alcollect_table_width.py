"""The table `al collect` prints at the end of a collection is laid out as every table is (`cli.tables`): in a
60-column terminal rich cut its columns to `thi…`, `acc…`, `tok…`, `meas…`; now each cell (thinking mode and K) is
named whole in every part, every figure is whole, and the columns that do not fit go into a continuation table."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from click.testing import CliRunner
from rich.console import Console

from llmsweep.cli import tables
from llmsweep.cli.alcollect import collect

LLAMA = Path(__file__).resolve().parents[3] / "tests" / "data" / "recipes" / "alcollect" / "llama-1b-ngram.yaml"


def test_the_collection_table_fits_a_60_column_terminal_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    buf = io.StringIO()
    monkeypatch.setattr(tables, "table_console", lambda: Console(file=buf, width=60, soft_wrap=False))
    got = CliRunner().invoke(collect, [str(LLAMA), "--simulate", "--prompts", "builtin", "--num-prompts", "1",
                                       "--output-len", "8", "-k", "1", "2", "--out", str(tmp_path / "out")])
    assert got.exit_code == 0, got.output
    text = buf.getvalue()
    assert all(len(line) <= 60 for line in text.splitlines()), text
    assert "…" not in text, text
    for header in ("AL", "accepted", "drafts", "requests", "tokens", "status"):
        assert f" {header} " in text, (header, text)
    for k in (1, 2):  # each cell named whole on one line in every part of the table
        named = [line for line in text.splitlines() if f"│ thinking_off K={k} " in line]
        assert len(named) == 2, text
        # served by the simulator: its AL is modelled, and the status says so (it said `measured`)
        assert "simulated" in named[-1] and "measured" not in named[-1], text
