"""`llmsweep compare`'s tables are laid out as every table is (`cli.tables`): A's and B's figures and the verdict whole
and right-aligned as every table's figures, in any terminal (in 60 columns the raw rich table cut a metric's label,
`interactiv…`); the columns that do not fit go into a continuation table; the figures are those `--json` gives."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.cli import run_main
from support.tables import as_terminal, body_lines, cells, fits, shown

from llmsweep.metrics.registry import HOT_BY_NAME
from llmsweep.report.markdown import VERDICT_MARK


@pytest.mark.parametrize("width", [60, 80, 120])
def test_every_figure_and_verdict_is_whole_and_nothing_is_cut(make_run: Any, width: int,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    a = make_run("a", concs=(4,), requests=100)
    b = make_run("b", concs=(4,), requests=100, seed=5, speed=0.8)
    code, out, err = run_main(capsys, "compare", a.path, b.path, "--no-history", "--json")
    assert code == 0, err
    (point,) = json.loads(out)["matched"]
    as_terminal(monkeypatch, width)
    code, out, err = run_main(capsys, "compare", a.path, b.path, "--no-history")
    assert code == 0, err
    text = shown(out)
    fits(text, width)
    assert "…" not in text, text  # rich's mark of a cut cell
    shown_cells = cells(text)
    figures = {c for d in point["deltas"] for c in (HOT_BY_NAME[d["metric"]].cell(d["a"]),
                                                    HOT_BY_NAME[d["metric"]].cell(d["b"]))}
    assert figures <= shown_cells, (figures - shown_cells, text)
    assert {VERDICT_MARK[d["verdict"]] for d in point["deltas"]} <= shown_cells, text
    # a figure's cell is right-aligned (its last character against the rule), as every table's numbers are
    padded = [c for line in body_lines(text) for c in line if c.strip() in figures]
    assert padded and all(c.endswith(c.strip() + " ") for c in padded), padded
