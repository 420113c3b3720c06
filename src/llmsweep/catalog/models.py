"""Models: identity (family, model-prefix, HF ids) and the shape numbers that size weights and KV cache.

A recipe names a model by HF id (``amd/Qwen3.5-397B-A17B-MXFP4``) and by InferenceX model-prefix (``qwen3.5``); the
golden curves name it by checkpoint key (``qwen3.5-397b-a17b-nvfp4``). One lookup accepts all three, so the planner,
the policy rules and the simulator agree on which model a job serves and how many bytes it moves.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsweep.catalog.precision import FORMATS, NAME_ALTERNATION, kv_bytes_per_element, named_format
from llmsweep.catalog.sources import Origin, build_models, cached, catalog_dirs, entry_fix
from llmsweep.errors import ConfigError
from llmsweep.words import count_of, noun

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
compressed attention: every layer keeps a sliding window of uncompressed entries, its CSA layers (compression ratio 4)
also entries compressed 4x of which an indexer picks the top `index_topk` per query token, its HCA layers (ratio 128)
entries compressed 128x, attended whole."""

CSA_RATIO = 4
"""DeepSeek-V4's compressed sparse attention layers: one cache entry per 4 tokens, an indexer picking the top-k."""
HCA_RATIO = 128
"""DeepSeek-V4's heavily compressed attention layers: one cache entry per 128 tokens, attended whole."""
COMPRESS_RATIOS = (0, CSA_RATIO, HCA_RATIO)
"""The per-layer compression ratios DeepSeek-V4's code knows (config.json `compress_ratios`; 0: the sliding window
only), as SGLang's `get_compress_state_ring_size` asserts them."""

EntryDtype = Literal["fp8", "bf16"]
IndexDtype = Literal["fp8", "fp4"]

_FP8_ENTRY_SCALE_BLOCK = 64
"""DeepSeek-V4's FP8 cache entry: one UE8M0 scale byte per 64 non-rope values (SGLang `DeepSeekV4SingleKVPool`
`quantize_block_size`)..."""
_FP8_ENTRY_PAD = 1
"""...and one pad byte (its `scale_pad`): 448 + 64 x 2 + 7 + 1 = 584 bytes at head_dim 512, rope 64."""


def indexer_key_bytes(index_head_dim: int, dtype: IndexDtype = "fp8") -> int:
    """Bytes one cached indexer key takes: FP8, the key and one fp32 scale per 128 values (vLLM's and SGLang's
    indexer caches: `head_dim + head_dim // 128 * 4`, 132 at 128); FP4, the packed key and one scale byte per 32
    (SGLang's `get_dsv4_indexer_bytes_per_token` with `--enable-deepseek-v4-fp4-indexer`: 68 at 128)."""
    if dtype == "fp4":
        return index_head_dim // 2 + math.ceil(index_head_dim / 32)
    return index_head_dim + math.ceil(index_head_dim / 128) * 4


class ContextTerm(NamedTuple):
    """One part of what a query token's attention reads and computes over its context, over the whole model, as the
    simulator prices a sparse or compressed attention (:meth:`ModelSpec.context_terms`): per context token it
    covers, capped at `cap` context tokens per query token (None: its whole context)."""

    cap: int | None
    """Context tokens one query token covers at most (a top-k, a window; None: every context token)."""
    bytes_per_token: float
    """Bytes a decoding sequence reads per covered context token."""
    prefill_flops: float
    """FLOPs a prompt token spends per covered context token."""
    decode_flops: float
    """FLOPs a decoding (or verified) token spends per covered context token."""


class SparseAttentionSpec(BaseModel):
    """A model's sparse attention, as its config.json gives it: what each query token attends instead of its whole
    context. The simulator prices `dsa` with its top-k and indexer recorded, and `csa-hca` from its per-layer
    compression (:meth:`ModelSpec.context_terms`); a DSA without them is priced dense and the result says so
    (`provenance.unmodelled`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: SparseKind = Field(description="dsa (indexer + top-k) or csa-hca (DeepSeek-V4's compressed attention).")
    index_topk: int | None = Field(
        default=None, gt=0, description="config.json `index_topk`: entries one query token attends per (DSA, or "
                                        "CSA) layer; None: not recorded.")
    index_heads: int | None = Field(default=None, gt=0, description="config.json `index_n_heads`: indexer heads.")
    index_head_dim: int | None = Field(default=None, gt=0, description="config.json `index_head_dim`.")
    index_dtype: IndexDtype = Field(
        default="fp8", description="How the engine caches indexer keys: fp8 (the key and an fp32 scale per 128 "
                                   "values, vLLM's and SGLang's default) or fp4 (SGLang's DeepSeek-V4 FP4 indexer).")
    window: int | None = Field(
        default=None, gt=0, description="csa-hca: config.json `sliding_window`, the uncompressed recent tokens every "
                                        "layer keeps and attends.")
    compress_ratios: tuple[int, ...] | None = Field(
        default=None, description="csa-hca: config.json `compress_ratios`, one per layer, the MTP layers' last (0: "
                                  "window only; 4: CSA; 128: HCA). Newer configs spell it `compress_rates` and "
                                  "`layer_types`: map each layer's type to its rate.")
    entry_dtype: EntryDtype | None = Field(
        default=None, description="csa-hca: how the engine stores one cache entry (window or compressed row), "
                                  "whatever --kv-cache-dtype says: fp8 (unset: the engines' default), FP8 non-rope "
                                  "values with a UE8M0 scale per 64 and BF16 rope values (SGLang's "
                                  "DeepSeekV4SingleKVPool, vLLM's V4 layout: 584 bytes at head_dim 512), or bf16 "
                                  "(head_dim x 2: SGLang's ROCm unified-KV Triton backend, an environment opt-in).")

    @model_validator(mode="after")
    def _compressed_shape(self) -> SparseAttentionSpec:
        if self.kind != "csa-hca":
            if self.window is not None or self.compress_ratios is not None or self.entry_dtype is not None:
                raise ValueError("window, compress_ratios and entry_dtype belong to a csa-hca sparse attention")
            return self
        if self.window is None or self.compress_ratios is None:
            raise ValueError("csa-hca sparse attention needs window (config.json sliding_window) and "
                             "compress_ratios (config.json compress_ratios)")
        odd = sorted(set(self.compress_ratios) - set(COMPRESS_RATIOS))
        if odd:
            raise ValueError(f"compress_ratios holds {odd}: DeepSeek-V4 layers are compressed "
                             f"{', '.join(map(str, COMPRESS_RATIOS))} (0: window only)")
        missing = [name for name in ("index_topk", "index_heads", "index_head_dim") if getattr(self, name) is None]
        if CSA_RATIO in self.compress_ratios and missing:
            raise ValueError(f"csa-hca sparse attention with CSA layers needs {', '.join(missing)} "
                             "(config.json index_topk, index_n_heads, index_head_dim)")
        return self


class AttentionSpec(BaseModel):
    """Attention layers that keep a per-token KV cache."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["gqa", "mla"] = Field(
        description="gqa (MHA when kv_heads == heads) or mla (latent KV, one vector a token cached whole on every GPU; "
                    "DeepSeek-V4's single key-value vector too, which engines keep as an MLA cache).")
    heads: int = Field(gt=0, description="Query heads.")
    kv_heads: int | None = Field(default=None, description="KV heads (gqa).")
    head_dim: int | None = Field(
        default=None, description="Head dimension (gqa); DeepSeek-V4 (mla with csa-hca sparse attention): the width "
                                  "of its one cached vector, both key and value (config.json `head_dim`).")
    kv_lora_rank: int | None = Field(default=None, description="MLA latent (compressed KV) width.")
    qk_rope_head_dim: int | None = Field(
        default=None, description="MLA decoupled rope key width, cached too; DeepSeek-V4: the rope part of head_dim.")
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
        if self.compressed:
            if self.kind != "mla" or self.head_dim is None or self.qk_rope_head_dim is None \
                    or self.kv_lora_rank is not None:
                raise ValueError("csa-hca sparse attention is DeepSeek-V4's: mla with head_dim and qk_rope_head_dim "
                                 "(config.json), no kv_lora_rank")
            if self.qk_rope_head_dim >= self.head_dim:
                raise ValueError("qk_rope_head_dim is the rope part of head_dim, so less than it")
        elif self.kind == "mla" and (self.kv_lora_rank is None or self.qk_rope_head_dim is None):
            raise ValueError("mla attention needs kv_lora_rank and qk_rope_head_dim")
        if self.kind == "mla" and (self.qk_nope_head_dim is None) != (self.v_head_dim is None):
            raise ValueError("mla attention needs both qk_nope_head_dim and v_head_dim, or neither")
        return self

    @property
    def compressed(self) -> bool:
        """DeepSeek-V4's compressed attention (`sparse.kind` csa-hca)."""
        return self.sparse is not None and self.sparse.kind == "csa-hca"

    def widths(self, phase: AttentionPhase) -> tuple[int, int] | None:
        """(query-key width, attention-value width) summed over the query heads: what one query token multiplies
        against each token of context (or cache entry) it attends to, per layer (2 FLOPs per unit each). GQA: heads x
        head_dim both ways, in either phase. MLA, as engines compute it (vLLM `v1/attention/backends/mla/common.py`,
        SGLang's `forward_absorb`): a prompt (`prefill`) in its MHA form, heads x (qk_nope + qk_rope) and heads x
        v_head_dim (None when those are not recorded); a decoding token (`decode`, speculative verification
        included) in its absorbed MQA form over the cached latent, heads x (kv_lora_rank + qk_rope) and heads x
        kv_lora_rank. DeepSeek-V4 (csa-hca): MQA over its one cached vector, key and value alike, heads x head_dim
        both ways in either phase."""
        if self.kind == "gqa" or self.compressed:
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
        ratios = self.attention.sparse.compress_ratios if self.attention.sparse is not None else None
        if ratios is not None and len(ratios) not in (self.layers, self.layers + self.mtp_layers):
            raise ValueError(f"attention.sparse.compress_ratios has {count_of(len(ratios), 'ratio')}: one a layer, "
                             f"{self.layers} (or {self.layers + self.mtp_layers} with the MTP layers, as "
                             "config.json lists them)")
        if ratios is not None and self.attention.layers is not None and self.attention.layers != self.layers:
            raise ValueError("a csa-hca model attends on every layer: leave attention.layers out")
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
        """KV-cache bytes one token of context occupies across the whole model (all layers, all KV heads), rounded up.

        GQA: 2 (K and V) x full-attention layers x KV heads x head dim; MLA: layers x (latent + rope key); a DSA
        adds its indexer's cached keys (:meth:`indexer_bytes_per_token`, whatever `dtype`); DeepSeek-V4's compressed
        attention its compressed entries and indexer keys (:meth:`compressed_bytes_per_token`, in the layout its
        engines keep whatever `dtype`). Linear attention layers add nothing per token (see
        :meth:`linear_state_bytes_per_sequence`).
        """
        per_elem = kv_bytes_per_element(dtype)
        if self.attention.compressed:
            return math.ceil(self.compressed_bytes_per_token())
        a = self.attention
        if a.kind == "mla":
            elems = self.full_attention_layers * (a.kv_lora_rank or 0) + self.full_attention_layers * (
                a.qk_rope_head_dim or 0
            )
        else:
            elems = 2 * self.full_attention_layers * (a.kv_heads or 0) * (a.head_dim or 0)
        return math.ceil(elems * per_elem) + self.indexer_bytes_per_token()

    def kv_cache_bytes_per_token(self, kv_dtype: str | None = None) -> float:
        """KV-cache bytes one token of context holds across the whole model at an engine's `--kv-cache-dtype`
        (None: its default, the model's dtype), unrounded: what the simulator sizes its KV pool, CPU tier and KV
        transfers by. Dense and MLA attention: the bf16 figure of :meth:`kv_bytes_per_token` scaled by the dtype's
        bytes per element (`catalog.precision.kv_bytes_per_element`: fp8 halves it), plus a DSA's indexer keys,
        which engines keep in FP8 whatever the dtype; DeepSeek-V4: :meth:`compressed_bytes_per_token`. Raises
        ConfigError for a dtype of no known size."""
        if self.attention.compressed:
            kv_bytes_per_element(kv_dtype or "auto")  # a dtype of no known size is refused for every model
            return self.compressed_bytes_per_token()
        return self._attended_bytes_per_token(kv_dtype) + self.indexer_bytes_per_token()

    def _attended_bytes_per_token(self, kv_dtype: str | None) -> float:
        """The bf16 KV (without a DSA's indexer keys) scaled to `kv_dtype`: what attention reads per context token
        it attends (:meth:`kv_cache_bytes_per_token`)."""
        scale = kv_bytes_per_element(kv_dtype or "auto") / kv_bytes_per_element("bf16")
        return float(self.kv_bytes_per_token("bf16") - self.indexer_bytes_per_token()) * scale

    def kv_bytes_per_token_per_gpu(self, dtype: str = "bf16", tp: int = 1) -> int:
        """KV bytes per token on one GPU of a TP group: GQA heads split (replicated when TP > KV heads); MLA's
        latent (DeepSeek-V4's compressed cache) and a DSA's indexer keys are replicated on every rank."""
        if tp < 1:
            raise ConfigError(f"tensor parallel size must be >= 1, got {tp}", fix="use tp >= 1")
        a = self.attention
        if a.kind == "mla":
            return self.kv_bytes_per_token(dtype)
        per_elem = kv_bytes_per_element(dtype)
        heads_per_gpu = math.ceil((a.kv_heads or 0) / tp)
        return math.ceil(2 * self.full_attention_layers * heads_per_gpu * (a.head_dim or 0) * per_elem) \
            + self.indexer_bytes_per_token()

    def attention_flops_per_context_token(self, phase: AttentionPhase) -> float:
        """FLOPs one query token of `phase` spends per token of context it attends to, over the whole model: 2 x
        (query-key + attention-value width, :meth:`AttentionSpec.widths`) x full-attention layers. Linear-attention
        layers keep a constant state and add nothing per context token. Where the widths are not recorded (an MLA
        entry without its head dims) the query width is taken as `hidden_size` both ways, the dense-MHA estimate
        (4 x layers x hidden), and the entry says so in its `estimates`. DeepSeek-V4 attends fewer entries than
        context tokens on most layers: the simulator prices it by :meth:`context_terms`."""
        widths = self.attention.widths(phase)
        qk, av = widths if widths is not None else (self.hidden_size, self.hidden_size)
        return 2.0 * (qk + av) * self.full_attention_layers

    def sparse_attention_gap(self) -> str | None:
        """Why the simulator prices this model's sparse attention as dense attention over the whole context, in
        words a result's `provenance.unmodelled` carries; None where its attention is dense, DeepSeek-V4's
        compressed attention (its shape is validated whole), or DSA with its top-k and indexer recorded (what
        :meth:`context_terms` prices)."""
        sparse = self.attention.sparse
        if sparse is None or sparse.kind != "dsa":
            return None
        missing = [name for name in ("index_topk", "index_heads", "index_head_dim") if getattr(sparse, name) is None]
        if missing:
            return (f"{self.name}'s sparse attention (DSA; the catalog records no {', '.join(missing)}: priced as "
                    "dense attention over every context token)")
        return None

    def indexer_bytes_per_token(self) -> int:
        """Bytes of DSA indexer keys one token of context holds, over the whole model: one key
        (:func:`indexer_key_bytes`, 132 bytes at FP8 and 128 wide) per full-attention layer, whatever the KV cache's
        dtype — what engines allocate beside the latent (vLLM's and SGLang's indexer caches, on every layer); 0
        without a DSA indexer whose head dim is recorded. DeepSeek-V4's indexer keys are in
        :meth:`compressed_bytes_per_token`."""
        sparse = self.attention.sparse
        if sparse is None or sparse.kind != "dsa" or sparse.index_head_dim is None:
            return 0
        return indexer_key_bytes(sparse.index_head_dim, sparse.index_dtype) * self.full_attention_layers

    def compressed_layers(self) -> tuple[int, int, int]:
        """DeepSeek-V4: (layers, CSA layers, HCA layers) among its `layers` (the MTP layers' ratios, listed last in
        config.json's `compress_ratios`, left out); every layer keeps the sliding window. (0, 0, 0) for any other
        attention."""
        sparse = self.attention.sparse
        if sparse is None or sparse.compress_ratios is None:
            return 0, 0, 0
        ratios = sparse.compress_ratios[:self.layers]
        return len(ratios), ratios.count(CSA_RATIO), ratios.count(HCA_RATIO)

    def cache_entry_bytes(self) -> int:
        """DeepSeek-V4: bytes one cache entry (a window token or a compressed row) takes, in the layout its engines
        keep (`sparse.entry_dtype`): fp8, the non-rope values in FP8 with a UE8M0 scale byte per 64 and a pad byte,
        the rope values in BF16 (SGLang's `DeepSeekV4SingleKVPool.get_bytes_per_token`: 448 + 128 + 7 + 1 = 584 at
        head_dim 512 and rope 64); bf16, head_dim x 2 (1024). 0 for any other attention."""
        a = self.attention
        if not a.compressed or a.sparse is None or a.head_dim is None or a.qk_rope_head_dim is None:
            return 0
        if a.sparse.entry_dtype == "bf16":
            return 2 * a.head_dim
        nope = a.head_dim - a.qk_rope_head_dim
        return nope + 2 * a.qk_rope_head_dim + math.ceil(nope / _FP8_ENTRY_SCALE_BLOCK) + _FP8_ENTRY_PAD

    def compressed_bytes_per_token(self) -> float:
        """DeepSeek-V4: what one token of context adds to its cache, over the whole model: on each CSA layer a
        quarter of an entry and of an indexer key, on each HCA layer 1/128 of an entry (DeepSeek-V4-Pro at FP8:
        30 x (584 + 132) / 4 + 31 x 584 / 128 = 5,511.4 bytes). The sliding window (window x entry bytes a layer,
        a sequence) and the compressors' state are held per request, not per token, and are not in it. 0 for any
        other attention."""
        sparse = self.attention.sparse
        if not self.attention.compressed or sparse is None:
            return 0.0
        _, csa, hca = self.compressed_layers()
        entry = self.cache_entry_bytes()
        key = indexer_key_bytes(sparse.index_head_dim, sparse.index_dtype) if sparse.index_head_dim else 0
        return csa * (entry + key) / CSA_RATIO + hca * entry / HCA_RATIO

    def context_terms(self, kv_dtype: str | None = None) -> tuple[ContextTerm, ...]:
        """What a query token's attention reads and computes over its context, as parts priced each at its own cap
        (:class:`ContextTerm`), where the simulator prices a sparse attention; () where the attention is dense (or a
        sparse one it cannot price, :meth:`sparse_attention_gap`): every context token's KV
        (:meth:`kv_cache_bytes_per_token`) and :meth:`attention_flops_per_context_token`.

        DSA: the top-k tokens' latent (its bytes at `kv_dtype`, the MLA attention's FLOPs) on every full-attention
        layer, and the indexer over the whole context (its keys, 2 x index heads x index head dim FLOPs a token a
        layer). DeepSeek-V4 (w = 2 x heads x 2 x head_dim FLOPs an entry a layer, E the entry bytes, I the indexer
        key's): the window on every layer, capped at `window` tokens (E and w a layer); the CSA layers' top-k
        entries, a cap of ratio x top-k context tokens (E / 4 and w / 4 a token a layer); and over the whole context
        the CSA indexers (I / 4 bytes, 2 x index heads x index head dim / 4 FLOPs) and the HCA layers (E / 128 and
        w / 128)."""
        sparse = self.attention.sparse
        if sparse is None or self.sparse_attention_gap() is not None:
            return ()
        heads, dim = sparse.index_heads or 0, sparse.index_head_dim or 0
        key = indexer_key_bytes(dim, sparse.index_dtype) if dim else 0
        score = 2.0 * heads * dim
        if sparse.kind == "dsa":
            layers = self.full_attention_layers
            return (ContextTerm(sparse.index_topk, self._attended_bytes_per_token(kv_dtype),
                                self.attention_flops_per_context_token("prefill"),
                                self.attention_flops_per_context_token("decode")),
                    ContextTerm(None, float(key * layers), score * layers, score * layers))
        layers, csa, hca = self.compressed_layers()
        entry = float(self.cache_entry_bytes())
        qk, av = self.attention.widths("decode") or (0, 0)
        attend = 2.0 * (qk + av)
        terms = [ContextTerm(sparse.window, entry * layers, attend * layers, attend * layers)]
        if csa:
            topk = CSA_RATIO * (sparse.index_topk or 0)
            terms.append(ContextTerm(topk, entry * csa / CSA_RATIO, attend * csa / CSA_RATIO,
                                     attend * csa / CSA_RATIO))
        whole_bytes = csa * key / CSA_RATIO + hca * entry / HCA_RATIO
        whole_flops = csa * score / CSA_RATIO + hca * attend / HCA_RATIO
        if whole_bytes or whole_flops:
            terms.append(ContextTerm(None, whole_bytes, whole_flops, whole_flops))
        return tuple(terms)

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
