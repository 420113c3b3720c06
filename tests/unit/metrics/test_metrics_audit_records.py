"""Audit of summarise() on hand-made records: definitions checked against numpy on the records the test writes,
and records whose times no request can have."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llmsweep.metrics import GateConfig, summarise


def rec(i: int, *, sent: float, ttft: float = 0.1, gap: float = 0.01, osl: int = 5, error: str | None = None,
        phase: str = "profiling", **kw: Any) -> dict[str, Any]:
    chunks = [sent + ttft + k * gap for k in range(osl)] if not error else []
    r: dict[str, Any] = {
        "id": str(i), "phase": phase, "scheduled_at": sent, "sent_at": sent,
        "first_token_at": chunks[0] if chunks else None, "end_at": (chunks[-1] if chunks else sent + ttft) + 0.001,
        "chunk_times": chunks, "chunk_tokens": [1] * len(chunks), "status": 200, "error_class": error,
        "error": error, "prompt_tokens": 100, "completion_tokens": osl if not error else None,
        "input_tokens_expected": 100, "max_tokens": osl, "worker": 0,
    }
    r.update(kw)
    return r


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    # json.dumps writes NaN and Infinity as the bare tokens json (and a damaged file) can hold
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


GOOD = [rec(i, sent=10.0 + i, ttft=0.1 + 0.01 * i, gap=0.02, osl=6) for i in range(8)]


@pytest.mark.parametrize("bad", [
    {"end_at": 5.0},                     # the end before the send: a clock that went backwards
    {"first_token_at": 17.0},            # the first token before the send (sent at 18)
    {"end_at": float("inf")},            # stopped the summary: OverflowError in the QPS windows
    {"sent_at": float("nan")},           # fed throughput's tokens but no latency
    {"end_at": float("nan")},
    {"first_token_at": float("-inf")},
])
def test_a_record_whose_times_no_request_can_have_is_left_out_counted_and_invalidates(
        tmp_path: Path, bad: dict[str, float]) -> None:
    odd = rec(99, sent=18.0, ttft=0.1, gap=0.02, osl=6)
    odd.update(bad)
    for source in ([*GOOD, odd], _write(tmp_path / "records.jsonl", [*GOOD, odd])):
        s = summarise(source, gpus=1, gates=GateConfig(min_submission_s=0))
        clean = summarise(GOOD, gpus=1, gates=GateConfig(min_submission_s=0))
        assert s.requests.total == 9 and s.dump()["requests"]["implausible"] == 1
        assert s.requests.successful == 8 and s.requests.failed == 0
        # the figures are those of the good records alone: tokens, window and latencies all agree
        assert s.tokens.output_total == clean.tokens.output_total == 8 * 6
        assert s.throughput.duration_s == clean.throughput.duration_s
        assert s.latency.ttft.count == s.latency.e2el.count == 8
        assert s.validity.verdict == "invalid"
        assert any("times no request can have" in r for r in s.validity.reasons)


def test_plausible_records_have_no_implausible_count_in_their_summary() -> None:
    s = summarise(GOOD, gpus=1, gates=GateConfig(min_submission_s=0))
    assert s.validity.verdict == "valid"
    assert "implausible" not in s.dump()["requests"]


def test_times_rebuilt_with_a_rounding_error_are_not_implausible() -> None:
    """An aiperf import adds its TTFT (ms) to its start (ns): a one-chunk answer's first token may land a few ulps
    (~0.2 us at unix times) after its end. That is no clock going backwards."""
    t0 = 1_733_000_000.123456
    records = [rec(i, sent=t0 + i, ttft=0.1, gap=0.02, osl=6) for i in range(8)]
    one = rec(50, sent=t0 + 3.5, ttft=0.25, osl=1)
    one["end_at"] = one["first_token_at"] - 4e-7
    s = summarise([*records, one], gpus=1, gates=GateConfig(min_submission_s=0))
    assert "implausible" not in s.dump()["requests"] and s.requests.successful == 9


def test_latency_definitions_against_numpy_on_the_records() -> None:
    """TTFT = first token - send, E2EL = last chunk - send, TPOT = (E2EL - TTFT)/(OSL - 1) per request (OSL >= 2:
    a one-token answer has none, nor one whose tokens all came in one chunk), e2e-normalised interactivity
    p90 = 1 / p90(E2EL / OSL); failed, cancelled and warm-up requests feed no latency; the error ratio is
    failed / (successful + failed)."""
    rng = np.random.default_rng(7)
    records = []
    ttft, e2el, tpot, norm = [], [], [], []
    for i in range(50):
        sent = 100.0 + i * 0.5
        osl = int(rng.integers(1, 40))
        first = sent + float(rng.uniform(0.05, 0.5))
        # several tokens per chunk (speculative decoding): OSL is the token count, not the chunk count
        per_chunk = int(rng.integers(1, 4))
        n_chunks = max(1, -(-osl // per_chunk))
        times = list(first + np.cumsum(np.r_[0.0, rng.uniform(0.005, 0.05, n_chunks - 1)]))
        tokens = [per_chunk] * (n_chunks - 1) + [osl - per_chunk * (n_chunks - 1)]
        records.append(rec(i, sent=sent, osl=osl, first_token_at=times[0], chunk_times=times, chunk_tokens=tokens,
                           completion_tokens=None, end_at=times[-1] + 0.002))
        ttft.append(times[0] - sent)
        e2el.append(times[-1] - sent)
        if osl >= 2 and len(times) > 1:  # AgentX drops a TPOT <= 0: a whole answer in one chunk has none
            tpot.append((times[-1] - times[0]) / (osl - 1))
        norm.append((times[-1] - sent) / osl)
    records += [rec(100, sent=101.0, error="http"), rec(101, sent=102.0, error="cancelled"),
                rec(102, sent=99.0, phase="warmup", ttft=9.0)]
    s = summarise(records, gpus=2)
    assert s.latency.ttft.count == 50 and s.latency.ttft.p90 == pytest.approx(np.percentile(ttft, 90))
    assert s.latency.e2el.p99 == pytest.approx(np.percentile(e2el, 99))
    assert s.latency.tpot.count == len(tpot) and s.latency.tpot.p50 == pytest.approx(np.percentile(tpot, 50))
    assert s.latency.tpot.std == pytest.approx(np.std(tpot))
    assert s.interactivity.p90 == pytest.approx(1 / np.percentile(tpot, 90))
    assert s.e2e_norm_interactivity.p90 == pytest.approx(1 / np.percentile(norm, 90))
    assert s.requests.error_ratio == pytest.approx(1 / 51) and s.requests.cancelled == 1
    ends = [r["end_at"] for r in records[:50]]
    out = sum(r["chunk_tokens"] and sum(r["chunk_tokens"]) for r in records[:50])
    assert s.throughput.duration_s == pytest.approx(max(ends) - 100.0)
    assert s.throughput.per_gpu.output_tps == pytest.approx(out / (max(ends) - 100.0) / 2)


def test_qps_over_a_span_of_decades_is_counted_not_held_in_memory() -> None:
    """One record's end in milliseconds (an order-correct but absurd time) spans 1.7e9 one-second windows: the array
    of their counts took 13.6 GB and the machine's memory. Run in a process limited to 3 GB of address space.
    Expected by hand: windows from the first completion t0 = 1000.2 up to t1 = 1000 + 1.7e9 (exclusive of the last
    one), completions 2 in the first window and 1 in the second, so mean 3 / W, max 2, every percentile 0."""
    import subprocess
    import sys

    code = """
import resource
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
import json
from llmsweep.metrics.summary import _qps
import numpy as np
print(json.dumps(_qps(np.array([1000.2, 1000.7, 1001.3, 1000.0 + 1.7e9]))))
"""
    env = {**__import__("os").environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    qps = json.loads(done.stdout)
    windows = int(np.floor(1000.0 + 1.7e9 - 1000.2))
    assert qps["samples"] == windows
    assert qps["mean"] == pytest.approx(3 / windows) and qps["max"] == 2 and qps["min"] == 0
    assert qps["p50"] == qps["p99.9"] == 0
    assert qps["std"] == pytest.approx(np.sqrt((2**2 + 1**2) / windows - (3 / windows) ** 2))


def test_qps_without_empty_windows_to_spare_agrees_with_numpy() -> None:
    """The sparse count block is numpy's over the dense array (zeros included), statistic by statistic."""
    from llmsweep.metrics import summary as summary_module
    from llmsweep.metrics.stats import stat_block

    sparse_count_block = summary_module._sparse_count_block  # type: ignore[attr-defined,unused-ignore]

    rng = np.random.default_rng(3)
    for windows, busy in ((50, 10), (1000, 900), (37, 37), (5, 1)):
        where = rng.choice(windows, size=busy, replace=False)
        counts = rng.integers(1, 9, size=busy)
        dense = np.zeros(windows)
        dense[where] = counts
        expected, got = stat_block(dense), sparse_count_block(counts, windows)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12)
