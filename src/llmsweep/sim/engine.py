"""What a user asks of the simulated engine (model, GPU, parallelism, memory, spec decode) and how it becomes a core.

:class:`EngineConfig` is the one envelope the CLI, the live server and the predictor share; :func:`build_core` turns it
into an :class:`~llmsweep.sim.core.EngineCore` with a sized KV pool and a step timer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from llmsweep.catalog.engines import CapacityPolicy, SchedulerPolicy
from llmsweep.sim.config import CAPACITY_HELP, SCHEDULER_HELP, SimConfig, SpecDecodeConfig
from llmsweep.sim.core import EngineCore
from llmsweep.sim.inputs import perf_inputs
from llmsweep.sim.perf import (
    GB,
    GIB,
    KV_RESERVE_BYTES_PER_GPU,
    ConstantTimer,
    Efficiency,
    PerfInputs,
    RooflineTimer,
    StepTimer,
    default_efficiency,
    host_capacity_tokens,
    kv_capacity_tokens,
    kv_room_bytes_per_gpu,
)

if TYPE_CHECKING:
    from llmsweep.errors import ConfigError
    from llmsweep.sim.calibration import CalibrationEntry, CalibrationKey

VLLM_BLOCK_PIN_CHECKED = "0.21.0"
"""The first vLLM release taken to refuse at start-up a pool pinned in blocks (`--num-gpu-blocks-override`) that holds
less than one request at its context: vllm-project/vllm#41069 ("[Core] Account for `num_gpu_blocks_override` in
`max_model_len` checks", merged 2026-04-28) makes `get_kv_cache_configs` check (and, with `--max-model-len -1`,
auto-fit) the context against the override's blocks, which "take precedence over the measured available kv cache
size", so vLLM refuses to start ("To serve at least one request …"). Before it the check read the memory profiled at
the memory fraction, vLLM started, and its scheduler retried a request longer than the pool at every step, every
request behind it waiting (vllm-project/vllm#35541, the hang #41069 names). The first release carrying #41069 was not
read: v0.19.0 was vLLM's latest on 2026-04-18 and v0.20.1 on 2026-05-05 (llm-d/llm-d-benchmark#975, #1082), so
0.20.0's date against the merge is not established and 0.20.x is taken as unknown; 0.21.0 (latest by 2026-05-16,
llm-d/llm-d-benchmark#1290) is the first release dated after the merge."""
VLLM_BLOCK_PIN_UNCHECKED_BELOW = "0.20.0"
"""vLLM releases below this one predate vllm-project/vllm#41069 (:data:`VLLM_BLOCK_PIN_CHECKED`)."""


def vllm_checks_pinned_blocks(version: str | None) -> bool | None:
    """Whether vLLM `version` refuses at start-up a pool pinned in blocks short of one request at its context
    (vllm-project/vllm#41069, from :data:`VLLM_BLOCK_PIN_CHECKED`): True from that release, False below 0.20.0 (it
    starts and stalls, vllm-project/vllm#35541), None where it is not known (no version, one that does not parse, or
    0.20.x, whose releases were not read)."""
    from llmsweep.catalog.version import Version

    parsed = Version.try_parse(version) if version else None
    if parsed is None:
        return None
    if not parsed < Version.parse(VLLM_BLOCK_PIN_CHECKED):
        return True
    return False if parsed < Version.parse(VLLM_BLOCK_PIN_UNCHECKED_BELOW) else None


class EngineConfig(BaseModel):
    """The simulated engine a job asks for; every field maps to a `llmsweep sim serve` flag."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field("llama-3.1-8b", description="Model name, HF id or catalog prefix.")
    hardware: str = Field("h200", description="GPU SKU (catalog name).")
    tp: int = Field(1, ge=1, description="Tensor-parallel degree (GPUs of one engine).")
    ep: int = Field(1, ge=1, description="Expert-parallel degree for MoE layers (<= tp).")
    dp_attention: int = Field(
        1, ge=1, description="DP-attention ranks (SGLang's --enable-dp-attention --dp-size, vLLM's data-parallel "
        "ranks): each rank of tp / dp GPUs attends its own requests and keeps their KV, so the pool is the ranks' "
        "pools together and a step waits for the busiest rank's KV reads; 1 = attention over the whole TP group. "
        "The running cap and step budget stay the engine's (the ranks' together).")
    precision: str = Field("bf16", description="Weight/compute precision: bf16, fp8, fp4.")
    kv_dtype: str = Field("bf16", description="KV-cache dtype, in any engine's `--kv-cache-dtype` spelling "
                          "(bf16, fp8, fp8_e4m3, mxfp8, nvfp4, fp4_e2m1, auto; catalog.precision."
                          "KV_CACHE_SPELLINGS): its bytes per element, block scales included, size the KV pool.")
    engine_style: Literal["sglang", "vllm"] = Field("sglang", description="Whose metric names and log lines to mimic.")
    mem_fraction_static: float = Field(0.88, gt=0, le=1, description="Share of HBM for weights + KV pool.")
    max_running_requests: int = Field(256, ge=1, description="Most requests decoding at once.")
    chunked_prefill_size: int = Field(8192, ge=1, description="Most prompt tokens of one request per step.")
    max_prefill_tokens: int = Field(16384, ge=1, description="Token budget of one step.")
    prefill_budget: int | None = Field(
        None, ge=1, description="Most prompt tokens of one step over all requests; None = only the step budget.")
    scheduler: SchedulerPolicy = Field("unified", description=SCHEDULER_HELP)
    capacity: CapacityPolicy = Field("on-demand", description=CAPACITY_HELP)
    block_size: int = Field(64, ge=1, description="KV/prefix-hash block in tokens.")
    prefix_caching: bool = Field(True, description="Reuse cached prompt blocks.")
    dram_gb: float = Field(0.0, ge=0, description="CPU KV tier (HiCache/offload) size in GB; 0 = none.")
    spec: SpecDecodeConfig | None = Field(None, description="Speculative decoding; None = off.")
    seed: int = Field(0, description="Seed for acceptance draws and output text.")
    timing: Literal["roofline", "constant"] = Field("roofline", description="Step-time model.")
    ttft_s: float = Field(0.05, gt=0, description="constant timing: duration of a step holding a prefill.")
    itl_s: float = Field(0.01, gt=0, description="constant timing: duration of a decode-only step.")
    kv_capacity_tokens: int | None = Field(None, ge=1, description="Override the KV pool size (tokens).")
    max_total_tokens: int | None = Field(
        None, ge=1, description="Most tokens the KV pool holds, per DP-attention rank (SGLang's --max-total-tokens): "
        "the pool is the smaller of it and the pool sized from HBM; None = no cap.")
    pinned_kv_tokens: int | None = Field(
        None, ge=1, description="The KV pool in tokens, the DP-attention ranks' together, whatever the memory "
        "fraction (vLLM's --num-gpu-blocks-override: blocks x its block size on each rank); refused where it does "
        "not fit beside the weights; None = sized from HBM.")
    kv_cache_memory_bytes: int | None = Field(
        None, ge=1, description="Bytes of KV pool on each GPU, whatever the memory fraction (vLLM's "
        "--kv-cache-memory-bytes); refused where they do not fit beside the weights; pinned_kv_tokens wins, as "
        "vLLM's block override does; None = sized from HBM.")
    context_length: int | None = Field(
        None, ge=1, description="Most tokens of one request, prompt + output (the engine's --context-length / "
        "--max-model-len); None = only the KV pool bounds a request.")
    vllm_version: str | None = Field(
        None, description="The vLLM release a launch that pins vLLM's KV pool in blocks stands in for (its image's, "
        "else the recipe's serve.engine.version): from 0.21.0 vLLM refuses to start where the pool holds less than one "
        "request at the context (vllm-project/vllm#41069), before 0.20.0 it starts and stalls on such a request "
        "(vllm-project/vllm#35541); None = not known, and a refusal says both.")
    max_prompt_tokens: int | None = Field(
        None, ge=1, description="Longest prompt the engine takes in one piece; a longer one gets TensorRT-LLM's 400 "
        "(its max_num_tokens without chunked prefill); None = any prompt the context holds.")
    efficiency: dict[str, float] = Field(default_factory=dict, description="Overrides of Efficiency fields.")
    calibrated: bool = Field(True, description="Apply the stored calibration of (engine, hardware, model class, "
                             "precision, TP, KV dtype).")
    perf_overrides: dict[str, Any] = Field(default_factory=dict, description="Overrides of PerfInputs fields.")

    @model_validator(mode="after")
    def _dp_divides_tp(self) -> EngineConfig:
        if self.tp % self.dp_attention:
            raise ValueError(f"dp_attention {self.dp_attention} does not divide tp {self.tp}: each DP-attention rank "
                             "is tp / dp GPUs")
        return self

    def perf_inputs(self) -> PerfInputs:
        return perf_inputs(self.model, self.hardware, precision=self.precision, kv_dtype=self.kv_dtype,
                           overrides=self.perf_overrides)

    def efficiency_factors(self) -> Efficiency:
        """Defaults, then the stored calibration of this key (when one matches), then explicit overrides."""
        found = self.calibration()
        fitted = found[1].efficiency if found is not None else {}
        return default_efficiency(self.engine_style, self.hardware).with_(**{**fitted, **self.efficiency})

    def model_class(self) -> str:
        from llmsweep.sim.calibration import model_class

        return model_class(self.model, self.perf_inputs(), self.spec.method if self.spec is not None else None)

    def calibration_key(self) -> CalibrationKey:
        """What a calibration of this engine is stored and looked up under: the one place a config's key is built."""
        from llmsweep.sim.calibration import calibration_key

        return calibration_key(self.engine_style, self.hardware, self.model_class(), self.precision, self.tp,
                               self.kv_dtype, ep=self.ep, dp_attention=self.dp_attention)

    def calibration(self) -> tuple[str, CalibrationEntry] | None:
        """(id, CalibrationEntry) stored for this engine's :meth:`calibration_key`; None when uncalibrated."""
        if not self.calibrated or self.timing == "constant":
            return None
        from llmsweep.sim.calibration import find_calibration

        return find_calibration(self.calibration_key())

    def calibration_label(self) -> str:
        """'calibrated: <id> (<engine version>, <GPU>, <date>)' or 'uncalibrated', for tables and provenance; an
        uncalibrated engine of a stored calibration's engine, GPU, model class and precision names it, and the TP
        and KV dtype it was fitted at (`sim.calibration.uncalibrated_label`)."""
        from llmsweep.sim.calibration import UNCALIBRATED, uncalibrated_label

        if self.timing == "constant":
            return "constant timing (no roofline)"
        if not self.calibrated:
            return UNCALIBRATED
        found = self.calibration()
        return found[1].label(found[0]) if found is not None else uncalibrated_label(self.calibration_key())

    def timer(self, inputs: PerfInputs | None = None) -> StepTimer:
        if self.timing == "constant":
            return ConstantTimer(ttft_s=self.ttft_s, itl_s=self.itl_s)
        return RooflineTimer(inputs or self.perf_inputs(), tp=self.tp, ep=self.ep,
                             efficiency=self.efficiency_factors(), dp=self.dp_attention)

    def kv_pool_tokens(self, inputs: PerfInputs | None = None) -> int:
        """Tokens the GPU KV pool holds (the override, else the pool the launch pins — :meth:`pinned_pool_tokens` —,
        else sized from HBM, weights and mem-fraction-static; at most `max_total_tokens` a DP-attention rank): what
        SGLang calls `max_total_num_tokens`, which it takes as `min(profiled, --max-total-tokens)` on each rank (0.5.x
        `ModelRunnerKVCacheMixin`, later `KVCacheConfigurator._apply_token_constraints`)."""
        if self.kv_capacity_tokens is not None:
            return self.kv_capacity_tokens
        inputs = inputs or self.perf_inputs()
        pinned = self.pinned_pool_tokens(inputs)
        sized = pinned if pinned is not None else kv_capacity_tokens(
            inputs, tp=self.tp, mem_fraction_static=self.mem_fraction_static, dp=self.dp_attention)
        if self.max_total_tokens is not None:
            return min(sized, self.max_total_tokens * self.dp_attention)
        return sized

    def pinned_pool_tokens(self, inputs: PerfInputs) -> int | None:
        """The KV pool the launch pins (`pinned_kv_tokens`, else `kv_cache_memory_bytes` over the KV bytes a token
        takes on each GPU), whatever the memory fraction: vLLM replaces its profiled block count with
        `--num-gpu-blocks-override` (`v1/core/kv_cache_utils.py` `may_override_num_blocks`) and skips its memory
        profiling for `--kv-cache-memory-bytes` (`v1/worker/gpu_worker.py` `Worker.determine_available_memory`: "does
        not respect the gpu_memory_utilization config"), then allocates the pool on each GPU (`torch.zeros`). None
        when the launch pins none. A pool that does not fit the GPU is refused (:meth:`pinned_pool_refusal`, raised
        as `simulator: …`): no prediction stands for a job that never serves."""
        refused = self.pinned_pool_refusal(inputs)
        if refused is not None:
            from llmsweep.errors import ConfigError

            raise ConfigError(f"simulator: {refused.message}", fix=refused.fix)
        if self.pinned_kv_tokens is not None:
            return self.pinned_kv_tokens
        if self.kv_cache_memory_bytes is not None:
            return int(self.kv_cache_memory_bytes // inputs.kv_bytes_per_token_per_gpu(self.tp, self.dp_attention))
        return None

    def pinned_pool_refusal(self, inputs: PerfInputs | None = None) -> ConfigError | None:
        """Why the pool the launch pins (:meth:`pinned_pool_tokens`) cannot serve the job, as an error to raise or
        report; None where it pins none or the pool fits. The one home of the check, which `sim serve`, `predict` and
        `run --simulate` refuse a job with and `validate`'s `resources.hbm-fit` warns of
        (`engines.sim.pinned_pool`).

        A pool that needs more of a GPU than its weights and the simulator's reserve leave of its whole HBM
        (`perf.kv_room_bytes_per_gpu`) is refused: the engine's allocation fails (CUDA out of memory) and it never
        serves. The engine's activation peak and CUDA graphs, which need room too, are not counted.

        So is a pool that does not hold one request at the context the engine serves (`context_length`, else the
        model's native context, vLLM's default `--max-model-len`) on a DP rank, in what vLLM does with it: pinned in
        bytes, vLLM refuses to start (its start-up check, `v1/core/kv_cache_utils.py` `_check_enough_kv_cache_memory`,
        reads the bytes as the memory for KV), before it allocates anything. Pinned in blocks, it depends on the
        release (`vllm_version`, :func:`vllm_checks_pinned_blocks`): from 0.21.0 vLLM refuses to start too (the check
        reads the override's blocks, vllm-project/vllm#41069); before 0.20.0 it starts (the check read the memory it
        profiled at its memory fraction, before the override replaced the count) and then never schedules a request
        longer than the pool: its scheduler retries it at every step, and every request behind it waits
        (vllm-project/vllm#35541); a release not known is said both ways. The block vLLM keeps out of the pool (its
        null block) is not counted."""
        from llmsweep.errors import ConfigError

        if self.pinned_kv_tokens is None and self.kv_cache_memory_bytes is None:
            return None
        inputs = inputs or self.perf_inputs()
        per_token = inputs.kv_bytes_per_token_per_gpu(self.tp, self.dp_attention)
        if self.pinned_kv_tokens is not None:
            tokens = self.pinned_kv_tokens
            need = tokens * per_token
            pinned = f"a pinned KV pool of {tokens} tokens"
        else:
            assert self.kv_cache_memory_bytes is not None
            need = float(self.kv_cache_memory_bytes)
            tokens = int(need // per_token)
            pinned = f"a pinned KV pool of {self.kv_cache_memory_bytes} bytes a GPU"
        room = kv_room_bytes_per_gpu(inputs, tp=self.tp)
        short = self._pool_short_of_context(tokens, per_token, inputs)
        if short is not None and self.pinned_kv_tokens is None:
            return short  # vLLM's start-up check of the bytes comes before it allocates them
        if need <= room:
            return short
        most = max(0, int(room // per_token))
        return ConfigError(
            f"{pinned} needs {need / 1e9:.1f} GB on each of the {self.tp} x {self.hardware}, and "
            f"{self.model}'s weights ({inputs.weight_bytes / self.tp / 1e9:.1f} GB a GPU) and the simulator's "
            f"{KV_RESERVE_BYTES_PER_GPU / GIB:g} GiB reserve leave {max(room, 0.0) / 1e9:.1f} GB of its "
            f"{inputs.hbm_bytes / 1e9:.1f} GB: the engine allocates a pinned pool whatever its memory fraction, "
            "and this one fails (CUDA out of memory), so the job never serves",
            fix=f"pin at most {most} tokens ({int(max(room, 0.0))} bytes on each GPU: vLLM's "
                "--num-gpu-blocks-override x its block size, or --kv-cache-memory-bytes), or raise the TP")

    def _pool_short_of_context(self, tokens: int, per_token: float, inputs: PerfInputs) -> ConfigError | None:
        """:meth:`pinned_pool_refusal`'s second check: a pinned pool of `tokens` (the DP ranks' together; `per_token`
        KV bytes a token on each GPU, averaged over the ranks) that holds less than one request at the context the
        engine serves on a rank; None where it holds one, or no context is known."""
        import math

        from llmsweep.catalog.models import find_model
        from llmsweep.errors import ConfigError

        native = None if self.context_length is not None else find_model(self.model)
        context = self.context_length or (native.native_context if native is not None else None)
        dp = self.dp_attention
        rank = tokens // dp
        if context is None or rank >= context:
            return None
        whose = (f"the context the launch serves ({context} tokens)" if self.context_length is not None else
                 f"{self.model}'s native context ({context} tokens, vLLM's --max-model-len when the launch sets none)")
        ranks = f" on each of the {dp} DP ranks" if dp > 1 else ""
        shorter = f"or serve a context of at most {rank} tokens (--max-model-len)"
        if self.pinned_kv_tokens is None:
            assert self.kv_cache_memory_bytes is not None
            needed = math.ceil(context * per_token * dp)  # one request's KV on one rank's GPUs, each GPU's share
            return ConfigError(
                f"a pinned KV pool of {self.kv_cache_memory_bytes} bytes a GPU holds {rank} tokens of {self.model}'s "
                f"KV{ranks}, less than one request at {whose}: vLLM refuses to start (\"To serve at least one request "
                f"with the models's max seq len ({context}), ({needed / GIB:.2f} GiB KV cache is needed, which is "
                f"larger than the available KV cache memory ({self.kv_cache_memory_bytes / GIB:.2f} GiB)\", "
                "v1/core/kv_cache_utils.py _check_enough_kv_cache_memory), so the job never serves",
                fix=f"pin at least {needed} bytes on each GPU (--kv-cache-memory-bytes), {shorter}")
        refuses = ("vLLM refuses to start (\"To serve at least one request with the models's max seq len "
                   f"({context}) …\": its start-up check reads the pool --num-gpu-blocks-override pins, "
                   "vllm-project/vllm#41069), so the job never serves")
        stalls = ("vLLM starts (its start-up check reads the memory it profiled at its memory fraction, before "
                  "--num-gpu-blocks-override replaces the block count), then never schedules a request longer than "
                  "the pool: its scheduler retries it at every step and every request behind it waits "
                  "(vllm-project/vllm#35541), so a run stalls once such a request arrives")
        checked = vllm_checks_pinned_blocks(self.vllm_version)
        release = f"vLLM {self.vllm_version}" if self.vllm_version else "a vLLM release not named"
        said = refuses if checked else stalls if checked is False else (
            f"from {VLLM_BLOCK_PIN_CHECKED} {refuses}; before 0.20.0 {stalls} ({release}: which it does is not "
            "established)")
        return ConfigError(
            f"a pinned KV pool of {tokens} tokens" + (f" ({rank} on each of the {dp} DP ranks)" if dp > 1 else "")
            + f" holds less than one request at {whose}: {said}",
            fix=f"pin at least {context} tokens on each DP rank (--num-gpu-blocks-override x the block size, and one "
                f"block more: vLLM keeps one out of the pool), "
                + (f"or serve a context of at most {rank} tokens (--max-model-len, or -1: vLLM then fits it to the "
                   "pool)" if checked else shorter))

    def sim_config(self, inputs: PerfInputs | None = None) -> SimConfig:
        """Scheduler knobs with the KV pool sized from HBM, weights and mem-fraction-static (or the override)."""
        if inputs is None and (self.kv_capacity_tokens is None or self.dram_gb):
            inputs = self.perf_inputs()
        kv = self.kv_pool_tokens(inputs)
        host = 0
        if self.dram_gb:
            assert inputs is not None
            host = host_capacity_tokens(inputs, dram_bytes=self.dram_gb * GB, tp=self.tp, dp=self.dp_attention)
        if kv < self.block_size:
            from llmsweep.errors import ConfigError

            if self.kv_capacity_tokens is not None:
                raise ConfigError(f"simulator: --kv-capacity-tokens {kv} holds less than one KV block of "
                                  f"{self.block_size} tokens", fix="raise --kv-capacity-tokens, or leave it out to "
                                  "size the pool from HBM")
            if self.pinned_kv_tokens is not None or self.kv_cache_memory_bytes is not None:
                raise ConfigError(f"simulator: the pinned KV pool holds {kv} tokens, less than one KV block of "
                                  f"{self.block_size} tokens",
                                  fix="pin a larger pool (vLLM's --num-gpu-blocks-override or "
                                      "--kv-cache-memory-bytes), or leave it out to size the pool from HBM")
            if self.max_total_tokens is not None and kv == self.max_total_tokens * self.dp_attention:
                raise ConfigError(f"simulator: --max-total-tokens {self.max_total_tokens} holds less than one KV "
                                  f"block of {self.block_size} tokens",
                                  fix="raise --max-total-tokens, or leave it out to size the pool from HBM")
            sized = inputs or self.perf_inputs()
            share = self.mem_fraction_static * sized.hbm_bytes / 1e9
            raise ConfigError(
                f"simulator: {self.model} does not fit {self.tp} x {self.hardware} at mem_fraction_static "
                f"{self.mem_fraction_static:.4g}: {sized.weight_bytes / self.tp / 1e9:.1f} GB of weights per GPU and "
                f"the simulator's {KV_RESERVE_BYTES_PER_GPU / GIB:g} GiB reserve against {share:.1f} GB of its "
                f"{sized.hbm_bytes / 1e9:.1f} GB (no room left for a KV cache)",
                fix="raise --tp, --mem-fraction-static or lower the precision",
            )
        return SimConfig(
            engine_style=self.engine_style, block_size=self.block_size, kv_capacity_tokens=kv,
            context_length=self.context_length, max_prompt_tokens=self.max_prompt_tokens, host_capacity_tokens=host,
            max_running_requests=self.max_running_requests,
            max_prefill_tokens=max(self.max_prefill_tokens, self.chunked_prefill_size),
            chunked_prefill_size=self.chunked_prefill_size, prefill_budget=self.prefill_budget,
            prefix_caching=self.prefix_caching, spec=self.spec,
            seed=self.seed, scheduler=self.scheduler, capacity=self.capacity,
        )


SGLANG_POOL_CAP_SOURCE = (
    "SGLang 0.5.x python/sglang/srt/model_executor/model_runner_kv_cache_mixin.py ModelRunnerKVCacheMixin "
    "(the request pool; KVCacheConfigurator.resolve_max_num_reqs in later trees)")
"""Where SGLang's own cap without speculation is read from (docs/simulator.md, *The running-request cap*)."""
SGLANG_SPECULATIVE_CAP_SOURCE = (
    "SGLang 0.5.x python/sglang/srt/server_args.py ServerArgs._handle_speculative_decoding "
    "(arg_groups/speculative_hook.py in later trees)")
"""Where SGLang's cap with speculative decoding is read from."""
SGLANG_SPECULATIVE_RUNNING_CAP = 48
"""SGLang's `--max-running-requests` when it is unset and a speculative algorithm is on (EAGLE, EAGLE3, NEXTN (MTP),
STANDALONE, NGRAM and the later DFLASH/DSPARK/FROZEN_KV_MTP: every handler writes 48, whatever the attention backend
or DP attention)."""


def sglang_running_cap(kv_pool_tokens: int, context_length: int, dp: int = 1) -> int:
    """The running-request cap an SGLang server takes when `--max-running-requests` is unset and it does not
    speculate (:data:`SGLANG_SPECULATIVE_RUNNING_CAP` when it does): its request pool,
    `min(max(int(T / C * 512), 2048), 4096)` for a KV pool of T tokens and a context of C, capped at `T // 2`
    (:data:`SGLANG_POOL_CAP_SOURCE`). With DP attention over `dp` ranks each rank sizes its own from its own pool
    (T / dp tokens; `KVCacheConfigurator.resolve_max_num_reqs` is per DP worker): the engine's cap is the ranks'
    together."""
    rank_tokens = kv_pool_tokens // dp
    pool = min(max(int(rank_tokens / context_length * 512), 2048), 4096)
    return dp * max(1, min(pool, rank_tokens // 2))


def sglang_pinned_cap(pinned: int, dp: int = 1) -> int:
    """The running-request cap of an SGLang launch whose `--max-running-requests` is `pinned` (the speculative 48
    included): with DP attention each of the `dp` ranks takes `pinned // dp` (`resolve_max_num_reqs`), so the engine
    runs at most `dp * (pinned // dp)`. A recipe's pin below `dp`, which leaves a rank none, is refused at the launch
    (`engines.sim.SimAdapter._dp_pinned_cap`); here a rank takes at least one."""
    return dp * max(1, pinned // dp)


def build_core(config: EngineConfig, *, coalesce: bool = True) -> EngineCore:
    """A ready engine core for `config`; `coalesce=False` keeps virtual-time callers on the step-by-step path."""
    inputs = None if (config.timing == "constant" and config.kv_capacity_tokens and not config.dram_gb) \
        else config.perf_inputs()
    return EngineCore(config.sim_config(inputs), config.timer(inputs), coalesce=coalesce)
