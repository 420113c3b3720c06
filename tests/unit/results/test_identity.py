"""Point identity from planned jobs: every field that makes two measurements the same experiment."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from llmsweep.results.identity import identity_from_job

REPO = Path(__file__).resolve().parents[3]


def test_identity_of_a_planned_job() -> None:
    plan = pytest.importorskip("llmsweep.plan")
    recipe = REPO / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"
    if not recipe.exists():
        pytest.skip("project recipe not present")
    job = plan.jobs_from_files([recipe])[0]
    ident = identity_from_job(job.to_json())
    assert ident.hardware == job.sku and ident.engine == job.framework and ident.image == job.image
    assert ident.scenario == "agentic-coding" and ident.spec == job.spec_decoding
    assert (ident.tp, ident.pp, ident.dcp, ident.pcp, ident.ep) == (job.tp, job.pp, job.dcp_size, job.pcp_size, job.ep)
    assert ident.conc == job.concs[0] and ident.workers == ""


def test_multinode_workers_and_router_take_part_in_the_key() -> None:
    job: dict[str, Any] = {
        "image": "lmsysorg/sglang:v0.5.16-rocm720-mi35x", "model": "Qwen/Qwen3.5-397B-A17B-FP8",
        "precision": "fp8", "framework": "sglang-disagg", "runner": "mi355x-disagg", "sku": "mi355x",
        "scenario": "fixed-seq-len", "isl": 8192, "osl": 1024, "spec-decoding": "none", "disagg": True,
        "prefill": {"num-worker": 1, "tp": 4, "ep": 1, "dp-attn": False, "pp": 1, "dcp-size": 1, "pcp-size": 1},
        "decode": {"num-worker": 1, "tp": 8, "ep": 8, "dp-attn": True, "pp": 1, "dcp-size": 1, "pcp-size": 1},
        "conc": [64], "router": {"name": "sglang-router", "version": "0.3.2"}, "gpus": 12,
    }
    ident = identity_from_job(job)
    assert ident.workers == "P1x(tp4 ep1) D1x(tp8 ep8 dpa)"
    assert ident.topology() == ident.workers
    assert ident.router == "sglang-router@0.3.2" and ident.conc == 64 and ident.scenario == "fixed-8k1k"
    wider = identity_from_job({**job, "decode": {**job["decode"], "num-worker": 2}})
    assert wider.key() != ident.key()
    assert dataclasses.replace(ident, router="other").key() != ident.key()
    # The same job as an InferenceX multinode row (flat prefill_*/decode_* keys) has the same workers string.
    row = {"hw": "mi355x-disagg", "prefill_num_workers": 1, "prefill_tp": 4, "prefill_ep": 1,
           "prefill_dp_attention": "false", "decode_num_workers": 1, "decode_tp": 8, "decode_ep": 8,
           "decode_dp_attention": "true"}
    assert identity_from_job(row).workers == ident.workers
    assert identity_from_job(row).hardware == "mi355x"


def test_spellings_and_defaults() -> None:
    a = identity_from_job({"runner": "cluster:mi300x-amds", "dcp-size": 2, "dp-attn": "true", "conc": 4,
                           "kv-offload-backend": {"name": "lmcache", "version": "0.3"}, "kv-offloading": "dram"})
    b = identity_from_job({"hw": "mi300x", "dcp_size": 2, "dp_attention": True, "conc": 4,
                           "kv_offload_backend": {"name": "lmcache"}, "kv_offloading": "dram"})
    assert a == b
    assert a.hardware == "mi300x" and a.dcp == 2 and a.dp_attn and a.offload_backend == "lmcache"
    assert identity_from_job({}).spec == "none" and identity_from_job({}).tp == 1


def test_disaggregated_series_are_kept_apart_from_aggregated_ones() -> None:
    base = {"image": "img", "model": "Qwen/Qwen3.5-397B-A17B-FP8", "precision": "fp8", "framework": "sglang",
            "runner": "mi355x", "sku": "mi355x", "scenario": "fixed-seq-len", "isl": 8192, "osl": 1024,
            "spec-decoding": "none", "tp": 8, "ep": 1, "conc": 64}
    aggregated = identity_from_job(base)
    disagg = identity_from_job({**base, "tp": None, "disagg": True,
                                "prefill": {"num-worker": 1, "tp": 4, "ep": 1, "dp-attn": False},
                                "decode": {"num-worker": 1, "tp": 8, "ep": 1, "dp-attn": False}})
    other = identity_from_job({**base, "tp": None, "disagg": True,
                               "prefill": {"num-worker": 2, "tp": 4, "ep": 1, "dp-attn": False},
                               "decode": {"num-worker": 1, "tp": 8, "ep": 1, "dp-attn": False}})
    # an aggregated key is what it always was (stored series keep matching); a disaggregated one carries its topology
    assert aggregated.series_key() == "|".join(str(getattr(aggregated, f)) for f in
                                                 ("model", "hardware", "engine", "precision", "scenario", "spec",
                                                  "offload"))
    assert len({aggregated.series_key(), disagg.series_key(), other.series_key()}) == 3
    assert "disagg" in disagg.series_label() and "disagg" not in aggregated.series_label()


def test_compare_refuses_to_ignore_the_topology() -> None:
    from llmsweep.errors import ConfigError
    from llmsweep.results.compare import compare_points

    for field in ("disagg", "workers"):
        with pytest.raises(ConfigError, match="aggregated and disaggregated"):
            compare_points([], [], ignore=[field])


def test_a_result_is_stored_only_under_the_topology_that_earned_it() -> None:
    from llmsweep.errors import ResultError
    from llmsweep.metrics.model import Summary
    from llmsweep.results.point import check_topology

    disagg = identity_from_job({"model": "m", "framework": "sglang-disagg", "disagg": True,
                                "prefill": {"num-worker": 1, "tp": 4, "ep": 1, "dp-attn": False},
                                "decode": {"num-worker": 1, "tp": 8, "ep": 1, "dp-attn": False}})
    aggregated = identity_from_job({"model": "m", "framework": "sglang", "tp": 8})
    ran = Summary.model_validate({"deployment": {"disaggregated": True, "gpus": 12, "kv_transfer": "mori"}})
    check_topology("j", disagg, ran, 12)
    with pytest.raises(ResultError, match="no disaggregated deployment"):
        check_topology("j", disagg, Summary(), 12)
    with pytest.raises(ResultError, match="aggregated job"):
        check_topology("j", aggregated, ran, 8)
    with pytest.raises(ResultError, match="plans 16 GPU"):
        check_topology("j", disagg, ran, 16)


def _summary(options: dict[str, Any] | None, workload: dict[str, Any] | None = None) -> Any:
    from llmsweep.metrics.model import Summary

    return Summary.model_validate({"provenance": {"options": options, "workload": workload}})


FIXED = {"name": "fixed", "kind": "fixed", "isl": 1024, "osl": 1024, "num_prompts": 40, "num_warmups": 8,
         "range_ratio": 0.8, "api": "completions", "seed": 1234, "tokenizer_name": "llmsweep-words"}
AGENTIC = {"name": "agentic", "corpus_digest": "sha256:ab", "concurrency": 8, "seed": 42, "run_id": "u1",
           "warmup_requests_per_lane": 10, "warm_start": True}


def test_a_measurement_is_the_load_and_workload_a_summary_records_without_what_repeats_vary() -> None:
    """Two results measure the same thing when their window, request budget, warm-ups and workload agree; a repeat's
    seed and run marker (and the concurrency, which the identity holds) do not make it another measurement."""
    from llmsweep.results.identity import measurement_of

    window = measurement_of(_summary({"concurrency": 8, "duration_s": 1800.0}, AGENTIC))
    assert window is not None and window.duration_s == 1800.0 and window.workload.startswith("sha256:")
    repeat = measurement_of(_summary({"concurrency": 8, "duration_s": 1800.0, "seed": 7},
                                     {**AGENTIC, "seed": 99, "run_id": "u2"}))
    assert repeat == window
    assert measurement_of(_summary({"concurrency": 8, "duration_s": 900.0}, AGENTIC)) != window
    assert measurement_of(_summary({"concurrency": 8, "duration_s": 1800.0},
                                   {**AGENTIC, "warmup_requests_per_lane": 1})) != window
    assert measurement_of(_summary({"concurrency": 8, "duration_s": 1800.0},
                                   {**AGENTIC, "corpus_digest": "sha256:cd"})) != window

    fixed = measurement_of(_summary({"concurrency": 4, "num_requests": 40, "warmup_requests": 8}, FIXED))
    assert fixed is not None and (fixed.num_requests, fixed.warmup_requests) == (40, 8)
    more = measurement_of(_summary({"concurrency": 4, "num_requests": 80, "warmup_requests": 8},
                                   {**FIXED, "num_prompts": 80}))
    assert more != fixed and more is not None and more.key() != fixed.key()
    assert measurement_of(_summary({"concurrency": 4, "num_requests": 40, "warmup_requests": 8},
                                   {**FIXED, "range_ratio": 1.0})) != fixed
    assert measurement_of(_summary({"concurrency": 4, "num_requests": 40, "warmup_requests": 8},
                                   {**FIXED, "seed": 5})) == fixed


def test_an_older_summary_still_gives_its_measurement_or_says_it_has_none() -> None:
    """Options a later llmsweep retired are left aside and ones it added take their defaults; a summary that records
    no client options has no measurement (its window is unknown), so its result is a repeat of nothing."""
    from llmsweep.results.identity import measurement_of

    retired = measurement_of(_summary({"concurrency": 8, "duration_s": 1800.0, "an_old_option": 1}, AGENTIC))
    assert retired == measurement_of(_summary({"concurrency": 8, "duration_s": 1800.0}, AGENTIC))
    assert measurement_of(_summary(None, AGENTIC)) is None
    assert measurement_of(None) is None
    no_workload = measurement_of(_summary({"concurrency": 8, "duration_s": 1800.0}))
    assert no_workload is not None and no_workload.workload == ""


def test_a_fixed_length_series_reads_its_lengths_apart() -> None:
    """`fixed-25664` (256 in, 64 out) read as one number in the dashboard, PNGs and compare headings."""
    base: dict[str, Any] = {"model": "m/Model", "precision": "fp8", "framework": "sglang", "runner": "h200",
                            "scenario": "fixed-seq-len", "tp": 8, "conc": [4]}
    for isl, osl, shown in ((256, 64, "fixed 256/64"), (8192, 1024, "fixed 8k/1k"), (1024, 1000, "fixed 1k/1000")):
        ident = identity_from_job({**base, "isl": isl, "osl": osl})
        assert ident.scenario_label == shown and f" · {shown}" in ident.series_label()
    agentic = identity_from_job({**base, "scenario": "agentic-coding"})
    assert agentic.scenario_label == "agentic-coding"
