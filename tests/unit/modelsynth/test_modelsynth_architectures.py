"""Presets render the configs engines accept, overrides keep them valid, parameter counts are the real ones."""

from __future__ import annotations

import pytest

from llmsweep.errors import ConfigError
from llmsweep.modelsynth import parameter_count, preset_config, scale_config, tensor_specs
from llmsweep.modelsynth.tensors import is_full_attention

# The key set vLLM 0.26.0 served on the H200 (research notes, qwen_next_run.sh); a missing key changes the model.
QWEN3_NEXT_KEYS = {
    "architectures", "model_type", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers",
    "num_attention_heads", "num_key_value_heads", "head_dim", "linear_conv_kernel_dim", "linear_key_head_dim",
    "linear_value_head_dim", "linear_num_key_heads", "linear_num_value_heads", "moe_intermediate_size",
    "shared_expert_intermediate_size", "num_experts_per_tok", "num_experts", "decoder_sparse_step", "norm_topk_prob",
    "mlp_only_layers", "max_position_embeddings", "rms_norm_eps", "rope_theta", "partial_rotary_factor",
    "num_nextn_predict_layers", "torch_dtype", "tie_word_embeddings", "hidden_act", "full_attention_interval",
}


def test_llama_1b_has_tinyllamas_parameter_count() -> None:
    assert parameter_count(preset_config("llama-1b")) == 1_100_048_384  # TinyLlama-1.1B's published count


def test_qwen3_next_small_is_the_hybrid_the_notes_describe() -> None:
    cfg = preset_config("qwen3-next-small")
    assert set(cfg) >= QWEN3_NEXT_KEYS
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_experts"], cfg["num_experts_per_tok"]) == (
        8, 2048, 64, 10)
    names = {t.name: t.shape for t in tensor_specs(cfg)}
    full = [i for i in range(8) if is_full_attention(cfg, i)]
    assert full == [3, 7]  # gated full attention every 4th layer, Gated-DeltaNet in the other three
    for i in range(8):
        assert (f"model.layers.{i}.self_attn.q_proj.weight" in names) == (i in full)
        assert (f"model.layers.{i}.linear_attn.in_proj_qkvz.weight" in names) == (i not in full)
    # gated attention: q_proj carries the gate, twice the heads' width
    q = names["model.layers.3.self_attn.q_proj.weight"]
    assert q == (2 * cfg["num_attention_heads"] * cfg["head_dim"], cfg["hidden_size"])
    assert "model.layers.0.mlp.experts.63.down_proj.weight" in names
    assert "mtp.fc.weight" in names and "mtp.layers.0.mlp.experts.0.up_proj.weight" in names


def test_qwen3_moe_has_per_expert_tensors_and_qk_norm() -> None:
    cfg = preset_config("qwen3-moe-small")
    names = {t.name for t in tensor_specs(cfg)}
    experts = {n.split(".")[5] for n in names if ".mlp.experts." in n and n.startswith("model.layers.0.")}
    assert len(experts) == cfg["num_experts"]
    assert "model.layers.0.self_attn.q_norm.weight" in names


def test_hidden_override_keeps_heads_divisible_and_scales_the_mlp() -> None:
    base = preset_config("llama-1b")
    cfg = scale_config(base, hidden=1024)
    assert cfg["num_attention_heads"] * cfg["head_dim"] == 1024
    assert cfg["num_attention_heads"] % cfg["num_key_value_heads"] == 0
    assert cfg["intermediate_size"] < base["intermediate_size"]
    with pytest.raises(ConfigError, match="multiple of the head size"):
        scale_config(base, hidden=1000)


def test_layer_override_respects_the_hybrid_pattern() -> None:
    assert scale_config(preset_config("qwen3-next-small"), layers=4)["num_hidden_layers"] == 4
    with pytest.raises(ConfigError, match="multiple of 4"):
        scale_config(preset_config("qwen3-next-small"), layers=6)


def test_unknown_preset_names_the_choices() -> None:
    with pytest.raises(ConfigError, match="qwen3-next-small"):
        preset_config("gpt-5")


def test_a_configs_per_layer_types_follow_a_new_depth() -> None:
    """A config listing `layer_types` (one a layer) kept its list when `--layers` changed the depth: 4 layers with 8
    types, and 12 layers indexed past the list's end (an IndexError traceback from the tensor specs)."""
    base = preset_config("qwen3-next-small")
    pattern = ["linear_attention"] * 3 + ["full_attention"]
    base = {**base, "num_hidden_layers": 8, "layer_types": pattern * 2}
    for layers in (4, 12):
        cfg = scale_config(base, layers=layers)
        assert cfg["layer_types"] == (pattern * 3)[:layers]
        assert [is_full_attention(cfg, i) for i in range(layers)] == [t == "full_attention" for t in cfg["layer_types"]]
        assert len(list(tensor_specs(cfg))) > 0
