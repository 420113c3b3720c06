"""DP attention on the simulator: each rank keeps its own requests' KV, so the pool is the ranks' together, a step
waits for the busiest rank's KV reads, and the running cap and step budget are the ranks' together.

Before, the simulator served a DP-attention job as TP attention (`provenance.unmodelled: DP attention`): an MLA
model's latent KV, replicated on every GPU of a TP group, filled one GPU's pool for the whole engine, so InferenceX's
DeepSeek DP-attention points above a few hundred requests queued for minutes (DeepSeek-V4 FP4, TP8 on MI355X, conc
2048: TTFT p50 411 s, 411 output tok/s/GPU) where SGLang's eight ranks hold eight pools.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from support.recipes import DSR1_FP8, LLAMA_8B, one_job

from llmsweep import engines
from llmsweep.engines.sim import DP_ATTENTION_UNMODELLED, unmodelled
from llmsweep.errors import ConfigError, LlmsweepError
from llmsweep.execute.virtual import engine_config
from llmsweep.sim.engine import EngineConfig, build_core, sglang_pinned_cap
from llmsweep.sim.perf import Batch, RooflineTimer
from llmsweep.sim.predict import predict
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload

DSR1 = dict(model="deepseek-r1", hardware="h200", tp=8, ep=8, precision="fp8")
SGLANG_IMAGE = "lmsysorg/sglang:v0.5.12"
VLLM_IMAGE = "vllm/vllm-openai:v0.26.0"


def _flag(argv: Sequence[str], flag: str) -> str | None:
    return argv[list(argv).index(flag) + 1] if flag in argv else None


def test_dp_ranks_hold_an_mla_pool_each_and_split_a_gqa_pool_as_tp_did() -> None:
    """MLA's latent is replicated over a TP group, so eight DP ranks hold eight times the tokens; a GQA model whose
    KV heads TP8 already split holds the same either way."""
    tp_pool = EngineConfig(**DSR1).kv_pool_tokens()
    dp_pool = EngineConfig(**DSR1, dp_attention=8).kv_pool_tokens()
    assert dp_pool == pytest.approx(8 * tp_pool, rel=1e-4)
    llama = dict(model="llama-3.1-70b", hardware="h200", tp=8, precision="fp8")
    assert EngineConfig(**llama, dp_attention=8).kv_pool_tokens() == pytest.approx(
        EngineConfig(**llama).kv_pool_tokens(), rel=1e-4)


@pytest.mark.parametrize(("pinned", "dp", "cap"), [(48, 8, 48), (100, 8, 96), (4, 8, 8), (100, 1, 100)])
def test_a_pinned_sglang_cap_is_divided_among_the_ranks(pinned: int, dp: int, cap: int) -> None:
    """`--max-running-requests N` gives each DP rank N // dp (at least one here: 4 over 8 ranks runs 8)."""
    assert sglang_pinned_cap(pinned, dp) == cap


def test_a_rank_count_that_does_not_divide_tp_is_refused() -> None:
    with pytest.raises(ValueError, match="does not divide tp"):
        EngineConfig(**{**DSR1, "tp": 4}, dp_attention=8)


def test_a_step_waits_for_the_busiest_rank() -> None:
    """Eight decodes on eight ranks read one request's KV per GPU; nine put two on one rank, which the step waits
    for; one request leaves seven ranks idle. The block path prices a run of steps as the step path does."""
    config = EngineConfig(**DSR1, dp_attention=8)
    timer = config.timer()
    assert isinstance(timer, RooflineTimer)
    assert [timer.rank_load(n) for n in (8, 16, 9, 1)] == [1.0, 1.0, pytest.approx(16 / 9), 8.0]
    tp_timer = EngineConfig(**DSR1).timer()
    # eight long decodes: the KV each GPU reads is an eighth of what TP attention reads (the weights are the same)
    batch = Batch(decode_seqs=8, decode_tokens=8, decode_ctx=8 * 100_000)
    assert timer.step_time(batch) < tp_timer.step_time(batch)
    for n in (9, 16, 1):
        b = Batch(decode_seqs=n, decode_tokens=n, decode_ctx=n * 50_000)
        ctx = np.array([n * 50_000, n * 50_001, n * 50_002], np.int64)
        stepped = []
        for c in ctx.tolist():
            b.decode_ctx = c
            stepped.append(timer.step_time(b))
        assert timer.decode_step_times(b, ctx).tolist() == stepped


@pytest.mark.parametrize(("arm", "args", "cap"), [
    ("", None, None),  # unpinned: each rank sizes its own request pool from its own KV pool
    (", spec-decoding: mtp", None, 48),  # SGLang's speculative 48, divided among the ranks: 6 each
    ("", "--max-running-requests: 100", 96),  # a pin, divided: 100 // 8 = 12 each
])
def test_an_sglang_dp_attention_launch_runs_its_ranks_caps_and_chunks(tmp_path: Path, arm: str, args: str | None,
                                                                       cap: int | None) -> None:
    job = one_job(tmp_path, framework="sglang", image=SGLANG_IMAGE, served=DSR1_FP8, tp=8, isl=8192, osl=1024,
                  arm=f", ep: 8, dp-attn: true{arm}", args=args)
    spec = engines.render(job, simulate=True)
    argv = spec.argv
    assert _flag(argv, "--dp-attention") == "8"
    config = engine_config(spec)
    assert config.dp_attention == 8
    if cap is None:
        # each rank's pool, 5.43 M / 8 = 679,076 tokens, over the context of 9,472 sizes int(T / C * 512) = 36,706
        # requests, SGLang's 4,096 ceiling: 8 ranks of 4,096
        assert (config.kv_pool_tokens() // 8, _flag(argv, "--context-length")) == (679_076, "9472")
        assert config.max_running_requests == 8 * 4096
    else:
        assert config.max_running_requests == cap
    # SGLang divides its chunk (8192 on a GPU under 160 GiB) among the ranks: a prompt takes 1024 tokens a step, the
    # ranks together the prompt tokens of the launch without DP attention (max(16384, 8192)); the step budget, which
    # also holds the decodes, is the 8 ranks' together
    assert (config.chunked_prefill_size, config.prefill_budget, config.max_prefill_tokens) == (1024, 16384, 8 * 16384)
    assert any("DP attention over 8 ranks" in note for note in spec.notes)


def test_a_pin_that_leaves_each_sglang_rank_no_request_is_refused(tmp_path: Path) -> None:
    """`--max-running-requests 4` over 8 DP-attention ranks: each rank would take 4 // 8 = 0 and admit nothing (an
    agentic job's 2 x conc below 8 likewise)."""
    job = one_job(tmp_path, framework="sglang", image=SGLANG_IMAGE, served=DSR1_FP8, tp=8,
                  arm=", ep: 8, dp-attn: true", args="--max-running-requests: 4")
    with pytest.raises(ConfigError, match=r"4 // 8 = 0 requests"):
        engines.render(job, simulate=True)


def test_a_chunk_that_is_no_token_count_is_left_for_the_launch_to_refuse(tmp_path: Path) -> None:
    """SGLang's `--chunked-prefill-size -1` (chunking off) is no chunk to divide among the ranks: the simulator
    refuses the launch as it does without DP attention, rather than run 1-token chunks."""
    job = one_job(tmp_path, framework="sglang", image=SGLANG_IMAGE, served=DSR1_FP8, tp=8,
                  arm=", ep: 8, dp-attn: true", args="--chunked-prefill-size: -1")
    spec = engines.render(job, simulate=True)
    assert _flag(spec.argv, "--chunked-prefill-size") == "-1" and "--prefill-budget" not in spec.argv
    with pytest.raises(LlmsweepError, match="'--chunked-prefill-size': -1"):
        engine_config(spec)


def test_a_prefill_budget_bounds_a_step_s_prompt_tokens() -> None:
    """Three 1,000-token prompts, a 16,384-token step budget: all three prefill in one step; with a prefill budget of
    1,500 the step takes the first prompt and 500 tokens of the second, and the third waits. Unset, nothing
    changes."""
    from support.simcore import core, hashes

    for budget, first_step in ((None, [1000, 1000, 1000]), (1500, [1000, 500])):
        sim = core(chunked_prefill_size=1000, prefill_budget=budget)
        for i in range(3):
            sim.new_request(1000, hashes(1000, i), 10)
        assert sim.begin_step(0.0) is not None
        assert [r.chunk for r in sim._scheduled] == first_step
        sim.end_step()


@pytest.mark.parametrize(("args", "cap"), [(None, 8 * 1024), ("--max-num-seqs: 64", 8 * 64)])
def test_vllm_s_data_parallel_ranks_each_take_the_cap(tmp_path: Path, args: str | None, cap: int) -> None:
    job = one_job(tmp_path, framework="vllm", image=VLLM_IMAGE, served=DSR1_FP8, tp=8, isl=8192, osl=1024,
                  arm=", ep: 8, dp-attn: true", args=args)
    config = engine_config(engines.render(job, simulate=True))
    assert (config.dp_attention, config.max_running_requests) == (8, cap)


def test_a_job_without_dp_attention_renders_as_before(tmp_path: Path) -> None:
    job = one_job(tmp_path, framework="sglang", image=SGLANG_IMAGE, served=LLAMA_8B)
    argv = engines.render(job, simulate=True).argv
    assert "--dp-attention" not in argv
    assert unmodelled(job) == []


def test_the_result_names_what_dp_attention_still_leaves_out(tmp_path: Path) -> None:
    job = one_job(tmp_path, framework="sglang", image=SGLANG_IMAGE, served=DSR1_FP8, tp=8,
                  arm=", ep: 8, dp-attn: true")
    assert unmodelled(job) == [DP_ATTENTION_UNMODELLED]


def test_dp_ranks_serve_a_load_the_tp_pool_queues() -> None:
    """DeepSeek-R1 FP8 on 8 x H200, 512 prompts of 8k/1k at once, as SGLang launches it (cap 4096, its chunk divided
    among the ranks): one TP pool holds about 70 such requests and the rest queue; eight DP ranks' pools hold them
    all, so the same prompts finish much sooner and wait less for their first token (the 8k prefills, bound by the
    experts' all-to-all in this roofline, take the same time either way)."""
    out = {}
    for dp in (1, 8):
        workload = FixedLengthWorkload(FixedLengthConfig(isl=8192, osl=1024, num_prompts=512, range_ratio=1.0))
        config = EngineConfig(**DSR1, dp_attention=dp, engine_style="sglang", max_running_requests=dp * 4096,
                              chunked_prefill_size=8192 // dp, max_prefill_tokens=dp * 16384,
                              prefill_budget=16384 if dp > 1 else None)  # as the launch renders it
        core = build_core(config)
        records = predict(workload, core, concurrency=512, duration=1e6)
        assert len(records) == 512 and all(r["status"] == 200 for r in records)
        ttft = sorted(r["first_token_at"] - r["sent_at"] for r in records)
        out[dp] = (max(r["end_at"] for r in records) - min(r["sent_at"] for r in records), ttft[len(ttft) // 2],
                   core.capacity_tokens)
    (tp_span, tp_ttft, tp_pool), (dp_span, dp_ttft, dp_pool) = out[1], out[8]
    assert dp_pool == pytest.approx(8 * tp_pool, rel=1e-4)
    assert tp_pool < 512 * (8192 + 1024) / 5 < dp_pool  # the TP pool holds under a fifth of the load, DP all of it
    assert dp_span < 0.6 * tp_span and dp_ttft < tp_ttft
