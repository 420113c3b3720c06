"""Sparse attention (DSA) is priced as what it attends: a decoding token reads and scores at most top-k context tokens
per layer, plus its indexer's dense pass over the whole context; a sparse attention the catalog cannot price (an
unrecorded top-k, DeepSeek-V4's compressed attention) stays dense and the result says so."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from llmsweep.catalog.models import find_model
from llmsweep.engines.sim import unmodelled
from llmsweep.plan import jobs_from_files
from llmsweep.sim.inputs import perf_inputs
from llmsweep.sim.perf import Batch, PerfInputs, RooflineTimer, decode_step_times

RUN = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run"


def _glm() -> PerfInputs:
    return perf_inputs("zai-org/GLM-5.2-FP8", "mi355x", precision="fp8", kv_dtype="fp8")


def _dense(p: PerfInputs) -> PerfInputs:
    return dataclasses.replace(p, sparse_topk=None, indexer_flops=0.0, indexer_bytes_per_token=0.0)


def _decode(ctx: int, seqs: int = 16) -> Batch:
    return Batch(decode_seqs=seqs, decode_tokens=seqs, decode_ctx=ctx * seqs)


def test_glm_5_2_is_priced_with_its_dsa_top_k_and_indexer_from_the_catalog() -> None:
    p = _glm()
    assert p.sparse_topk == 2048
    assert p.indexer_flops == 2 * 32 * 128 * 78  # index heads x head dim, every full-attention layer
    assert p.indexer_bytes_per_token == (128 + 4) * 78  # an FP8 key and its fp32 scale per layer


def test_a_long_context_decode_step_costs_far_less_than_dense_attention_over_it() -> None:
    """At 200k tokens of context a DSA decode step reads 2048 tokens' KV per sequence (and the indexer's small keys
    over all of them), not the whole 200k: the dense pricing it had overstated the step about twice over."""
    p = _glm()
    sparse, dense = RooflineTimer(p, tp=8), RooflineTimer(_dense(p), tp=8)
    long = _decode(200_000)
    assert dense.step_time(long) > 1.8 * sparse.step_time(long)


def test_beyond_the_top_k_a_longer_context_adds_only_the_indexer_pass() -> None:
    """Past top-k the attention is constant per token; what still grows with the context is the indexer's key read
    (memory-bound decode), by exactly its bytes over the achieved bandwidth."""
    p = _glm()
    timer = RooflineTimer(p, tp=8)
    grown = timer.step_time(_decode(120_000)) - timer.step_time(_decode(100_000))
    per_token = p.indexer_bytes_per_token / (p.hbm_bw * timer.efficiency.mem)
    assert grown == pytest.approx(16 * 20_000 * per_token, rel=1e-9)
    dense = RooflineTimer(_dense(p), tp=8)
    assert dense.step_time(_decode(120_000)) - dense.step_time(_decode(100_000)) > 4 * grown


def test_within_the_top_k_the_attention_is_dense_plus_the_indexer() -> None:
    """A context shorter than top-k is attended whole: the step costs dense attention plus the indexer's pass."""
    p = _glm()
    short = _decode(1_500)
    sparse = RooflineTimer(p, tp=8).step_time(short)
    dense = RooflineTimer(_dense(p), tp=8).step_time(short)
    indexer = 16 * 1_500 * p.indexer_bytes_per_token / (p.hbm_bw * RooflineTimer(p, tp=8).efficiency.mem)
    assert sparse == pytest.approx(dense + indexer, rel=1e-9)


def test_a_long_prompt_attends_at_most_top_k_tokens_each() -> None:
    p = _glm()
    chunk = Batch(prefill_tokens=16_384, prefill_attn=16_384 * (100_000 + 8_192), new_seqs=1)
    assert p.attended(chunk.prefill_attn, chunk.prefill_tokens) == 16_384 * 2048
    assert RooflineTimer(_dense(p), tp=8).step_time(chunk) > 2 * RooflineTimer(p, tp=8).step_time(chunk)


def test_the_vectorised_decode_steps_equal_the_scalar_ones_for_a_sparse_model() -> None:
    timer = RooflineTimer(_glm(), tp=8, dp=2)
    batch = Batch(decode_seqs=5, decode_tokens=15, decode_ctx=0, draft_tokens=2)
    contexts = np.array([1_000, 10_240, 10_241, 60_000, 900_000])
    expected = []
    for ctx in contexts.tolist():
        batch.decode_ctx = ctx
        expected.append(timer.step_time(batch))
    assert decode_step_times(timer, batch, contexts).tolist() == expected


def test_a_dense_model_has_no_top_k_and_no_indexer() -> None:
    p = perf_inputs("deepseek-r1", "mi355x", precision="fp8")
    assert (p.sparse_topk, p.indexer_flops, p.indexer_bytes_per_token) == (None, 0.0, 0.0)
    assert p.attended(1e9, 1) == 1e9


def test_a_sparse_attention_the_catalog_cannot_price_stays_dense_and_is_named_unmodelled() -> None:
    """DeepSeek-V4's compressed attention (CSA/HCA) has no per-layer shape recorded: priced dense, and its result's
    `provenance.unmodelled` says so; GLM-5.2's DSA is priced and not listed."""
    v4 = find_model("deepseek-ai/DeepSeek-V4-Pro")
    assert v4 is not None and v4.sparse_topk is None
    assert perf_inputs("deepseek-ai/DeepSeek-V4-Pro", "mi355x", precision="fp4").sparse_topk is None
    plain = jobs_from_files([RUN / "fixed-sim.yaml"])[0]
    assert unmodelled(plain) == []
    v4_job = plain.model_copy(update={"model": "deepseek-ai/DeepSeek-V4-Pro"})
    (note,) = unmodelled(v4_job)
    assert "DeepSeek-V4-Pro" in note and "dense" in note
    assert unmodelled(plain.model_copy(update={"model": "zai-org/GLM-5.2-FP8"})) == []


def test_a_dsa_without_its_top_k_is_named_with_what_is_missing() -> None:
    glm = find_model("glm-5.2")
    assert glm is not None and glm.attention.sparse is not None
    blind = glm.model_copy(update={"attention": glm.attention.model_copy(
        update={"sparse": glm.attention.sparse.model_copy(update={"index_topk": None})})})
    assert blind.sparse_topk is None and blind.indexer_flops_per_context_token() == 0.0
    gap = blind.sparse_attention_gap()
    assert gap is not None and "index_topk" in gap and "dense" in gap
