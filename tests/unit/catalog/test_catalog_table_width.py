"""`llmsweep catalog` tables laid out for the terminal as every table is (`cli.tables`): in an 80-column terminal each
figure is whole on one line (rich had folded 85.52 GB into `85.5` over `2`, 1978.9 TF into `1978.` over `9`); the
columns that do not fit go into a continuation table beside the row's name."""

from __future__ import annotations

import io
import re

import pytest
from click.testing import CliRunner
from rich.console import Console

from llmsweep.catalog import hardware as hardware_mod
from llmsweep.cli import catalog as catalog_cli
from llmsweep.cli.main import cli


@pytest.mark.parametrize("width", [60, 80])
def test_every_hardware_figure_is_whole_in_a_narrow_terminal(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    buf = io.StringIO()
    console = Console(file=buf, width=width, soft_wrap=False)
    monkeypatch.setattr(catalog_cli, "table_console", lambda: console)
    result = CliRunner().invoke(cli, ["catalog", "hardware"])
    assert result.exit_code == 0, result.output
    text = buf.getvalue()
    assert all(len(line) <= width for line in text.splitlines()), text
    rows: dict[str, list[str]] = {}  # sku -> the figures on its rows, over every part of the table
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip("│ ").split("│")]
        if len(cells) > 1 and cells[0]:
            rows.setdefault(cells[0], []).extend(cells[1:])
    for h in hardware_mod.all_hardware():
        want = [f"{v:g}" for v in (h.hbm_gb, h.hbm_tbps, h.bf16_tflops, h.fp8_tflops, h.fp4_tflops, h.scaleup_gbps)
                if v is not None]
        shown = [re.sub(r"\*$", "", c) for c in rows.get(h.id, [])]
        assert all(w in shown for w in want), (h.id, want, shown, text)
