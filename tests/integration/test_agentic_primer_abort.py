"""AgentX aborts a run whose root primer fails; so does the client, against the simulator over loopback."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from support.cli import sim_serve

from llmsweep.metrics.gates import ROOT_PRIMER_FAILED


def test_a_root_primer_the_server_refuses_ends_the_run_at_once_invalid_and_says_why(tmp_path: Path) -> None:
    """The simulator's KV pool (4,000 tokens) cannot hold a primer (the trace's whole prefix up to t*, tens of
    thousands of tokens): the server answers 400, and the 60-s window is never measured — the run stops there,
    invalid, naming the lane, the trace and the server's words. It used to go on replaying each lane from turn 0."""
    out = tmp_path / "agentic"
    with sim_serve("--model", "llama-1b", "--timing", "constant", "--ttft-ms", "5", "--itl-ms", "1",
                   "--kv-capacity-tokens", "4000") as url:
        began = time.monotonic()
        res = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "bench", "agentic", "--url", url,
                              "--model", "llama-1b", "--traces", "synthetic", "--concurrency", "2", "--duration", "60",
                              "--grace", "1", "--out", str(out)], capture_output=True, text=True, timeout=120)
        took = time.monotonic() - began
    assert res.returncode == 1, res.stderr
    assert took < 30, took  # not the 60-s window
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    assert records and all(r["phase"] == "warmup" for r in records)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["validity"]["verdict"] == "invalid"
    stopped = [r for r in summary["validity"]["reasons"] if r.startswith(f"run stopped early: {ROOT_PRIMER_FAILED}")]
    assert stopped and "maximum context length" in stopped[0], summary["validity"]["reasons"]
    assert f"{ROOT_PRIMER_FAILED} (lane " in res.stdout + res.stderr  # the user reads it where the run ends


def test_an_error_inside_a_200_stream_aborts_the_run_as_an_http_error_does(tmp_path: Path) -> None:
    """A server that refuses inside its stream (a 200 whose one event is the error, vLLM's late refusal): the record
    said context_overflow, but the program heard `ok` (streams are parsed after the next send), so the failed root
    primer did not stop the run and every warm-up and profiling turn was sent."""
    from support.stream_server import ServerConfig, StreamServer

    out = tmp_path / "agentic"
    with StreamServer(ServerConfig(fault="stream_overflow", fault_every=1)) as server:
        res = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "bench", "agentic", "--url", server.url,
                              "--model", "llama-1b", "--traces", "synthetic", "--concurrency", "2", "--duration", "60",
                              "--grace", "1", "--metrics-url", "none", "--out", str(out)],
                             capture_output=True, text=True, timeout=120)
        sent = len(server.served)
    assert res.returncode == 1, res.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    stopped = [r for r in summary["validity"]["reasons"] if r.startswith(f"run stopped early: {ROOT_PRIMER_FAILED}")]
    assert stopped and "maximum context length" in stopped[0], summary["validity"]["reasons"]
    assert sent <= 2, sent  # the primers only (one per lane), not the warm-up and profiling turns after them
