"""The checkpoint tensors of each architecture, as (name, shape, init) rows derived from `config.json` alone.

Names and shapes follow the Hugging Face checkpoints the engines' loaders expect (per-expert MoE tensors, Qwen3-Next's
fused `in_proj_qkvz`/`in_proj_ba`, gated `q_proj` of twice the width, and the `mtp.*` head). The same table gives the
parameter count that a planner needs for memory budgets, whether or not weights are written.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum
from math import prod

from llmsweep.modelsynth.architectures import Config, model_type


class Init(Enum):
    """How a tensor is filled: normal(0, std) for projections, ones for norms, zeros for offset norms and biases."""

    NORMAL = "normal"
    ONES = "ones"
    ZEROS = "zeros"


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    init: Init = Init.NORMAL

    @property
    def numel(self) -> int:
        return prod(self.shape)


def _head_dim(cfg: Config) -> int:
    return int(cfg.get("head_dim") or int(cfg["hidden_size"]) // int(cfg["num_attention_heads"]))


def _attention(prefix: str, cfg: Config, *, qk_norm: bool, gated: bool) -> Iterator[TensorSpec]:
    h, hd = int(cfg["hidden_size"]), _head_dim(cfg)
    nh, kv = int(cfg["num_attention_heads"]), int(cfg["num_key_value_heads"])
    yield TensorSpec(f"{prefix}self_attn.q_proj.weight", (nh * hd * (2 if gated else 1), h))
    yield TensorSpec(f"{prefix}self_attn.k_proj.weight", (kv * hd, h))
    yield TensorSpec(f"{prefix}self_attn.v_proj.weight", (kv * hd, h))
    yield TensorSpec(f"{prefix}self_attn.o_proj.weight", (h, nh * hd))
    if qk_norm:
        yield TensorSpec(f"{prefix}self_attn.q_norm.weight", (hd,), Init.ONES)
        yield TensorSpec(f"{prefix}self_attn.k_norm.weight", (hd,), Init.ONES)


def _dense_mlp(prefix: str, hidden: int, inter: int) -> Iterator[TensorSpec]:
    yield TensorSpec(f"{prefix}gate_proj.weight", (inter, hidden))
    yield TensorSpec(f"{prefix}up_proj.weight", (inter, hidden))
    yield TensorSpec(f"{prefix}down_proj.weight", (hidden, inter))


def _moe(prefix: str, cfg: Config, *, shared: bool) -> Iterator[TensorSpec]:
    h, e, inter = int(cfg["hidden_size"]), int(cfg["num_experts"]), int(cfg["moe_intermediate_size"])
    yield TensorSpec(f"{prefix}mlp.gate.weight", (e, h))
    for i in range(e):
        yield from _dense_mlp(f"{prefix}mlp.experts.{i}.", h, inter)
    if shared:
        yield from _dense_mlp(f"{prefix}mlp.shared_expert.", h, int(cfg["shared_expert_intermediate_size"]))
        yield TensorSpec(f"{prefix}mlp.shared_expert_gate.weight", (1, h))


def _is_sparse(cfg: Config, layer: int) -> bool:
    step = int(cfg.get("decoder_sparse_step", 1) or 1)
    return (
        layer not in cfg.get("mlp_only_layers", [])
        and int(cfg.get("num_experts", 0)) > 0
        and (layer + 1) % step == 0
    )


def _gated_delta_net(prefix: str, cfg: Config) -> Iterator[TensorSpec]:
    h = int(cfg["hidden_size"])
    nk, nv = int(cfg["linear_num_key_heads"]), int(cfg["linear_num_value_heads"])
    dk, dv = int(cfg["linear_key_head_dim"]), int(cfg["linear_value_head_dim"])
    key_dim, value_dim = nk * dk, nv * dv
    p = f"{prefix}linear_attn."
    yield TensorSpec(f"{p}in_proj_qkvz.weight", (2 * key_dim + 2 * value_dim, h))
    yield TensorSpec(f"{p}in_proj_ba.weight", (2 * nv, h))
    yield TensorSpec(f"{p}conv1d.weight", (2 * key_dim + value_dim, 1, int(cfg["linear_conv_kernel_dim"])))
    yield TensorSpec(f"{p}dt_bias", (nv,), Init.ONES)
    yield TensorSpec(f"{p}A_log", (nv,), Init.ZEROS)
    yield TensorSpec(f"{p}norm.weight", (dv,), Init.ONES)
    yield TensorSpec(f"{p}out_proj.weight", (h, value_dim))


def _norms(prefix: str, hidden: int, init: Init) -> Iterator[TensorSpec]:
    yield TensorSpec(f"{prefix}input_layernorm.weight", (hidden,), init)
    yield TensorSpec(f"{prefix}post_attention_layernorm.weight", (hidden,), init)


def _llama_layer(prefix: str, cfg: Config, _layer: int) -> Iterator[TensorSpec]:
    h = int(cfg["hidden_size"])
    yield from _attention(prefix, cfg, qk_norm=False, gated=False)
    yield from _dense_mlp(f"{prefix}mlp.", h, int(cfg["intermediate_size"]))
    yield from _norms(prefix, h, Init.ONES)


def _qwen3_moe_layer(prefix: str, cfg: Config, layer: int) -> Iterator[TensorSpec]:
    h = int(cfg["hidden_size"])
    yield from _attention(prefix, cfg, qk_norm=True, gated=False)
    if _is_sparse(cfg, layer):
        yield from _moe(prefix, cfg, shared=False)
    else:
        yield from _dense_mlp(f"{prefix}mlp.", h, int(cfg["intermediate_size"]))
    yield from _norms(prefix, h, Init.ONES)


def is_full_attention(cfg: Config, layer: int) -> bool:
    """Qwen3-Next's layer pattern: every `full_attention_interval`-th layer is full attention, the rest linear."""
    types: list[str] | None = cfg.get("layer_types")
    if types:
        return types[layer] == "full_attention"
    return (layer + 1) % int(cfg.get("full_attention_interval", 4)) == 0


def _qwen3_next_layer(prefix: str, cfg: Config, layer: int, *, full: bool | None = None) -> Iterator[TensorSpec]:
    h = int(cfg["hidden_size"])
    if full if full is not None else is_full_attention(cfg, layer):
        yield from _attention(prefix, cfg, qk_norm=True, gated=True)
    else:
        yield from _gated_delta_net(prefix, cfg)
    if _is_sparse(cfg, layer):
        yield from _moe(prefix, cfg, shared=True)
    else:
        yield from _dense_mlp(f"{prefix}mlp.", h, int(cfg["intermediate_size"]))
    # Qwen3-Next's RMSNorm scales by (1 + w): zero is its identity.
    yield from _norms(prefix, h, Init.ZEROS)


def _mtp(cfg: Config) -> Iterator[TensorSpec]:
    h = int(cfg["hidden_size"])
    yield TensorSpec("mtp.fc.weight", (h, 2 * h))
    yield TensorSpec("mtp.pre_fc_norm_embedding.weight", (h,), Init.ZEROS)
    yield TensorSpec("mtp.pre_fc_norm_hidden.weight", (h,), Init.ZEROS)
    for i in range(int(cfg.get("num_nextn_predict_layers", 0))):
        yield from _qwen3_next_layer(f"mtp.layers.{i}.", cfg, 0, full=True)
    yield TensorSpec("mtp.norm.weight", (h,), Init.ZEROS)


_LAYERS = {"llama": _llama_layer, "qwen3_moe": _qwen3_moe_layer, "qwen3_next": _qwen3_next_layer}


def tensor_specs(cfg: Config) -> Iterator[TensorSpec]:
    """Every tensor of the checkpoint, in the order a loader reads them."""
    kind = model_type(cfg)
    h, vocab = int(cfg["hidden_size"]), int(cfg["vocab_size"])
    yield TensorSpec("model.embed_tokens.weight", (vocab, h))
    layer_fn = _LAYERS[kind]
    for i in range(int(cfg["num_hidden_layers"])):
        yield from layer_fn(f"model.layers.{i}.", cfg, i)
    yield TensorSpec("model.norm.weight", (h,), Init.ZEROS if kind == "qwen3_next" else Init.ONES)
    if not cfg.get("tie_word_embeddings", False):
        yield TensorSpec("lm_head.weight", (vocab, h))
    if kind == "qwen3_next" and int(cfg.get("num_nextn_predict_layers", 0)) > 0:
        yield from _mtp(cfg)


def parameter_count(cfg: Config) -> int:
    """Total parameters of the checkpoint (MTP head included, tied embeddings counted once)."""
    return sum(t.numel for t in tensor_specs(cfg))
