"""Fixed-length prompts split across client worker processes: together they send the one planned sequence."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.stream_server import ServerConfig, StreamServer

from llmsweep.client import Endpoint, RunOptions, run_benchmark
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload

# Odd warm-up and prompt counts over two workers: striding the whole sequence (warm-ups and prompts as one run of
# indices) leaves worker 1 with more prompts than its request budget and worker 0 with fewer, so one goes unsent.
CONFIG = FixedLengthConfig(isl=120, osl=6, num_prompts=7, num_warmups=3, range_ratio=0.5, seed=11)


@pytest.fixture(scope="module")
def server() -> Iterator[StreamServer]:
    with StreamServer(ServerConfig(ttft_s=0.005, itl_s=0.002)) as srv:
        yield srv


def _run(server: StreamServer, out: Path, workers: int, load: dict[str, Any]) -> list[dict[str, Any]]:
    options = RunOptions(num_requests=CONFIG.num_prompts, warmup_requests=CONFIG.num_warmups, workers=workers, **load)
    endpoint = Endpoint(base_url=server.url, model="m", api="completions")
    run_benchmark(FixedLengthWorkload(CONFIG), endpoint, options, out)
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


def _sent(records: list[dict[str, Any]]) -> dict[int, tuple[str, int, int, int]]:
    """request index -> (phase, planned input length, tokens the server counted in the prompt, max_tokens)."""
    assert all(r["error_class"] is None for r in records)
    indices = [r["request_index"] for r in records]
    assert len(indices) == len(set(indices)), "a prompt was sent twice"
    return {
        r["request_index"]: (r["phase"], r["input_tokens_expected"], r["prompt_tokens"], r["max_tokens"])
        for r in records
    }


@pytest.mark.parametrize(
    "load", [{"concurrency": 4}, {"request_rate": 200.0, "arrival": "constant"}], ids=["closed-loop", "open-loop"]
)
def test_two_worker_processes_send_the_planned_prompts_once_with_single_worker_lengths(
    server: StreamServer, tmp_path: Path, load: dict[str, Any]
) -> None:
    single = _sent(_run(server, tmp_path / "one", 1, load))
    records = _run(server, tmp_path / "two", 2, load)
    split = _sent(records)
    total = CONFIG.num_warmups + (CONFIG.num_prompts or 0)
    assert sorted(split) == list(range(total))
    assert split == single
    plan = FixedLengthWorkload(CONFIG)
    for index, (phase, expected, counted, max_tokens) in split.items():
        assert phase == plan.phase(index)
        assert (expected, max_tokens) == plan.lengths(index) and counted == expected  # the server got that many ids
    assert len({v[1] for v in split.values()}) > 1  # lengths really vary, so a mix-up would show
    by_worker = {w: [r for r in records if r["worker"] == w] for w in (0, 1)}
    # each worker sent its even share of each phase: 2 + 1 warm-ups, 4 + 3 profiling prompts
    assert [sum(r["phase"] == "warmup" for r in by_worker[w]) for w in (0, 1)] == [2, 1]
    assert [sum(r["phase"] == "profiling" for r in by_worker[w]) for w in (0, 1)] == [4, 3]
