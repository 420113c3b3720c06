"""Resources before GPU hours: DRAM metadata for offload arms, GPUs per node, weights + KV within HBM.

The DRAM budget itself (`total-cpu-dram-gb`, 3 TB cap, node share) is computed by the planner exactly as InferenceX
does; these rules catch what would make that computation impossible or the server unable to start.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TypeGuard

from llmsweep.catalog.engines import get_engine
from llmsweep.catalog.hardware import HardwareSpec, find_hardware, hardware_for_runner
from llmsweep.catalog.models import find_model, model_for_prefix
from llmsweep.errors import ConfigError, LlmsweepError
from llmsweep.findings import Finding, Severity
from llmsweep.plan.job import Job
from llmsweep.policy.context import Context, engine_flags, entry_path, serve_arg_path
from llmsweep.policy.registry import rule
from llmsweep.spec.recipe import AgenticEntry, Recipe
from llmsweep.words import count_of

KV_CONTEXT_CAP = 131_072
"""Tokens of KV the fit check asks room for: one request at min(model context, job max-model-len, 128k)."""


def dram_arm_paths(recipe: Recipe) -> list[tuple[str | int, ...]]:
    return [path for path, entry in recipe.search_space_entries()
            if isinstance(entry, AgenticEntry) and entry.kv_offloading == "dram"]


@rule("kv-offload.hardware-metadata", Severity.ERROR,
      "A KV-offload arm needs the runner's hardware metadata (available-cpu-dram-mib, gpus-per-node)",
      "add `hardware: <runner>: {available-cpu-dram-mib: ..., gpus-per-node: ...}` to the runner file",
      "InferenceX spec §2.4 (total-cpu-dram-gb needs runner hardware metadata)")
def hardware_metadata(ctx: Context) -> Iterator[Finding]:
    for recipe in ctx.recipes.values():
        paths = dram_arm_paths(recipe)
        if paths and ctx.fleet.hardware_of(recipe.runner) is None:
            yield ctx.hit("kv-offload.hardware-metadata", recipe, (*paths[0], "kv-offloading"),
                          f"runner `{recipe.runner}` has no hardware metadata: the arm's DRAM budget cannot be "
                          "computed")


def gpus_per_node_of(ctx: Context, job: Job) -> int | None:
    per_node = ctx.fleet.gpus_per_node(job.runner_label)
    if per_node is None:
        hw = hardware_for_runner(job.runner_label)
        per_node = hw.gpus_per_node if hw else None
    return per_node


@rule("resources.gpus-per-node", Severity.ERROR,
      "A single-node job needs more GPUs than one node of its runner has",
      "lower tp/pp/pcp-size, or use a multinode recipe",
      "InferenceX spec §2.4 (tp·pp·pcp must fit gpus-per-node)")
def gpus_per_node(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.job_pairs():
        if job.multinode:
            continue
        per_node = gpus_per_node_of(ctx, job)
        if per_node is not None and job.gpus > per_node:
            yield ctx.hit("resources.gpus-per-node", recipe, (*entry_path(recipe, job), "tp"),
                          f"tp·pp·pcp = {count_of(job.gpus, 'GPU')} but `{job.runner_label}` has {per_node} per node",
                          job=job)


def hbm_share(job: Job, hw: HardwareSpec, weights: float) -> tuple[float, str]:
    """(bytes, what they are) of each GPU's memory that `job`'s weights (`weights`, per GPU) and KV cache must fit,
    at the memory fraction its engine launches with (:func:`llmsweep.engines.launch_memory_fraction`: the recipe's
    flag, else the engine's own default for its version, else the simulator's 0.88, each named with its source):
    HBM × the fraction for a share of HBM; for TensorRT-LLM's `kv_cache_free_gpu_memory_fraction`, a share of the
    memory the weights leave, the weights + the fraction × (HBM − weights) (`MemoryFraction.budget_bytes`; the
    activation peak TensorRT-LLM also leaves out of the free memory is not modelled, so the check misses a job that
    fits this budget but not the engine's own).

    An engine the catalog records no fraction for (transformers serve, an engine llmsweep has no adapter for) is
    checked against the whole HBM: weights plus one request's KV over it cannot start under any fraction."""
    from llmsweep.engines import launch_memory_fraction

    hbm = f"{hw.id}'s {hw.hbm_bytes / 1e9:.0f} GB"
    fraction = launch_memory_fraction(job, hw.id)
    if fraction is None:
        try:
            engine = get_engine(job.engine or job.framework).display_name
        except ConfigError:
            engine = job.engine or job.framework
        return hw.hbm_bytes, (f"all of {hbm}: {engine}'s memory fraction is no share of the whole HBM that the "
                              "engines catalog records")
    budget = fraction.budget_bytes(hw.hbm_bytes, weights)
    if fraction.share_of == "free":
        return budget, (f"memory fraction {fraction.describe()}, of {hbm}: the weights + {fraction.value:g} × the "
                        f"rest; the engine's activation peak is not modelled")
    return budget, f"memory fraction {fraction.describe()}, of {hbm}"


@rule("resources.hbm-fit", Severity.WARNING,
      "Model weights plus one request's KV do not fit the GPUs' HBM share, or a pinned KV pool does not fit the GPU "
      "or hold one request at the context",
      "raise tp (or the engine's memory fraction: mem-fraction-static / gpu-memory-utilization / "
      "kv_cache_free_gpu_memory_fraction), or serve a smaller precision",
      "catalog models × hardware (weights at the recipe's precision, KV per token per GPU); the share is the memory "
      "fraction the job's engine launches with (the recipe's flag, else the engine's own default from the engines "
      "catalog, else the simulator's 0.88): of HBM, or for TensorRT-LLM of the memory the weights leave; a KV pool "
      "pinned in vLLM's terms (--num-gpu-blocks-override, --kv-cache-memory-bytes) against what the weights leave of "
      "the whole GPU and against one request at the context, the check the simulator refuses the job with "
      "(engines.sim.pinned_pool); under --kv-cache-memory-bytes, which vLLM takes whatever its memory fraction, the "
      "fraction is not checked, nor under --num-gpu-blocks-override from vLLM 0.21.0 (vllm-project/vllm#41069: the "
      "override, not the memory profiled at the fraction, is what its start-up check reads)")
def hbm_fit(ctx: Context) -> Iterator[Finding]:
    from llmsweep.catalog.precision import MODEL_DTYPE
    from llmsweep.engines import context_fitted, launched_job
    from llmsweep.engines.base import topology
    from llmsweep.engines.sim import pinned_pool

    for job, recipe in ctx.job_pairs():
        if job.multinode or job.tp is None or job.sku is None:
            continue
        # a pinned pool is allocated whatever the memory fraction: one that does not fit fails at start-up, one short
        # of a request at the context fails or stalls, and the simulator refuses the job at predict/run time in these
        # words
        launched = launched_job(job)  # the job as its engine launches it: its context, its memory fraction, its pool
        pool = pinned_pool(launched)
        if pool is not None and pool.refusal is not None:
            yield ctx.hit("resources.hbm-fit", recipe, (*entry_path(recipe, job), "tp"), pool.refusal.message,
                          job=job, fix=pool.refusal.fix)
            continue
        if pool is not None and not pool.sizes_from_fraction:
            continue  # the engine takes the pinned pool whatever its fraction: the pool, checked above, is its KV
        # an HF id the catalog does not know is not its prefix's model (Qwen3.5-35B-A3B is not the 397B one):
        # `input.unknown-model` says so, and no figure of another model is costed
        model = find_model(job.model) or (model_for_prefix(job.model_prefix) if "/" not in job.model else None)
        hw = find_hardware(job.sku)
        if model is None or hw is None:
            continue
        try:
            weights = model.served_weight_bytes(job.precision, job.model if "/" in job.model else None) / job.gpus
            # a recipe's context flag, else the derived isl + osl + 256; a context the engine fits to its memory at
            # start-up (vLLM's `auto`) must still hold one request of what the job sends (its derived length)
            context = job.max_model_len if context_fitted(job) else launched.max_model_len
            tokens = min(model.native_context, context or KV_CONTEXT_CAP, KV_CONTEXT_CAP)
            kv_dtype = _kv_dtype(job)
            # one request's KV sits on one DP-attention rank, split only over that rank's tp / dp GPUs
            kv = model.kv_bytes_per_token_per_gpu(kv_dtype, job.tp // topology(job).dp_ranks) * tokens \
                if kv_dtype is not None else 0
        except LlmsweepError:
            continue
        budget, share = hbm_share(launched, hw, weights)
        if weights + kv > budget:
            cache = f", {kv_dtype} KV cache" if kv_dtype != MODEL_DTYPE else ""
            kv_said = (f"{kv / 1e9:.1f} GB KV ({tokens} tokens{cache})" if kv_dtype is not None
                       else "its KV (not costed: its --kv-cache-dtype has no known size)")
            yield ctx.hit("resources.hbm-fit", recipe, (*entry_path(recipe, job), "tp"),
                          f"{model.id} at {job.precision}: {weights / 1e9:.0f} GB weights + {kv_said} per GPU over "
                          f"tp·pp={job.gpus} exceeds {budget / 1e9:.0f} GB "
                          f"({share})", job=job)


def _kv_dtype(job: Job) -> str | None:
    """The KV cache the job's flags ask for, as `resources.hbm-fit` sizes it (`engines.sim.kv_cache_dtype`; the
    model's dtype when they set none); None for a spelling of no known size (`serve.flag-value` names it), whose KV
    is then not costed rather than costed as bf16."""
    from llmsweep.catalog.precision import MODEL_DTYPE
    from llmsweep.engines.sim import kv_cache_dtype

    try:
        return kv_cache_dtype({name: value for _, name, value in engine_flags(job)}) or MODEL_DTYPE
    except ConfigError:
        return None


def _offload_gb(job: Job) -> tuple[str, float] | None:
    """(what, GB) of host memory the recipe's own offload flags ask for, summed over ranks, and vLLM's per-engine
    sizes (`cpu_bytes_to_use`, `--kv-offloading-size`) over the engines a DP-attention launch runs: vLLM's
    `--data-parallel-size` starts one engine per DP rank, each reading the figure as its own pool
    (`engines.vllm.VLLMAdapter._kv_offload`). A `--kv-transfer-config` is read as a mapping or as its JSON text
    (`catalog.engines.kv_transfer_keys`, through a MultiConnector's connectors). None if the recipe sets none."""
    from llmsweep.catalog.engines import kv_transfer_keys
    from llmsweep.engines.base import topology

    if job.serve is None:
        return None
    ranks = (job.tp or 1) * (job.pp or 1)
    engines = topology(job).dp_ranks
    per_engine = f" × {engines} DP engines" if engines > 1 else ""
    args = {name: value for _, name, value in engine_flags(job)}
    size = args.get("--hicache-size")
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        return f"--hicache-size {size:g} GB × {ranks} ranks", float(size) * ranks
    lmcache = job.serve.env.get("LMCACHE_MAX_LOCAL_CPU_SIZE")
    if lmcache is not None:
        try:
            return f"LMCACHE_MAX_LOCAL_CPU_SIZE {lmcache} GB × {ranks} ranks", float(lmcache) * ranks
        except ValueError:
            return None
    keys = kv_transfer_keys(args.get("--kv-transfer-config"))
    per_rank = _amount(keys.get("cpu_bytes_to_use_per_rank"))
    if per_rank is not None:
        return f"cpu_bytes_to_use_per_rank {per_rank:g} × {ranks} ranks", per_rank * ranks / 1e9
    cpu = _amount(keys.get("cpu_bytes_to_use"))
    if cpu is not None:  # OffloadingConnector's: one engine's pool, over its TP × PP workers
        return f"cpu_bytes_to_use {cpu:g}{per_engine}", cpu * engines / 1e9
    size = _amount(args.get("--kv-offloading-size"))
    if size is not None:  # vLLM's: GiB, one engine's total over its TP × PP ranks (its cpu_bytes_to_use)
        return f"--kv-offloading-size {size:g} GiB{per_engine}", size * engines * 2**30 / 1e9
    return None


def _number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _amount(value: object) -> float | None:
    """A size as the recipe writes it: a number, or a number's text (a quoted `"1e12"`, in a mapping or in a JSON
    config); else None."""
    if _number(value):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


PER_RANK_GB_BACKENDS = frozenset({"hicache", "mooncake", "lmcache"})
"""Offload backends whose pool the adapters size in whole GB per rank (`engines.sglang.per_rank_gb`)."""

OFFLOAD_CONNECTORS = frozenset({"OffloadingConnector", "SimpleCPUOffloadConnector", "LMCacheConnectorV1",
                                "lmcache_offload"})
"""vLLM's and ATOM's (`lmcache_offload`) KV connectors that keep KV in host memory (a transfer connector such as
NixlConnector does not)."""

OFFLOAD_SWITCHES = ("--enable-hierarchical-cache", "--kv-offloading-backend", "--enable-lmcache")
"""Flags that turn an engine's host-memory KV pool on (SGLang's HiCache and its LMCache connector, vLLM's backend)."""

LMCACHE_CPU_SWITCH = "LMCACHE_LOCAL_CPU"
"""The one LMCache variable that itself turns its host-memory KV pool on. LMCache is loaded only by a connector in the
launch (vLLM's `LMCacheConnectorV1`, ATOM's `lmcache_offload`, SGLang's `--enable-lmcache`, each an offload above);
its other variables (`LMCACHE_CHUNK_SIZE`, ...) tune that connector and keep no KV anywhere on a launch without one."""


def _on(value: object) -> bool:
    """A boolean variable or flag value as LMCache and the engines read it on: true, 1, yes, on (any case)."""
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"))


def _offloads(job: Job) -> str | None:
    """The recipe's own flag or variable that makes the job's engine keep KV in host memory, as written; None when
    it sets none."""
    from llmsweep.catalog.engines import kv_transfer_keys

    for written, name, value in engine_flags(job):
        if name in OFFLOAD_SWITCHES and value not in (False, None, "false", "False"):
            return written
        if name in ("--hicache-size", "--kv-offloading-size") and _number(value) and value > 0:
            return written
        if name == "--kv-transfer-config":
            connectors = {str(name) for _, name in _connector_names(value)}
            if connectors & OFFLOAD_CONNECTORS or "cpu_bytes_to_use" in kv_transfer_keys(value):
                return written
    env = job.serve.env if job.serve is not None else {}
    return LMCACHE_CPU_SWITCH if _on(env.get(LMCACHE_CPU_SWITCH)) else None


def _connector_names(config: object) -> list[tuple[str, object]]:
    """Every `kv_connector` of a `--kv-transfer-config` (a dict or its JSON text), through a MultiConnector's list."""
    from llmsweep.catalog.engines import kv_transfer_config

    config = kv_transfer_config(config)
    if config is None:
        return []
    out: list[tuple[str, object]] = [("kv_connector", config.get("kv_connector"))]
    extra = config.get("kv_connector_extra_config")
    inner = extra.get("connectors") if isinstance(extra, dict) else None
    for c in inner if isinstance(inner, list) else ():
        out += _connector_names(c)
    return out


@rule("kv-offload.none-arm", Severity.ERROR,
      "An arm with `kv-offloading: none` whose launch still keeps KV in host memory",
      "put the offload flags in an override for the `dram` arms, or delete them: the adapter renders a `dram` "
      "arm's offload from its kv-offload-backend and total-cpu-dram-gb",
      "InferenceX's agentic launch checks KV_OFFLOADING none ⇒ no offload backend (agentx-spec §2); a job named "
      "kvnone that offloads is another configuration under its name")
def none_arm_offloads(ctx: Context) -> Iterator[Finding]:
    from llmsweep.policy.context import serve_arg_path, serve_env_path

    for job, recipe in ctx.runnable_pairs():
        if job.kv_offloading != "none" or job.serve is None:  # None: a fixed-length job, whose label says nothing
            continue
        written = _offloads(job)
        if written is None:
            continue
        where = serve_env_path(recipe, job, written) if written in job.serve.env else \
            serve_arg_path(recipe, job, written)
        yield ctx.hit("kv-offload.none-arm", recipe, where,
                      f"`{written}` keeps KV in host memory on an arm with kv-offloading "
                      f"{job.kv_offloading or 'none'}: its results would be labelled without offload", job=job)


BYTE_COUNT_KEYS = ("cpu_bytes_to_use", "cpu_bytes_to_use_per_rank")
"""vLLM's offload connectors' byte counts, which vLLM reads with `int()` at start-up."""


@rule("serve.kv-transfer-bytes", Severity.ERROR,
      "A byte count in --kv-transfer-config is text vLLM cannot read as an integer",
      "write the count as a whole number of bytes (1000000000000 or 1e12, not the text \"1e12\"), or delete it "
      "and let the adapter size the pool from total-cpu-dram-gb",
      "vLLM's offload specs read cpu_bytes_to_use with int(), which refuses '1e12', at start-up after the weights "
      "have loaded")
def kv_transfer_bytes(ctx: Context) -> Iterator[Finding]:
    from llmsweep.catalog.engines import kv_transfer_keys
    from llmsweep.policy.context import serve_arg_path

    for job, recipe in ctx.runnable_pairs():
        args = {name: value for _, name, value in engine_flags(job)}
        if "--kv-transfer-config" not in args:
            continue
        keys = kv_transfer_keys(args["--kv-transfer-config"])
        for key in BYTE_COUNT_KEYS:
            value = keys.get(key)
            if isinstance(value, str) and not _whole_number_text(value):
                yield ctx.hit("serve.kv-transfer-bytes", recipe, serve_arg_path(recipe, job, "--kv-transfer-config"),
                              f"{key} is the text {value!r}, which vLLM's int() refuses at start-up", job=job)


def _whole_number_text(text: str) -> bool:
    try:
        int(text.strip())
    except ValueError:
        return False
    return True


@rule("kv-offload.dram-budget", Severity.ERROR,
      "KV offload asks for more host DRAM than the job's budget (total-cpu-dram-gb)",
      "delete the hand-written size: the adapter sizes the pool from total-cpu-dram-gb",
      "AgentX KV-offload policy (agentx-spec §4.4): DRAM per server capped at 3 TB × GPUs used / GPUs in server")
def dram_budget(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        if job.kv_offloading != "dram":
            continue
        budget = job.total_cpu_dram_gb or 0
        asked = _offload_gb(job)
        if budget <= 0:
            yield ctx.hit("kv-offload.dram-budget", recipe, (*entry_path(recipe, job), "kv-offloading"),
                          "the offload arm has no DRAM budget (total-cpu-dram-gb is 0)", job=job)
        elif asked is not None and asked[1] > budget + 0.5:
            from llmsweep.policy.context import serve_arg_path

            what, gb = asked
            flag = next((f for f in ("--hicache-size", "--kv-offloading-size") if what.startswith(f)),
                        "--kv-transfer-config")
            yield ctx.hit("kv-offload.dram-budget", recipe, serve_arg_path(recipe, job, flag),
                          f"{what} = {gb:.0f} GB exceeds the job's total-cpu-dram-gb {budget}", job=job)
        elif asked is None and job.kv_offload_backend is not None \
                and job.kv_offload_backend.name in PER_RANK_GB_BACKENDS \
                and budget < (ranks := (job.tp or 1) * (job.pp or 1)):
            # the adapter sizes these pools in whole GB per rank: a budget below one GB a rank is 0, which SGLang's
            # --hicache-size reads as "size by --hicache-ratio" instead
            yield ctx.hit("kv-offload.dram-budget", recipe, (*entry_path(recipe, job), "kv-offloading"),
                          f"total-cpu-dram-gb {budget} over {ranks} ranks is 0 GB a rank: the "
                          f"{job.kv_offload_backend.name} pool would not be the budget's", job=job)


@rule("resources.kv-dtype-auto", Severity.WARNING,
      "A vLLM or SGLang launch of a ModelOpt checkpoint leaves --kv-cache-dtype at auto: the engine keeps the "
      "checkpoint's KV-cache quantisation, the simulator and resources.hbm-fit size the model's dtype",
      "write the KV-cache dtype the launch is to keep: the checkpoint's (`--kv-cache-dtype fp8` on vLLM, `fp8_e4m3` "
      "on SGLang, where its hf_quant_config.json names kv_cache_quant_algo FP8), or `--kv-cache-dtype bfloat16` "
      "where it names none, so that what is sized is what runs",
      "vLLM 0.14.0 on (vllm-project/vllm#30785; read in the 0.12.0, 0.13.0, 0.14.0 and 0.26.0 wheels): "
      "EngineArgs.create_engine_config resolves `auto` with vllm/utils/torch_utils.py resolve_kv_cache_dtype_string "
      "from a modelopt quantisation config's kv_cache_quant_algo / kv_cache_scheme (FP8; NVFP4 in 0.26.0). SGLang "
      "0.5.4 on (read in the 0.4.6, 0.4.10, 0.5.1, 0.5.4, 0.5.9, 0.5.12, 0.5.19 and 0.5.23 wheels): "
      "ModelRunner.configure_kv_cache_dtype keeps FP8 where the quant_config's kv_cache_quant_algo is FP8")
def kv_dtype_auto(ctx: Context) -> Iterator[Finding]:
    """The simulator and `resources.hbm-fit` read `auto` (or no flag) as the model's dtype
    (`engines.sim.kv_cache_dtype`, `catalog.precision.MODEL_DTYPE`), which is what vLLM and SGLang keep for every
    checkpoint but a ModelOpt export that names a KV-cache quantisation their `auto` takes
    (`Adapter.checkpoint_kv_dtypes`, `engines.checkpoint_kv.auto_kv_cache`): that one they keep in its format (FP8:
    half the bytes per token sized, twice the tokens). The finding points at the written `auto`, else at the field
    naming the checkpoint (`serve.model-path`, else `model`)."""
    from llmsweep.catalog.version import as_version
    from llmsweep.engines import ADAPTERS, adapter_for
    from llmsweep.engines.checkpoint_kv import auto_kv_cache
    from llmsweep.engines.sim import SimAdapter

    for job, recipe in ctx.runnable_pairs():
        engine = SimAdapter.stands_in_for(job)
        adapter = ADAPTERS.get(engine) if engine is not None else None
        if adapter is None or not adapter.checkpoint_kv_dtypes:
            continue
        written = next(((flag, value) for flag, name, value in engine_flags(job) if name == "--kv-cache-dtype"),
                       None)
        if written is not None and str(written[1]).strip().lower() != "auto":
            continue
        version = None
        if job.engine == engine:
            try:
                version = as_version(adapter_for(job).image_and_version(job)[1])
            except LlmsweepError:
                continue
        kept = auto_kv_cache(job, adapter.checkpoint_kv_dtypes, version)
        if kept is None:
            continue
        name = adapter.info().display_name
        since = adapter.checkpoint_kv_dtypes[kept.algo].since
        said = f"{name} {version}" if version is not None else f"{name} (version unknown; {since} on)"
        flag = "`--kv-cache-dtype auto`" if written is not None else "no `--kv-cache-dtype` (auto)"
        if written is not None:
            path = serve_arg_path(recipe, job, written[0])
        elif recipe.serve is not None and recipe.serve.model_path:
            path = ("serve", "model-path")
        else:
            path = ("model",)
        algo = kept.algo.upper()
        yield ctx.hit("resources.kv-dtype-auto", recipe, path,
                      f"with {flag}, {said} keeps {job.model}'s KV cache {kept.how}, while the simulator and "
                      f"resources.hbm-fit size it at the model's dtype (bf16: {kept.ratio} an {algo} cache's bytes "
                      "per token)", job=job,
                      fix=f"write the KV-cache dtype the launch is to keep: `--kv-cache-dtype {kept.spelling}` where "
                          f"the checkpoint names kv_cache_quant_algo {algo}, or `--kv-cache-dtype bfloat16` where it "
                          "names none, so that what is sized is what runs")
