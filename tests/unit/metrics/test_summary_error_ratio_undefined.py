"""A point where no profiling request finished (every one cancelled by a stop, or none sent) had `error_ratio` 0.0,
which every table showed as "0.0%": no errors. The ratio is undefined there: None in the summary (null in
summary.json), `-` in a table, and the gates' reason says why."""

from __future__ import annotations

import json
from typing import Any

from llmsweep.metrics import summarise
from llmsweep.metrics.model import Summary
from llmsweep.metrics.registry import HOT_BY_NAME


def _cancelled(i: int) -> dict[str, Any]:
    """A profiling request a stop cut (what a Ctrl-C leaves for each request in flight)."""
    return {"id": f"r{i}", "phase": "profiling", "scheduled_at": 1.0, "sent_at": 1.0 + i, "end_at": 5.0,
            "error_class": "cancelled", "error": "cancelled: interrupted by SIGINT", "chunk_times": [],
            "chunk_tokens": []}


def _ok(i: int) -> dict[str, Any]:
    return {"id": f"ok{i}", "phase": "profiling", "scheduled_at": 1.0, "sent_at": 1.0 + i, "status": 200,
            "first_token_at": 1.5 + i, "end_at": 2.0 + i, "chunk_times": [1.5 + i, 2.0 + i], "chunk_tokens": [1, 1],
            "completion_tokens": 2, "max_tokens": 2, "prompt_tokens": 8}


def test_no_finished_request_has_no_error_ratio_not_a_perfect_one() -> None:
    column = HOT_BY_NAME["error_ratio"]
    for records in ([_cancelled(0), _cancelled(1)], []):
        s = summarise(records, gpus=1)
        assert s.requests.error_ratio is None
        assert s.dump()["requests"]["error_ratio"] is None  # null in summary.json: the key stays, undefined
        assert column.read(s) is None and column.cell(column.read(s)) == "-"  # every table: `-`, never 0.0%
        assert s.validity.verdict == "invalid"
    s = summarise([_cancelled(0), _cancelled(1)], gpus=1)
    assert s.validity.reasons[0] == ("no successful profiling request: none finished (2 cancelled), so the error "
                                     "ratio is undefined")
    assert Summary.from_doc(json.loads(json.dumps(s.dump()))).requests.error_ratio is None  # and it reads back


def test_a_finished_request_still_gives_a_ratio_and_zero_means_no_errors() -> None:
    s = summarise([_ok(0), _ok(1), _cancelled(2)], gpus=1)
    assert s.requests.error_ratio == 0.0 and HOT_BY_NAME["error_ratio"].cell(0.0) == "0.0%"


def test_an_older_summary_that_said_0_over_no_finished_request_reads_as_undefined() -> None:
    """Summaries written before the fix say 0.0 there; they still read, with the ratio undefined. One with finished
    requests keeps its 0.0."""
    doc = summarise([_cancelled(0)], gpus=1).dump()
    doc["requests"]["error_ratio"] = 0.0  # as earlier releases wrote it
    assert Summary.from_doc(doc).requests.error_ratio is None
    assert Summary.from_doc(doc).dump()["requests"]["error_ratio"] is None
    fine = summarise([_ok(0), _ok(1)], gpus=1).dump()
    assert Summary.from_doc(fine).requests.error_ratio == 0.0
