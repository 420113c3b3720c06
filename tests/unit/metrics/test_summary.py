"""summarise(): AgentX definitions over hand-made records, request accounting and validity gates."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from llmsweep.errors import ResultError
from llmsweep.metrics import SCHEMA_VERSION, GateConfig, Summary, summarise


def rec(i: int, *, sent: float, ttft: float = 0.1, gap: float = 0.01, osl: int = 5, phase: str = "profiling",
        error: str | None = None, **kw: Any) -> dict[str, Any]:
    chunks = [sent + ttft + k * gap for k in range(osl)]
    r = {
        "id": str(i), "phase": phase, "scheduled_at": sent, "sent_at": sent, "first_byte_at": sent + ttft / 2,
        "first_token_at": chunks[0] if not error else None, "end_at": chunks[-1] + 0.001,
        "chunk_times": chunks if not error else [], "chunk_tokens": [1] * osl if not error else [],
        "status": 200, "error_class": error, "error": error, "prompt_tokens": 100, "completion_tokens": osl,
        "cached_tokens": 40, "input_tokens_expected": 100, "theoretical_cached_tokens": 50, "max_tokens": osl,
        "worker": 0,
    }
    r.update(kw)
    return r


def test_itl_counts_the_zero_gaps_of_chunks_that_arrived_in_one_read() -> None:
    """Every second chunk arrives in the same read as the one before (stamped alike): ITL is every gap the client
    saw, zeros included, so its mean is the TPOT's; dropping the zeros made it the gap between reads (twice TPOT)."""
    records = []
    for i in range(40):
        sent = i * 2.0
        times = [sent + 0.1 + 0.02 * (k // 2) for k in range(101)]  # pairs: 0 s, then 20 ms
        records.append(rec(i, sent=sent, osl=101, chunk_times=times, chunk_tokens=[1] * 101, end_at=times[-1]))
    s = summarise(records, gpus=1)
    assert s.latency.itl.count == 40 * 100
    assert s.latency.itl.mean == pytest.approx(0.01, rel=1e-3) == pytest.approx(s.latency.tpot.mean, rel=1e-3)
    assert s.latency.itl.min == 0.0 and s.latency.itl.p75 == pytest.approx(0.02)


def test_a_column_past_its_exact_size_bins_zero_gaps_without_a_warning() -> None:
    import warnings

    from llmsweep.metrics.stats import SketchColumn

    col = SketchColumn(exact_max=10, keep_zero=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        col.extend(np.array([0.0, 0.01] * 20))
    block = col.stat_block()
    assert block["count"] == 40 and block["min"] == 0.0 and block["mean"] == pytest.approx(0.005, rel=1e-3)
    assert block["p50"] <= 0.01 * 1.001 and float(col.quantiles(np.array([5.0]))[0]) < 1e-6  # a zero's rank


def test_latency_definitions_follow_agentx() -> None:
    records = [rec(0, sent=0.0, ttft=0.1, gap=0.01, osl=5), rec(1, sent=0.5, ttft=0.3, gap=0.03, osl=3)]
    s = summarise(records, gpus=1)
    e2el = [0.1 + 4 * 0.01, 0.3 + 2 * 0.03]  # send → last content chunk
    tpot = [(e2el[0] - 0.1) / 4, (e2el[1] - 0.3) / 2]
    assert s.latency.ttft.mean == pytest.approx(0.2)
    assert s.latency.e2el.p50 == pytest.approx(np.percentile(e2el, 50))
    assert s.latency.tpot.mean == pytest.approx(np.mean(tpot))
    assert s.latency.itl.count == 4 + 2  # gaps within each record, none across records
    assert s.latency.itl.max == pytest.approx(0.03, rel=1e-5)
    assert s.interactivity.p90 == pytest.approx(1 / np.percentile(tpot, 90))
    assert s.e2e_norm_interactivity.p50 == pytest.approx(1 / np.percentile([e2el[0] / 5, e2el[1] / 3], 50))


def test_warmup_errors_and_cancellations_are_accounted_and_excluded() -> None:
    records = [
        rec(0, sent=0.0), rec(1, sent=0.1),
        rec(2, sent=0.0, phase="warmup", ttft=9.0),
        rec(3, sent=0.2, error="http"), rec(4, sent=0.3, error="context_overflow"),
        rec(5, sent=0.4, error="cancelled"),
    ]
    s = summarise(records, gpus=1)
    r = s.requests
    assert (r.total, r.successful, r.failed, r.warmup, r.cancelled) == (6, 2, 2, 1, 1)
    assert r.error_categories == {"cancelled": 1, "context_overflow": 1, "http": 1}
    assert r.context_overflow == 1 and r.error_ratio == 0.5
    assert s.latency.ttft.max < 1.0  # the 9 s warmup request is not in the stats


def test_throughput_cache_and_per_gpu() -> None:
    records = [rec(i, sent=float(i), osl=4) for i in range(4)]
    s = summarise(records, gpus=4)
    t = s.throughput
    duration = records[-1]["end_at"] - 0.0
    assert t.duration_s == pytest.approx(duration)
    assert t.output_tps == pytest.approx(16 / duration) and t.input_tps == pytest.approx(400 / duration)
    assert t.per_gpu.total_tps == pytest.approx(416 / duration / 4)
    assert s.cache.theoretical_hit_rate == pytest.approx(0.5)
    assert s.cache.observed_hit_rate == pytest.approx(0.4)


def test_qps_counts_completions_in_one_second_windows_from_the_first() -> None:
    ends = [10.0, 10.2, 10.9, 11.5, 12.1, 12.2, 12.3, 13.05]
    records = [rec(i, sent=e - 0.2, ttft=0.1, gap=0.01, osl=2, end_at=e) for i, e in enumerate(ends)]
    q = summarise(records, gpus=1).qps
    # windows [10,11) [11,12) [12,13); the window [13,14) does not fit before the last completion 13.05
    assert q.samples == 3
    assert q.mean == pytest.approx((3 + 1 + 3) / 3)
    assert q.p50 == 3


def test_streaming_from_a_file_equals_summarising_the_list(tmp_path: Path) -> None:
    records = [rec(i, sent=i * 0.37, osl=1 + i % 7) for i in range(50)] + [rec(99, sent=1.0, error="timeout")]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "{\"torn")
    assert summarise(path, gpus=2) == summarise(records, gpus=2)


def test_error_ratio_gate_is_inclusive_and_invalidates_above() -> None:
    ok = [rec(i, sent=i * 0.1) for i in range(19)]
    at = summarise([*ok, rec(50, sent=0, error="http")], gpus=1, gates=GateConfig(max_error_ratio=0.05))
    assert at.validity.verdict == "smoke"  # 1/20 = 0.05 passes
    above = summarise([*ok[:18], rec(50, sent=0, error="http"), rec(51, sent=0, error="http")], gpus=1,
                      gates=GateConfig(max_error_ratio=0.05))
    assert above.validity.verdict == "invalid"
    assert any("error ratio" in r for r in above.validity.reasons)


def test_context_overflow_gate_and_long_runs_are_valid() -> None:
    ok = [rec(i, sent=i * 10.0) for i in range(98)]  # spans ~970 s: not smoke
    s = summarise([*ok, rec(98, sent=5, error="context_overflow"), rec(99, sent=6, error="context_overflow")],
                  gpus=1, gates=GateConfig(max_error_ratio=0.1))
    assert s.validity.verdict == "invalid"
    assert any("context-overflow" in r for r in s.validity.reasons)
    assert summarise(ok, gpus=1).validity.verdict == "valid"


def test_coverage_gate_fails_when_observations_stop_early_in_the_window() -> None:
    records = [rec(i, sent=i * 1.0) for i in range(10)]  # observations end near 9.1 s
    s = summarise(records, gpus=1, gates=GateConfig(planned_duration_s=100.0))
    assert s.coverage is not None and s.coverage < 0.2 and s.validity.verdict == "invalid"
    assert any("cover" in r for r in s.validity.reasons)


def test_no_successful_request_is_invalid_and_gpus_must_be_positive() -> None:
    assert summarise([rec(0, sent=0, error="connection")], gpus=1).validity.verdict == "invalid"
    with pytest.raises(ResultError):
        summarise([], gpus=0)


def test_summary_json_has_the_contract_keys_and_reads_back(tmp_path: Path) -> None:
    s = summarise([rec(0, sent=0.0)], gpus=1, provenance={"seed": 7})
    doc = json.loads(json.dumps(s.dump(), allow_nan=False))
    for key in ("schema_version", "source", "requests", "latency", "interactivity", "e2e_norm_interactivity",
                "throughput", "qps", "cache", "server_metrics", "client_health", "validity", "provenance"):
        assert key in doc
    assert doc["schema_version"] == SCHEMA_VERSION == 2
    assert set(doc["latency"]) == {"ttft", "tpot", "itl", "e2el"}
    assert "p99.9" in doc["latency"]["ttft"] and "readback" not in doc  # unset optional blocks are not written
    assert doc["source"] == "measured" and doc["provenance"]["seed"] == 7
    s.write(tmp_path / "summary.json")
    assert Summary.load(tmp_path / "summary.json") == s


def test_a_schema_version_1_summary_reads_and_a_newer_one_is_refused(tmp_path: Path) -> None:
    """Summaries written before the typed model (schema_version 1, the committed examples) still read."""
    root = Path(__file__).resolve().parents[3] / "examples" / "results"
    paths = sorted(root.glob("**/summary.json"))
    docs = {path: json.loads(path.read_text()) for path in paths}
    assert any(doc["schema_version"] == 1 for doc in docs.values())  # the evidence committed before the typed model
    for path, doc in docs.items():
        assert doc["schema_version"] in (1, SCHEMA_VERSION)
        s = Summary.load(path)
        assert s.schema_version == SCHEMA_VERSION
        assert s.latency.ttft.p99_9 == doc["latency"]["ttft"]["p99.9"]
        assert s.validity.verdict == doc["validity"]["verdict"]
        assert s.requests.successful == doc["requests"]["successful"]
    (tmp_path / "summary.json").write_text(json.dumps({"schema_version": 99}))
    with pytest.raises(ResultError, match="schema_version 99"):
        Summary.load(tmp_path / "summary.json")
    whole: dict[str, dict[str, object]] = {"requests": {}, "validity": {}, "provenance": {}, "throughput": {}}
    (tmp_path / "summary.json").write_text(json.dumps({"schema_version": 2, **whole,
                                                       "latency": {"ttft": {"p99_9x": 1}}}))
    with pytest.raises(ResultError, match="not a summary"):
        Summary.load(tmp_path / "summary.json")
    # A version and nothing else is not an empty, unjudged job that reads as defaults: it is refused with its fix.
    cuts: list[dict[str, dict[str, object]]] = [{}, {"requests": {}}, {"requests": {}, "provenance": {}}]
    for cut in cuts:
        (tmp_path / "summary.json").write_text(json.dumps({"schema_version": 2, **cut}))
        with pytest.raises(ResultError, match=r"is not a whole summary: it has no .*'validity'") as err:
            Summary.load(tmp_path / "summary.json")
        assert (err.value.fix or "").startswith("`llmsweep summarize ")
    # A summary whose figures were cut out read as one with none (`sim calibrate` fitted it on throughput alone).
    written = summarise([rec(i, sent=i * 0.1) for i in range(5)], gpus=1).dump()
    for block in ("latency", "throughput"):
        (tmp_path / "summary.json").write_text(json.dumps({k: v for k, v in written.items() if k != block}))
        with pytest.raises(ResultError, match=rf"is not a whole summary: it has no '{block}'"):
            Summary.load(tmp_path / "summary.json")



@pytest.mark.parametrize(("cut", "said"), [
    (lambda d: d.update(latency={}, throughput={}), "`latency` and `throughput` are empty"),
    (lambda d: d["latency"].update(ttft={}), "`latency.ttft` is empty"),
    (lambda d: d["throughput"].pop("total_tps"), "it has no `throughput.total_tps`"),
    (lambda d: d["throughput"]["per_gpu"].pop("output_tps"), "it has no `throughput.per_gpu.output_tps`"),
    (lambda d: [d["latency"][k].pop("p90") for k in ("ttft", "tpot")],
     "it has no `latency.ttft.p90` or `latency.tpot.p90`"),
])
def test_a_summary_with_a_whole_block_emptied_or_cut_is_refused_by_every_reader(tmp_path: Path, cut: Any,
                                                                                 said: str) -> None:
    """`"latency": {}, "throughput": {}` passed the check for a missing block and read as a valid point of 0.0
    tok/s/GPU and no TTFT (ingested over a good result, drawn on the frontier): a block present but without its
    figures is as damaged as one missing, and `Summary.from_doc` (every reader's) refuses it, naming what it lacks."""
    written = summarise([rec(i, sent=i * 0.1) for i in range(5)], gpus=1).dump()
    assert Summary.from_doc(written).throughput.total_tps > 0  # a whole summary reads
    damaged = json.loads(json.dumps(written))
    cut(damaged)
    (tmp_path / "summary.json").write_text(json.dumps(damaged))
    with pytest.raises(ResultError, match="is not a whole summary") as err:
        Summary.load(tmp_path / "summary.json")
    assert said in str(err.value) and (err.value.fix or "").startswith("`llmsweep summarize ")
    # a summary with no request answered (an eval-only job's, every request failed) has every figure, at zero
    assert Summary.from_doc(Summary().dump()).throughput.total_tps == 0.0

def test_a_server_that_reuses_far_less_than_the_workload_allows_is_warned_about_not_failed() -> None:
    hybrid = [rec(i, sent=i * 0.2, theoretical_cached_tokens=90, cached_tokens=0) for i in range(10)]
    s = summarise(hybrid, gpus=1)
    assert s.cache.theoretical_hit_rate == pytest.approx(0.9) and s.cache.observed_hit_rate == 0.0
    assert any("prefix cache" in w and "90%" in w for w in s.validity.warnings)
    assert s.validity.verdict == "smoke"  # still a measurement, of another setting
    reusing = [rec(i, sent=i * 0.2, theoretical_cached_tokens=90, cached_tokens=80) for i in range(10)]
    unplanned = [rec(i, sent=i * 0.2, theoretical_cached_tokens=0, cached_tokens=0) for i in range(10)]
    for records in (reusing, unplanned):
        assert not any("prefix cache" in w for w in summarise(records, gpus=1).validity.warnings)
    strict = summarise(hybrid[:], gpus=1, gates=GateConfig(min_cache_ratio=0.0))
    assert not any("prefix cache" in w for w in strict.validity.warnings)


def test_the_h200_hybrid_model_runs_would_have_been_warned_about() -> None:
    """The committed Qwen3-Next summaries: vLLM turned prefix caching off; their cache blocks now raise the warning."""
    from llmsweep.metrics.gates import _cache_warning

    root = Path(__file__).resolve().parents[3] / "examples" / "results" / "h200-vllm-0.26.0"
    hybrid = [json.loads(p.read_text())["cache"] for p in (root / "qwen3next" / "jobs").glob("*/summary.json")]
    dense = [json.loads(p.read_text())["cache"] for p in (root / "llama" / "jobs").glob("*kvnone*/summary.json")]
    assert hybrid and all(_cache_warning(c, GateConfig()) for c in hybrid)
    assert dense and not any(_cache_warning(c, GateConfig()) for c in dense)


def test_truncated_streams_are_failures_a_fifth_of_them_fails_a_fixed_run() -> None:
    """A run where one stream in five ended early is not a smoke run: `truncated` is a failure like any other."""
    from llmsweep.workload.scenario import get_scenario

    gates = get_scenario("fixed-seq-len").gate.config()
    records = [rec(i, sent=i * 0.1) for i in range(8)] + [rec(8, sent=0.8, error="truncated"),
                                                         rec(9, sent=0.9, error="truncated")]
    s = summarise(records, gpus=1, gates=gates)
    assert s.requests.error_categories == {"truncated": 2} and s.requests.failed == 2
    assert s.validity.verdict == "invalid"


def test_a_point_whose_every_request_failed_says_what_they_failed_with() -> None:
    """It said only "no successful profiling request": the cause was in summary.json's error_categories alone."""
    records = [rec(i, sent=i * 0.1, error="truncated") for i in range(6)] + [
        rec(6, sent=0.6, error="http"), rec(7, sent=0.7, error="cancelled")]
    s = summarise(records, gpus=1)
    assert s.requests.successful == 0
    assert s.validity.reasons[0] == ("no successful profiling request: all 7 failed (6 truncated, 1 http; each "
                                     "request's error is in records.jsonl)"), s.validity.reasons


def test_short_outputs_are_counted_and_gated_by_the_scenario_profile() -> None:
    from llmsweep.workload.scenario import get_scenario

    gates = get_scenario("fixed-seq-len").gate.config()
    assert gates.max_short_output_ratio is not None
    whole = [rec(i, sent=i * 0.1, osl=8) for i in range(19)]
    one_short = summarise([*whole, rec(19, sent=2.0, osl=3, max_tokens=8, finish_reason="stop")], gpus=1, gates=gates)
    assert one_short.requests.short_outputs == 1 and one_short.requests.failed == 0
    assert one_short.validity.verdict == "valid"  # 1/20 is within the fixed profile's 0.05 (no 900 s minimum)
    shorts = [rec(i, sent=i * 0.1, osl=3, max_tokens=8, finish_reason="stop") for i in range(20, 24)]
    many = summarise([*whole, *shorts], gpus=1, gates=gates)
    assert many.requests.short_outputs == 4
    assert many.validity.verdict == "invalid"
    assert any("short-output ratio" in r for r in many.validity.reasons)
    assert summarise([*whole, *shorts], gpus=1).validity.verdict == "smoke"  # ungated without a profile


def test_long_outputs_are_counted_and_gated_with_the_short_outputs_tolerance() -> None:
    """More output than max_tokens, by the chunks or by a usage count the client did not take for it, is as far
    from the point's output length as a short output, and was not gated at all (an "osl 8" point of 80-token answers
    was valid). Within the profile's tolerance it stands, past it the point is invalid."""
    from llmsweep.workload.scenario import get_scenario

    gates = get_scenario("fixed-seq-len").gate.config()
    whole = [rec(i, sent=i * 0.1, osl=8) for i in range(19)]
    one_long = summarise([*whole, rec(19, sent=2.0, osl=80, max_tokens=8)], gpus=1, gates=gates)
    assert one_long.requests.long_outputs == 1 and one_long.requests.output_length_mismatch == 1
    assert one_long.validity.verdict == "valid"  # 1/20 is within 0.05
    # the client's record of a usage count above max_tokens: no completion count, the chunks count 8
    claimed = [rec(i, sent=i * 0.1, osl=8, completion_tokens=None, usage_over_max_tokens=1000)
               for i in range(20, 23)]
    many = summarise([*whole, *claimed], gpus=1, gates=gates)
    assert many.requests.long_outputs == 3 and many.requests.short_outputs == 0
    assert many.tokens.output_total == 22 * 8
    assert many.validity.verdict == "invalid"
    assert any(r.startswith("long-output ratio 0.1364 exceeds 0.05 (3/22 successful requests brought more output "
                            "than their max_tokens") for r in many.validity.reasons), many.validity.reasons
    assert summarise(whole, gpus=1, gates=gates).requests.long_outputs is None  # absent when none
    assert "long_outputs" not in summarise(whole, gpus=1).model_dump(exclude_none=True)["requests"]


def test_a_point_whose_successes_have_no_latency_sample_is_invalid() -> None:
    """Records that succeeded without a first token's time (a stream of no tokens, as the client recorded it before
    such a stream failed; an import that kept no times) gave TTFT, TPOT, ITL and E2EL `count: 0` and the point was
    valid on its token counts alone."""
    untimed = [rec(i, sent=i * 0.1, osl=8, first_token_at=None, chunk_times=[], chunk_tokens=[])
               for i in range(20)]
    s = summarise(untimed, gpus=1, gates=GateConfig(min_submission_s=0))
    assert s.latency.ttft.count == 0 and s.requests.successful == 20
    assert s.validity.verdict == "invalid"
    assert s.validity.reasons == ["no latency sample: 20 successful profiling requests but no first token's time "
                                  "among them, so TTFT, TPOT, ITL and E2EL have no figure"]
    timed = summarise([rec(i, sent=i * 0.1, osl=8) for i in range(20)], gpus=1, gates=GateConfig(min_submission_s=0))
    assert timed.validity.verdict == "valid"


def test_warmup_failures_warn_and_above_the_threshold_invalidate() -> None:
    ok = [rec(i, sent=i * 0.1) for i in range(10)]
    warm_ok = [rec(100 + i, sent=0.0, phase="warmup") for i in range(3)]
    warm_bad = [rec(200 + i, sent=0.0, phase="warmup", error="truncated") for i in range(3)]
    one = summarise([*warm_ok, warm_bad[0], *ok], gpus=1)
    assert one.validity.verdict == "smoke"
    assert any("1/4 warm-up requests failed" in w for w in one.validity.warnings)
    most = summarise([warm_ok[0], *warm_bad, *ok], gpus=1)
    assert most.validity.verdict == "invalid"
    assert any("warm-up failure ratio" in r and "3/4" in r for r in most.validity.reasons)
    every = summarise([warm_bad[0], *ok], gpus=1, gates=GateConfig(max_warmup_failure_ratio=1.0))
    assert every.validity.verdict == "invalid"  # every warm-up failed: the server never served one


def test_warmups_a_stop_cancelled_did_not_fail() -> None:
    """A signal during the warm-up cancels its requests in flight: `warm-up failure ratio 1.0000 exceeds 0.5 (8/8
    warm-up requests failed)` blamed the server for the user's Ctrl-C. Cancelled warm-ups are no failures."""
    ok = [rec(i, sent=i * 0.1) for i in range(10)]
    cancelled = [rec(300 + i, sent=0.0, phase="warmup", error="cancelled") for i in range(4)]
    summary = summarise([*cancelled, *ok], gpus=1)
    assert (summary.requests.warmup, summary.requests.warmup_failed, summary.requests.warmup_cancelled) == (4, 0, 4)
    assert not any("warm-up" in text for text in [*summary.validity.reasons, *summary.validity.warnings])
    # ... nor do they dilute the rest: every warm-up the server did answer failed, so the gate still fails the run
    failed = [rec(400 + i, sent=0.0, phase="warmup", error="http") for i in range(3)]
    judged = summarise([*failed, cancelled[0], *ok], gpus=1, gates=GateConfig(max_warmup_failure_ratio=1.0))
    assert judged.validity.verdict == "invalid", judged.validity
    assert any("(3/3 warm-up requests failed)" in r for r in judged.validity.reasons), judged.validity.reasons


@pytest.mark.parametrize("damage", [b"{\"id\": \"7\", \"chunk_times\": [1.0, 2", b"not json at all", b"[1, 2]",
                                    b"{\"id\": \"7\", \"chunk_times\": [1.0, x], \"chunk_tokens\": [1, 1]}"])
def test_a_damaged_line_inside_the_records_file_is_counted_and_invalidates_the_point(tmp_path: Path,
                                                                                    damage: bytes) -> None:
    """The client writes whole lines: one that is not a record mid-file was damaged since, and the figures miss a
    request. It was skipped in silence, and the point kept its verdict on the rest."""
    from llmsweep.client.records import record_line

    records = [rec(i, sent=i * 0.37, osl=1 + i % 7) for i in range(20)]
    lines = [record_line(r) for r in records]
    path = tmp_path / "records.jsonl"
    path.write_bytes(b"".join(lines[:10]) + damage + b"\n" + b"".join(lines[10:]) + b"{\"torn")
    summary = summarise(path, gpus=1)
    assert summary.requests.unreadable == 1 and summary.requests.successful == 20
    assert summary.validity.verdict == "invalid"
    assert any("1 line of records.jsonl is not a readable record" in r for r in summary.validity.reasons)
    whole = summarise(records, gpus=1)  # the torn last line alone is a killed run's, not counted
    assert whole.requests.unreadable == 0 and whole.validity.verdict != "invalid"
    path.write_bytes(b"".join(lines) + b"{\"torn")
    assert summarise(path, gpus=1).requests.unreadable == 0
