"""Measured latencies match what a real loopback server injected and actually served."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from support.stream_server import ServerConfig, StreamServer
from support.workloads import SimpleWorkload

from llmsweep.client import Endpoint, RunOptions, run_benchmark


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


def test_ttft_and_itl_match_the_injected_delays(tmp_path: Path) -> None:
    ttft, itl, n = 0.08, 0.02, 12
    with StreamServer(ServerConfig(ttft_s=ttft, itl_s=itl)) as srv:
        res = run_benchmark(
            SimpleWorkload(max_tokens=n, lanes_hint=4),
            Endpoint(base_url=srv.url, model="m"),
            RunOptions(concurrency=4, num_requests=16),
            tmp_path,
        )
        served = list(srv.served)
    lat = res.summary.latency
    # sleeps only overshoot; allow generous slack for a busy 2-core machine
    assert ttft <= lat.ttft.p50 < ttft + 0.04
    assert itl * 0.9 <= lat.itl.p50 < itl + 0.015
    assert itl * 0.9 <= lat.tpot.p50 < itl + 0.015
    assert res.summary.requests.successful == 16
    assert res.summary.tokens.output_total == 16 * n
    # against what the server really did: first token as served vs as seen by the client
    recs = _records(tmp_path)
    assert len(served) == 16
    client_first = sorted(r["first_token_at"] for r in recs)
    served_first = sorted(s.chunk_sent_at[0] for s in served)
    err = np.abs(np.array(client_first) - np.array(served_first))
    assert np.median(err) < 0.01


def test_chunk_token_counts_follow_server_usage_for_multi_token_chunks(tmp_path: Path) -> None:
    with StreamServer(ServerConfig(tokens_per_chunk=3, usage="final_chunk", send_done=False)) as srv:
        res = run_benchmark(
            SimpleWorkload(max_tokens=10), Endpoint(base_url=srv.url, model="m"),
            RunOptions(concurrency=1, num_requests=2), tmp_path,
        )
    recs = _records(tmp_path)
    assert all(r["error_class"] is None for r in recs)
    assert all(len(r["chunk_times"]) == 4 and sum(r["chunk_tokens"]) == 10 for r in recs)
    assert res.summary.tokens.output.mean == 10
