"""Faults become failed records with the right error class, and the run completes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from support.stream_server import ServerConfig, StreamServer, run_in_subprocess
from support.workloads import SimpleWorkload

from llmsweep.client import Endpoint, RunOptions, run_benchmark


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


# records are made in the event loop, or by the record helper process (the default at high concurrency)
_WHERE = pytest.mark.parametrize("record_process", [False, True], ids=["records-in-loop", "records-helper"])


@_WHERE
def test_each_fault_is_recorded_with_its_error_class(tmp_path: Path, record_process: bool) -> None:
    faults = {1: "http500", 2: "reset", 3: "stall", 4: "invalid_json", 5: "overflow", 6: "stream_error"}
    expected = {"http500": "http", "reset": "connection", "stall": "timeout", "invalid_json": "protocol",
                "overflow": "context_overflow", "stream_error": "http"}
    with StreamServer(ServerConfig(itl_s=0.001)) as srv:
        res = run_benchmark(
            SimpleWorkload(max_tokens=6, faults=faults, sessions_per_lane=9),
            Endpoint(base_url=srv.url, model="m"),
            RunOptions(concurrency=1, stall_timeout_s=0.5, timeout_s=30, max_failure_ratio=1.0,
                       record_process=record_process),
            tmp_path,
        )
    by_index = {r["request_index"]: r for r in _records(tmp_path)}
    assert len(by_index) == 9
    for index, fault in faults.items():
        assert by_index[index]["error_class"] == expected[fault], (fault, by_index[index])
    assert by_index[5]["status"] == 400 and "maximum context length" in by_index[5]["error"]
    assert "0.5 s (the stall timeout)" in by_index[3]["error"]
    for index in (0, 7, 8):
        assert by_index[index]["error_class"] is None and by_index[index]["completion_tokens"] == 6
    r = res.summary.requests
    assert (r.successful, r.failed, r.context_overflow) == (3, 6, 1)
    assert res.verdict == "invalid"
    assert [w["record_helper"] for w in json.loads((tmp_path / "run.json").read_text())["client"]["workers"]] == [
        record_process]


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


@_WHERE
def test_the_newer_faults_are_recorded_with_their_error_class(tmp_path: Path, record_process: bool) -> None:
    """Rate limiting, an unavailable server and a response cut in the middle of an event fail their request; a slow
    first byte inside the timeouts only shows in its TTFT; the requests around them are untouched."""
    faults = {1: "http429", 2: "http503", 3: "truncated", 4: "slow_first_byte"}
    with StreamServer(ServerConfig(itl_s=0.001, slow_first_byte_s=0.3)) as srv:
        run_benchmark(
            SimpleWorkload(max_tokens=6, faults=faults, sessions_per_lane=6),
            Endpoint(base_url=srv.url, model="m"),
            RunOptions(concurrency=1, stall_timeout_s=2, timeout_s=30, max_failure_ratio=1.0,
                       record_process=record_process),
            tmp_path,
        )
    by_index = {r["request_index"]: r for r in _records(tmp_path)}
    assert (by_index[1]["error_class"], by_index[1]["status"]) == ("http", 429)
    assert (by_index[2]["error_class"], by_index[2]["status"]) == ("http", 503)
    assert by_index[3]["error_class"] == "truncated"  # half an event, then the end: never a success
    assert by_index[4]["error_class"] is None and by_index[4]["completion_tokens"] == 6
    assert by_index[4]["first_token_at"] - by_index[4]["sent_at"] >= 0.3
    for index in (0, 5):
        assert by_index[index]["error_class"] is None and by_index[index]["completion_tokens"] == 6


def test_a_clean_early_end_is_truncated_and_the_dialects_own_endings_are_whole(tmp_path: Path) -> None:
    """Half the tokens then a clean end (no usage, finish_reason or [DONE]) is `truncated`, keeping what arrived; a
    server that never sends [DONE] but ends on a finish_reason with usage (transformers serve) is whole unless the
    endpoint says its server promises [DONE]."""
    with StreamServer(ServerConfig(itl_s=0.001)) as srv:
        run_benchmark(SimpleWorkload(max_tokens=8, faults={1: "early_end"}, sessions_per_lane=3),
                      Endpoint(base_url=srv.url, model="m"),
                      RunOptions(concurrency=1, timeout_s=30, max_failure_ratio=1.0), tmp_path / "early")
    by_index = {r["request_index"]: r for r in _records(tmp_path / "early")}
    assert by_index[1]["error_class"] == "truncated" and 0 < len(by_index[1]["chunk_times"]) < 8
    assert by_index[0]["error_class"] is None and by_index[2]["error_class"] is None
    assert by_index[0]["finish_reason"] == "length"

    with StreamServer(ServerConfig(itl_s=0.001, usage="final_chunk", send_done=False)) as srv:
        whole = run_benchmark(SimpleWorkload(max_tokens=8), Endpoint(base_url=srv.url, model="m"),
                              RunOptions(concurrency=1, num_requests=2), tmp_path / "no-done")
        promised = run_benchmark(SimpleWorkload(max_tokens=8), Endpoint(base_url=srv.url, model="m", sends_done=True),
                                 RunOptions(concurrency=1, num_requests=2, max_failure_ratio=1.0),
                                 tmp_path / "promised")
    assert whole.summary.requests.successful == 2 and whole.summary.tokens.output_total == 16
    assert promised.summary.requests.error_categories == {"truncated": 2}


@_WHERE
def test_the_whole_request_timeout_ends_a_stream_still_flowing(tmp_path: Path, record_process: bool) -> None:
    """A stream that keeps sending (no stall) but runs past --request-timeout: aiohttp's whole-request timer covers
    only its own reads, and the body awaited whole on the stamped path ran on — 40-token streams of ~1.2 s were
    `valid` under a 0.5-s timeout. Each now ends as a timeout at the limit."""
    with StreamServer(ServerConfig(itl_s=0.03)) as srv:
        res = run_benchmark(
            SimpleWorkload(max_tokens=40, sessions_per_lane=2),
            Endpoint(base_url=srv.url, model="m"),
            RunOptions(concurrency=1, stall_timeout_s=5, timeout_s=0.5, max_failure_ratio=1.0,
                       record_process=record_process),
            tmp_path,
        )
    records = _records(tmp_path)
    assert [r["error_class"] for r in records] == ["timeout", "timeout"], records
    assert all("whole-request timeout of 0.5 s" in r["error"] for r in records)
    spans = [r["end_at"] - r["sent_at"] for r in records]
    assert all(0.45 <= s <= 1.0 for s in spans), spans  # ended at the limit, not at the stream's end
    # the second request went out when the first timed out, not when its stream ended (on the client's own stamps:
    # a wall-clock bound around the call counted the records helper's start-up, 2.5 s on a loaded machine)
    window = max(r["end_at"] for r in records) - min(r["sent_at"] for r in records)
    assert window < 2 * 1.2 and res.summary.requests.failed == 2, window
