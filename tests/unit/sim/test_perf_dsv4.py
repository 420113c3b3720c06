"""DeepSeek-V4's compressed attention is sized and priced from its config's shape, not as V3's dense MLA.

Every layer keeps a 128-token sliding window; its 30 CSA layers (compress ratio 4) also keep one entry per 4 tokens,
of which an indexer picks the top 1024 per query token, and its 31 HCA layers one entry per 128 tokens, attended whole.
An entry is 584 bytes in the layout both engines keep (448 FP8 non-rope values, 64 BF16 rope values, 7 scale bytes, a
pad byte) and a CSA indexer key 132: a token of context adds 30 x (584 + 132) / 4 + 31 x 584 / 128 = 5,511 bytes. The
simulator had sized it as V3's latent on every layer, 35,136 bytes at FP8 (70,272 at the bf16 its launches pass), and
priced dense attention over every context token; the result said so in `provenance.unmodelled`.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from llmsweep.engines.sim import unmodelled
from llmsweep.plan import jobs_from_files
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.inputs import perf_inputs
from llmsweep.sim.perf import Batch, PerfInputs, RooflineTimer, covered, decode_step_times, kv_capacity_tokens

DSV4 = "deepseek-ai/DeepSeek-V4-Pro"
RUN = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run"
ENTRY, KEY = 448 + 64 * 2 + 7 + 1, 128 + 4  # an FP8 cache entry; an FP8 indexer key and its fp32 scale
CSA, HCA, LAYERS = 30, 31, 61
PER_TOKEN = CSA * (ENTRY + KEY) / 4 + HCA * ENTRY / 128  # 5,511.4375 bytes
V3_LATENT_FP8 = LAYERS * (512 + 64)  # what it was sized at: V3's latent on every layer, 35,136 bytes


def _v4(kv_dtype: str | None = None) -> PerfInputs:
    return perf_inputs(DSV4, "mi355x", precision="fp4", kv_dtype=kv_dtype)


def _as_v3_mla(p: PerfInputs) -> PerfInputs:
    """The pricing it had: V3's FP8 latent on every layer, absorbed MLA over every context token."""
    return dataclasses.replace(p, kv_bytes_per_token=float(V3_LATENT_FP8), context_terms=(),
                               decode_attention_flops=2.0 * (128 * 576 + 128 * 512) * LAYERS)


def _decode(ctx: int, seqs: int = 16) -> Batch:
    return Batch(decode_seqs=seqs, decode_tokens=seqs, decode_ctx=ctx * seqs)


def test_a_token_of_context_holds_its_compressed_entries_and_indexer_keys_whatever_the_kv_dtype() -> None:
    """5,511 bytes from the config's numbers, 6.4 times less than V3's FP8 latent; the engines keep the one layout
    whatever --kv-cache-dtype says (the simulator's launches pass bf16 for none, which had doubled it)."""
    assert pytest.approx(5_511.4375) == PER_TOKEN
    for kv_dtype in (None, "bf16", "fp8"):
        assert _v4(kv_dtype).kv_bytes_per_token == PER_TOKEN, kv_dtype
    assert pytest.approx(6.375, abs=1e-3) == V3_LATENT_FP8 / PER_TOKEN


def test_the_kv_pool_holds_six_times_the_tokens_it_did() -> None:
    p = _v4("fp8")
    pool = kv_capacity_tokens(p, tp=8, mem_fraction_static=0.85)
    room = p.hbm_bytes * 0.85 - 1024**3 - p.weight_bytes / 8  # per GPU: the cache is whole on every GPU of TP
    assert pool == int(room // PER_TOKEN)
    before = kv_capacity_tokens(_as_v3_mla(p), tp=8, mem_fraction_static=0.85)
    assert pool / before == pytest.approx(V3_LATENT_FP8 / PER_TOKEN, rel=1e-5)


def test_a_long_context_decode_step_costs_far_less_than_v3_s_dense_attention_over_it() -> None:
    """At 200k tokens of context a decoding sequence reads its window (128 entries a layer), 1024 CSA entries a CSA
    layer, and over the whole context the CSA indexer keys and the HCA entries: 1.2 KB a token of its context in
    all, not 35 KB; the old pricing overstated the step 2.8 times (5 times at 500k)."""
    p = _v4("fp8")
    new, old = RooflineTimer(p, tp=8), RooflineTimer(_as_v3_mla(p), tp=8)
    assert old.step_time(_decode(200_000)) > 2.5 * new.step_time(_decode(200_000))
    assert old.step_time(_decode(500_000)) > 4.5 * new.step_time(_decode(500_000))


def test_past_the_window_and_the_top_k_a_longer_context_adds_only_the_whole_context_reads() -> None:
    """Beyond 4,096 tokens (top-1024 entries of 4 tokens) a decoding token's window and CSA reads are constant; what
    grows is the CSA indexers' keys (132 / 4 bytes a token a CSA layer) and the HCA entries (584 / 128 a token a HCA
    layer), by exactly their bytes over the achieved bandwidth (memory-bound decode)."""
    p = _v4("fp8")
    timer = RooflineTimer(p, tp=8)
    grown = timer.step_time(_decode(120_000)) - timer.step_time(_decode(100_000))
    whole = CSA * KEY / 4 + HCA * ENTRY / 128
    assert grown == pytest.approx(16 * 20_000 * whole / (p.hbm_bw * timer.efficiency.mem), rel=1e-9)
    window, top_k, rest = p.context_terms
    assert (window.cap, top_k.cap, rest.cap) == (128, 4 * 1024, None)
    assert (window.bytes_per_token, top_k.bytes_per_token, rest.bytes_per_token) == (LAYERS * ENTRY,
                                                                                     CSA * ENTRY / 4, whole)


def test_attention_is_mqa_over_one_512_wide_vector_on_the_entries_each_layer_attends() -> None:
    """128 heads x 512 both ways (the vector is key and value alike), 2 FLOPs a unit: 262,144 FLOPs an entry a layer,
    in a prompt as in decode; the CSA indexer scores with 64 heads of 128."""
    window, top_k, rest = _v4().context_terms
    per_entry = 2 * (128 * 512 + 128 * 512)
    assert window.prefill_flops == window.decode_flops == per_entry * LAYERS
    assert top_k.decode_flops == per_entry * CSA / 4
    assert rest.decode_flops == CSA * 2 * 64 * 128 / 4 + per_entry * HCA / 128


def test_a_prompt_chunk_covers_each_part_up_to_its_cap() -> None:
    p = _v4("fp8")
    chunk = Batch(prefill_tokens=16_384, prefill_attn=16_384 * (100_000 + 8_192), new_seqs=1)
    window, top_k, rest = p.context_terms
    assert covered(chunk.prefill_attn, chunk.prefill_tokens, window.cap) == 16_384 * 128
    assert covered(chunk.prefill_attn, chunk.prefill_tokens, top_k.cap) == 16_384 * 4096
    assert covered(chunk.prefill_attn, chunk.prefill_tokens, rest.cap) == chunk.prefill_attn
    assert RooflineTimer(p, tp=8).step_time(chunk) < 0.8 * RooflineTimer(_as_v3_mla(p), tp=8).step_time(chunk)


def test_the_vectorised_decode_steps_equal_the_scalar_ones_for_dsv4() -> None:
    timer = RooflineTimer(_v4("fp8"), tp=8, dp=2)
    batch = Batch(decode_seqs=5, decode_tokens=15, decode_ctx=0, draft_tokens=2)
    contexts = np.array([100, 640, 641, 20_480, 20_481, 60_000, 900_000, 5_000_000])
    expected = []
    for ctx in contexts.tolist():
        batch.decode_ctx = ctx
        expected.append(timer.step_time(batch))
    assert decode_step_times(timer, batch, contexts).tolist() == expected


def test_a_dsv4_result_no_longer_names_its_compressed_attention_unmodelled() -> None:
    plain = jobs_from_files([RUN / "fixed-sim.yaml"])[0]
    assert unmodelled(plain.model_copy(update={"model": DSV4})) == []


def test_predict_serves_an_inferencex_dsv4_key_with_the_compressed_pool(shared_dir: Path, tmp_path: Path) -> None:
    """`llmsweep predict` on InferenceX's dsv4-fp8-mi300x-vllm (TP 8, 8k/1k, conc 4-256) predicts every point, and
    the pool each point is served with holds 12.75 times the tokens it did: 5,511 bytes a token where the launch's
    bf16 default had sized V3's latent at 70,272."""
    from llmsweep.cli.sim import predict as predict_cmd

    ref = shared_dir / "reference" / "inferencex"
    out = CliRunner().invoke(predict_cmd, [str(ref / "amd-master.yaml"), "--runner-config", str(ref / "runners.yaml"),
                                           "--config-keys", "dsv4-fp8-mi300x-vllm", "--traces", "synthetic",
                                           "--duration", "20", "--max-requests", "8", "--processes", "1", "--json"])
    assert out.exit_code == 0, out.output[-3000:]
    rows = json.loads(out.stdout)
    assert len(rows) == 7 and all("summary" in r for r in rows), [r.get("refused") for r in rows]
    for row in rows:
        provenance = row["summary"]["provenance"]
        assert not [u for u in provenance.get("unmodelled", []) if "DeepSeek-V4" in u], provenance.get("unmodelled")
        config = EngineConfig(**provenance["engine_config"])
        inputs = config.perf_inputs()
        assert inputs.kv_bytes_per_token == PER_TOKEN
        before = dataclasses.replace(inputs, kv_bytes_per_token=2.0 * V3_LATENT_FP8)
        pool = config.kv_pool_tokens(inputs)
        assert pool / config.kv_pool_tokens(before) == pytest.approx(2 * V3_LATENT_FP8 / PER_TOKEN, rel=1e-5)
