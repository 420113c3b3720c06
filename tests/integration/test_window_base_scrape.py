"""The server's counters over the window start where profiling starts: the client reads them once more after the
warm-up has ended (one worker or several), so the warm-up's requests are not counted into the window. Without that
read, the window's base was the last periodic scrape before it — taken before the warm-up when scrapes are far
apart, or a third of a second before its end at the default rate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.stream_server import ServerConfig, run_in_subprocess
from support.workloads import SimpleWorkload

from llmsweep.client import Endpoint, RunOptions, run_benchmark

TOKENS = 8


@pytest.fixture(scope="module")
def server_url() -> Iterator[str]:
    server, url = run_in_subprocess(ServerConfig(ttft_s=0.01, itl_s=0.005))
    try:
        yield url
    finally:
        server.kill()
        server.wait()


@pytest.mark.parametrize("workers", [1, 2])
def test_the_windows_server_counters_hold_the_profiled_requests_only(server_url: str, workers: int,
                                                                    tmp_path: Path) -> None:
    result = run_benchmark(
        SimpleWorkload(max_tokens=TOKENS, lanes_hint=2), Endpoint(base_url=server_url, model="m"),
        RunOptions(concurrency=2, num_requests=8, warmup_requests=4, workers=workers, scrape_interval_s=30.0),
        tmp_path)
    server = result.summary.server_metrics
    assert server is not None and server.present and server.tokens is not None
    profiled = result.summary.requests.successful
    assert profiled == 8
    # the four warm-up requests' tokens (32) stay out: a periodic scrape every 30 s is never between them and the start
    assert server.tokens.generation_total == profiled * TOKENS, server.tokens
