"""Coverage of the profile window: scheduled think time is covered; a stopped client, a stalled server and a short
window are not."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from llmsweep.client.folder import summarise_dir
from llmsweep.metrics import GateConfig, summarise

AGENTIC = {"workload": {"name": "agentic", "system_idle_gap_cap_s": 10.0, "trace_idle_gap_cap_s": 300.0}}


def rec(i: int, *, sent: float, took: float = 0.5, lane: int = 0, error: str | None = None,
        chunks: list[float] | None = None) -> dict[str, Any]:
    if chunks is None:
        chunks = [] if error else [sent + 0.05 + k * (took - 0.05) / 4 for k in range(5)]
    return {
        "id": str(i), "lane": lane, "phase": "profiling", "scheduled_at": sent, "sent_at": sent,
        "first_token_at": chunks[0] if chunks else None, "end_at": sent + took, "chunk_times": chunks,
        "chunk_tokens": [1] * len(chunks), "status": None if error else 200, "error_class": error, "error": error,
        "prompt_tokens": 100, "completion_tokens": len(chunks), "max_tokens": len(chunks), "worker": 0,
    }


def think_time_run() -> list[dict[str, Any]]:
    """Two lanes replaying turns with recorded think times: both lanes sleep at once for 8.1 s, and the window's
    last 6 s fall in such a sleep (the H200 conc-2 case that scored 94.9 % before)."""
    lane0 = [0.0, 9.0, 17.5]
    lane1 = [0.2, 8.8, 18.0, 23.5]
    records = [rec(i, sent=t, lane=0) for i, t in enumerate(lane0)]
    records += [rec(10 + i, sent=t, lane=1) for i, t in enumerate(lane1)]
    return records


def test_think_time_under_the_idle_cap_at_low_concurrency_is_valid() -> None:
    s = summarise(think_time_run(), gpus=1, gates=GateConfig.for_kind("agentic", planned_duration_s=30.0),
                  provenance=AGENTIC)
    assert s.coverage == pytest.approx(1.0)
    assert s.validity.verdict == "smoke"  # a 30 s window is a smoke run, not an invalid one
    assert not any("cover" in r for r in s.validity.reasons)
    detail = s.validity.coverage
    assert detail is not None
    assert detail.idle_allowance_s == pytest.approx(11.0) and detail.longest_idle_s == pytest.approx(8.1)


def test_without_an_idle_cap_the_tail_after_the_last_observation_counts() -> None:
    # the same records with no workload idle cap known: AgentX's original rule, only the tail counts
    s = summarise(think_time_run(), gpus=1, gates=GateConfig(planned_duration_s=30.0))
    assert s.coverage == pytest.approx(24.0 / 30.0)
    assert s.validity.verdict == "invalid"
    reason = next(r for r in s.validity.reasons if "cover" in r)
    assert "nothing was in flight after 24.0 s" in reason and "no idle cap" in reason


def test_client_that_stops_sending_half_way_is_invalid_with_a_clear_reason() -> None:
    records = [rec(i * 4 + lane, sent=i * 0.6 + lane * 0.1, lane=lane) for i in range(25) for lane in range(4)]
    last_end = max(r["end_at"] for r in records)
    assert last_end == pytest.approx(15.0 - 0.1 + 0.3, abs=0.2)  # busy until ~15 s, then silence
    s = summarise(records, gpus=1, gates=GateConfig.for_kind("agentic", planned_duration_s=30.0), provenance=AGENTIC)
    assert s.coverage == pytest.approx(last_end / 30.0)
    assert s.validity.verdict == "invalid"
    reason = next(r for r in s.validity.reasons if "cover" in r)
    assert f"nothing was in flight after {last_end:.1f} s of the 30.0 s window" in reason
    assert "11.0 s" in reason  # the allowance it was judged against


def test_planned_60_s_window_that_ran_20_s_is_invalid() -> None:
    records = [rec(i, sent=i * 1.0, took=0.9) for i in range(20)]  # busy 0–19.9 s
    s = summarise(records, gpus=1, gates=GateConfig.for_kind("agentic", planned_duration_s=60.0), provenance=AGENTIC)
    assert s.coverage == pytest.approx(19.9 / 60.0)
    assert s.validity.verdict == "invalid"
    assert s.validity.coverage is not None and s.validity.coverage.window_s == pytest.approx(60.0)


def test_an_idle_stretch_longer_than_the_cap_mid_window_counts_in_full() -> None:
    # the client went silent for 20 s mid-window and then resumed: not think time, since the cap is 10 s
    records = [rec(i, sent=i * 1.0, took=0.9) for i in range(10)]
    records += [rec(100 + i, sent=29.9 + i * 1.0, took=0.9) for i in range(11)]
    s = summarise(records, gpus=1, gates=GateConfig.for_kind("agentic", planned_duration_s=40.0), provenance=AGENTIC)
    assert s.coverage == pytest.approx(1.0 - 20.0 / 40.0)
    reason = next(r for r in s.validity.reasons if "cover" in r)
    assert "nothing was in flight for 20.0 s (9.9–29.9 s into the window)" in reason


def test_a_stalled_server_leaves_the_window_uncovered() -> None:
    # from 12 s on the server answers nothing: the requests in flight are cancelled at the drain without a byte
    records = [rec(i, sent=i * 1.0, took=0.9) for i in range(12)]
    records += [rec(50 + k, sent=12.0 + k * 0.1, took=25.0, error="cancelled") for k in range(4)]
    s = summarise(records, gpus=1, gates=GateConfig.for_kind("agentic", planned_duration_s=30.0), provenance=AGENTIC)
    assert s.coverage == pytest.approx(12.3 / 30.0)
    assert s.validity.verdict == "invalid"
    assert any("server stopped answering" in r for r in s.validity.reasons)
    # chunks streamed before the stall count up to the last one
    streamed = [*records[:12], rec(60, sent=12.0, took=25.0, error="cancelled", chunks=[12.1, 14.0])]
    s = summarise(streamed, gpus=1, gates=GateConfig.for_kind("agentic", planned_duration_s=30.0), provenance=AGENTIC)
    assert s.coverage == pytest.approx(14.0 / 30.0)


def test_an_explicit_idle_allowance_overrides_the_workload_cap() -> None:
    gates = GateConfig.for_kind("agentic", planned_duration_s=30.0, max_idle_gap_s=2.0)
    s = summarise(think_time_run(), gpus=1, gates=gates, provenance=AGENTIC)
    assert s.validity.coverage is not None and s.validity.coverage.idle_allowance_s == pytest.approx(3.0)
    assert s.validity.verdict == "invalid"  # gaps of 8 s are beyond a 2 s cap


def test_summarize_dir_reproduces_the_coverage_from_run_json(tmp_path: Path) -> None:
    records = think_time_run()
    gates = GateConfig.for_kind("agentic", planned_duration_s=30.0)
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "run.json").write_text(json.dumps({"provenance": AGENTIC, "gates": gates.model_dump(mode="json"),
                                                   "client": {}, "gpus": 1, "source": "measured"}))
    s = summarise_dir(tmp_path, write=False)
    assert s == summarise(records, gpus=1, gates=gates, provenance=AGENTIC)
    assert s.validity.verdict == "smoke" and s.coverage == pytest.approx(1.0)
