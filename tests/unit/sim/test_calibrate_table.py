"""`llmsweep sim calibrate`'s point table is laid out as every table is (`cli.tables`): a metric's measured / before /
after figures are one cell, never wrapped (in 80 columns the raw rich table broke `1,064 / 1,186 /` from its
`1,016`); the metrics that do not fit beside the point go into a continuation table; the rows are the points `--json`
lists (`calibrations[].points`), keyed as every --json keys the metric (`p50_ttft`, in seconds)."""

from __future__ import annotations

from dataclasses import asdict

import pytest
from support.tables import as_terminal, cells, fits, shown

from llmsweep.sim.calibrate import PointComparison


def _point(label: str, conc: int, tps: tuple[float, float, float], weighted: bool = True) -> PointComparison:
    def figures(i: int) -> dict[str, float]:
        return {"output_tput": tps[i], "p50_tpot": 0.00086 + i * 1e-5, "p50_ttft": 0.0330 + i * 1e-3}

    return PointComparison(label=label, concurrency=conc, scenario="fixed", measured=figures(0), before=figures(1),
                           after=figures(2), excess_hit_rate=0.0,
                           weights={"output_tput": 1.0 if weighted else 0.0, "p50_tpot": 1.0, "p50_ttft": 1.0})


POINTS = [_point("fixed 1024/512 c1", 1, (949.2, 1211.0, 1034.4)),
          _point("fixed 4096/512 c1", 1, (1064.0, 1186.3, 1016.2)),
          _point("agentic coding c16", 16, (13022.0, 13565.0, 13014.0), weighted=False)]


@pytest.mark.parametrize("width", [60, 80, 120])
def test_each_metrics_three_figures_are_one_whole_cell(width: int, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from llmsweep.cli.sim import _print_points

    as_terminal(monkeypatch, width)
    _print_points("vllm/h200/hybrid-moe-tiny+mtp/bf16/tp1/kv-bf16: measured / before / after", POINTS)
    text = shown(capsys.readouterr().out)
    fits(text, width)
    assert "…" not in text, text
    shown_cells = cells(text)
    # the points --json lists, each figure as the table gives it (tok/s whole, latencies in ms)
    for p in (asdict(p) for p in POINTS):
        sides = (p["measured"], p["before"], p["after"])
        tps = " / ".join(f"{d['output_tput']:,.0f}" for d in sides) + ("" if p["weights"]["output_tput"] else " *")
        tpot = " / ".join(f"{d['p50_tpot'] * 1e3:.2f}" for d in sides)
        ttft = " / ".join(f"{d['p50_ttft'] * 1e3:.1f}" for d in sides)
        assert {p["label"], str(p["concurrency"]), tps, tpot, ttft} <= shown_cells, (p["label"], text)
    # headed as every table heads the metric (`HotColumn.header`: `P50 TTFT ms` in `results list` too)
    assert {"conc", "Output tok/s", "P50 TPOT ms", "P50 TTFT ms"} <= shown_cells or width < 80, text
    # the agentic point's output rate is marked, and the mark said under the table, within the terminal
    assert "* not fitted (an agentic point's output rate is set by the traces' idle gaps)" in " ".join(text.split())


def test_no_mark_no_note(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from llmsweep.cli.sim import _print_points

    as_terminal(monkeypatch, 120)
    _print_points("fit", POINTS[:2])
    text = shown(capsys.readouterr().out)
    assert "*" not in text and "not fitted" not in text, text
