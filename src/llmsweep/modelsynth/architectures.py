"""Named model shapes (`tiny`, `llama-1b`, `qwen3-next-small`, ...) rendered as Hugging Face `config.json` dicts.

A benchmark needs the real architecture, not the real weights: engines serve these configs with `--load-format
dummy` or with the random weights written here. Key sets follow what vLLM 0.26.0 accepted on the H200
(`docs/gpu.md`); scaling overrides (`--layers`, `--hidden`, `--vocab`) keep each architecture's invariants.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmsweep.errors import ConfigError

Config = dict[str, Any]

SUPPORTED_MODEL_TYPES = ("llama", "qwen3_moe", "qwen3_next")


@dataclass(frozen=True)
class Preset:
    """A named shape: the function that renders its config and a line of help."""

    name: str
    summary: str
    build: Callable[[], Config]


def _llama(hidden: int, intermediate: int, layers: int, heads: int, kv_heads: int, max_pos: int = 8192) -> Config:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": 32000,
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "head_dim": hidden // heads,
        "hidden_act": "silu",
        "max_position_embeddings": max_pos,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def _qwen3_moe() -> Config:
    return {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "vocab_size": 32000,
        "hidden_size": 2048,
        "intermediate_size": 6144,
        "num_hidden_layers": 8,
        "num_attention_heads": 32,
        "num_key_value_heads": 4,
        "head_dim": 128,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "rope_theta": 1000000.0,
        "attention_bias": False,
        "decoder_sparse_step": 1,
        "moe_intermediate_size": 512,
        "num_experts": 64,
        "num_experts_per_tok": 8,
        "norm_topk_prob": True,
        "mlp_only_layers": [],
        "output_router_logits": False,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


def _qwen3_next() -> Config:
    # The exact key set vLLM 0.26.0 served on the H200 (MTP with synthetic acceptance, 2026-11-29).
    return {
        "architectures": ["Qwen3NextForCausalLM"],
        "model_type": "qwen3_next",
        "vocab_size": 32000,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 8,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "linear_conv_kernel_dim": 4,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 32,
        "moe_intermediate_size": 512,
        "shared_expert_intermediate_size": 512,
        "num_experts_per_tok": 10,
        "num_experts": 64,
        "decoder_sparse_step": 1,
        "norm_topk_prob": True,
        "mlp_only_layers": [],
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000000,
        "partial_rotary_factor": 0.25,
        "num_nextn_predict_layers": 1,
        "hidden_act": "silu",
        "full_attention_interval": 4,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }


PRESETS: dict[str, Preset] = {
    p.name: p
    for p in (
        Preset("tiny", "2-layer Llama, hidden 64: CPU smoke tests", lambda: _llama(64, 128, 2, 4, 2, max_pos=2048)),
        Preset("llama-160m", "12-layer Llama, hidden 768", lambda: _llama(768, 2048, 12, 12, 4)),
        Preset(
            "llama-1b", "TinyLlama-1.1B shape: 22 layers, hidden 2048, GQA 32/4", lambda: _llama(2048, 5632, 22, 32, 4)
        ),
        Preset(
            "llama-draft", "4-layer Llama, hidden 768: the draft model of `model synth --with-draft`",
            lambda: _llama(768, 2048, 4, 12, 4),
        ),
        Preset(
            "qwen3-moe-small",
            "Qwen3-MoE (Qwen3-30B-A3B family), scaled down: 8 layers, hidden 2048, 64 experts top-8",
            _qwen3_moe,
        ),
        Preset(
            "qwen3-next-small",
            "Qwen3-Next (Qwen3.5 text architecture), scaled down: Gated-DeltaNet 3 of 4 layers, gated attention, "
            "64 experts top-10, 1 MTP layer; 8 layers, hidden 2048",
            _qwen3_next,
        ),
    )
}

DRAFT_PRESET = "llama-draft"


def preset_config(name: str) -> Config:
    """The config dict of a named preset."""
    try:
        return PRESETS[name].build()
    except KeyError:
        raise ConfigError(
            f"unknown model preset {name!r}",
            fix=f"use one of {', '.join(PRESETS)} or a path to a config.json",
        ) from None


def model_type(config: Config) -> str:
    """The config's `model_type`, checked against the architectures llmsweep knows the tensors of."""
    kind = str(config.get("model_type", ""))
    if kind not in SUPPORTED_MODEL_TYPES:
        raise ConfigError(
            f"config.json has model_type {kind!r}, whose tensors llmsweep does not know",
            fix="use --weights none (engines fill weights with --load-format dummy), "
            f"or one of {', '.join(SUPPORTED_MODEL_TYPES)}",
        )
    return kind


def check_heads(cfg: Config, where: str) -> None:
    """Refuse a config's attention heads that no engine serves as written (`where` names the file): a hidden size that
    is not a multiple of the heads, where that sets the head size (no `head_dim`; a Llama always — transformers'
    LlamaConfig.validate_architecture refuses it whatever head_dim says, while vLLM would floor it: hidden 64 over 3
    heads gave a q_proj of [63, 64]); or query heads that are not a multiple of the KV heads (grouped-query attention
    shares each KV head among a whole number of query heads). `scale_config` keeps both for `--hidden`."""
    hidden, heads = cfg.get("hidden_size"), cfg.get("num_attention_heads")
    if not isinstance(hidden, int) or not isinstance(heads, int) or hidden < 1 or heads < 1:
        return  # an architecture without them (or not numbers): its own loader's question
    llama = cfg.get("model_type") == "llama"
    if hidden % heads and (llama or not cfg.get("head_dim")):
        lower, upper = hidden // heads * heads, (hidden // heads + 1) * heads
        divisors = [d for d in range(heads - 1, 0, -1) if hidden % d == 0][:1] + \
            [d for d in range(heads + 1, hidden + 1) if hidden % d == 0][:1]
        why = ("transformers' LlamaConfig refuses it, head_dim or not" if llama else
               f"without head_dim its head size would be {hidden / heads:.4g}, which engines floor differently")
        raise ConfigError(
            f"{where}: hidden_size {hidden} is not a multiple of num_attention_heads {heads} ({why})",
            fix=f"set hidden_size to a multiple of {heads} ({', '.join(str(v) for v in (lower, upper) if v)}) or "
                f"num_attention_heads to a divisor of {hidden} ({' or '.join(str(d) for d in divisors)})"
                + ("" if llama else ", or give head_dim explicitly") + f" in {where}")
    kv = cfg.get("num_key_value_heads")
    if isinstance(kv, int) and kv >= 1 and heads % kv:
        raise ConfigError(
            f"{where}: num_attention_heads {heads} is not a multiple of num_key_value_heads {kv} (each KV head serves "
            "a whole number of query heads)",
            fix=f"set num_key_value_heads to a divisor of {heads} (e.g. {math.gcd(heads, kv)}) in {where}")


def _round_to(value: float, multiple: int) -> int:
    return max(multiple, round(value / multiple) * multiple)


def scale_config(config: Config, *, layers: int | None = None, hidden: int | None = None) -> Config:
    """Change depth and width while keeping head size, GQA ratio, MLP ratio and the hybrid layer pattern valid."""
    cfg = dict(config)
    if layers is not None:
        if layers < 1:
            raise ConfigError(f"--layers {layers} must be at least 1", fix="pass a positive layer count")
        interval = cfg.get("full_attention_interval")
        if interval and layers % int(interval):
            raise ConfigError(
                f"--layers {layers} is not a multiple of full_attention_interval {interval}: the hybrid model would "
                "end without its full-attention layer",
                fix=f"use a multiple of {interval}",
            )
        cfg["num_hidden_layers"] = layers
        types = cfg.get("layer_types")
        if isinstance(types, list) and types:  # one entry a layer: the pattern repeated (or cut) to the new depth
            cfg["layer_types"] = [types[i % len(types)] for i in range(layers)]
    if hidden is not None:
        old = int(cfg["hidden_size"])
        if cfg.get("model_type") == "llama":
            head_dim = int(cfg.get("head_dim") or old // int(cfg["num_attention_heads"]))
            if hidden % head_dim:
                raise ConfigError(
                    f"--hidden {hidden} is not a multiple of the head size {head_dim}",
                    fix=f"use a multiple of {head_dim}",
                )
            heads = hidden // head_dim
            kv = int(cfg["num_key_value_heads"])
            cfg["num_attention_heads"] = heads
            cfg["num_key_value_heads"] = math.gcd(heads, kv)
            cfg["head_dim"] = head_dim
        elif hidden % 128:
            raise ConfigError(f"--hidden {hidden} must be a multiple of 128", fix="round it to a multiple of 128")
        cfg["intermediate_size"] = _round_to(int(cfg["intermediate_size"]) * hidden / old, 64)
        for key in ("moe_intermediate_size", "shared_expert_intermediate_size"):
            if key in cfg:
                cfg[key] = _round_to(int(cfg[key]) * hidden / old, 64)
        cfg["hidden_size"] = hidden
    return cfg
