"""Models: identity (family, model-prefix, HF ids) and the shape numbers that size weights and KV cache.

A recipe names a model by HF id (``amd/Qwen3.5-397B-A17B-MXFP4``) and by InferenceX model-prefix (``qwen3.5``); the
golden curves name it by checkpoint key (``qwen3.5-397b-a17b-nvfp4``). One lookup accepts all three, so the planner,
the policy rules and the simulator agree on which model a job serves and how many bytes it moves.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsweep.catalog.precision import FORMATS, NAME_ALTERNATION, kv_bytes_per_element, named_format
from llmsweep.catalog.sources import Origin, build_models, cached, catalog_dirs, entry_fix
from llmsweep.errors import ConfigError
from llmsweep.words import noun

MODELS_FILE = "models.yaml"
"""The models catalog's file name, packaged and in a user catalog directory."""
MODEL_KEY = "the served id under hf_ids"
"""How a models.yaml entry is found for a served model (the fix that asks for one says it)."""

ContextClass = Literal["1m", "256k"]
AttentionPhase = Literal["prefill", "decode"]
"""Which form of attention a token's step computes: a prompt token's (`prefill`) or a decoding token's (`decode`)."""

#: Bytes per parameter of a weight format (`catalog.precision`). Real checkpoints keep embeddings, norms and often
#: attention in higher precision, so weight_bytes() is a lower bound for quantised ids.
WEIGHT_BYTES_PER_PARAM: dict[str, float] = {name: f.bytes_per_param for name, f in FORMATS.items()}

_VARIANT_SUFFIX = re.compile(rf"(?:[-_](?:{NAME_ALTERNATION}|preview|v\d+|dynamic))+$")


def _bytes(table: dict[str, float], dtype: str, what: str) -> float:
    try:
        return table[dtype.strip().lower()]
    except KeyError:
        raise ConfigError(
            f"unknown {what} dtype {dtype!r}", fix=f"use one of {', '.join(sorted(table))}"
        ) from None


SparseKind = Literal["dsa", "csa-hca"]
"""How a model's attention skips context: `dsa`, DeepSeek Sparse Attention (DeepSeek-V3.2, GLM-5): a lightning
indexer scores every cached token and each query token attends its `index_topk` best; `csa-hca`, DeepSeek-V4's
compressed attention (compressed sparse and heavily compressed layers with a sliding window), which the simulator does
not model."""


class SparseAttentionSpec(BaseModel):
    """A model's sparse attention, as its config.json gives it: what each query token attends instead of its whole
    context. The simulator prices `dsa` with `index_topk` recorded (`sim.inputs.sparse_attention`); any other (an
    unrecorded top-k, DeepSeek-V4's `csa-hca`) is priced dense and the result says so (`provenance.unmodelled`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: SparseKind = Field(description="dsa (indexer + top-k) or csa-hca (DeepSeek-V4's compressed attention).")
    index_topk: int | None = Field(
        default=None, gt=0, description="config.json `index_topk`: context tokens one query token attends per "
                                        "layer; None: not recorded.")
    index_heads: int | None = Field(default=None, gt=0, description="config.json `index_n_heads`: indexer heads.")
    index_head_dim: int | None = Field(default=None, gt=0, description="config.json `index_head_dim`.")


class AttentionSpec(BaseModel):
    """Attention layers that keep a per-token KV cache."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["gqa", "mla"] = Field(description="gqa (MHA when kv_heads == heads) or mla (latent KV).")
    heads: int = Field(gt=0, description="Query heads.")
    kv_heads: int | None = Field(default=None, description="KV heads (gqa).")
    head_dim: int | None = Field(default=None, description="Head dimension (gqa).")
    kv_lora_rank: int | None = Field(default=None, description="MLA latent (compressed KV) width.")
    qk_rope_head_dim: int | None = Field(default=None, description="MLA decoupled rope key width, cached too.")
    qk_nope_head_dim: int | None = Field(
        default=None, description="MLA: a query/key head's width without rope (config.json `qk_nope_head_dim`), "
                                  "what a prompt's attention computes over; None: not recorded.")
    v_head_dim: int | None = Field(
        default=None, description="MLA: a value head's width (config.json `v_head_dim`); None: not recorded.")
    layers: int | None = Field(default=None, description="Layers with full attention; default: every layer.")
    sparse: SparseAttentionSpec | None = Field(
        default=None, description="Sparse attention over the cached context (DSA, DeepSeek-V4's CSA/HCA); None: "
                                  "each query token attends its whole context.")

    @model_validator(mode="after")
    def _shape_complete(self) -> AttentionSpec:
        if self.kind == "gqa" and (self.kv_heads is None or self.head_dim is None):
            raise ValueError("gqa attention needs kv_heads and head_dim")
        if self.kind == "mla" and (self.kv_lora_rank is None or self.qk_rope_head_dim is None):
            raise ValueError("mla attention needs kv_lora_rank and qk_rope_head_dim")
        if self.kind == "mla" and (self.qk_nope_head_dim is None) != (self.v_head_dim is None):
            raise ValueError("mla attention needs both qk_nope_head_dim and v_head_dim, or neither")
        return self

    def widths(self, phase: AttentionPhase) -> tuple[int, int] | None:
        """(query-key width, attention-value width) summed over the query heads: what one query token multiplies
        against each token of context it attends to, per layer (2 FLOPs per unit each). GQA: heads x head_dim both
        ways, in either phase. MLA, as engines compute it (vLLM `v1/attention/backends/mla/common.py`, SGLang's
        `forward_absorb`): a prompt (`prefill`) in its MHA form, heads x (qk_nope + qk_rope) and heads x v_head_dim
        (None when those are not recorded); a decoding token (`decode`, speculative verification included) in its
        absorbed MQA form over the cached latent, heads x (kv_lora_rank + qk_rope) and heads x kv_lora_rank."""
        if self.kind == "gqa":
            width = self.heads * (self.head_dim or 0)
            return width, width
        latent, rope = self.kv_lora_rank or 0, self.qk_rope_head_dim or 0
        if phase == "decode":
            return self.heads * (latent + rope), self.heads * latent
        if self.qk_nope_head_dim is None or self.v_head_dim is None:
            return None
        return self.heads * (self.qk_nope_head_dim + rope), self.heads * self.v_head_dim


class LinearAttentionSpec(BaseModel):
    """Linear-attention (Gated DeltaNet / Mamba-like) layers: a constant recurrent state per sequence, no KV."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: str = Field(description="e.g. gated-deltanet.")
    layers: int = Field(gt=0)
    key_heads: int = Field(gt=0)
    value_heads: int = Field(gt=0)
    key_head_dim: int = Field(gt=0)
    value_head_dim: int = Field(gt=0)
    conv_kernel: int = Field(default=4, gt=0)


class VisionTowerSpec(BaseModel):
    """A multimodal checkpoint's vision encoder, as config.json's `vision_config` names its size: SGLang sizes its
    memory fraction down for it (`engines.sglang_memory`), reading `num_hidden_layers` and `hidden_size` there."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    num_hidden_layers: int | None = Field(
        default=None, gt=0, description="`vision_config.num_hidden_layers`; None where the config names its depth "
                                        "otherwise (Qwen3-VL and Qwen3.5: `depth`), so an engine reading this name "
                                        "finds none.")
    depth: int | None = Field(default=None, gt=0, description="`vision_config.depth`, where the config names it so.")
    hidden_size: int = Field(gt=0, description="`vision_config.hidden_size`.")

    @model_validator(mode="after")
    def _has_a_depth(self) -> VisionTowerSpec:
        if self.num_hidden_layers is None and self.depth is None:
            raise ValueError("a vision tower needs num_hidden_layers or depth")
        return self


class MoESpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    experts: int = Field(gt=0, description="Routed experts per MoE layer.")
    top_k: int = Field(gt=0, description="Routed experts per token.")
    shared_experts: int = Field(default=0, ge=0)


class ModelSpec(BaseModel):
    """One model with its identity, shape and provenance."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(description="Canonical lower-case id, e.g. 'qwen3.5-397b-a17b'.")
    name: str
    family: str = Field(description="Model family, e.g. 'qwen3.5'.")
    prefix: str = Field(description="InferenceX model-prefix, e.g. 'qwen3.5', 'dsv4', 'minimaxm3'.")
    hf_ids: list[str] = Field(default_factory=list, description="Hugging Face ids, precision variants included.")
    aliases: list[str] = Field(default_factory=list, description="Other names: golden-curve checkpoint keys etc.")
    native_precision: str = Field(default="bf16", description="Precision of the un-suffixed release checkpoint.")
    total_params_b: float = Field(gt=0, description="Total parameters, billions.")
    active_params_b: float = Field(gt=0, description="Parameters active per token, billions.")
    layers: int = Field(gt=0, description="Decoder layers (MTP layers excluded).")
    hidden_size: int = Field(gt=0)
    vocab_size: int | None = None
    hf_architecture: str | None = Field(
        default=None, description="config.json `architectures[0]`: what engines key per-architecture defaults on "
                                  "(SGLang's attention-backend overrides); None: not recorded.")
    attention: AttentionSpec
    linear_attention: LinearAttentionSpec | None = None
    moe: MoESpec | None = None
    vision: VisionTowerSpec | None = Field(
        default=None, description="The vision encoder of a multimodal checkpoint; None: text-only, or not recorded.")
    native_context: int = Field(gt=0, description="Native context length, tokens.")
    context_class_override: ContextClass | None = Field(
        default=None, alias="context_class", description="1m | 256k; default from native_context."
    )
    served_weights_gb: dict[str, float] = Field(
        default_factory=dict,
        description="GB of weights a launch at a precision holds where that is not the parameters at the smaller of "
                    "that format and the checkpoint's (`served_bytes_per_param`): a checkpoint an engine converts "
                    "at load (DeepSeek-V4-Pro's FP4 experts dequantized to FP8 where the GPU has no FP4 compute), "
                    "by precision; `source` says where each figure is from.")
    mtp_layers: int = Field(default=0, ge=0, description="Native multi-token-prediction layers (0: none).")
    draft_methods: list[str] = Field(default_factory=list, description="Spec-decode methods with known drafts.")
    draft_models: list[str] = Field(default_factory=list, description="HF ids of separate draft heads.")
    source: str
    estimates: dict[str, str] = Field(default_factory=dict, description="Field -> note for unsourced figures.")
    notes: str | None = None

    @model_validator(mode="after")
    def _consistent(self) -> ModelSpec:
        unknown = set(self.estimates) - set(type(self).model_fields) - {"context_class"}
        if unknown:
            raise ValueError(f"estimates names unknown {noun(len(unknown), 'field')} {sorted(unknown)}")
        if self.active_params_b > self.total_params_b:
            raise ValueError("active_params_b exceeds total_params_b")
        full = self.attention.layers if self.attention.layers is not None else self.layers
        linear = self.linear_attention.layers if self.linear_attention else 0
        if full + linear != self.layers and self.linear_attention is not None:
            raise ValueError(
                f"attention.layers ({full}) + linear_attention.layers ({linear}) != layers ({self.layers})"
            )
        return self

    # ------------------------------------------------------------------------------------------------ identity

    @property
    def context_class(self) -> ContextClass:
        """Which AgentX trace corpus the model replays: the 1M-context one or the 256k-filtered one."""
        if self.context_class_override is not None:
            return self.context_class_override
        return "1m" if self.native_context >= 1_000_000 else "256k"

    @property
    def is_hybrid(self) -> bool:
        """Linear-attention layers present (SGLang's Mamba/no_buffer paths, vLLM turns prefix caching off)."""
        return self.linear_attention is not None

    @property
    def is_moe(self) -> bool:
        return self.moe is not None

    @property
    def params_total(self) -> float:
        """Total parameters as a count (not billions)."""
        return self.total_params_b * 1e9

    @property
    def params_active(self) -> float:
        """Parameters read per token as a count (not billions)."""
        return self.active_params_b * 1e9

    @property
    def n_experts(self) -> int:
        return self.moe.experts if self.moe else 0

    @property
    def experts_per_token(self) -> int:
        return self.moe.top_k if self.moe else 0

    @property
    def full_attention_layers(self) -> int:
        return self.attention.layers if self.attention.layers is not None else self.layers

    def checkpoint_precision(self, hf_id: str | None = None) -> str:
        """Weight precision a checkpoint id states (``-FP8`` -> fp8, ``-NVFP4`` -> nvfp4); else the native one."""
        return checkpoint_precision(hf_id or "", default=self.native_precision)

    def is_estimate(self, field: str) -> bool:
        return field in self.estimates

    # ------------------------------------------------------------------------------------------------ sizes

    def kv_bytes_per_token(self, dtype: str = "bf16") -> int:
        """KV-cache bytes one token occupies across the whole model (all layers, all KV heads).

        GQA: 2 (K and V) x full-attention layers x KV heads x head dim; MLA: layers x (latent + rope key). Linear
        attention layers add nothing per token (see :meth:`linear_state_bytes_per_sequence`).
        """
        per_elem = kv_bytes_per_element(dtype)
        a = self.attention
        if a.kind == "mla":
            elems = self.full_attention_layers * (a.kv_lora_rank or 0) + self.full_attention_layers * (
                a.qk_rope_head_dim or 0
            )
        else:
            elems = 2 * self.full_attention_layers * (a.kv_heads or 0) * (a.head_dim or 0)
        return math.ceil(elems * per_elem)

    def kv_bytes_per_token_per_gpu(self, dtype: str = "bf16", tp: int = 1) -> int:
        """KV bytes per token on one GPU of a TP group: GQA heads split (replicated when TP > KV heads); MLA's
        latent is replicated on every rank."""
        if tp < 1:
            raise ConfigError(f"tensor parallel size must be >= 1, got {tp}", fix="use tp >= 1")
        a = self.attention
        if a.kind == "mla":
            return self.kv_bytes_per_token(dtype)
        per_elem = kv_bytes_per_element(dtype)
        heads_per_gpu = math.ceil((a.kv_heads or 0) / tp)
        return math.ceil(2 * self.full_attention_layers * heads_per_gpu * (a.head_dim or 0) * per_elem)

    def attention_flops_per_context_token(self, phase: AttentionPhase) -> float:
        """FLOPs one query token of `phase` spends per token of context it attends to, over the whole model: 2 x
        (query-key + attention-value width, :meth:`AttentionSpec.widths`) x full-attention layers. Linear-attention
        layers keep a constant state and add nothing per context token. Where the widths are not recorded (an MLA
        entry without its head dims) the query width is taken as `hidden_size` both ways, the dense-MHA estimate
        (4 x layers x hidden), and the entry says so in its `estimates`."""
        widths = self.attention.widths(phase)
        qk, av = widths if widths is not None else (self.hidden_size, self.hidden_size)
        return 2.0 * (qk + av) * self.full_attention_layers

    def sparse_attention_gap(self) -> str | None:
        """Why the simulator prices this model's sparse attention as dense attention over the whole context, in
        words a result's `provenance.unmodelled` carries; None where its attention is dense, or DSA with its top-k
        and indexer recorded (what :meth:`indexer_flops_per_context_token` and the top-k price)."""
        sparse = self.attention.sparse
        if sparse is None:
            return None
        if sparse.kind != "dsa":
            return (f"{self.name}'s compressed sparse attention ({sparse.kind}: fewer, compressed entries and a "
                    "sliding window in place of the whole context; priced as dense attention over every context "
                    "token)")
        missing = [name for name in ("index_topk", "index_heads", "index_head_dim") if getattr(sparse, name) is None]
        if missing:
            return (f"{self.name}'s sparse attention (DSA; the catalog records no {', '.join(missing)}: priced as "
                    "dense attention over every context token)")
        return None

    @property
    def sparse_topk(self) -> int | None:
        """Context tokens one query token attends per full-attention layer where the simulator prices sparse
        attention (DSA's `index_topk`); None where it prices it dense (:meth:`sparse_attention_gap`)."""
        sparse = self.attention.sparse
        return sparse.index_topk if sparse is not None and self.sparse_attention_gap() is None else None

    def indexer_flops_per_context_token(self) -> float:
        """FLOPs a query token's DSA indexer spends per token of context, over the whole model: 2 x index heads x
        index head dim on every full-attention layer (it scores every cached token, densely); 0 where the sparse
        attention is not priced (:attr:`sparse_topk`)."""
        sparse = self.attention.sparse
        if sparse is None or self.sparse_topk is None:
            return 0.0
        return 2.0 * (sparse.index_heads or 0) * (sparse.index_head_dim or 0) * self.full_attention_layers

    def indexer_bytes_per_context_token(self) -> float:
        """Bytes of DSA indexer keys a query token reads per token of context, over the whole model: one FP8 key of
        the index head dim and its fp32 scale per cached token per full-attention layer (vLLM's indexer cache:
        `head_dim + head_dim // 128 * 4`, 132 bytes at 128), whatever the KV cache's dtype; 0 where the sparse
        attention is not priced."""
        sparse = self.attention.sparse
        if sparse is None or self.sparse_topk is None:
            return 0.0
        dim = sparse.index_head_dim or 0
        return float((dim + math.ceil(dim / 128) * 4) * self.full_attention_layers)

    def linear_state_bytes_per_sequence(self, state_dtype: str = "fp32", conv_dtype: str = "bf16") -> int:
        """Constant recurrent state one sequence holds in the linear-attention layers (0 for non-hybrid models)."""
        la = self.linear_attention
        if la is None:
            return 0
        state = la.layers * la.value_heads * la.key_head_dim * la.value_head_dim
        conv_width = 2 * la.key_heads * la.key_head_dim + la.value_heads * la.value_head_dim
        conv = la.layers * (la.conv_kernel - 1) * conv_width
        return math.ceil(state * kv_bytes_per_element(state_dtype)) + math.ceil(
            conv * kv_bytes_per_element(conv_dtype)
        )

    def weight_bytes(self, dtype: str | None = None) -> int:
        """Bytes of all weights in a format (default: native precision); block-scale overhead included."""
        return math.ceil(self.params_total * self._bytes_per_param(dtype))

    def served_bytes_per_param(self, precision: str, hf_id: str | None = None) -> float:
        """Bytes per weight a launch at `precision` holds: the entry's `served_weights_gb` for that precision where
        it records one (a checkpoint the engine converts at load: DeepSeek-V4-Pro served at "fp8" on MI300X/MI325X,
        whose FP4 experts vLLM dequantizes to FP8), else the checkpoint's own format where it is smaller (an
        FP4-native checkpoint served at "fp8" otherwise keeps its FP4 experts), else `precision`'s. The one rule for
        it: the simulator's sizing (`sim.inputs.perf_inputs`) and the HBM-fit policy rule (`served_weight_bytes`)
        both read it."""
        served = self.served_weights_gb.get(precision.strip().lower())
        if served is not None:
            return served * 1e9 / self.params_total
        return min(self._bytes_per_param(precision), self._bytes_per_param(self.checkpoint_precision(hf_id)))

    def served_weight_bytes(self, precision: str, hf_id: str | None = None) -> int:
        """Bytes of the weights a launch at `precision` holds (`served_bytes_per_param`)."""
        return math.ceil(self.params_total * self.served_bytes_per_param(precision, hf_id))

    def active_weight_bytes(self, dtype: str | None = None) -> int:
        """Bytes of the weights one token reads (MoE: routed top-k + shared + dense parts)."""
        return math.ceil(self.params_active * self._bytes_per_param(dtype))

    def _bytes_per_param(self, dtype: str | None) -> float:
        return _bytes(WEIGHT_BYTES_PER_PARAM, dtype or self.native_precision, "weight")


def checkpoint_precision(hf_id: str, default: str = "bf16") -> str:
    """Precision stated by an HF id's suffix: ``-FP8`` fp8, ``-NVFP4`` nvfp4, ``-MXFP4-v2`` mxfp4; else ``default``."""
    p = named_format(hf_id)
    if p is None:
        return default
    return {"w4a16": "int4", "fp16": "bf16"}.get(p, p)


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def _base_name(name: str) -> str:
    """``amd/DeepSeek-R1-0528-MXFP4-v2`` -> ``deepseek-r1-0528``: org and precision/variant suffixes dropped."""
    return _VARIANT_SUFFIX.sub("", _norm(name).rsplit("/", 1)[-1])


def _inject_id(key: str, raw: dict[str, Any]) -> dict[str, Any]:
    raw.setdefault("id", key.lower())
    return raw


@cached
def _catalog(dirs: tuple[Path, ...]) -> dict[str, tuple[ModelSpec, Origin]]:
    return build_models(MODELS_FILE, "models", ModelSpec, dirs, inject=_inject_id)


@cached
def _names(dirs: tuple[Path, ...]) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """(exact names -> id, base names -> id, prefix -> id). The first model listed for a prefix owns it."""
    exact: dict[str, str] = {}
    base: dict[str, str] = {}
    prefix: dict[str, str] = {}
    for key, (spec, _) in _catalog(dirs).items():
        names = [spec.id, spec.name, *spec.aliases, *spec.hf_ids]
        for n in names:
            exact[_norm(n)] = key
            exact.setdefault(_norm(n.rsplit("/", 1)[-1]), key)
            base.setdefault(_base_name(n), key)
        prefix.setdefault(spec.prefix.lower(), key)
    return exact, base, prefix


def all_models() -> list[ModelSpec]:
    """Every model, packaged and user-supplied."""
    return [spec for spec, _ in _catalog(catalog_dirs()).values()]


def find_model(name: str) -> ModelSpec | None:
    """Like :func:`get_model`, None instead of an error."""
    dirs = catalog_dirs()
    catalog = _catalog(dirs)
    exact, base, prefix = _names(dirs)
    n = _norm(name)
    key = exact.get(n) or exact.get(n.rsplit("/", 1)[-1]) or prefix.get(n) or base.get(_base_name(n))
    return catalog[key][0] if key else None


def get_model(name_or_hf_id_or_prefix: str) -> ModelSpec:
    """A model by canonical id, HF id (any precision variant, any org), golden checkpoint key or model-prefix."""
    spec = find_model(name_or_hf_id_or_prefix)
    if spec is None:
        known = ", ".join(f"{m.id} ({m.prefix})" for m in all_models())
        raise ConfigError(
            f"unknown model {name_or_hf_id_or_prefix!r}",
            fix=f"use an HF id, id or model-prefix of: {known}; or {entry_fix(MODELS_FILE, ModelSpec, MODEL_KEY)}",
        )
    return spec


def model_for_prefix(prefix: str) -> ModelSpec | None:
    """The model an InferenceX model-prefix (``qwen3.5``, ``dsv4``, ``kimik3``) names; None if unknown."""
    dirs = catalog_dirs()
    key = _names(dirs)[2].get(prefix.strip().lower())
    return _catalog(dirs)[key][0] if key else None
