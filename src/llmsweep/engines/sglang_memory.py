"""SGLang's own memory fraction (`--mem-fraction-static`) and prefill chunk (`--chunked-prefill-size`) when a launch
sets neither: what `ServerArgs._handle_gpu_memory_settings(gpu_mem)` (`python/sglang/srt/server_args.py`) computes
per launch, reproduced for the SGLang releases whose source was read (the PyPI wheels of 0.5.9, 0.5.12,
0.5.12.post1, 0.5.14, 0.5.15, 0.5.16 and 0.5.17, sha256 checked against the index, 2026-12-05; docs/simulator.md,
"The memory fraction").

What every one of those releases does, with `gpu_mem` the device's total memory in MiB (ROCm: `rocminfo`'s pool
size, CUDA: `nvidia-smi`'s `memory.total`; the hardware catalog's `hbm_gb` is that total):

- the prefill chunk and the decode CUDA-graph batch bound by memory band: below 20 GiB 2048 / 8; below 35 GiB 2048 /
  24 (80 from TP 4); below 60 GiB 4096 / 32 (160 from TP 4); below 160 GiB 8192 / 256 (512 from TP 4); from 160
  GiB (MI300X, MI325X, MI355X, B200, B300) 16384 / 512. A pinned value of either wins.
- unless `--mem-fraction-static` is given, it reserves in MiB `512 + 1.5 x max(chunk, 2048) + 2 x graph_bs +
  tp x pp / 8 x 1024`, with DP attention `+ 3 x graph_bs x dp` and `+ 1.5 x graph_bs x dp` again when graph_bs >
  300, plus the prefill (piecewise) CUDA graphs — off on ROCm in every release read (0.5.9: opt-in; 0.5.12: disabled
  on HIP; 0.5.14-0.5.17: the torch-compiled piecewise backend, HIP's default, is disabled on HIP) —, at least 10240
  MiB on a GPU of more than 60 GiB, and then takes `round((gpu_mem - reserved) / gpu_mem, 3)`.
- by release: 0.5.9 adds 2048 MiB after the floor when it speculates (EAGLE, EAGLE3, NEXTN i.e. MTP), 6144 for
  STANDALONE, none for NGRAM; 0.5.12 and 0.5.12.post1 add 4096 (6144 STANDALONE, none NGRAM); 0.5.14 on reserve
  nothing for speculation; 0.5.15 on add 2048 after the floor for a DeepEP all-to-all backend (and size a
  disaggregated worker by its role, not modelled here).
- later, `_handle_attention_backend_compatibility` multiplies `mem_fraction_static` (pinned or computed) by 0.85
  when the attention backend is `aiter` and the model config's `context_len` (the served `--context-length`, else
  the checkpoint's own) exceeds 8192 tokens: :func:`sglang_attention_backend` says which backend that is.

Only ROCm launches are reproduced: on CUDA the prefill CUDA graphs (on by default from 0.5.12, sized by capture
lists and disabled by a dozen model and launch conditions) are reserved too, which is not modelled here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llmsweep.engine_ids import SGLANG
from llmsweep.engines.base import in_launch, job_version, token_count

if TYPE_CHECKING:
    from llmsweep.catalog.engines import EngineDefault
    from llmsweep.catalog.hardware import HardwareSpec
    from llmsweep.catalog.models import ModelSpec
    from llmsweep.plan.job import Job

SGLANG_VERSIONS_READ: tuple[str, ...] = ("0.5.9", "0.5.12", "0.5.12.post1", "0.5.14", "0.5.15", "0.5.16", "0.5.17")
"""The SGLang releases whose `server_args.py` was read; any other version (or an image naming none) keeps the
simulator's 0.88 and 8192."""

SGLANG_MEMORY_FUNCTION = "ServerArgs._handle_gpu_memory_settings"
SGLANG_MEMORY_FILE = "python/sglang/srt/server_args.py"

_SPECULATIVE_RESERVE_MIB: dict[str, tuple[int, int]] = {
    "0.5.9": (2048, 6144), "0.5.12": (4096, 6144), "0.5.12.post1": (4096, 6144),
}
"""(EAGLE/EAGLE3/NEXTN, STANDALONE) MiB reserved for the draft when speculating, by release; later ones reserve none."""

_DEEPEP_RESERVE_RELEASES = frozenset({"0.5.15", "0.5.16", "0.5.17"})
"""Releases that reserve 2048 MiB more for DeepEP all-to-all buffers captured in the decode graph."""

AITER_FACTOR = 0.85
AITER_CONTEXT_ABOVE = 8192
AITER = "aiter"
AITER_HEADS_PER_RANK = frozenset({16, 128})
"""The KV heads per rank (`model_config.get_num_kv_heads(tp)`) for which SGLang picks aiter for an MLA model on ROCm
(`# TODO current aiter only support head number 16 or 128 head number`), in every release read."""
SGLANG_BACKEND_FUNCTION = "ServerArgs._get_default_attn_backend"

_ALL_READ = frozenset(SGLANG_VERSIONS_READ)
_FROM_0512 = _ALL_READ - {"0.5.9"}

SGLANG_VLM_FUNCTION = "ServerArgs.adjust_mem_fraction_for_vlm"
VLM_BASE_FACTOR = 0.95
"""`base_mem_fraction_reduction_ratio`, for a ViT of the baseline's size (ViT-L/14: 24 layers x 1024)."""
VLM_BASELINE_LAYERS, VLM_BASELINE_HIDDEN = 24, 1024
"""The baseline ViT; also what SGLang takes where `vision_config` names no `num_hidden_layers` or `hidden_size`."""
VLM_SENSITIVITY = 0.1
"""The factor moves by 0.1 for every 100 % of complexity (layers x hidden^2) above the baseline's."""
VLM_FACTOR_BOUNDS = (0.8, 1.05)
_MULTIMODAL_ARCHITECTURES = frozenset({"Qwen3_5MoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
                                       "KimiK25ForConditionalGeneration"})
"""Architectures of the model catalog that `configs/model_config.py` `multimodal_model_archs` lists in every release
read (and none disables by default, `mm_disabled_models`): SGLang serves them multimodal unless `--language-only`."""


@dataclass(frozen=True)
class _ArchitectureRule:
    """What SGLang's per-architecture adjustments (`_handle_model_specific_adjustments`, from 0.5.15 the
    `arg_groups/overrides.py` providers) do to the attention backend of one architecture on ROCm."""

    releases: frozenset[str]
    """The releases read that know the architecture with this rule."""
    forced: str | None = None
    """The backend it sets whatever the recipe names; None: none on ROCm (SGLang's default pick stands)."""


_HIP_ARCHITECTURES: dict[str, _ArchitectureRule] = {
    # DeepSeek V3/R1 and Kimi K2.5: the DeepSeek family branch sets trtllm_mla on SM100 only (and the DSA backend
    # for DeepSeek V3.2 / GLM-5 configs, which these are not).
    "DeepseekV3ForCausalLM": _ArchitectureRule(_ALL_READ),
    "KimiK25ForConditionalGeneration": _ArchitectureRule(_ALL_READ),
    # Qwen3.5 / Qwen3-Next hybrids: an SM100 default (triton or trtllm_mha) only; Qwen3 MoE: MoE runner only.
    "Qwen3_5MoeForConditionalGeneration": _ArchitectureRule(_ALL_READ),
    "Qwen3_5ForConditionalGeneration": _ArchitectureRule(_ALL_READ),
    "Qwen3NextForCausalLM": _ArchitectureRule(_ALL_READ),
    "Qwen3MoeForCausalLM": _ArchitectureRule(_ALL_READ),
    "LlamaForCausalLM": _ArchitectureRule(_ALL_READ),
    # DeepSeek V4: `attention_backend = "dsv4"` unconditionally (0.5.12, 0.5.14: arg_groups/deepseek_v4_hook.py
    # apply_deepseek_v4_defaults; 0.5.15 on: the overrides.py provider); 0.5.9 does not know the architecture.
    "DeepseekV4ForCausalLM": _ArchitectureRule(_FROM_0512, forced="dsv4"),
}
"""The architectures whose per-architecture adjustments were read in every release of
:data:`SGLANG_VERSIONS_READ` (server_args.py; from 0.5.15 also arg_groups/overrides.py): where a launch's
architecture is not here (or not recorded in the model catalog), SGLang's pick is not modelled."""


@dataclass(frozen=True)
class AttentionBackendPick:
    """The attention backend SGLang's `attention_backend` ends as for a launch, before the aiter memory factor."""

    backend: str | None
    """None: not modelled (an architecture whose adjustments were not read, or not recorded)."""
    why: str
MIB = 1024 * 1024
GIB_MIB = 1024



def sglang_chunked_prefill_default(gpu_mib: float) -> int:
    """SGLang's `chunked_prefill_size` when unset, by the GPU's total memory in MiB (the same bands in every
    release read)."""
    if gpu_mib < 35 * GIB_MIB:
        return 2048
    if gpu_mib < 60 * GIB_MIB:
        return 4096
    if gpu_mib < 160 * GIB_MIB:
        return 8192
    return 16384


def sglang_cuda_graph_max_bs_default(gpu_mib: float, tp: int) -> int:
    """SGLang's decode CUDA-graph batch bound (`cuda_graph_max_bs`, later `cuda_graph_config.decode.max_bs`) when
    unset, by the GPU's total memory in MiB and TP."""
    if gpu_mib < 20 * GIB_MIB:
        return 8
    if gpu_mib < 35 * GIB_MIB:
        return 24 if tp < 4 else 80
    if gpu_mib < 60 * GIB_MIB:
        return 32 if tp < 4 else 160
    if gpu_mib < 160 * GIB_MIB:
        return 256 if tp < 4 else 512
    return 512


@dataclass(frozen=True)
class SglangLaunch:
    """What SGLang's memory settings read of one launch (a server of `tp` x `pp` GPUs)."""

    version: str
    """The SGLang release (one of :data:`SGLANG_VERSIONS_READ` to be reproduced)."""
    gpu: str
    gpu_mib: float
    """The GPU's total memory in MiB, as the driver reports it (the hardware catalog's `hbm_gb`)."""
    rocm: bool
    tp: int
    pp: int = 1
    dp_attention: int | None = None
    """The DP size with `--enable-dp-attention` (InferenceX's dp-attn launches use dp = tp); None without."""
    speculative_algorithm: str | None = None
    """SGLang's spelling (NEXTN, EAGLE, EAGLE3, STANDALONE, NGRAM, ...); None: no speculation."""
    chunked_prefill_size: int | None = None
    """The recipe's pin; None: the band default."""
    max_prefill_tokens: int = 16384
    cuda_graph_max_bs: int | None = None
    """The recipe's pin; None: the band default."""
    moe_a2a_backend: str | None = None
    attention_backend: str | None = None
    """The recipe's `--attention-backend`; None: SGLang picks one (:func:`sglang_attention_backend`)."""
    prefill_attention_backend: str | None = None
    decode_attention_backend: str | None = None
    """The recipe's `--prefill-attention-backend` / `--decode-attention-backend`: where both name the same backend,
    SGLang takes it as `attention_backend`."""
    architecture: str | None = None
    """The model's config.json `architectures[0]` (the model catalog's `hf_architecture`); None: not recorded."""
    mla: bool = False
    """SGLang's `use_mla_backend()`: the model's attention is MLA (the catalog's attention kind)."""
    total_kv_heads: int | None = None
    """`model_config.get_total_num_kv_heads()`: config.json `num_key_value_heads` (for DeepSeek V3/R1 and Kimi K2.x,
    MLA, it equals `num_attention_heads`: 128 and 64)."""
    context_len: int | None = None
    vision_layers: int | None = None
    """What SGLang reads as the vision encoder's `num_hidden_layers` (None: the config names none: 24 is taken)."""
    vision_hidden: int | None = None
    """The vision encoder's `hidden_size`; None with `vision_layers`: no vision encoder recorded."""
    language_only: bool = False
    """The recipe's `--language-only` (the VLM's language model alone: no vision headroom)."""
    disaggregated: bool = False
    """A worker of a disaggregated job: sized here as an aggregated server (0.5.15 on size a prefill worker without
    the decode-graph reserve and a decode worker's activations by its running batch; not modelled)."""

    @property
    def reproduced(self) -> bool:
        """Whether :func:`sglang_memory_fraction` answers for this launch: a release read, on ROCm."""
        return self.version in SGLANG_VERSIONS_READ and self.rocm

    @property
    def chunk(self) -> int:
        return self.chunked_prefill_size if self.chunked_prefill_size is not None else \
            sglang_chunked_prefill_default(self.gpu_mib)

    @property
    def graph_bs(self) -> int:
        return self.cuda_graph_max_bs if self.cuda_graph_max_bs is not None else \
            sglang_cuda_graph_max_bs_default(self.gpu_mib, self.tp)

    def reserved_terms(self) -> list[tuple[str, float]]:
        """The MiB SGLang reserves, term by term, in its order; a `floor` term lifts the sum to 10240 MiB."""
        chunk, bs = self.chunk, self.graph_bs
        activation = max(chunk if chunk > 0 else self.max_prefill_tokens, 2048)
        terms: list[tuple[str, float]] = [("constant", 512.0), (f"1.5 x {activation} prefill tokens", 1.5 * activation),
                                          (f"2 x decode graph bs {bs}", 2.0 * bs),
                                          (f"TP {self.tp} x PP {self.pp} / 8 x 1024", self.tp * self.pp / 8 * 1024)]
        if self.dp_attention:
            dp = self.dp_attention
            terms.append((f"DP attention 3 x {bs} x {dp}", 3.0 * bs * dp))
            if bs > 300:
                terms.append((f"DP attention 1.5 x {bs} x {dp}", 1.5 * bs * dp))
        if self.gpu_mib > 60 * GIB_MIB:
            below = 10 * GIB_MIB - sum(v for _, v in terms)
            if below > 0:
                terms.append(("floor 10240", below))
        reserve = _SPECULATIVE_RESERVE_MIB.get(self.version)
        algorithm = (self.speculative_algorithm or "").upper()
        if reserve is not None and algorithm and algorithm != "NGRAM":
            mib = reserve[1] if algorithm == "STANDALONE" else reserve[0]
            terms.append((f"{algorithm} draft {mib}", float(mib)))
        if self.version in _DEEPEP_RESERVE_RELEASES and (self.moe_a2a_backend or "").lower() == "deepep":
            terms.append(("DeepEP all-to-all 2048", 2048.0))
        return terms

    def multimodal(self) -> bool:
        """Whether SGLang serves the model multimodal and sizes its computed fraction for the vision encoder: an
        architecture of :data:`_MULTIMODAL_ARCHITECTURES` with a vision encoder recorded, not `--language-only`, and
        (0.5.17) not a disaggregated job's decode worker (the encoder runs at prefill only)."""
        return (self.architecture in _MULTIMODAL_ARCHITECTURES and self.vision_hidden is not None
                and not self.language_only and not (self.disaggregated and self.version == "0.5.17"))

    def vlm_factor(self) -> float | None:
        """`adjust_mem_fraction_for_vlm`'s factor (identical in every release read): 0.95 x (1 - 0.1 x (complexity
        ratio - 1)) clamped to [0.8, 1.05], the complexity `layers x hidden^2` against the baseline ViT's; None where
        the launch is not multimodal (:meth:`multimodal`)."""
        if not self.multimodal():
            return None
        layers = self.vision_layers if self.vision_layers is not None else VLM_BASELINE_LAYERS
        hidden = self.vision_hidden if self.vision_hidden is not None else VLM_BASELINE_HIDDEN
        ratio = layers * hidden**2 / (VLM_BASELINE_LAYERS * VLM_BASELINE_HIDDEN**2)
        lo, hi = VLM_FACTOR_BOUNDS
        return VLM_BASE_FACTOR * max(lo, min(hi, 1.0 - VLM_SENSITIVITY * (ratio - 1.0)))

    def aiter_scaled(self) -> bool:
        """Whether SGLang multiplies the fraction by 0.85: its attention backend is aiter
        (:func:`sglang_attention_backend`) and the context exceeds 8192 tokens."""
        return sglang_attention_backend(self).backend == AITER and (self.context_len or 0) > AITER_CONTEXT_ABOVE


def sglang_attention_backend(launch: SglangLaunch) -> AttentionBackendPick:
    """The `attention_backend` SGLang ends with for `launch` on ROCm, in the order every release read takes: the
    recipe's `--attention-backend`; an architecture's forced backend (`_handle_model_specific_adjustments`); the
    recipe's prefill and decode backends where they are the same; else `_get_default_attn_backend`: aiter for an
    MHA/GQA model, for an MLA model aiter when `get_num_kv_heads(tp)` (= max(1, total KV heads // tp)) is 16 or 128,
    else triton. Not modelled (backend None) off ROCm, or for an architecture whose adjustments were not read."""
    version = launch.version
    rule = _HIP_ARCHITECTURES.get(launch.architecture or "")
    if rule is not None and version not in rule.releases:
        rule = None
    prefill, decode = launch.prefill_attention_backend, launch.decode_attention_backend
    if prefill is not None and prefill == decode:
        return AttentionBackendPick(prefill, f"the recipe's prefill and decode attention backend {prefill}")
    if rule is not None and rule.forced is not None:
        return AttentionBackendPick(rule.forced, f"SGLang {version} sets {rule.forced} for {launch.architecture}")
    if launch.attention_backend is not None:
        return AttentionBackendPick(launch.attention_backend,
                                    f"the recipe's --attention-backend {launch.attention_backend}")
    if not launch.rocm:
        return AttentionBackendPick(None, "SGLang's pick off ROCm is not modelled")
    if rule is None:
        what = f"architecture {launch.architecture}" if launch.architecture else \
            "a model whose architecture the model catalog does not record"
        return AttentionBackendPick(None, f"SGLang {version}'s pick for {what} is not modelled (its "
                                          "per-architecture overrides were not read)")
    if not launch.mla:
        return AttentionBackendPick(AITER, f"SGLang {version}'s {SGLANG_BACKEND_FUNCTION} on ROCm for an MHA/GQA "
                                           f"model ({launch.architecture})")
    per_rank = max(1, (launch.total_kv_heads or 0) // launch.tp)
    backend = AITER if per_rank in AITER_HEADS_PER_RANK else "triton"
    return AttentionBackendPick(backend, f"SGLang {version}'s {SGLANG_BACKEND_FUNCTION} on ROCm for an MLA model "
                                         f"({launch.architecture}) with {launch.total_kv_heads} KV heads / TP "
                                         f"{launch.tp} = {per_rank} per rank (aiter only for 16 or 128)")


def sglang_memory_fraction(launch: SglangLaunch) -> float | None:
    """`mem_fraction_static` SGLang computes for `launch` when it is unset; None when the launch is not reproduced
    (a release not read, a CUDA GPU: :attr:`SglangLaunch.reproduced`)."""
    if not launch.reproduced:
        return None
    reserved = sum(v for _, v in launch.reserved_terms())
    fraction = round((launch.gpu_mib - reserved) / launch.gpu_mib, 3)
    vlm = launch.vlm_factor()
    if vlm is not None:
        fraction *= vlm
    return fraction * AITER_FACTOR if launch.aiter_scaled() else fraction


def _recipe_value(job: Job, flag: str) -> Any:
    """The value the recipe gives the SGLang flag `flag`, read as SGLang's parser reads it (any spelling; the last of
    two), else None."""
    from llmsweep.engines import get_adapter

    found = get_adapter(SGLANG.id).recipe_value(job, flag)
    return found[1] if found is not None else None


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def job_spec_algorithm(job: Job) -> str | None:
    """SGLang's `--speculative-algorithm` for the job's own launch (an eval-only job's too: SGLang launches it with
    its draft), as the SGLang adapter renders it (`engines.sglang.SPEC_ALGORITHM`: MTP is EAGLE), else None."""
    from llmsweep.engines.sglang import SPEC_ALGORITHM

    sd = job.serve.spec_decoding if job.serve is not None else None
    if job.spec_decoding == "none" or (sd is None and not job.spec_decoding):
        return None
    method = sd.method if sd is not None else job.spec_decoding
    return SPEC_ALGORITHM.get(method, method.upper())


def sglang_launch(job: Job, version: str, gpu: HardwareSpec) -> SglangLaunch:
    """What SGLang's memory settings read of `job`'s launch at `version` on `gpu`: its parallelism (the decode
    worker of a disaggregated job), speculation, and the recipe's pins of the inputs."""
    from llmsweep.catalog.models import find_model
    from llmsweep.engines.base import topology

    parallel = topology(job)
    tp, pp = parallel.tp, parallel.pp
    model = find_model(job.model)
    context = job.max_model_len or (model.native_context if model is not None else None)
    attention, prefill, decode = (_str_or_none(_recipe_value(job, f"--{flag}attention-backend"))
                                  for flag in ("", "prefill-", "decode-"))
    moe_a2a = _recipe_value(job, "--moe-a2a-backend")
    vision = model.vision if model is not None else None
    max_prefill = token_count(_recipe_value(job, "--max-prefill-tokens"))
    return SglangLaunch(
        version=version, gpu=gpu.id, gpu_mib=gpu.hbm_bytes / MIB, rocm=gpu.image_gpu_family is not None, tp=tp,
        pp=pp, dp_attention=parallel.dp_ranks if parallel.dp_attn else None,
        speculative_algorithm=job_spec_algorithm(job),
        chunked_prefill_size=token_count(_recipe_value(job, "--chunked-prefill-size")),
        max_prefill_tokens=max_prefill if max_prefill is not None else 16384,
        cuda_graph_max_bs=token_count(_recipe_value(job, "--cuda-graph-max-bs")),
        moe_a2a_backend=str(moe_a2a) if isinstance(moe_a2a, str) else None,
        attention_backend=attention, prefill_attention_backend=prefill, decode_attention_backend=decode,
        architecture=model.hf_architecture if model is not None else None,
        mla=model is not None and model.attention.kind == "mla",
        total_kv_heads=_total_kv_heads(model) if model is not None else None, context_len=context,
        vision_layers=vision.num_hidden_layers if vision is not None else None,
        vision_hidden=vision.hidden_size if vision is not None else None,
        language_only=in_launch(_recipe_value(job, "--language-only")),
        disaggregated=bool(job.disagg))


def _total_kv_heads(model: ModelSpec) -> int:
    """What SGLang's `get_total_num_kv_heads` reads: config.json `num_key_value_heads`, the catalog's `kv_heads`;
    for an MLA model the catalog records none, and the DeepSeek-V3-style configs name `num_attention_heads` there."""
    a = model.attention
    return a.kv_heads if a.kv_heads is not None else a.heads


def describe_launch(launch: SglangLaunch) -> str:
    """`mi355x (294914 MiB) at TP 8, DP attention 8, NEXTN`: the inputs a source text names."""
    parts = [f"{launch.gpu} ({launch.gpu_mib:.0f} MiB) at TP {launch.tp}"]
    if launch.pp > 1:
        parts.append(f"PP {launch.pp}")
    if launch.dp_attention:
        parts.append(f"DP attention {launch.dp_attention}")
    if launch.speculative_algorithm:
        parts.append(launch.speculative_algorithm)
    return ", ".join(parts)


def explain_fraction(launch: SglangLaunch) -> str:
    """The computation in words, for a launch note: the reserve's terms, the rounding, the aiter factor (or why it
    is not applied), and what is not modelled."""
    terms = launch.reserved_terms()
    reserved = sum(v for _, v in terms)
    summed = " + ".join(f"{v:g} ({name})" for name, v in terms)
    text = f"reserves {summed} = {reserved:g} MiB of {launch.gpu_mib:.0f}, round((M - R) / M, 3)"
    text += f", {vlm_factor_note(launch)}, {aiter_factor_note(launch)}"
    if launch.disaggregated and launch.version not in _SPECULATIVE_RESERVE_MIB and launch.version != "0.5.14":
        text += f"; sized as an aggregated server (SGLang {launch.version} sizes a disaggregated worker by its role: " \
                "not modelled)"
    return text


def vlm_factor_note(launch: SglangLaunch) -> str:
    """Whether and why SGLang sizes the computed fraction down for a multimodal model's vision encoder, in words."""
    vlm = launch.vlm_factor()
    if vlm is not None:
        layers = launch.vision_layers if launch.vision_layers is not None else \
            f"{VLM_BASELINE_LAYERS} (its vision_config names no num_hidden_layers)"
        return (f"x {vlm:.4f} for {launch.architecture}'s vision encoder ({SGLANG_VLM_FUNCTION}: {VLM_BASE_FACTOR:g} "
                f"x the complexity of {layers} layers x hidden {launch.vision_hidden} against ViT-L/14's)")
    if launch.architecture in _MULTIMODAL_ARCHITECTURES and launch.language_only:
        return f"no vision headroom ({SGLANG_VLM_FUNCTION}): the recipe's --language-only"
    if launch.architecture in _MULTIMODAL_ARCHITECTURES and launch.vision_hidden is None:
        return f"the vision encoder's headroom ({SGLANG_VLM_FUNCTION}) not modelled: the model catalog records none"
    if launch.architecture in _MULTIMODAL_ARCHITECTURES:
        return (f"no vision headroom ({SGLANG_VLM_FUNCTION}): SGLang {launch.version} skips it on a decode worker, "
                "and this job's workers are sized as its decode worker (its prefill workers would take it)")
    return "a text-only model (no vision headroom)"


def aiter_factor_note(launch: SglangLaunch) -> str:
    """Whether and why SGLang's x 0.85 for the aiter attention backend above 8192 tokens of context is applied, in
    words: `x 0.85: attention backend aiter (...) at a context of 9472 > 8192`."""
    pick = sglang_attention_backend(launch)
    rule = f"SGLang's x {AITER_FACTOR:g} for the aiter attention backend at a context above {AITER_CONTEXT_ABOVE}"
    if pick.backend is None:
        return f"not applied: {rule} ({pick.why})"
    if pick.backend != AITER:
        return f"not applied: {rule} (attention backend {pick.backend}: {pick.why})"
    if (launch.context_len or 0) <= AITER_CONTEXT_ABOVE:
        return f"not applied: {rule} (attention backend aiter: {pick.why}; context {launch.context_len})"
    return f"x {AITER_FACTOR:g}: attention backend aiter ({pick.why}) at a context of {launch.context_len} > " \
           f"{AITER_CONTEXT_ABOVE}"


def sglang_scaled_pin(job: Job, pinned: float, gpu: HardwareSpec | None) -> tuple[float, str] | None:
    """A recipe's pinned `--mem-fraction-static` as SGLang launches with it: `_handle_attention_backend_compatibility`
    multiplies `self.mem_fraction_static` by 0.85 whether pinned or computed (every release read); `(value, note)`
    where it does, None where it does not or the launch is not reproduced (:func:`not_reproduced`)."""
    version = job_version(job)
    if not_reproduced(version, gpu) is not None or version is None or gpu is None:
        return None
    launch = sglang_launch(job, version, gpu)
    if not launch.aiter_scaled():
        return None
    value = pinned * AITER_FACTOR
    return value, (f"memory fraction {value:g}: the recipe's {pinned:g} {aiter_factor_note(launch)}, as SGLang "
                   f"{version}'s {SGLANG_MEMORY_FILE} ServerArgs._handle_attention_backend_compatibility does to a "
                   "pinned fraction too")


def sglang_chunk_default(job: Job, gpu: HardwareSpec) -> EngineDefault | None:
    """SGLang's `--chunked-prefill-size` for `job` on `gpu` when its recipe pins none, where it is not the
    simulator's own (8192): the band default of :func:`sglang_chunked_prefill_default` (16384 on a GPU of 160 GiB or
    more: MI300X, MI325X, MI355X, B200, B300), for a release read (:data:`SGLANG_VERSIONS_READ`); None otherwise."""
    from llmsweep.catalog.engines import EngineDefault
    from llmsweep.sim.engine import EngineConfig

    version = job_version(job)
    if version not in SGLANG_VERSIONS_READ:
        return None
    gpu_mib = gpu.hbm_bytes / MIB
    value = sglang_chunked_prefill_default(gpu_mib)
    if value == EngineConfig.model_fields["chunked_prefill_size"].default:
        return None
    return EngineDefault(value=value, flag="--chunked-prefill-size", engine=f"SGLang {version}", gpu=gpu.id,
                         condition=f"{gpu.id} ({gpu_mib:.0f} MiB; {value} from 160 GiB, 8192 from 60 GiB)",
                         source=f"{SGLANG_MEMORY_FILE} {SGLANG_MEMORY_FUNCTION}", knob="chunked prefill size")


def not_reproduced(version: str | None, gpu: HardwareSpec | None) -> str | None:
    """Why SGLang's own fraction is not reproduced for a launch at `version` on `gpu`, in words (`for an image that
    names no version`); None where it is."""
    if version is None:
        return "for an image that names no version"
    if version not in SGLANG_VERSIONS_READ:
        return f"for version {version} (its source was read for {', '.join(SGLANG_VERSIONS_READ)})"
    if gpu is None:
        return "on a GPU the hardware catalog does not know"
    if gpu.image_gpu_family is None:
        return f"on {gpu.id} (CUDA: its prefill CUDA-graph reserve is not modelled)"
    return None
