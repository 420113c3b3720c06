"""Model shapes that were marked "as recalled / placeholder" are now pinned to the published config.json values and
no longer shown as estimates by `llmsweep catalog models` (the KV and weight figures the HBM-fit rule and the
simulator read come from them).

Qwen/Qwen3.5-397B-A17B config.json: hidden 4096, 60 layers (full_attention_interval 4: 15 attention + 45 Gated
DeltaNet), 32 heads, 2 KV heads, head_dim 256, linear heads 16 key / 64 value of 128, conv 4, 512 experts top-10 + 1
shared, vocab 248,320, 262,144 positions. deepseek-ai/DeepSeek-V4-Pro config.json (glennklockwood.com/garden,
apxml.com): 61 layers + 1 MTP, hidden 7168, 384 experts top-6 + 1 shared, vocab 129,280, 1,048,576 positions,
1.6T / 49B. Kimi-K2.5 model card: 256K context."""

from __future__ import annotations

from llmsweep.catalog.models import get_model


def test_qwen3_5_397b_shape_is_its_config_and_not_an_estimate() -> None:
    m = get_model("qwen3.5-397b-a17b")
    assert (m.layers, m.hidden_size, m.vocab_size, m.native_context) == (60, 4096, 248320, 262144)
    a, la = m.attention, m.linear_attention
    assert (a.kind, a.heads, a.kv_heads, a.head_dim, a.layers) == ("gqa", 32, 2, 256, 15)
    assert la is not None and (la.layers, la.key_heads, la.value_heads, la.key_head_dim, la.value_head_dim,
                               la.conv_kernel) == (45, 16, 64, 128, 128, 4)
    assert m.moe is not None and (m.moe.experts, m.moe.top_k, m.moe.shared_experts) == (512, 10, 1)
    for field in ("layers", "hidden_size", "vocab_size", "attention", "linear_attention", "moe", "native_context"):
        assert not m.is_estimate(field), field
    # KV per token lives in the 15 full-attention layers only: 15 layers x (K, V) x 2 heads x 256 x 2 bytes
    assert m.kv_bytes_per_token("bf16") == 15 * 2 * 2 * 256 * 2


def test_deepseek_v4_pro_shape_is_its_config_and_only_attention_precision_and_architecture_stay_estimates() -> None:
    m = get_model("deepseek-v4-pro")
    assert (m.total_params_b, m.active_params_b, m.layers, m.hidden_size, m.vocab_size) == (1600, 49, 61, 7168,
                                                                                            129280)
    assert m.moe is not None and (m.moe.experts, m.moe.top_k, m.moe.shared_experts) == (384, 6, 1)
    assert (m.native_context, m.mtp_layers) == (1048576, 1)
    # the architecture is the name SGLang registers for V4, not read from the config; the FP8-served weights are
    # InferenceX's stated footprint
    assert sorted(m.estimates) == ["attention", "hf_architecture", "native_precision", "served_weights_gb"]


def test_kimi_k2_5_context_is_the_model_cards() -> None:
    m = get_model("kimi-k2.5")
    assert m.native_context == 262144 and not m.is_estimate("native_context")
