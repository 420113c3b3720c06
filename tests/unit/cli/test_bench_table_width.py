"""The summary table `bench` and `summarize` print is laid out as every table is (`cli.tables`): in a narrow terminal
a statistic is never cut (`3,663.…` had stood for an E2E latency of 3,663.41 ms at 60 columns); the columns that do
not fit go into a continuation table beside the metric."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from llmsweep.cli import tables
from llmsweep.cli.bench import _print_summary
from llmsweep.metrics import summarise


def _requests(n: int = 8) -> list[dict[str, Any]]:
    """Requests of 3.66 s each, 100 tokens: E2E latencies in the thousands of ms, with a comma."""
    out = []
    for i in range(n):
        t0 = 100.0 + i * 0.01
        chunks = [t0 + 0.05 + j * (3.6134 + i * 0.001) / 99 for j in range(100)]
        out.append({"id": str(i), "phase": "profiling", "scheduled_at": t0, "sent_at": t0, "first_byte_at": t0 + 0.04,
                    "first_token_at": chunks[0], "end_at": chunks[-1], "chunk_times": chunks,
                    "chunk_tokens": [1] * 100, "status": 200, "error_class": None, "error": None, "max_tokens": 100,
                    "worker": 0})
    return out


@pytest.mark.parametrize("width", [60, 80, 120])
def test_no_statistic_is_cut_or_folded_in_a_narrow_terminal(width: int, monkeypatch: pytest.MonkeyPatch) -> None:
    summary = summarise(_requests(), gpus=1)
    stats = [summary.latency.e2el.stat(s) for s in ("mean", "p50", "p90", "p99", "p99.9")]
    e2e = [f"{v * 1e3:,.2f}" for v in stats if v is not None]
    assert len(e2e) == len(stats)
    assert all(v.startswith("3,6") for v in e2e), e2e
    buf = io.StringIO()
    monkeypatch.setattr(tables, "table_console", lambda: Console(file=buf, width=width, soft_wrap=False))
    _print_summary(summary, Path("out"), as_json=False)
    text = buf.getvalue()
    lines = text.splitlines()
    assert all(len(line) <= width for line in lines), text
    assert "…" not in text, text
    # each statistic whole on the E2E row of whichever table holds it, every one of them shown
    shown = [cell for line in lines if line.startswith("│ E2E latency ms")
             for cell in re.findall(r"[\d,]+\.\d\d", line)]
    assert sorted(shown) == sorted(e2e), text
