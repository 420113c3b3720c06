"""The simulated engine's knobs: one validated envelope shared by the live server, the predictor and the CLI."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsweep.catalog.engines import CapacityPolicy, SchedulerPolicy
from llmsweep.engine_ids import MAX_SPEC_K

SCHEDULER_HELP = (
    "How a step is formed. unified: running requests first (decodes and unfinished prefill chunks), then waiting "
    "ones, in one step (vLLM V1, SGLang's unified shape). prefill-first: a step that can prefill holds prefills only "
    "(unfinished ones first, then waiting ones FCFS), and a request takes KV blocks for its whole remaining prompt "
    "when admitted; decodes run only in steps where nothing can be prefilled (ATOM, nano-vllm's shape).")
"""`SimConfig.scheduler`'s description, shown by `llmsweep sim serve --scheduler` too (one text)."""

CAPACITY_HELP = (
    "Which waiting requests a step may admit, as far as KV is concerned. on-demand: any whose first chunk (or whole "
    "prompt, prefill-first) finds free blocks; running requests take blocks as they grow, and one that finds none is "
    "preempted (vLLM, SGLang, ATOM). no-evict: only one whose whole length, prompt plus max_tokens (plus the drafts "
    "of a verify step), fits the blocks the running requests have not yet reserved to their own completion; its "
    "prompt's KV is taken at admission, and nothing is ever preempted (TensorRT-LLM's GUARANTEED_NO_EVICT capacity "
    "scheduler, its default).")
"""`SimConfig.capacity`'s description, shown by `llmsweep sim serve --capacity` too (one text)."""


ESTIMATED_DRAFT_ACCEPTANCE: dict[str, float] = {
    "mtp": 0.80, "eagle": 0.75, "eagle3": 0.70, "draft_model": 0.65, "ngram": 0.40,
}
"""Per-draft-token acceptance probability the simulator assumes for a method where a job measures real acceptance
and no golden curve covers its (model, method, thinking, K): the i.i.d. model of `llmsweep.sim.acceptance`, so the
estimated AL is (1 - p^(K+1)) / (1 - p) (MTP K=3 → 2.95, EAGLE3 K=3 → 2.53, n-gram K=3 → 1.62). Typical of the
published curves' K=1..3 range; a real engine's acceptance depends on the prompts it drafts for."""


def typical_acceptance(sim_method: str, k: int) -> float:
    """The AL the simulator realises for a method at draft length K when nothing pins one (the i.i.d. model at
    :data:`ESTIMATED_DRAFT_ACCEPTANCE`'s per-draft probability), rounded to two decimals: what `sim serve`
    realises without `--acceptance-length`, and the estimate `engines.sim` labels a job with."""
    from llmsweep.sim.acceptance import expected_length

    return round(expected_length(ESTIMATED_DRAFT_ACCEPTANCE.get(sim_method, 0.7), k), 2)


class SpecDecodeConfig(BaseModel):
    """Speculative decoding with a forced mean acceptance length (SGLang's match-expected, vLLM's synthetic)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: Literal["mtp", "eagle", "eagle3", "draft_model", "ngram"] = Field("mtp", description="Draft method.")
    k: int = Field(3, ge=1, le=MAX_SPEC_K,
                   description="Draft tokens proposed per verify step (num_speculative_tokens).")
    acceptance_length: float = Field(
        ..., description="Mean tokens emitted per verify step, bonus token included; must lie in [1, K+1]."
    )

    @model_validator(mode="after")
    def _al_in_range(self) -> SpecDecodeConfig:
        if not 1.0 <= self.acceptance_length <= self.k + 1:
            raise ValueError(
                f"acceptance_length {self.acceptance_length} is outside [1, K+1] = [1, {self.k + 1}]; "
                "raise --spec-k or lower --acceptance-length"
            )
        return self


class SimConfig(BaseModel):
    """Scheduler and memory knobs of the simulated engine (names follow SGLang/vLLM flags)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    engine_style: Literal["sglang", "vllm"] = Field("sglang", description="Whose metric names and log lines to mimic.")
    block_size: int = Field(
        64, ge=1, le=4096,
        description="Tokens per KV block and prefix-hash block (64 matches the AgentX trace block; larger is faster).",
    )
    kv_capacity_tokens: int = Field(..., ge=1, description="Tokens the GPU KV pool holds for the whole TP group.")
    context_length: int | None = Field(
        None, ge=1,
        description="Most tokens of one request, prompt + output (the engine's max_model_len); None: the KV pool's.",
    )
    max_prompt_tokens: int | None = Field(
        None, ge=1, description="Longest prompt the engine takes; a longer one is refused with a 400 (TensorRT-LLM "
        "without chunked prefill: max_num_tokens); None: any prompt the context holds.")
    host_capacity_tokens: int = Field(0, ge=0, description="Tokens the CPU tier (HiCache/offload) holds; 0 = none.")
    max_running_requests: int = Field(256, ge=1, description="Most requests decoding at once (max_num_seqs).")
    max_prefill_tokens: int = Field(
        16384, ge=1, description="Token budget of one step: prefill chunk tokens plus decode tokens."
    )
    chunked_prefill_size: int = Field(8192, ge=1, description="Most prompt tokens of one request per step.")
    prefill_budget: int | None = Field(
        None, ge=1, description="Most prompt tokens of one step over all requests (SGLang's DP-attention ranks, each "
        "bounded by its own chunk); None: only max_prefill_tokens bounds them.")
    scheduler: SchedulerPolicy = Field("unified", description=SCHEDULER_HELP)
    capacity: CapacityPolicy = Field("on-demand", description=CAPACITY_HELP)
    prefix_caching: bool = Field(True, description="Reuse KV blocks whose prefix hash is cached.")
    spec: SpecDecodeConfig | None = Field(None, description="Speculative decoding; None = off.")
    seed: int = Field(0, description="Seeds acceptance draws and output text; same seed, same streams.")

    @property
    def pool_tokens(self) -> int:
        """The KV pool the engine holds: `kv_capacity_tokens` in whole blocks, at least one (`EngineCore`'s
        `capacity_tokens`)."""
        return max(1, self.kv_capacity_tokens // self.block_size) * self.block_size

    def served_context(self) -> int:
        """The longest request, prompt + output, the engine takes: the one length its admission check refuses past
        (`EngineCore.refusal`, a 400 "maximum context length"), the live server's `/v1/models` `max_model_len` and
        the room a request without max_tokens generates into (`sim.server`), and what a virtual-time run records as
        `launch.context_served` (`execute.virtual`), so a live and a virtual-time run of one launch say the same.

        The context length where it is set, within the KV pool less a step's lookahead: a request must leave room in
        the pool for the token (and, speculating, the K drafts) its last step writes, so without a context flag the
        longest is `pool_tokens - (K + 1)`, not the pool."""
        lookahead = (self.spec.k if self.spec is not None else 0) + 1
        pool = max(0, self.pool_tokens - lookahead)
        return pool if self.context_length is None else min(self.context_length, pool)
