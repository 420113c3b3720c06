"""The CLI drives the real workload classes: Mooncake replay on its timestamps, AgentX agentic replay."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.stream_server import ServerConfig, StreamServer

REPO = Path(__file__).resolve().parents[2]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *args], capture_output=True, text=True,
                          cwd=REPO, timeout=120)


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def server() -> Iterator[StreamServer]:
    with StreamServer(ServerConfig(ttft_s=0.005, itl_s=0.0005)) as srv:
        yield srv


def test_replay_follows_the_trace_timestamps_divided_by_speedup(server: StreamServer, tmp_path: Path) -> None:
    trace = tmp_path / "mooncake.jsonl"
    trace.write_text("".join(
        json.dumps({"timestamp": i * 100, "input_length": 300, "output_length": 8, "hash_ids": [0, 10 + i]}) + "\n"
        for i in range(10)
    ))
    out = tmp_path / "run"
    res = _cli("bench", "replay", "--url", server.url, "--model", "m", "--traces", str(trace), "--speedup", "2",
               "--out", str(out), "--json")
    assert res.returncode == 0, res.stderr
    recs = sorted(_records(out), key=lambda r: r["scheduled_at"])
    assert len(recs) == 10 and all(r["error_class"] is None for r in recs)
    gaps = [b["scheduled_at"] - a["scheduled_at"] for a, b in itertools.pairwise(recs)]
    assert all(g == pytest.approx(0.05, abs=1e-3) for g in gaps)
    summary = json.loads(res.stdout)
    assert summary["cache"]["theoretical_hit_rate"] > 0  # rows share hash block 0


def test_agentic_replay_runs_warmup_then_profiling_trees(server: StreamServer, tmp_path: Path) -> None:
    out = tmp_path / "agentic"
    res = _cli("bench", "agentic", "--url", server.url, "--model", "m", "--traces", "synthetic",
               "--concurrency", "2", "--duration", "2", "--grace", "1", "--out", str(out))
    assert res.returncode in (0, 1), res.stderr  # a 2-second window may fail coverage; the run itself completes
    recs = _records(out)
    phases = {r["phase"] for r in recs}
    assert phases == {"warmup", "profiling"}
    assert {r["lane"] for r in recs} == {0, 1}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["requests"]["warmup"] == sum(r["phase"] == "warmup" for r in recs)
    assert summary["cache"]["theoretical_hit_rate"] > 0.5  # multi-turn prefixes are reused
    assert summary["validity"]["gates"]["max_error_ratio"] == 0.10
    # AgentX drains every lane's warm-up before profiling starts
    assert max(r["end_at"] for r in recs if r["phase"] == "warmup") <= min(
        r["sent_at"] for r in recs if r["phase"] == "profiling")


def test_an_option_the_agentic_replay_does_not_read_is_refused_before_any_load(server: StreamServer,
                                                                                tmp_path: Path) -> None:
    """`bench agentic --api completions` was dropped without a word (the replay sends chat), and the run went on."""
    served = len(server.served)
    res = _cli("bench", "agentic", "--url", server.url, "--model", "m", "--traces", "synthetic", "--concurrency", "1",
               "--duration", "5", "--api", "completions", "--out", str(tmp_path / "agentic"))
    assert res.returncode == 2 and "--api completions does not apply" in res.stderr, res.stderr[-2000:]
    assert len(server.served) == served and not (tmp_path / "agentic" / "records.jsonl").exists()
