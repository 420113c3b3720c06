"""The server's counters over the window start where profiling starts: the client reads them once more after the
warm-up has ended (one worker or several), so the warm-up's requests are not counted into the window. Without that
read, the window's base was the last periodic scrape before it — taken before the warm-up when scrapes are far
apart, or a third of a second before its end at the default rate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.stream_server import ServerConfig, run_in_subprocess
from support.workloads import DrainingWorkload, DyingWorkload, SimpleWorkload

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


@pytest.mark.timeout(120)
def test_a_worker_that_dies_during_the_warm_up_fails_the_run_instead_of_hanging_it(server_url: str,
                                                                                   tmp_path: Path) -> None:
    """Worker 1 dies while the warm-up runs: the others waited for it at the profiling start (and the barrier) for
    ever; now they go on, the run ends, and it is not valid: its stop reason names the worker that died."""
    result = run_benchmark(DyingWorkload(die_lane=1, max_tokens=TOKENS, lanes_hint=2),
                           Endpoint(base_url=server_url, model="m"),
                           RunOptions(concurrency=2, num_requests=8, warmup_requests=4, workers=2), tmp_path)
    assert result.summary.validity.verdict != "valid"
    assert any("llmsweep-worker-1 exited with 3" in r for r in result.summary.validity.reasons), \
        result.summary.validity.reasons


def test_a_slow_base_scrape_is_not_a_warm_up_that_did_not_drain(tmp_path: Path) -> None:
    """The lanes drain well within `warmup_drain_s`, then wait for the profiling start's scrape of a `/metrics` that
    answers in 1.5 s: that wait is not the warm-up failing to drain (the run was stopped for it)."""
    server, url = run_in_subprocess(ServerConfig(ttft_s=0.001, itl_s=0.001, metrics_delay_s=1.5))
    try:
        result = run_benchmark(DrainingWorkload(lanes=2, slow_warmups=1, slow_tokens=2, grace_s=1.0),
                               Endpoint(base_url=url, model="m"),
                               RunOptions(concurrency=2, duration_s=1, scrape_interval_s=30.0), tmp_path)
    finally:
        server.kill()
        server.wait()
    stop = result.summary.validity.reasons
    assert not any("drain" in reason for reason in stop), stop
    assert result.summary.requests.successful > 0
