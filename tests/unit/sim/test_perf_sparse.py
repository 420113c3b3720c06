"""Sparse attention (DSA) is priced as what it attends: a decoding token reads and scores at most top-k context tokens
per layer, plus its indexer's dense pass over the whole context, and the indexer's cached keys take room in the KV
pool; a DSA the catalog cannot price (an unrecorded top-k) stays dense and the result says so (DeepSeek-V4's
compressed attention: test_perf_dsv4.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import yaml

from llmsweep.catalog.models import ContextTerm, ModelSpec, find_model, get_model
from llmsweep.catalog.sources import clear_caches
from llmsweep.engines.sim import unmodelled
from llmsweep.plan import jobs_from_files
from llmsweep.sim.inputs import perf_inputs
from llmsweep.sim.perf import (
    Batch,
    PerfInputs,
    RooflineTimer,
    covered,
    decode_step_times,
    kv_capacity_tokens,
)

RUN = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run"


def _glm() -> PerfInputs:
    return perf_inputs("zai-org/GLM-5.2-FP8", "mi355x", precision="fp8", kv_dtype="fp8")


def _dense(p: PerfInputs) -> PerfInputs:
    """The same model priced as dense attention over every context token, its whole cache read."""
    return dataclasses.replace(p, context_terms=())


def _decode(ctx: int, seqs: int = 16) -> Batch:
    return Batch(decode_seqs=seqs, decode_tokens=seqs, decode_ctx=ctx * seqs)


def test_glm_5_2_is_priced_with_its_dsa_top_k_and_indexer_from_the_catalog() -> None:
    p = _glm()
    latent, indexer = p.context_terms
    assert (latent.cap, latent.bytes_per_token) == (2048, 78 * (512 + 64))  # the top-k's FP8 latent
    assert latent.decode_flops == 2 * 64 * (576 + 512) * 78  # absorbed MLA over the latent
    assert indexer.cap is None  # the indexer scores every context token:
    assert indexer.decode_flops == indexer.prefill_flops == 2 * 32 * 128 * 78  # index heads x head dim, every layer
    assert indexer.bytes_per_token == (128 + 4) * 78  # an FP8 key and its fp32 scale per layer


def test_the_dsa_indexer_s_cached_keys_take_room_in_the_kv_pool() -> None:
    """The indexer keeps one FP8 key (and its scale) per token per layer beside the latent, whatever the KV dtype:
    the pool counted only the latent, so it held GLM-5.2 23 % more tokens than the engine (at an FP8 cache)."""
    p = _glm()
    assert p.kv_bytes_per_token == 78 * (512 + 64) + 78 * 132
    bf16 = perf_inputs("zai-org/GLM-5.2-FP8", "mi355x", precision="fp8")
    assert bf16.kv_bytes_per_token == 78 * 576 * 2 + 78 * 132  # the latent doubles, the FP8 keys do not
    latent_only = kv_capacity_tokens(dataclasses.replace(p, kv_bytes_per_token=78 * 576.0), tp=8,
                                     mem_fraction_static=0.85)
    pool = kv_capacity_tokens(p, tp=8, mem_fraction_static=0.85)
    assert pool == pytest.approx(latent_only * 576 / (576 + 132), rel=1e-6)


def _deepseek_v3_2() -> ModelSpec:
    """DeepSeek-V3.2's shape: DeepSeek-V3's (the catalog's R1) with its DSA indexer (config.json index_topk 2048,
    index_n_heads 64, index_head_dim 128)."""
    r1 = get_model("deepseek-r1")
    return r1.model_copy(update={"attention": r1.attention.model_copy(update={"sparse": get_model(
        "glm-5.2").attention.sparse.model_copy(update={"index_heads": 64})})})  # type: ignore[union-attr]


def test_deepseek_v3_2_s_kv_holds_its_indexer_keys_on_every_layer() -> None:
    """8,052 bytes a token (132 on each of 61 layers) on top of the 35,136 of its FP8 latent: 19 % fewer tokens."""
    v32 = _deepseek_v3_2()
    assert v32.indexer_bytes_per_token() == 8_052
    assert v32.kv_cache_bytes_per_token("fp8") == 61 * 576 + 8_052
    assert v32.kv_bytes_per_token("fp8") == 61 * 576 + 8_052
    r1 = get_model("deepseek-r1")
    assert r1.kv_cache_bytes_per_token("fp8") / v32.kv_cache_bytes_per_token("fp8") == pytest.approx(0.8136, abs=1e-4)


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
    per_token = p.context_terms[1].bytes_per_token / (p.hbm_bw * timer.efficiency.mem)
    assert grown == pytest.approx(16 * 20_000 * per_token, rel=1e-9)
    dense = RooflineTimer(_dense(p), tp=8)
    assert dense.step_time(_decode(120_000)) - dense.step_time(_decode(100_000)) > 4 * grown


def test_within_the_top_k_the_attention_is_dense_plus_the_indexer() -> None:
    """A context shorter than top-k is attended whole: the step reads the whole latent plus the indexer's keys,
    what a dense pricing of the whole cache reads."""
    p = _glm()
    short = _decode(1_500)
    sparse = RooflineTimer(p, tp=8).step_time(short)
    dense = RooflineTimer(_dense(p), tp=8).step_time(short)
    assert sparse == pytest.approx(dense, rel=1e-9)  # the dense pricing reads the whole cache: latent and keys


def test_a_long_prompt_attends_at_most_top_k_tokens_each() -> None:
    p = _glm()
    chunk = Batch(prefill_tokens=16_384, prefill_attn=16_384 * (100_000 + 8_192), new_seqs=1)
    assert covered(chunk.prefill_attn, chunk.prefill_tokens, p.context_terms[0].cap) == 16_384 * 2048
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
    assert p.context_terms == ()
    assert p.kv_bytes_per_token == 61 * 576 * 2  # its bf16 latent, nothing beside it
    assert covered(1e9, 1, None) == 1e9
    assert ContextTerm(None, 1.0, 2.0, 3.0).cap is None


def test_a_dsa_without_its_top_k_stays_dense_and_its_result_says_so(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A user catalog entry for GLM-5.2 that records no index_topk: priced dense (no parts), its indexer's keys
    still in the pool, and its result's `provenance.unmodelled` names the gap; the packaged entry is priced and not
    listed."""
    plain = jobs_from_files([RUN / "fixed-sim.yaml"])[0]
    glm_job = plain.model_copy(update={"model": "zai-org/GLM-5.2-FP8"})
    assert unmodelled(plain) == [] and unmodelled(glm_job) == []
    entry = get_model("glm-5.2").model_dump(mode="json", by_alias=True, exclude_none=True)
    del entry["attention"]["sparse"]["index_topk"]
    (tmp_path / "models.yaml").write_text(yaml.safe_dump({"models": {"glm-5.2": entry}}))
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(tmp_path))
    clear_caches()
    try:
        (note,) = unmodelled(glm_job)
        assert "GLM-5.2" in note and "index_topk" in note and "dense" in note
        blind = perf_inputs("zai-org/GLM-5.2-FP8", "mi355x", precision="fp8", kv_dtype="fp8")
        assert blind.context_terms == () and blind.kv_bytes_per_token == 78 * (576 + 132)
    finally:
        monkeypatch.undo()
        clear_caches()


def test_a_dsa_without_its_top_k_is_named_with_what_is_missing() -> None:
    glm = find_model("glm-5.2")
    assert glm is not None and glm.attention.sparse is not None
    blind = glm.model_copy(update={"attention": glm.attention.model_copy(
        update={"sparse": glm.attention.sparse.model_copy(update={"index_topk": None})})})
    assert blind.context_terms() == () and blind.indexer_bytes_per_token() == 78 * 132
    gap = blind.sparse_attention_gap()
    assert gap is not None and "index_topk" in gap and "dense" in gap


def test_an_override_the_parts_would_not_see_is_refused() -> None:
    """A sparse model's step is priced part by part, so an override of its KV bytes or attention FLOPs (the Python
    API's `EngineConfig.perf_overrides`) changed nothing and said nothing: refused, naming the parts to override."""
    from llmsweep.errors import ConfigError

    with pytest.raises(ConfigError, match="kv_bytes_per_token would not reach its step time") as err:
        perf_inputs("zai-org/GLM-5.2-FP8", "mi355x", precision="fp8", kv_dtype="fp8",
                    overrides={"kv_bytes_per_token": 1e6})
    assert "override `context_terms`" in (err.value.fix or "")
    parts = (ContextTerm(2048, 1e6, 1.0, 1.0),)
    assert perf_inputs("zai-org/GLM-5.2-FP8", "mi355x", precision="fp8", kv_dtype="fp8",
                       overrides={"kv_bytes_per_token": 1e6, "context_terms": parts}).context_terms == parts
    dense = perf_inputs("deepseek-r1", "mi355x", precision="fp8", overrides={"kv_bytes_per_token": 1e6})
    assert dense.kv_bytes_per_token == 1e6  # a dense model's KV bytes are what its step reads
