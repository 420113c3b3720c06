"""Drill-down series from hand-written records and scrapes."""

from __future__ import annotations

import pytest

from llmsweep.report.timeseries import request_series, server_series


def _rec(i: int, sent: float, first: float, end: float, tokens: int, *, error: str | None = None,
         phase: str = "profiling") -> dict:
    return {"id": str(i), "phase": phase, "sent_at": sent, "first_token_at": first, "end_at": end,
            "completion_tokens": tokens, "error_class": error}


def test_inflight_throughput_and_timeline() -> None:
    recs = [_rec(0, 100.0, 100.5, 110.5, 100), _rec(1, 100.0, 101.0, 111.0, 100),
            _rec(2, 105.0, 105.2, 105.3, 0, error="http"), _rec(3, 99.0, 99.1, 99.5, 1, phase="warmup")]
    s = request_series(recs, bins=40)
    assert s is not None and s.total == 4 and s.t0 == 100.0  # t0 is the first *profiling* send
    assert s.timeline[0][:3] == [-1.0, -0.9, -0.5] and s.timeline[0][4] == 0  # warmup first, flagged
    failed = [r for r in s.timeline if r[3] == 0]
    assert len(failed) == 1
    peak = max(v or 0 for _, v in s.inflight)
    assert peak == 3  # two long requests and the short failed one overlap at t≈105.2
    # Output tokens spread over decode intervals: the rate integrates back to the 200 tokens produced.
    (t0, _), (t1, _) = s.throughput[0], s.throughput[1]
    assert t0 is not None and t1 is not None
    assert sum(v or 0.0 for _, v in s.throughput) * (t1 - t0) == pytest.approx(200, rel=0.02)
    ttfts = (s.ttft[0][1], s.ttft[1][1])
    assert None not in ttfts and [round(t or 0.0, 3) for t in ttfts] == [0.5, 1.0]


def test_timeline_is_downsampled_for_big_runs() -> None:
    recs = [_rec(i, float(i), i + 0.1, i + 1.0, 10) for i in range(5000)]
    s = request_series(recs, max_requests=300)
    assert s is not None and s.total == 5000 and s.shown == len(s.timeline) == 300
    assert len(s.ttft) == 300


def test_no_records() -> None:
    assert request_series([]) is None


def test_server_series_from_counters_gauges_and_percent() -> None:
    scrapes = [
        {"t": 10.0, "samples": [["vllm:kv_cache_usage_perc", {}, 0.2], ["vllm:prefix_cache_hits_total", {}, 0],
                                ["vllm:prefix_cache_queries_total", {}, 0]]},
        {"t": 11.0, "samples": [["vllm:kv_cache_usage_perc", {}, 0.5], ["vllm:prefix_cache_hits_total", {}, 30],
                                ["vllm:prefix_cache_queries_total", {}, 100]]},
        {"t": 12.0, "error": "timeout"},
        {"t": 13.0, "samples": [["vllm:kv_cache_usage_perc", {}, 80.0], ["vllm:prefix_cache_hits_total", {}, 130],
                                ["vllm:prefix_cache_queries_total", {}, 200]]},
    ]
    s = server_series(scrapes, t0=10.0)
    assert s.kv_usage == [[0.0, 0.2], [1.0, 0.5], [3.0, 0.8]]  # 80 (percent) read as 0.8
    assert s.cache_hit == [[1.0, 0.3], [3.0, 1.0]]  # per-interval deltas, not cumulative ratios
    sg = server_series([{"t": 5.0, "samples": [["sglang:cache_hit_rate", {}, 42.0]]}], t0=0.0)
    assert sg.cache_hit == [[5.0, 0.42]]


def test_the_hit_rate_series_is_the_engines_own_as_the_summary_reads_it() -> None:
    """vLLM exports prompt tokens beside its prefix-cache queries, and external (offload) hits beside its own: the
    chart takes the engine's hit rate as the summary's reader does, not every counter whose name looks like one (the
    queries and the prompt tokens together halved a 90 % rate). Over the whole window it is the summary's."""
    from llmsweep.metrics.server import summarise_server

    def vllm(t: float, k: int) -> dict[str, object]:
        return {"t": t, "samples": [["vllm:prefix_cache_hits_total", {}, 90.0 * k],
                                    ["vllm:prefix_cache_queries_total", {}, 100.0 * k],
                                    ["vllm:prompt_tokens_total", {}, 100.0 * k],
                                    ["vllm:external_prefix_cache_hits_total", {}, 0.0],
                                    ["vllm:external_prefix_cache_queries_total", {}, 10.0 * k]]}

    scrapes = [vllm(10.0 + k, k) for k in range(4)]
    s = server_series(scrapes, t0=10.0)
    assert s.cache_hit == [[1.0, 0.9], [2.0, 0.9], [3.0, 0.9]]
    assert summarise_server(scrapes, start=10.0, end=13.0)["cache"]["overall_hit_rate"] == 0.9

    def sglang(t: float, k: int) -> dict[str, object]:  # HiCache: device and host hits, of the prompt tokens
        return {"t": t, "samples": [["sglang:prompt_tokens_total", {}, 1000.0 * k],
                                    ["sglang:cached_tokens_total", {"cache_source": "device"}, 600.0 * k],
                                    ["sglang:cached_tokens_total", {"cache_source": "host"}, 100.0 * k * (k + 1)]]}

    sg = server_series([sglang(0.0, 0), sglang(1.0, 1), sglang(2.0, 2)], t0=0.0)
    assert sg.cache_hit == [[1.0, 0.8], [2.0, 1.0]]  # device and host hits: (600 + 200) / 1000, (600 + 400) / 1000
