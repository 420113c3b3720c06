"""`llmsweep traces stats`'s tables are laid out as every table is (`cli.tables`): each figure whole in its own cell
in any terminal (in 80 columns the raw rich table broke a reference band, `1.06e+03 –` over `2.05e+03`, and a
distribution's four statistics shared one cell); the figures are those `--json` gives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import run_main
from support.tables import as_terminal, cells, fits, shown

from llmsweep.workload.traces.synth import SynthProfile, synthesize, write_jsonl

DISTRIBUTIONS = {"ISL": ("isl", "{:,.0f}"), "OSL": ("osl", "{:,.0f}"),
                 "main turns / trace": ("main_turns_per_trace", "{:,.1f}"),
                 "subagent groups / trace": ("subagent_groups_per_trace", "{:,.1f}"),
                 "inner requests / group": ("inner_requests_per_group", "{:,.1f}"),
                 "spawn batch size": ("spawn_batch_size", "{:,.2f}"), "think time (s)": ("think_time_s", "{:,.2f}")}


@pytest.mark.parametrize("width", [60, 80, 120])
def test_every_statistic_and_band_is_whole_in_its_own_cell(width: int, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    corpus = tmp_path / "c.jsonl"
    write_jsonl(synthesize(SynthProfile(traces=4, seed=3, max_isl=16384)), corpus)
    code, out, err = run_main(capsys, "traces", "stats", corpus, "--scale-to", "16384", "--json")
    assert code == 0, err
    doc = json.loads(out)
    as_terminal(monkeypatch, width)
    code, out, err = run_main(capsys, "traces", "stats", corpus, "--scale-to", "16384")
    assert code == 0, err
    text = shown(out)
    fits(text, width)
    assert "…" not in text, text
    shown_cells = cells(text)
    assert {f"{doc['traces']:,}", f"{doc['total_requests']:,}", f"{doc['prefix_hit_token_weighted']:.3f}"} \
        <= shown_cells, text
    for name, (key, fmt) in DISTRIBUTIONS.items():
        figures = {fmt.format(doc[key][stat]) for stat in ("mean", "p50", "p90", "p99")}
        assert figures <= shown_cells, (name, figures - shown_cells, text)
    for row in doc["reference"]:
        band = f"{row['low']:,.3g} – {row['high']:,.3g}"
        assert {f"{row['value']:,.3g}", f"{row['published']:,.3g}", band,
                "ok" if row["inside"] else "outside"} <= shown_cells, (row, text)
