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
- later, `_handle_attention_backend_compatibility` multiplies the fraction (pinned or computed) by 0.85 when the
  attention backend is `aiter` and the model's context exceeds 8192 tokens. SGLang picks aiter by default on ROCm
  for MHA/GQA models and for MLA models with 16 or 128 KV heads per rank, with per-architecture overrides the
  simulator does not model, so the factor is applied only where the recipe names `--attention-backend aiter`.

Only ROCm launches are reproduced: on CUDA the prefill CUDA graphs (on by default from 0.5.12, sized by capture
lists and disabled by a dozen model and launch conditions) are reserved too, which is not modelled here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmsweep.catalog.engines import EngineDefault
    from llmsweep.catalog.hardware import HardwareSpec
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
MIB = 1024 * 1024
GIB_MIB = 1024

SPEC_ALGORITHMS: dict[str, str] = {
    "mtp": "NEXTN", "eagle": "EAGLE", "eagle3": "EAGLE3", "draft_model": "STANDALONE", "ngram": "NGRAM",
    "dspark": "DSPARK", "medusa": "NEXTN",
}
"""A job's speculative method → SGLang's `--speculative-algorithm` (MTP is NEXTN, which SGLang runs as EAGLE)."""


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
    """The recipe's pin; None: SGLang picks one (not modelled)."""
    context_len: int | None = None
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

    def aiter_scaled(self) -> bool:
        """Whether SGLang multiplies the fraction by 0.85: the recipe names the aiter attention backend and the
        context exceeds 8192 tokens (a backend SGLang picks itself is not modelled)."""
        return (self.attention_backend or "").lower() == "aiter" and (self.context_len or 0) > AITER_CONTEXT_ABOVE


def sglang_memory_fraction(launch: SglangLaunch) -> float | None:
    """`mem_fraction_static` SGLang computes for `launch` when it is unset; None when the launch is not reproduced
    (a release not read, a CUDA GPU: :attr:`SglangLaunch.reproduced`)."""
    if not launch.reproduced:
        return None
    reserved = sum(v for _, v in launch.reserved_terms())
    fraction = round((launch.gpu_mib - reserved) / launch.gpu_mib, 3)
    return fraction * AITER_FACTOR if launch.aiter_scaled() else fraction


def _recipe_value(job: Job, flag: str) -> Any:
    """The last value the recipe gives the SGLang flag `flag` (in any spelling SGLang's parser reads as it)."""
    from llmsweep.engines import engine_flags

    found = [value for _written, name, value in engine_flags(job) if name == flag]
    return found[-1] if found else None


def _int_or_none(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def job_spec_algorithm(job: Job) -> str | None:
    """SGLang's `--speculative-algorithm` for the job's own launch (an eval-only job's too: SGLang launches it with
    its draft), else None."""
    sd = job.serve.spec_decoding if job.serve is not None else None
    if job.spec_decoding == "none" or (sd is None and not job.spec_decoding):
        return None
    method = sd.method if sd is not None else job.spec_decoding
    return SPEC_ALGORITHMS.get(method, method.upper())


def sglang_launch(job: Job, version: str, gpu: HardwareSpec) -> SglangLaunch:
    """What SGLang's memory settings read of `job`'s launch at `version` on `gpu`: its parallelism (the decode
    worker of a disaggregated job), speculation, and the recipe's pins of the inputs."""
    from llmsweep.catalog.models import find_model
    from llmsweep.engines.base import topology

    tp, pp, _ep, dp_attn, _dcp, _pcp = topology(job)
    model = find_model(job.model)
    context = job.max_model_len or (model.native_context if model is not None else None)
    attention = _recipe_value(job, "--attention-backend")
    moe_a2a = _recipe_value(job, "--moe-a2a-backend")
    max_prefill = _int_or_none(_recipe_value(job, "--max-prefill-tokens"))
    return SglangLaunch(
        version=version, gpu=gpu.id, gpu_mib=gpu.hbm_bytes / MIB, rocm=gpu.image_gpu_family is not None, tp=tp,
        pp=pp, dp_attention=tp if dp_attn else None, speculative_algorithm=job_spec_algorithm(job),
        chunked_prefill_size=_int_or_none(_recipe_value(job, "--chunked-prefill-size")),
        max_prefill_tokens=max_prefill if max_prefill is not None else 16384,
        cuda_graph_max_bs=_int_or_none(_recipe_value(job, "--cuda-graph-max-bs")),
        moe_a2a_backend=str(moe_a2a) if isinstance(moe_a2a, str) else None,
        attention_backend=str(attention) if isinstance(attention, str) else None, context_len=context,
        disaggregated=bool(job.disagg))


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
    if launch.aiter_scaled():
        text += f", x {AITER_FACTOR:g} for the recipe's aiter attention backend at a context of {launch.context_len}"
    elif launch.attention_backend is None:
        text += (f"; not applied: the x {AITER_FACTOR:g} SGLang takes when the attention backend it picks is aiter "
                 f"and the context exceeds {AITER_CONTEXT_ABOVE} (the ROCm default for many models; the pick is not "
                 "modelled)")
    if launch.disaggregated and launch.version not in _SPECULATIVE_RESERVE_MIB and launch.version != "0.5.14":
        text += f"; sized as an aggregated server (SGLang {launch.version} sizes a disaggregated worker by its role: " \
                "not modelled)"
    return text


def job_version(job: Job) -> str | None:
    """The engine version the job's image tag names, else the recipe's `serve.engine.version`."""
    from llmsweep.engines.base import stated_version, tag_version

    return tag_version(job.image) or stated_version(job)


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
