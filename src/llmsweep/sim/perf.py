"""How long one engine step takes: a roofline over the hardware and the model, scaled by calibratable efficiencies.

The core asks one question per step — "this batch, how many seconds?" — through the :class:`StepTimer` protocol.
:class:`RooflineTimer` answers from first principles (bytes moved, FLOPs done, bytes communicated) so an untested
(model, GPU, TP) point still gets a plausible number; :class:`ConstantTimer` answers with fixed TTFT/ITL so tests of
the scheduler are deterministic and independent of the hardware figures.

The efficiencies live in :class:`Efficiency`, a small flat record a later `sim calibrate` fits from measured records;
the defaults and their rationale are in :data:`DEFAULT_EFFICIENCY` and `docs/simulator.md`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from llmsweep.catalog.models import ContextTerm

GB = 1e9
GIB = 1024**3


def covered(context: float, queries: float, cap: int | None) -> float:
    """Context tokens `queries` query tokens cover in all, with `context` their summed context, at most `cap` each:
    min(context, queries x cap), all of it without a cap — exact where every query's context is on the same side of
    the cap, and never below the sum of min(context_i, cap) (the step sees only the sum)."""
    if cap is None:
        return context
    most = queries * cap
    return context if context < most else most


@dataclass(frozen=True, slots=True)
class PerfInputs:
    """The hardware and model figures the roofline needs, in SI units; per GPU for hardware, whole model for model.

    Kept separate from the catalog's own types so the core never depends on their exact shapes
    (see :mod:`llmsweep.sim.inputs` for the one adapter).
    """

    hardware: str
    model: str
    hbm_bytes: float
    hbm_bw: float
    """Bytes per second of HBM bandwidth per GPU."""
    flops: float
    """Dense FLOP/s per GPU at the compute precision."""
    link_bw: float = 450 * GB
    """Unidirectional scale-up interconnect bytes per second per GPU (NVLink, xGMI)."""
    link_latency_s: float = 8e-6
    """Latency of one small collective (NCCL/RCCL all-reduce) in seconds."""
    host_bw: float = 50 * GB
    """Host <-> device bytes per second per GPU (PCIe/C2C), used for CPU-tier KV loads."""
    params_total: float = 8e9
    params_active: float = 8e9
    n_layers: int = 32
    hidden: int = 4096
    kv_bytes_per_token: float = 131072.0
    """KV cache bytes one token of context holds for the whole model at the serving KV dtype (all layers, K and V;
    with a DSA, its indexer's keys too; DeepSeek-V4: its compressed entries and indexer keys): what the KV pool, the
    CPU tier and KV transfers are sized by, and what a dense attention reads per context token."""
    bytes_per_param: float = 2.0
    n_experts: int = 0
    """Routed experts per MoE layer (0 for dense models)."""
    experts_per_token: int = 0
    expert_param_share: float = 0.0
    """Share of the parameters that sit in routed experts (0 for dense models)."""
    kv_split_max: int = 1 << 20
    """Largest TP degree that still splits the KV cache (GQA: KV heads; MLA: 1). Beyond it KV is replicated."""
    prefill_attention_flops: float | None = None
    """FLOPs a prompt token spends per token of context it attends to, over the whole model (the catalog model's
    `attention_flops_per_context_token("prefill")`: its query heads x head dims, full-attention layers only). None: 4
    x n_layers x hidden, the dense-MHA estimate for a model given by figures alone."""
    decode_attention_flops: float | None = None
    """The same for a decoding token (MLA: the absorbed form over the cached latent); None: as for a prompt."""
    context_terms: tuple[ContextTerm, ...] = ()
    """A sparse or compressed attention, priced part by part in place of :attr:`kv_bytes_per_token` and
    :attr:`attention_flops` (the catalog model's `context_terms`): a DSA's top-k latent and its indexer over the
    whole context; DeepSeek-V4's sliding window, its CSA layers' top-k entries, and over the whole context its CSA
    indexers and HCA layers. (): dense, every context token's KV."""

    def kv_bytes_per_token_per_gpu(self, tp: int, dp: int = 1) -> float:
        """KV bytes one token of the engine takes on each GPU, on average over its GPUs: split over the attention's
        TP group up to `kv_split_max` (replicated beyond). With DP attention over `dp` ranks (each `tp // dp` GPUs
        attending its own requests, as SGLang's `--enable-dp-attention` and vLLM's data-parallel ranks do) a token
        lives on one rank only, so the engine's average is that rank's figure over `dp`: MLA's latent, replicated
        on every GPU of a TP group, is held `dp` times over by DP ranks instead."""
        return self.per_gpu(self.kv_bytes_per_token, tp, dp)

    def per_gpu(self, per_token: float, tp: int, dp: int = 1) -> float:
        """Bytes a token's `per_token` bytes of KV take on each GPU, on average (:meth:`kv_bytes_per_token_per_gpu`'s
        rule)."""
        return per_token / max(1, min(tp // max(dp, 1) or 1, self.kv_split_max)) / max(dp, 1)

    @property
    def weight_bytes(self) -> float:
        return self.params_total * self.bytes_per_param

    @property
    def attention_flops(self) -> tuple[float, float]:
        """(prompt, decoding) token's attention FLOPs per token of context attended (:attr:`prefill_attention_flops`,
        :attr:`decode_attention_flops`, with their estimate where not given)."""
        prefill = self.prefill_attention_flops
        if prefill is None:
            prefill = 4.0 * self.n_layers * self.hidden
        return prefill, prefill if self.decode_attention_flops is None else self.decode_attention_flops

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0 and self.experts_per_token > 0 and self.expert_param_share > 0


@dataclass(frozen=True, slots=True)
class Efficiency:
    """Achieved fractions of peak and fixed overheads for one (engine, hardware); what calibration fits."""

    mem: float = 0.75
    """Achieved fraction of HBM bandwidth on weight and KV reads."""
    compute: float = 0.55
    """Achieved fraction of dense peak FLOP/s (model FLOPs utilisation) in prefill."""
    comm: float = 0.7
    """Achieved fraction of interconnect bandwidth in collectives."""
    step_s: float = 1.0e-3
    """Fixed cost of one step (scheduling, launch, sampling) in seconds."""
    per_layer_s: float = 40e-6
    """Launch cost per layer per step (CUDA-graph replay is not free on deep models)."""
    per_seq_s: float = 30e-6
    """Host cost per running sequence per step (scheduler bookkeeping, detokenisation)."""
    frontend_s: float = 0.010
    """API server latency before a request reaches the scheduler (parse, template, tokenise)."""
    frontend_per_request_s: float = 0.0
    """API server latency added per other request in flight: their streams share the front end's event loop, so its
    latency grows with the load (vLLM 0.26: TTFT minus the engine's queue and prefill time grows ~0.5 ms per
    concurrent stream; docs/simulator.md, "Fidelity"). 0: a fixed front end; fitted per calibration key."""
    draft_layer_fraction: float = 1.0
    """Cost of one draft (MTP/EAGLE) token relative to one target layer's weight read (MTP head ~ one layer)."""

    def with_(self, **changes: float) -> Efficiency:
        return replace(self, **changes)


# (engine, hardware family) -> Efficiency. Rationale (docs/simulator.md has the long form):
# - mem 0.75: decode GEMV/attention kernels reach 70-80% of HBM peak on Hopper/Blackwell (vLLM/SGLang decode traces).
# - compute 0.55: prefill MFU of 50-60% for bf16/fp8 GEMMs with FlashAttention-3 class kernels.
# - step/per-layer/per-seq overheads: chosen so a 1.1B Llama on one H200 gives vLLM 0.26's measured ITL of
#   2.65 ms at concurrency 1 and ~3.8 ms at 32 (gpu-and-ci-notes.md); SGLang's scheduler is a little cheaper per
#   sequence; ROCm launch overheads are higher.
DEFAULT_EFFICIENCY: dict[tuple[str, str], Efficiency] = {
    ("*", "*"): Efficiency(),
    ("vllm", "*"): Efficiency(frontend_s=0.012),
    ("sglang", "*"): Efficiency(per_seq_s=20e-6, frontend_s=0.008),
    ("trtllm", "*"): Efficiency(mem=0.8, compute=0.6, per_seq_s=15e-6, step_s=0.8e-3),
    ("*", "mi300x"): Efficiency(mem=0.65, compute=0.45, step_s=1.5e-3, per_layer_s=60e-6),
    ("*", "mi355x"): Efficiency(mem=0.65, compute=0.45, step_s=1.5e-3, per_layer_s=60e-6),
}


def default_efficiency(engine: str = "*", hardware: str = "*") -> Efficiency:
    """Most specific entry of :data:`DEFAULT_EFFICIENCY`: (engine, hw) > (engine, *) > (*, hw) > (*, *)."""
    family = hardware.lower().split("-")[0].split("_")[0]
    for key in ((engine, family), (engine, "*"), ("*", family), ("*", "*")):
        if key in DEFAULT_EFFICIENCY:
            return DEFAULT_EFFICIENCY[key]
    return Efficiency()


@dataclass(slots=True)
class Batch:
    """What one step computes; filled by the core, read by the timer (all plain numbers, no per-request objects)."""

    prefill_tokens: int = 0
    prefill_attn: float = 0.0
    """Sum over prefill tokens of the context each attends to (the quadratic attention term)."""
    decode_seqs: int = 0
    decode_tokens: int = 0
    """Tokens the target model verifies/decodes this step (decode_seqs x (K+1) with speculative decoding)."""
    decode_ctx: int = 0
    """Sum of the context lengths of the decoding sequences (KV bytes read)."""
    draft_tokens: int = 0
    """Draft tokens proposed per sequence this step (K), for the draft-model cost."""
    host_load_tokens: int = 0
    """Prefix tokens loaded from the CPU tier this step."""
    new_seqs: int = 0


class StepTimer(Protocol):
    """Answers how long a step takes; the only thing the core knows about performance."""

    def step_time(self, batch: Batch) -> float: ...

    def frontend_latency(self, in_flight: int = 0) -> float:
        """Seconds from a request's arrival at the API server to the scheduler, with `in_flight` other requests
        being served; never less than with none (virtual time bounds its event-to-event blocks by that)."""
        ...


def decode_step_times(timer: StepTimer, batch: Batch, decode_ctx: np.ndarray) -> np.ndarray:
    """Step times of consecutive decode-only steps that differ from `batch` only in their total context length
    `decode_ctx` (one entry per step): the timer's vectorised `decode_step_times` when it has one, else a call each."""
    vectorised = getattr(timer, "decode_step_times", None)
    if vectorised is not None:
        out: np.ndarray = vectorised(batch, decode_ctx)
        return out
    times = []
    for ctx in decode_ctx.tolist():
        batch.decode_ctx = int(ctx)
        times.append(timer.step_time(batch))
    return np.array(times, np.float64)


@dataclass(frozen=True, slots=True)
class ConstantTimer:
    """Deterministic timing for tests: a step holding a prefill takes `ttft_s`, a decode-only step `itl_s`."""

    ttft_s: float = 0.05
    itl_s: float = 0.01
    frontend_s: float = 0.0

    def step_time(self, batch: Batch) -> float:
        return self.ttft_s if batch.prefill_tokens else self.itl_s

    def decode_step_times(self, batch: Batch, decode_ctx: np.ndarray) -> np.ndarray:
        return np.full(len(decode_ctx), self.step_time(batch))

    def frontend_latency(self, in_flight: int = 0) -> float:
        return self.frontend_s


@dataclass
class RooflineTimer:
    """Step time = overhead + max(memory, compute) + communication + host KV loads, each over its efficiency.

    - memory: weights read once per step (dense part, plus the experts the batch's tokens touch), plus KV bytes read
      by every decoding sequence; split over the TP group (with DP attention, each rank's GPUs read their own
      requests' KV and the step waits for the busiest rank: `rank_load`).
    - compute: 2 x active params per token, plus attention (per token of context attended, 2 x (query-key +
      attention-value width) x full-attention layers, the model's own heads x head dims: `PerfInputs.attention_flops`,
      quadratic in prefill; MLA decodes in its absorbed form over the latent), split over the TP group.
    - sparse or compressed attention (`PerfInputs.context_terms`) in place of the KV read and the attention term:
      each part reads and computes over the context tokens it covers, at most its cap a query token (`covered`): a
      DSA's top-k latent and its indexer's keys and scoring over the whole context; DeepSeek-V4's sliding window, its
      CSA layers' top-k entries, and over the whole context its CSA indexers and HCA layers.
    - communication: two all-reduces of the step's activations per layer for TP (ring: 2(n-1)/n x bytes / link
      bandwidth + latency); MoE layers with EP do a dispatch/combine all-to-all instead of the MLP all-reduce
      (also with DP attention, whose gathers around the MoE layers are priced as that all-reduce: not modelled
      apart).
    """

    inputs: PerfInputs
    tp: int = 1
    ep: int = 1
    efficiency: Efficiency = field(default_factory=Efficiency)
    dp: int = 1
    """DP-attention ranks (1: attention over the whole TP group). Each rank's GPUs read only its own requests' KV,
    and a step waits for the busiest rank (:meth:`rank_load`)."""
    activation_bytes: float = 2.0
    _per_tokens: dict[int, tuple[float, float]] = field(default_factory=dict, repr=False)

    def rank_load(self, seqs: int) -> float:
        """The busiest DP-attention rank's share of a step's decode KV reads over the balanced share: with `seqs`
        decoding sequences dealt over `dp` ranks one holds ceil(seqs / dp), so its GPUs read `dp * ceil(seqs / dp) /
        seqs` times the engine's average (1 without DP attention, or when the sequences divide evenly; the ranks'
        requests are taken to have the batch's mean context)."""
        dp = self.dp
        if dp <= 1 or seqs <= 0:
            return 1.0
        return dp * -(-seqs // dp) / seqs

    def frontend_latency(self, in_flight: int = 0) -> float:
        eff = self.efficiency
        if in_flight > 0 and eff.frontend_per_request_s:
            return eff.frontend_s + eff.frontend_per_request_s * in_flight
        return eff.frontend_s

    def experts_touched(self, tokens: int) -> float:
        """Expected distinct experts per layer hit by `tokens` tokens under uniform top-k routing."""
        p = self.inputs
        if not p.is_moe or tokens <= 0:
            return 0.0
        return p.n_experts * (1.0 - (1.0 - p.experts_per_token / p.n_experts) ** tokens)

    def weight_bytes_read(self, tokens: int) -> float:
        """Weight bytes the whole TP group reads in a step processing `tokens` tokens."""
        p = self.inputs
        if not p.is_moe:
            return p.weight_bytes
        expert_bytes = p.weight_bytes * p.expert_param_share
        return p.weight_bytes - expert_bytes + expert_bytes * self.experts_touched(tokens) / p.n_experts

    def comm_time(self, tokens: int) -> float:
        p, eff = self.inputs, self.efficiency
        if tokens <= 0:
            return 0.0
        msg = tokens * p.hidden * self.activation_bytes
        total = 0.0
        if self.tp > 1:
            ring = 2.0 * (self.tp - 1) / self.tp * msg / (p.link_bw * eff.comm) + p.link_latency_s
            n_allreduce = 2 if not (p.is_moe and self.ep > 1) else 1
            total += n_allreduce * p.n_layers * ring
        if p.is_moe and self.ep > 1:
            a2a = 2.0 * msg * p.experts_per_token * (self.ep - 1) / self.ep / (p.link_bw * eff.comm)
            total += p.n_layers * (a2a + 2 * p.link_latency_s)
        return total

    def __post_init__(self) -> None:
        p, eff, tp = self.inputs, self.efficiency, self.tp
        mem_bw = p.hbm_bw * eff.mem
        self._kv_s = p.kv_bytes_per_token_per_gpu(tp, self.dp) / mem_bw
        self._prefill_attn_flops, self._decode_attn_flops = p.attention_flops
        self._token_flops = 2.0 * p.params_active
        self._flops_s = 1.0 / (tp * p.flops * eff.compute)
        layer_bytes = p.weight_bytes / max(p.n_layers, 1) / max(1, self.ep if p.is_moe else 1)
        self._draft_s = layer_bytes * eff.draft_layer_fraction / (tp * mem_bw) + eff.per_layer_s * 2
        self._host_s = p.kv_bytes_per_token_per_gpu(tp, self.dp) / p.host_bw
        self._overhead_s = eff.step_s + eff.per_layer_s * p.n_layers
        self._comm = tp > 1 or self.ep > 1
        # Sparse or compressed attention: each part reads (on each GPU, as the KV is held) and computes over the
        # context tokens it covers (`covered`).
        self._terms = tuple((t.cap, p.per_gpu(t.bytes_per_token, tp, self.dp) / mem_bw, t.prefill_flops,
                             t.decode_flops) for t in p.context_terms)
        self._sparse = bool(self._terms)

    def _per_token_count(self, tokens: int) -> tuple[float, float]:
        """(weight-read seconds per GPU, communication seconds): they depend on the token count only."""
        cached = self._per_tokens.get(tokens)
        if cached is None:
            weights = self.weight_bytes_read(tokens) / self.tp / (self.inputs.hbm_bw * self.efficiency.mem)
            cached = self._per_tokens[tokens] = (weights, self.comm_time(tokens) if self._comm else 0.0)
        return cached

    def step_time(self, batch: Batch) -> float:
        tokens = batch.prefill_tokens + batch.decode_tokens
        if tokens <= 0:
            return self.efficiency.step_s
        weights_s, comm_s = self._per_token_count(tokens)
        decode_ctx = batch.decode_ctx
        load = 1.0 if self.dp <= 1 else self.rank_load(batch.decode_seqs)
        kv_s = self._kv_s if self.dp <= 1 else self._kv_s * load
        per_seq_tokens = batch.decode_tokens / batch.decode_seqs if batch.decode_seqs else 1.0
        if self._sparse:
            query_ctx = decode_ctx * per_seq_tokens
            t_mem, attn = weights_s, 0.0
            for cap, read_s, prefill_flops, decode_flops in self._terms:
                t_mem += covered(decode_ctx, batch.decode_seqs, cap) * read_s * load
                attn += prefill_flops * covered(batch.prefill_attn, batch.prefill_tokens, cap) \
                    + decode_flops * covered(query_ctx, batch.decode_tokens, cap)
        else:
            t_mem = weights_s + decode_ctx * kv_s
            attn = self._prefill_attn_flops * batch.prefill_attn + self._decode_attn_flops * decode_ctx * per_seq_tokens
        t_compute = (self._token_flops * tokens + attn) * self._flops_s
        t = (t_mem if t_mem > t_compute else t_compute) + comm_s
        if batch.draft_tokens:
            # K sequential draft passes, each reading a one-layer head's weights plus its launch cost.
            t += batch.draft_tokens * self._draft_s
        if batch.host_load_tokens:
            t += batch.host_load_tokens * self._host_s
        return t + self._overhead_s + self.efficiency.per_seq_s * (batch.decode_seqs + batch.new_seqs)

    def decode_step_times(self, batch: Batch, decode_ctx: np.ndarray) -> np.ndarray:
        """:meth:`step_time` of `batch` for each total context length in `decode_ctx`, in one vectorised pass (same
        operations in the same order, so each entry equals the scalar answer)."""
        tokens = batch.prefill_tokens + batch.decode_tokens
        if tokens <= 0:
            return np.full(len(decode_ctx), self.efficiency.step_s)
        weights_s, comm_s = self._per_token_count(tokens)
        ctx = decode_ctx.astype(np.float64)
        load = 1.0 if self.dp <= 1 else self.rank_load(batch.decode_seqs)
        kv_s = self._kv_s if self.dp <= 1 else self._kv_s * load
        per_seq_tokens = batch.decode_tokens / batch.decode_seqs if batch.decode_seqs else 1.0
        if self._sparse:
            query_ctx = ctx * per_seq_tokens
            t_mem, attn = np.full_like(ctx, weights_s), np.zeros_like(ctx)
            for cap, read_s, prefill_flops, decode_flops in self._terms:
                read = ctx if cap is None else np.minimum(ctx, batch.decode_seqs * cap)
                scored = query_ctx if cap is None else np.minimum(query_ctx, batch.decode_tokens * cap)
                t_mem = t_mem + read * read_s * load
                attn = attn + (prefill_flops * covered(batch.prefill_attn, batch.prefill_tokens, cap)
                               + decode_flops * scored)
        else:
            t_mem = weights_s + ctx * kv_s
            attn = self._prefill_attn_flops * batch.prefill_attn + self._decode_attn_flops * ctx * per_seq_tokens
        t_compute = (self._token_flops * tokens + attn) * self._flops_s
        t = np.maximum(t_mem, t_compute) + comm_s
        if batch.draft_tokens:
            t = t + batch.draft_tokens * self._draft_s
        if batch.host_load_tokens:
            t = t + batch.host_load_tokens * self._host_s
        out: np.ndarray = t + self._overhead_s + self.efficiency.per_seq_s * (batch.decode_seqs + batch.new_seqs)
        return out


KV_RESERVE_BYTES_PER_GPU = 1.0 * GIB
"""Bytes of each GPU the KV pool leaves beside the weights within the memory fraction (CUDA context, workspaces):
:func:`kv_capacity_tokens`' reserve."""


def kv_capacity_tokens(
    inputs: PerfInputs, *, tp: int, mem_fraction_static: float, reserve_bytes_per_gpu: float = KV_RESERVE_BYTES_PER_GPU,
    dp: int = 1,
) -> int:
    """Tokens of KV the TP group's pool holds: per GPU, (HBM x fraction - reserve - weights / TP) over the KV bytes
    per token on one GPU (KV heads split over TP up to their count, replicated beyond); with DP attention over `dp`
    ranks, the sum of the ranks' pools (each rank's tokens on its own GPUs:
    :meth:`PerfInputs.kv_bytes_per_token_per_gpu`).

    Same budget rule as SGLang's --mem-fraction-static and vLLM's --gpu-memory-utilization (weights and KV pool share
    the static fraction; activations and CUDA graphs take the rest and a small reserve).
    """
    budget = inputs.hbm_bytes * mem_fraction_static - reserve_bytes_per_gpu - inputs.weight_bytes / tp
    return max(0, int(budget // inputs.kv_bytes_per_token_per_gpu(tp, dp)))


def kv_room_bytes_per_gpu(inputs: PerfInputs, *, tp: int,
                          reserve_bytes_per_gpu: float = KV_RESERVE_BYTES_PER_GPU) -> float:
    """Bytes of each GPU's whole HBM that its share of the weights and the reserve leave: the most KV a GPU can
    hold whatever the memory fraction (what a pool pinned in blocks or bytes must fit: `EngineConfig.
    pinned_pool_tokens`)."""
    return inputs.hbm_bytes - reserve_bytes_per_gpu - inputs.weight_bytes / tp


def host_capacity_tokens(inputs: PerfInputs, *, dram_bytes: float, tp: int = 1, dp: int = 1) -> int:
    """Tokens of KV a CPU tier of `dram_bytes` holds for an engine of `tp` GPUs (`dp` DP-attention ranks): each GPU
    offloads its own share of a token's KV (SGLang's HiCache host pool per rank, `--hicache-size` GB each; vLLM's
    offload connector per worker), so where the GPUs replicate KV heads (MLA's latent, KV heads fewer than TP) the
    tier holds a token as many times as they do: `dram_bytes / (tp x` :meth:`PerfInputs.kv_bytes_per_token_per_gpu`
    `)`, which is `dram_bytes / kv_bytes_per_token` when TP splits the heads evenly."""
    return max(0, int(dram_bytes // (inputs.kv_bytes_per_token_per_gpu(tp, dp) * tp)))


__all__ = [
    "DEFAULT_EFFICIENCY",
    "KV_RESERVE_BYTES_PER_GPU",
    "Batch",
    "ConstantTimer",
    "Efficiency",
    "PerfInputs",
    "RooflineTimer",
    "StepTimer",
    "covered",
    "decode_step_times",
    "default_efficiency",
    "host_capacity_tokens",
    "kv_capacity_tokens",
    "kv_room_bytes_per_gpu",
]
