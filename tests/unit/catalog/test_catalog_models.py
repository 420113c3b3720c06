"""Model catalog: every model InferenceX serves resolves from any spelling; sizes follow from the shape."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
import yaml

from llmsweep.catalog.models import AttentionSpec, all_models, checkpoint_precision, get_model, model_for_prefix
from llmsweep.errors import ConfigError

REQUIRED_PREFIXES = {"qwen3.5", "dsv4", "minimaxm3", "glm5.2", "kimik3", "dsr1"}


def test_required_families_exist_with_sources() -> None:
    models = all_models()
    assert {m.prefix for m in models} >= REQUIRED_PREFIXES
    assert {"llama-3.1-8b", "llama-3.1-70b", "llama-1.1b", "qwen3-next-mini"} <= {m.id for m in models}
    for m in models:
        assert m.source.strip(), m.id


def test_every_model_in_amd_master_resolves_to_its_prefix(shared_dir: Path) -> None:
    master = yaml.safe_load((shared_dir / "reference" / "inferencex" / "amd-master.yaml").read_text())
    for key, entry in master.items():
        model = get_model(entry["model"])
        assert model.prefix == entry["model-prefix"], key
        assert model_for_prefix(entry["model-prefix"]) is not None


@pytest.mark.parametrize(
    ("name", "model_id"),
    [
        ("Qwen/Qwen3.5-397B-A17B-FP8", "qwen3.5-397b-a17b"),
        ("qwen/qwen3.5-397b-a17b-fp8", "qwen3.5-397b-a17b"),
        ("qwen3.5-397b-a17b-nvfp4", "qwen3.5-397b-a17b"),  # golden-curve checkpoint key
        ("qwen3.5", "qwen3.5-397b-a17b"),  # model-prefix
        ("someone/Qwen3.5-397B-A17B-NVFP4", "qwen3.5-397b-a17b"),  # unknown org, known base
        ("amd/DeepSeek-R1-0528-MXFP4-v2", "deepseek-r1"),
        ("deepseek-v4-pro-0813", "deepseek-v4-pro"),
        ("kimik3", "kimi-k3"),
        ("glm-5.2-fp8", "glm-5.2"),
    ],
)
def test_get_model_accepts_ids_hf_ids_checkpoint_keys_and_prefixes(name: str, model_id: str) -> None:
    assert get_model(name).id == model_id


def test_unknown_model_says_which_exist() -> None:
    with pytest.raises(ConfigError, match=r"qwen3\.5"):
        get_model("mistralai/Mistral-Large-3")


@pytest.mark.parametrize(
    ("hf_id", "precision"),
    [
        ("Qwen/Qwen3.5-397B-A17B-FP8", "fp8"),
        ("nvidia/Qwen3.5-397B-A17B-NVFP4", "nvfp4"),
        ("amd/DeepSeek-R1-0528-MXFP4-Preview", "mxfp4"),
        ("MiniMaxAI/MiniMax-M3-MXFP8", "mxfp8"),
        ("meta-llama/Llama-3.1-8B-Instruct", "bf16"),
        ("deepseek-ai/DeepSeek-R1-0528", "fp8"),  # un-suffixed: the release's native precision
    ],
)
def test_checkpoint_precision_from_the_id(hf_id: str, precision: str) -> None:
    assert get_model(hf_id).checkpoint_precision(hf_id) == precision


def test_checkpoint_precision_function_defaults() -> None:
    assert checkpoint_precision("org/Some-Model") == "bf16"
    assert checkpoint_precision("org/Some-Model-FP8-dynamic") == "fp8"


def test_kv_bytes_follow_the_attention_shape() -> None:
    llama8b = get_model("meta-llama/Llama-3.1-8B-Instruct")
    assert llama8b.kv_bytes_per_token("bf16") == 2 * 32 * 8 * 128 * 2  # 128 KiB per token
    assert llama8b.kv_bytes_per_token("fp8") == llama8b.kv_bytes_per_token("bf16") // 2
    r1 = get_model("dsr1")  # MLA caches the 512-wide latent + 64-wide rope key per layer
    assert r1.kv_bytes_per_token("bf16") == 61 * (512 + 64) * 2
    assert r1.kv_bytes_per_token_per_gpu("bf16", tp=8) == r1.kv_bytes_per_token("bf16")  # replicated
    assert llama8b.kv_bytes_per_token_per_gpu("bf16", tp=16) == 2 * 32 * 1 * 128 * 2  # heads replicated past 8


def test_attention_flops_take_the_models_query_heads_times_head_dims_not_its_hidden_size() -> None:
    """Attention FLOPs were 4 x layers x hidden per token of context: right where query heads x head_dim = hidden
    (Llama), a third low for MiniMax-M3 (64 x 128 = 8192 against 6144), twice too high for Qwen3.5 (every one of its
    60 layers counted, 15 attend) and far off for MLA, whose prompts attend in 128 + 64 (DeepSeek-R1) or 192 + 64
    (GLM-5.2) wide query heads and whose decoding tokens attend over the 512 + 64 latent (absorbed)."""
    def per_layer(name: str, phase: Literal["prefill", "decode"]) -> float:
        m = get_model(name)
        return m.attention_flops_per_context_token(phase) / m.full_attention_layers

    llama = get_model("llama-3.1-8b")
    assert per_layer("llama-3.1-8b", "prefill") == per_layer("llama-3.1-8b", "decode") == 4 * llama.hidden_size
    assert per_layer("minimaxm3", "prefill") == 2 * 2 * 64 * 128 == 4 * 6144 * 4 / 3
    qwen = get_model("qwen3.5")
    assert qwen.attention_flops_per_context_token("prefill") == 2 * 2 * 32 * 256 * 15  # 15 full-attention layers
    assert per_layer("dsr1", "prefill") == 2 * 128 * ((128 + 64) + 128)
    assert per_layer("dsr1", "decode") == 2 * 128 * ((512 + 64) + 512)
    assert per_layer("glm5.2", "prefill") == 2 * 64 * ((192 + 64) + 256)
    assert per_layer("kimik2.5", "prefill") == 2 * 64 * ((128 + 64) + 128)
    # an MLA entry without its head dims takes the hidden size for a prompt's, and says it is an estimate
    k3 = get_model("kimik3")
    assert k3.attention.widths("prefill") is None and k3.is_estimate("attention")
    assert k3.attention_flops_per_context_token("prefill") == 4 * 24 * k3.hidden_size
    with pytest.raises(ValueError, match="qk_nope_head_dim and v_head_dim"):
        AttentionSpec(kind="mla", heads=8, kv_lora_rank=512, qk_rope_head_dim=64, qk_nope_head_dim=128)


def test_hybrid_models_cache_kv_only_in_full_attention_layers() -> None:
    qwen = get_model("qwen3.5")
    assert qwen.is_hybrid and qwen.full_attention_layers * 4 == qwen.layers
    assert qwen.kv_bytes_per_token("bf16") == 2 * qwen.full_attention_layers * 2 * 256 * 2
    assert qwen.linear_state_bytes_per_sequence() > 0
    mini = get_model("probe/qwen3-next-mini")
    assert mini.is_hybrid and mini.mtp_layers == 1 and mini.full_attention_layers == 2
    assert get_model("llama-1.1b").linear_state_bytes_per_sequence() == 0


def test_weight_bytes_scale_with_precision() -> None:
    m = get_model("llama-3.1-70b")
    assert m.weight_bytes("bf16") == pytest.approx(70.6e9 * 2)
    assert m.weight_bytes("fp8") == pytest.approx(70.6e9)
    assert m.weight_bytes("nvfp4") < m.weight_bytes("fp8")
    moe = get_model("dsr1")
    assert moe.active_weight_bytes("fp8") < moe.weight_bytes("fp8") / 10
    with pytest.raises(ConfigError, match="weight dtype"):
        m.weight_bytes("fp3")


def test_context_class_selects_the_agentx_trace_corpus() -> None:
    # InferenceX: dsv4*, glm5.2*, minimaxm3*, kimik3* replay the 1M corpus; every other prefix the 256k one
    for prefix in ("dsv4", "glm5.2", "minimaxm3", "kimik3"):
        assert model_for_prefix(prefix).context_class == "1m"  # type: ignore[union-attr]
    for prefix in ("qwen3.5", "dsr1"):
        assert model_for_prefix(prefix).context_class == "256k"  # type: ignore[union-attr]


def test_unsourced_numbers_of_recent_models_are_marked_as_estimates() -> None:
    for prefix in ("dsv4", "minimaxm3", "glm5.2", "kimik3"):
        m = model_for_prefix(prefix)
        assert m is not None
        # DeepSeek-V4-Pro's counts are from its config.json (1.6T / 49B), MiniMax-M3's and Kimi-K3's from public
        # readings of theirs; GLM-5.2's card states none, so they are GLM-5's (same config shape)
        assert m.is_estimate("total_params_b") == (prefix == "glm5.2"), prefix
        # DSv4's compressed attention is its config's, but its pool leaves out the per-request window and follows
        # vLLM's rule, not SGLang's; GLM-5.2's MLA latent is its config's, its DSA indexer keys counted on every layer
        # and its head dims GLM-5's; Kimi-K3's readings give no MLA head dims, so its prompts' attention width is the
        # hidden size
        assert m.is_estimate("attention") == (prefix in ("dsv4", "glm5.2", "kimik3")), prefix


def test_kimi_k3_and_minimax_m3_have_their_released_shapes() -> None:
    """Their placeholders (Kimi-K2's and MiniMax-M2's) made Kimi-K3 ~2.7x too small, so TP4 on MI355X passed the
    HBM-fit check where InferenceX says it cannot load, and MiniMax-M3 half its size."""
    k3, m3 = model_for_prefix("kimik3"), model_for_prefix("minimaxm3")
    assert k3 is not None and m3 is not None
    assert (k3.params_total, k3.params_active, k3.layers) == (2.78e12, 104e9, 93)
    assert k3.linear_attention is not None and k3.linear_attention.layers == 69 and k3.attention.layers == 24
    assert 190e9 < k3.served_weight_bytes("fp4", "moonshotai/Kimi-K3") / 8 * 1.05 < 200e9  # ~185 GB/GPU at TP8
    assert (m3.params_total, m3.params_active, m3.layers, m3.attention.kv_heads) == (428e9, 23e9, 60, 4)


def test_user_catalog_adds_a_model(user_catalog: Path) -> None:
    (user_catalog / "models.yaml").write_text(
        """\
models:
  tiny-gqa:
    name: Tiny
    family: tiny
    prefix: tiny
    hf_ids: [me/Tiny-1B]
    total_params_b: 1.0
    active_params_b: 1.0
    layers: 4
    hidden_size: 256
    attention: {kind: gqa, heads: 4, kv_heads: 2, head_dim: 64}
    native_context: 1048576
    source: my own config.json
"""
    )
    m = get_model("me/Tiny-1B-FP8")
    assert m.id == "tiny-gqa" and m.checkpoint_precision("me/Tiny-1B-FP8") == "fp8"
    assert m.kv_bytes_per_token("bf16") == 2 * 4 * 2 * 64 * 2
    assert m.context_class == "1m"
    assert model_for_prefix("qwen3.5") is not None


def test_qwen3_30b_a3b_instruct_2507_has_its_own_context() -> None:
    """The -2507 checkpoint reads 262,144 tokens natively; listed under the base model's entry it took 32,768, and a
    64k fixed-length job on it was refused (`input.context-length`)."""
    from llmsweep.catalog.models import find_model

    base, instruct = find_model("Qwen/Qwen3-30B-A3B"), find_model("Qwen/Qwen3-30B-A3B-Instruct-2507")
    assert base is not None and instruct is not None and base.id != instruct.id
    assert (base.native_context, instruct.native_context) == (32768, 262144)
    assert (instruct.layers, instruct.attention) == (base.layers, base.attention)  # the same architecture
