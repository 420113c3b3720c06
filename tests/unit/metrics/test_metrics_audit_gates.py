"""Audit of the validity gates at their boundaries (a value exactly at a threshold passes: AgentX's inclusive rule),
and of `llmsweep summarize` giving the same bytes twice."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llmsweep.metrics import GateConfig, summarise


def rec(i: int, *, sent: float, error: str | None = None, phase: str = "profiling", took: float = 0.5,
        osl: int = 4) -> dict[str, Any]:
    chunks = [sent + 0.1 + k * (took - 0.1) / max(osl - 1, 1) for k in range(osl)] if not error else []
    return {"id": str(i), "phase": phase, "sent_at": sent, "scheduled_at": sent,
            "first_token_at": chunks[0] if chunks else None, "end_at": sent + took, "chunk_times": chunks,
            "chunk_tokens": [1] * len(chunks), "error_class": error, "prompt_tokens": 10,
            "completion_tokens": osl if not error else None, "max_tokens": osl}


def run(ok: int, failed: int = 0, error: str = "http", **gates: Any) -> list[str]:
    records = [rec(i, sent=1000.0 + i) for i in range(ok)]
    records += [rec(ok + i, sent=1000.5 + i, error=error) for i in range(failed)]
    s = summarise(records, gpus=1, gates=GateConfig(min_submission_s=0, **gates))
    return s.validity.reasons


def test_error_ratio_exactly_at_the_threshold_passes_and_just_above_fails() -> None:
    assert not run(19, 1)  # 1/20 = 0.05, the fixed-length threshold
    assert any(r.startswith("error ratio 0.0526") for r in run(18, 1))  # 1/19
    assert not run(9, 1, max_error_ratio=0.10)  # agentic: 1/10
    assert any(r.startswith("error ratio") for r in run(8, 1, max_error_ratio=0.10))


def test_context_overflow_ratio_exactly_at_one_percent_passes() -> None:
    assert not run(99, 1, error="context_overflow")  # 1/100
    assert any(r.startswith("context-overflow ratio 0.0101") for r in run(98, 1, error="context_overflow"))


def test_warmup_failures_exactly_half_warn_above_half_invalidate() -> None:
    def warm(n: int, failed: int) -> Any:
        records = [rec(100 + i, sent=900.0 + i, phase="warmup", error="http" if i < failed else None)
                   for i in range(n)] + [rec(i, sent=1000.0 + i) for i in range(5)]
        return summarise(records, gpus=1, gates=GateConfig(min_submission_s=0)).validity

    half = warm(4, 2)
    assert half.verdict == "valid" and half.warnings == ["2/4 warm-up requests failed"]
    assert warm(3, 2).verdict == "invalid"


def test_a_window_of_exactly_900_s_is_a_submission_and_one_just_shorter_is_smoke() -> None:
    """Throughput's window runs from the first successful send to the last end: 1000 s to 1900 s."""
    def verdict(last_end: float) -> str:
        records = [rec(0, sent=1000.0), rec(1, sent=1000.0 + (last_end - 1000.0) / 2),
                   rec(2, sent=last_end - 0.5)]
        return summarise(records, gpus=1).validity.verdict

    assert verdict(1900.0) == "valid"
    assert verdict(1899.9) == "smoke"


@pytest.mark.parametrize("records, said", [
    ([], "no successful profiling request"),
    ([rec(0, sent=1.0, error="timeout"), rec(1, sent=2.0, error="timeout"), rec(2, sent=3.0, error="http")],
     "no successful profiling request: all 3 failed (2 timeout, 1 http"),
    ([rec(0, sent=1.0, error="cancelled")], "no successful profiling request"),
])
def test_no_successful_request_is_invalid_with_zero_figures_not_a_crash(records: list[dict[str, Any]],
                                                                       said: str) -> None:
    s = summarise(records, gpus=1)
    assert s.validity.verdict == "invalid" and s.validity.reasons[0].startswith(said)
    assert s.throughput.duration_s == 0 and s.throughput.output_tps == 0 and s.latency.ttft.count == 0


EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "results" / "h200-vllm-0.26.0" / "qwen3next" / "jobs"


def test_summarize_twice_gives_the_same_bytes_and_json_prints_the_file(tmp_path: Path) -> None:
    """A real vLLM MTP job folder (records, /metrics scrapes, run.json, job.json with a pinned acceptance)."""
    from llmsweep.cli.main import cli

    source = next(p for p in sorted(EXAMPLE.iterdir()) if "conc8" in p.name)
    job = tmp_path / "job"
    shutil.copytree(source, job)
    runner = CliRunner()
    first = runner.invoke(cli, ["summarize", str(job), "--json"])
    written = (job / "summary.json").read_bytes()
    second = runner.invoke(cli, ["summarize", str(job), "--json"])
    assert first.exit_code == second.exit_code == 0, first.output
    assert (job / "summary.json").read_bytes() == written
    assert first.stdout == second.stdout
    assert json.loads(first.stdout) == json.loads(written)
    plain = runner.invoke(cli, ["summarize", str(job)])
    assert plain.exit_code == 0 and (job / "summary.json").read_bytes() == written
