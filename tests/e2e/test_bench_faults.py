"""`llmsweep bench fixed` against a fault-injecting streaming server (tests/support/stream_server.py), one fault per
case on every request: each fault is a recorded failure with its error class (never a success, never a crash, no
traceback), the summary and every record are written, the gate fails the run (exit 1), and a slow first byte within
the timeouts is a success whose TTFT shows the wait. A server killed mid-run ends in connection errors, not a hang.

Run with `-s` to see one `FAULT …` line per case: the figures of the README's "Reliability" section.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.stream_server import ServerConfig, StreamServer, run_in_subprocess

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

REPO = Path(__file__).resolve().parents[2]
OSL = 8
LOAD = ("--isl", "16", "--osl", str(OSL), "--concurrency", "2", "--num-prompts", "6", "--num-warmups", "0",
        "--stall-timeout", "1", "--request-timeout", "5", "--grace", "2")


def _bench(url: str, out: Path, *extra: str, timeout: float = 120) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "bench", "fixed", "--url", url, "--model", "m",
                          *LOAD, *extra, "--out", str(out), "--json"],
                         capture_output=True, text=True, cwd=REPO, timeout=timeout,
                         env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return res, time.monotonic() - started


def _records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines() if x.strip()]


def _figures(fault: str, res: subprocess.CompletedProcess[str], seconds: float, records: list[dict[str, Any]]) -> None:
    classes: dict[str, int] = {}
    for r in records:
        key = r["error_class"] or "ok"
        classes[key] = classes.get(key, 0) + 1
    print(f"FAULT {fault}: exit {res.returncode}, {len(records)} records {classes}, {seconds:.1f} s")


def _no_crash(res: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in res.stderr and "Traceback" not in res.stdout, res.stderr[-3000:]


# fault → the error class its requests are recorded with
FAILURES = {
    "http500": "http",
    "http503": "http",
    "http429": "http",
    "stall": "timeout",
    "invalid_json": "protocol",  # garbage JSON mid-stream
    "reset": "connection",
    "stream_error": "http",  # an error event in the stream
    # what the stream says: no token streamed (usage 8 all the same), usage counts that are no counts, half a
    # character in the output text, a line past the client's cap (12 MiB, then a stall: failed at once)
    "no_content": "protocol",
    "empty_content": "protocol",
    "usage_negative": "protocol",
    "usage_string": "protocol",
    "lone_surrogate": "protocol",
    "long_line": "protocol",
}


@pytest.mark.parametrize("fault", sorted(FAILURES))
def test_every_request_of_a_faulty_server_is_a_recorded_failure(fault: str, tmp_path: Path) -> None:
    out = tmp_path / "bench"
    # A stalled request costs the whole --stall-timeout: two of them (one round at concurrency 2) show it, not six.
    with StreamServer(ServerConfig(itl_s=0.002, fault=fault, fault_every=1)) as srv:
        res, seconds = _bench(srv.url, out, *(("--num-prompts", "2") if fault == "stall" else ()))
    _no_crash(res)
    records = _records(out)
    _figures(fault, res, seconds, records)
    assert res.returncode == 1, res.stderr[-3000:]
    assert records and {r["error_class"] for r in records} == {FAILURES[fault]}
    summary = json.loads((out / "summary.json").read_text())
    assert summary == json.loads(res.stdout)
    assert summary["requests"]["successful"] == 0 and summary["requests"]["failed"] == len(records)
    assert summary["requests"]["error_categories"] == {FAILURES[fault]: len(records)}
    assert summary["validity"]["verdict"] == "invalid"
    if fault.startswith("http"):
        assert {r["status"] for r in records} == {int(fault[4:])}
    if fault == "stall":
        assert seconds < 60, "--stall-timeout ends a stalled request; the run does not wait out --request-timeout"
    if fault == "long_line":  # failed as soon as the line passed the cap, not at the stall timeout after it
        assert all(r["end_at"] - r["sent_at"] < 1 and "line ran past 8 MiB" in r["error"] for r in records), records
    if fault in ("no_content", "empty_content"):
        assert all(r["error"].startswith("stream ended without any content chunk: 10 events, ")
                   and r["error"].endswith("usage said 8 completion tokens; then [DONE]") for r in records), records
        assert summary["latency"]["ttft"]["count"] == 0 and summary["tokens"]["output_total"] == 0


@pytest.mark.parametrize(("fault", "claimed", "chunks"), [("usage_inflated", 1000, OSL),
                                                          ("ignore_max_tokens", 10 * OSL, 10 * OSL)])
def test_outputs_past_max_tokens_are_counted_by_their_chunks_and_fail_the_gate(
        fault: str, claimed: int, chunks: int, tmp_path: Path) -> None:
    """8 chunks whose usage says 1000 tokens at max_tokens 8 made throughput ~100x the real one and TPOT ~1/125 of
    it, in a valid point; a server that ignores max_tokens (80 tokens sent and counted) was valid at an "osl 8"
    point with `output_length_mismatch: 6` said and not gated. A count above max_tokens is not taken (the chunks
    count the output, the record keeps the server's count) and the long-output gate fails the point, exit 1."""
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(itl_s=0.002, fault=fault, fault_every=1)) as srv:
        res, seconds = _bench(srv.url, out)
    _no_crash(res)
    records = _records(out)
    _figures(fault, res, seconds, records)
    assert res.returncode == 1, res.stderr[-3000:]
    assert len(records) == 6 and all(r["error_class"] is None and r["completion_tokens"] is None
                                     and r["usage_over_max_tokens"] == claimed
                                     and sum(r["chunk_tokens"]) == chunks for r in records), records
    summary = json.loads((out / "summary.json").read_text())
    assert summary["tokens"]["output_total"] == 6 * chunks
    assert summary["requests"]["long_outputs"] == 6 and summary["requests"]["short_outputs"] == 0
    assert summary["validity"]["verdict"] == "invalid"
    assert summary["validity"]["reasons"][0].startswith("long-output ratio 1.0000 exceeds 0.05 (6/6 successful")


def test_a_response_truncated_mid_event_is_a_recorded_failure(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(itl_s=0.002, fault="truncated", fault_every=1)) as srv:
        res, seconds = _bench(srv.url, out)
    _no_crash(res)
    records = _records(out)
    _figures("truncated", res, seconds, records)
    assert res.returncode == 1, res.stderr[-3000:]
    # the half event is the body's last bytes, with no blank line after it: the stream was cut, not garbled
    assert records and {r["error_class"] for r in records} == {"truncated"}
    assert json.loads((out / "summary.json").read_text())["requests"]["successful"] == 0


def test_a_stream_ending_cleanly_after_half_its_tokens_is_a_truncated_failure(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(itl_s=0.002, fault="early_end", fault_every=1)) as srv:
        res, seconds = _bench(srv.url, out)
    _no_crash(res)
    records = _records(out)
    _figures("early_end", res, seconds, records)
    assert records and {r["error_class"] for r in records} == {"truncated"}
    assert res.returncode == 1


def test_a_stream_ending_cleanly_after_half_its_tokens_crashes_nothing(tmp_path: Path) -> None:
    """With the failure stop off, a run of early ends goes on to the end normally with its summary and every
    record written, each a `truncated` failure, and the verdict fails it."""
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(itl_s=0.002, fault="early_end", fault_every=1)) as srv:
        res, seconds = _bench(srv.url, out, "--max-failure-ratio", "1")
    _no_crash(res)
    records = _records(out)
    _figures("early_end", res, seconds, records)
    assert res.returncode == 1
    assert len(records) == 6
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"]["total"] == 6
    assert summary["requests"]["error_categories"] == {"truncated": 6}
    assert summary["validity"]["verdict"] == "invalid"


def test_a_run_with_one_stream_in_five_ending_early_fails_its_gate(tmp_path: Path) -> None:
    """20 % truncated streams is not a smoke run that exits 0: they are failures and the error-ratio gate fails."""
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(itl_s=0.002, fault="early_end", fault_every=5)) as srv:
        res, seconds = _bench(srv.url, out, "--num-prompts", "10")
    _no_crash(res)
    records = _records(out)
    _figures("early_end on every 5th request", res, seconds, records)
    assert res.returncode == 1, res.stderr[-3000:]
    assert sorted(r["error_class"] or "ok" for r in records) == ["ok"] * 8 + ["truncated"] * 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"]["error_categories"] == {"truncated": 2}
    assert summary["validity"]["verdict"] == "invalid"


def test_a_slow_first_byte_within_the_timeouts_is_a_success_whose_ttft_shows_it(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(itl_s=0.002, fault="slow_first_byte", fault_every=1,
                                   slow_first_byte_s=0.5)) as srv:  # one round at concurrency 2: 0.5 s, not 1.5
        res, seconds = _bench(srv.url, out, "--max-failure-ratio", "0", "--num-prompts", "2")
    _no_crash(res)
    records = _records(out)
    _figures("slow_first_byte (0.5 s)", res, seconds, records)
    assert res.returncode == 0, res.stderr[-3000:]
    assert len(records) == 2 and all(r["error_class"] is None and r["completion_tokens"] == OSL for r in records)
    assert json.loads(res.stdout)["latency"]["ttft"]["min"] >= 0.5


def test_a_first_byte_slower_than_the_request_timeout_is_a_timeout(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(fault="slow_first_byte", fault_every=1, slow_first_byte_s=30)) as srv:
        # one round at concurrency 2: each request waits out the 1-s timeout
        res, seconds = _bench(srv.url, out, "--request-timeout", "1", "--num-prompts", "2")
    _no_crash(res)
    records = _records(out)
    _figures("slow_first_byte (30 s)", res, seconds, records)
    assert res.returncode == 1
    assert records and {r["error_class"] for r in records} == {"timeout"}
    assert seconds < 60


def test_one_fault_in_two_fails_those_requests_only(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    with StreamServer(ServerConfig(itl_s=0.002, fault="reset", fault_every=2)) as srv:
        res, seconds = _bench(srv.url, out, "--max-failure-ratio", "1")
    _no_crash(res)
    records = _records(out)
    _figures("reset on every 2nd request", res, seconds, records)
    assert len(records) == 6
    ok = [r for r in records if r["error_class"] is None]
    assert len(ok) == 3 and all(r["completion_tokens"] == OSL for r in ok)
    assert sorted(r["error_class"] for r in records if r["error_class"]) == ["connection"] * 3
    assert json.loads(res.stdout)["requests"]["error_ratio"] == pytest.approx(0.5)


def test_a_server_killed_mid_run_ends_in_connection_errors_not_a_hang(tmp_path: Path) -> None:
    out = tmp_path / "bench"
    proc, url = run_in_subprocess(ServerConfig(ttft_s=0.05, itl_s=0.05))

    def kill_after_three_records() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            path = out / "records.jsonl"
            if path.is_file() and len(path.read_text().splitlines()) >= 3:
                break
            time.sleep(0.05)
        proc.kill()

    try:
        threading.Thread(target=kill_after_three_records, daemon=True).start()
        res, seconds = _bench(url, out, "--num-prompts", "400")
    finally:
        proc.kill()
        proc.wait()
    _no_crash(res)
    records = _records(out)
    _figures("server killed after 3 records", res, seconds, records)
    classes = {r["error_class"] for r in records}
    # Requests to the dead server fail as connection errors; one still in flight when the failure ratio stops the run
    # is `cancelled` by the run itself (seen on a loaded machine), never more of them than connection errors.
    assert None in classes and "connection" in classes and classes <= {None, "connection", "cancelled"}
    assert sum(r["error_class"] == "cancelled" for r in records) <= sum(r["error_class"] == "connection"
                                                                        for r in records)
    summary = json.loads((out / "summary.json").read_text())
    # A request the run cancelled itself is counted apart from the failures, never in both.
    assert summary["requests"]["failed"] == sum(1 for r in records if r["error_class"] not in (None, "cancelled"))
    assert summary["requests"]["cancelled"] == sum(r["error_class"] == "cancelled" for r in records)
    assert summary["validity"]["verdict"] == "invalid"
    assert res.returncode == 1  # the failure ratio stops the run and fails its gate
    assert seconds < 60
