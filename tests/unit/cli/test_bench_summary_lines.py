"""The lines `bench` and `summarize` print under the latency table: no lag sample is no figure (`-`, as the table
says it), and a warning is printed apart from the reasons of the verdict, not as one of them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llmsweep.cli.bench import _print_summary
from llmsweep.metrics import summarise


def _cancelled(n: int = 4) -> list[dict[str, Any]]:
    """Requests cancelled before they were sent (a stop at once): no schedule lag to measure."""
    return [{"id": str(i), "phase": "profiling", "scheduled_at": 0.0, "sent_at": None, "first_byte_at": None,
             "first_token_at": None, "end_at": None, "chunk_times": [], "chunk_tokens": [], "status": None,
             "error_class": "cancelled", "error": "cancelled", "max_tokens": 4, "worker": 0} for i in range(n)]


def _printed(summary: Any, capsys: pytest.CaptureFixture[str]) -> list[str]:
    _print_summary(summary, Path("out"), as_json=False)
    return capsys.readouterr().out.splitlines()


def test_no_lag_sample_prints_a_dash_not_zero(capsys: pytest.CaptureFixture[str]) -> None:
    summary = summarise(_cancelled(), gpus=1)
    assert summary.client_health.schedule_lag_s.count == 0
    client = next(line for line in _printed(summary, capsys) if line.startswith("client:"))
    assert "lag p99 - ms" in client and "0.00 ms" not in client


def test_warnings_are_printed_apart_from_the_reasons_of_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    summary = summarise(_cancelled(), gpus=1).model_copy(deep=True)
    summary.validity.verdict = "invalid"
    summary.validity.reasons = ["no successful profiling request"]
    summary.validity.warnings = ["client saturated: worker 0 used 91% CPU (limit 90%)"]
    lines = _printed(summary, capsys)
    verdict = next(line for line in lines if line.startswith("validity:"))
    assert verdict == "validity: invalid — no successful profiling request"
    assert "warnings: client saturated: worker 0 used 91% CPU (limit 90%)" in lines
    summary.validity.reasons = []
    summary.validity.verdict = "valid"
    lines = _printed(summary, capsys)
    assert "validity: valid" in lines and any(line.startswith("warnings: client saturated") for line in lines)


def test_requests_sent_again_are_counted_on_the_client_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The workers' count of requests sent again on a new connection (the server closed a pooled one as they arrived)
    reaches the summary and the client line; none says nothing."""
    workers = [{"worker": 0, "cpu_s": 0.1, "wall_s": 1.0, "retried": 2}, {"worker": 1, "cpu_s": 0.1, "wall_s": 1.0,
                                                                          "retried": 1}]
    summary = summarise(_cancelled(), gpus=1, client={"workers": workers})
    assert summary.client_health.requests_retried == 3
    client = next(line for line in _printed(summary, capsys) if line.startswith("client:"))
    assert "3 requests sent again on a new connection" in client
    quiet = summarise(_cancelled(), gpus=1, client={"workers": [{**w, "retried": 0} for w in workers]})
    client = next(line for line in _printed(quiet, capsys) if line.startswith("client:"))
    assert "sent again" not in client
