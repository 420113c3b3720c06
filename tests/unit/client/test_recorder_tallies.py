"""The record helper sends the worker one tally per record it wrote, but an error's message only with the first
record of its class (the worker keeps only that one, `WorkerStats.first_errors`): a run of failures does not ship
every message back over the pipe. The records themselves keep every message."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from llmsweep.client.recorder import RecordHelper, Tally
from llmsweep.client.transport import RawExchange
from llmsweep.workload.base import RequestSpec


def _failed(status: int, body: bytes) -> RawExchange:
    t = time.perf_counter()
    return RawExchange(scheduled=t, sent=t, first_byte=t, end=t, status=status, error_class="http", body=body)


def test_a_classes_first_error_alone_carries_its_message(tmp_path: Path) -> None:
    tallies: list[Tally] = []
    records = tmp_path / "records.jsonl"

    async def run() -> None:
        helper = RecordHelper(records, worker=0, overflow_patterns=("context length",), sends_done=None,
                              on_tallies=tallies.extend)
        await helper.start()
        spec = RequestSpec(api="completions", max_tokens=8)
        for i, (status, body) in enumerate([(500, b"boom 0"), (500, b"boom 1"), (400, b"context length exceeded"),
                                            (503, b"boom 3"), (400, b"context length again")]):
            helper.submit(_failed(status, body), spec, f"r{i}", "profiling", True)
        await helper.close()

    asyncio.run(run())
    assert [(t[1], t[3]) for t in tallies] == [("http", "HTTP 500: boom 0"), ("http", None),
                                               ("context_overflow", "HTTP 400: context length exceeded"),
                                               ("http", None), ("context_overflow", None)]
    written = [json.loads(line)["error"] for line in records.read_text().splitlines()]
    assert written == ["HTTP 500: boom 0", "HTTP 500: boom 1", "HTTP 400: context length exceeded",
                       "HTTP 503: boom 3", "HTTP 400: context length again"]
