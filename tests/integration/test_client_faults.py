"""Faults become failed records with the right error class, and the run completes."""

from __future__ import annotations

import json
import time
from pathlib import Path

from support.stream_server import ServerConfig, StreamServer, run_in_subprocess
from support.workloads import SimpleWorkload

from llmsweep.client import Endpoint, RunOptions, run_benchmark


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


def test_each_fault_is_recorded_with_its_error_class(tmp_path: Path) -> None:
    faults = {1: "http500", 2: "reset", 3: "stall", 4: "invalid_json", 5: "overflow", 6: "stream_error"}
    expected = {"http500": "http", "reset": "connection", "stall": "timeout", "invalid_json": "protocol",
                "overflow": "context_overflow", "stream_error": "http"}
    with StreamServer(ServerConfig(itl_s=0.001)) as srv:
        res = run_benchmark(
            SimpleWorkload(max_tokens=6, faults=faults, sessions_per_lane=9),
            Endpoint(base_url=srv.url, model="m"),
            RunOptions(concurrency=1, stall_timeout_s=0.5, timeout_s=30, max_failure_ratio=1.0),
            tmp_path,
        )
    by_index = {r["request_index"]: r for r in _records(tmp_path)}
    assert len(by_index) == 9
    for index, fault in faults.items():
        assert by_index[index]["error_class"] == expected[fault], (fault, by_index[index])
    assert by_index[5]["status"] == 400 and "maximum context length" in by_index[5]["error"]
    for index in (0, 7, 8):
        assert by_index[index]["error_class"] is None and by_index[index]["completion_tokens"] == 6
    r = res.summary.requests
    assert (r.successful, r.failed, r.context_overflow) == (3, 6, 1)
    assert res.verdict == "invalid"


def test_strict_server_needs_the_field_switches(tmp_path: Path) -> None:
    with StreamServer(ServerConfig(strict_fields=True, usage="final_chunk", send_done=False)) as srv:
        bad = run_benchmark(SimpleWorkload(), Endpoint(base_url=srv.url, model="m"),
                            RunOptions(concurrency=1, num_requests=2, max_failure_ratio=1.0), tmp_path / "bad")
        good = run_benchmark(
            SimpleWorkload(),
            Endpoint(base_url=srv.url, model="m", send_ignore_eos=False, send_stream_options=False),
            RunOptions(concurrency=1, num_requests=2), tmp_path / "good",
        )
    assert {r["status"] for r in _records(tmp_path / "bad")} == {422}
    assert bad.summary.requests.error_categories == {"http": 2}
    assert good.summary.requests.successful == 2 and good.summary.tokens.output_total == 16


def test_a_server_killed_mid_run_gives_connection_errors_and_the_run_completes(tmp_path: Path) -> None:
    proc, url = run_in_subprocess(ServerConfig(ttft_s=0.05, itl_s=0.05))
    try:
        import threading

        def kill_later() -> None:
            time.sleep(0.8)
            proc.kill()

        threading.Thread(target=kill_later, daemon=True).start()
        res = run_benchmark(
            SimpleWorkload(max_tokens=10, lanes_hint=2), Endpoint(base_url=url, model="m", metrics_url=""),
            RunOptions(concurrency=2, duration_s=2.0, grace_s=1.0, max_failure_ratio=1.0, timeout_s=5),
            tmp_path,
        )
    finally:
        proc.kill()
        proc.wait()
    recs = _records(tmp_path)
    ok = [r for r in recs if r["error_class"] is None]
    failed = [r for r in recs if r["error_class"] == "connection"]
    assert ok and failed
    assert {r["error_class"] for r in recs} <= {None, "connection"}
    assert res.summary.requests.failed == len(failed)
