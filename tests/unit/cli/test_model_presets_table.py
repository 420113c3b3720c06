"""`llmsweep model presets` prints its table as every table prints (`cli.tables`): in a 44-column terminal each
preset's name and parameter count stay whole (the shape goes to a continuation table); at 120 the rows are
`--json`'s rows. It printed a raw rich table, whose columns rich shrank by folding names mid-word
(`qwen3-moe-smal` / `l`) and counts into several lines."""

from __future__ import annotations

import json

import pytest
from support.cli import run_main
from support.tables import as_terminal, fits, rows, shown

from llmsweep.modelsynth.architectures import PRESETS


@pytest.mark.parametrize("width", [44, 120])
def test_presets_fit_the_terminal_with_whole_names_and_counts(monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str], width: int) -> None:
    as_terminal(monkeypatch, width)
    code, out, err = run_main(capsys, "model", "presets")
    assert code == 0, err
    text = shown(out)
    fits(text, width)
    table = rows(text.split("└")[0])  # the first table: its keys and counts
    code, out, err = run_main(capsys, "model", "presets", "--json")
    listed = json.loads(out)
    assert [r[0] for r in table] == [[p["name"]] for p in listed] and len(listed) == len(PRESETS)
    assert [r[1] for r in table] == [[f"{p['parameters'] / 1e6:,.1f} M"] for p in listed]
    if width == 120:
        assert [" ".join(r[2]) for r in table] == [p["summary"] for p in listed]
