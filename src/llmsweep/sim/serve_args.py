"""The simulated engine's command line, `llmsweep sim serve ...`, declared once, in the simulator's own room: the
options its server takes, their parser, and the `EngineConfig` they describe.

As a real engine's server arguments live in the engine, these live below the CLI: `llmsweep sim serve` is built from
:func:`serve_options` (the CLI adds only what it does with them: serve the engine over HTTP), and a room that reads a
simulator launch without serving it — `execute.virtual` running a group in virtual time, `sim calibrate` predicting a
measured job — parses the launch's argv with :func:`engine_config_from_argv`, the same options. No room below the
CLI imports `llmsweep.cli` (`tests/unit/test_rooms.py`). An option other commands take too (`--model`, `--host`,
`--seed`, `--spec-method`, `--spec-k`, `--kv-transfer`) has its concept's one spelling (`option_spellings`) and is
tagged with its concept, as the CLI's shared options are; its parameter name is the concept's (`cli.options.CONCEPTS`,
checked by `tests/unit/cli/test_sim_serve_defaults.py`). Each option's spelling is `sim.serve_flags`'s, which the
adapter that renders a job into a launch (`engines.sim`) writes it with.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar, get_args

import click

from llmsweep.catalog.engines import CAPACITY_POLICIES, SCHEDULER_POLICIES
from llmsweep.engine_ids import MAX_SPEC_K
from llmsweep.errors import ConfigError
from llmsweep.option_kit import BIND_PORT, FINITE_POSITIVE, FiniteRange, Opt, field_option
from llmsweep.option_spellings import flag
from llmsweep.sim import serve_flags as sf
from llmsweep.sim.config import SimConfig, SpecDecodeConfig, typical_acceptance
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.transfer import DEFAULT_LINK

F = TypeVar("F", bound=Callable[..., Any])

SPEC_METHODS: tuple[str, ...] = get_args(SpecDecodeConfig.model_fields["method"].annotation)
"""The draft methods the simulator models (`--spec-method`'s choices): `SpecDecodeConfig.method`'s."""


def _engine_default(name: str) -> Any:
    """The simulated engine's own default for `name` (`EngineConfig`): `sim serve`'s options take it from there."""
    return EngineConfig.model_fields[name].default


def _shared(concept: str, dest: str, **settings: Any) -> Callable[[F], F]:
    """The shared option `concept` as `sim serve` takes it: its one spelling, tagged with the concept; `dest` is the
    concept's parameter name."""
    return click.option(flag(concept), dest, cls=Opt, concept=concept, **settings)


def _engine_option(spelling: str, field: str, **settings: Any) -> Callable[[F], F]:
    """`sim serve`'s option `spelling` (`sim.serve_flags`') that feeds `EngineConfig.field`: its parameter is named
    after the field, so a renamed spelling reaches the same field."""
    return field_option(spelling, field, source=(EngineConfig, field), **settings)


_OPTIONS: list[Callable[[Callable[..., Any]], Callable[..., Any]]] = [
    field_option(sf.MODEL, "model", concept="model", source=(EngineConfig, "model"), required=False,
                 show_default=True),
    _engine_option(sf.HARDWARE, "hardware", show_default=True, help="GPU SKU whose figures drive the roofline."),
    _engine_option(sf.TP, "tp", show_default=True, type=int, help="Tensor-parallel degree."),
    _engine_option(sf.EP, "ep", show_default=True, type=int, help="Expert-parallel degree."),
    _engine_option(sf.DP_ATTENTION, "dp_attention", show_default=True, type=int,
                   help=f"DP-attention ranks (dividing {sf.TP}): each rank keeps its own requests' KV, so the pool "
                        "is the ranks' together and a step waits for the busiest rank; "
                        f"{sf.MAX_RUNNING_REQUESTS} and the step budget stay the engine's. A job's launch sets it to "
                        "its --dp-size where the recipe or the entry asks for DP attention."),
    _shared("bind_host", "host", default="127.0.0.1", show_default=True, help="Address to bind."),
    click.option(sf.PORT, "port", default=8000, show_default=True, type=BIND_PORT,
                 help="Port to bind (0 = any free port)."),
    _engine_option(sf.PRECISION, "precision", show_default=True,
                   help="Weight/compute precision (bf16, fp8, fp4)."),
    _engine_option(sf.KV_DTYPE, "kv_dtype", show_default=True,
                   help="KV-cache dtype, as an engine spells it (bf16, fp8, fp8_e4m3, mxfp8, nvfp4, fp4_e2m1, auto)."),
    _shared("spec_method", "spec_method", type=click.Choice(SPEC_METHODS), default=None,
            help="Speculative decoding method (off when absent)."),
    _shared("spec_k", "spec_k", default=3, show_default=True, type=click.IntRange(1, MAX_SPEC_K),
            help="Draft tokens per step."),
    click.option(sf.ACCEPTANCE_LENGTH, "acceptance_length", type=FiniteRange(min=1), default=None,
                 help="Forced mean acceptance length (tokens per verify step, bonus included); without it a "
                 f"{sf.SPEC_METHOD} realises that method's typical acceptance (nothing pinned)."),
    click.option(sf.KV_OFFLOAD, "kv_offload", type=click.Choice(["none", "dram"]), default="none", show_default=True,
                 help="CPU KV tier (HiCache / offload connector)."),
    _engine_option(sf.DRAM_GB, "dram_gb", show_default=True, help="CPU KV tier size in GB."),
    _engine_option(sf.MEM_FRACTION_STATIC, "mem_fraction_static", show_default=True,
                   help="Share of HBM for weights plus KV pool."),
    _engine_option(sf.MAX_RUNNING_REQUESTS, "max_running_requests", type=int, show_default=True,
                   help=f"Most running requests. A job's launch (`render`, `run {flag('simulate')}`, `predict`) sets "
                        "it to the default of the engine the job stands in for where the recipe pins none: vLLM's "
                        "and ATOM's on the job's GPU (the engines catalog's `max_running_default`), SGLang's from the "
                        "KV pool and context (its request pool, 2048-4096, at most half the pool's tokens; 48 when it "
                        f"speculates). Run by hand, 256 whatever {sf.ENGINE_STYLE}."),
    _engine_option(sf.CHUNKED_PREFILL_SIZE, "chunked_prefill_size", type=int, show_default=True,
                   help="Prefill chunk (tokens)."),
    _engine_option(sf.MAX_PREFILL_TOKENS, "max_prefill_tokens", type=int, show_default=True,
                   help="Token budget of one step (prefill chunks plus decode tokens); at least "
                        f"{sf.CHUNKED_PREFILL_SIZE}."),
    _engine_option(sf.PREFILL_BUDGET, "prefill_budget", type=int,
                   help="Most prompt tokens of one step over all requests; a job's launch sets it for SGLang with DP "
                        "attention, whose ranks each prefill at most their own chunk [default: none, only "
                        f"{sf.MAX_PREFILL_TOKENS} bounds them]."),
    _engine_option(sf.SCHEDULER, "scheduler", type=click.Choice(SCHEDULER_POLICIES), show_default=True),
    _engine_option(sf.CAPACITY, "capacity", type=click.Choice(CAPACITY_POLICIES), show_default=True),
    _engine_option(sf.KV_CAPACITY_TOKENS, "kv_capacity_tokens", type=int),
    _engine_option(sf.MAX_TOTAL_TOKENS, "max_total_tokens", type=int,
                   help="Most tokens the KV pool holds, per DP-attention rank: SGLang's --max-total-tokens, which a "
                        "job's launch passes on; the pool is the smaller of it and the pool sized from HBM "
                        "[default: no cap]."),
    _engine_option(sf.PINNED_KV_TOKENS, "pinned_kv_tokens", type=int,
                   help="The KV pool in tokens, the DP-attention ranks' together, whatever "
                        f"{sf.MEM_FRACTION_STATIC}: a job's launch sets it from vLLM's --num-gpu-blocks-override "
                        "(blocks x its block size x DP ranks); a pool that does not fit beside the weights is "
                        "refused, as the engine fails to allocate it [default: sized from HBM]."),
    _engine_option(sf.KV_CACHE_MEMORY_BYTES, "kv_cache_memory_bytes", type=int,
                   help=f"Bytes of KV pool on each GPU, whatever {sf.MEM_FRACTION_STATIC}: vLLM's "
                        "--kv-cache-memory-bytes, which a job's launch passes on; refused where they do not fit beside "
                        f"the weights; {sf.PINNED_KV_TOKENS} wins [default: sized from HBM]."),
    _engine_option(f"{sf.PREFIX_CACHING}/{sf.NO_PREFIX_CACHING}", "prefix_caching", show_default=True,
                   help="Reuse cached prompt blocks. A job's launch turns it off where the recipe does for the engine "
                        "the job stands in for (SGLang's --disable-radix-cache, vLLM's or ATOM's "
                        "--no-enable-prefix-caching)."),
    click.option(sf.NO_CALIBRATION, "no_calibration", is_flag=True,
                 help="Serve the roofline's default efficiency, not the stored calibration of (engine style, hardware, "
                      "model class, precision, TP, KV dtype): the label says `uncalibrated` (what "
                      f"`run {flag('simulate')}` renders for a job of an engine no calibration was fitted on)."),
    _engine_option(sf.CONTEXT_LENGTH, "context_length", type=int,
                   help="Most tokens of one request, prompt + output; longer ones get a 400, as an engine refuses them "
                        "[default: none, only the KV pool bounds a request]."),
    _engine_option(sf.VLLM_VERSION, "vllm_version", type=str,
                   help="The vLLM release a launch that pins the pool with vLLM's --num-gpu-blocks-override stands in "
                        "for (its image's version): a pool short of one request at the context is refused in that "
                        "release's terms (from 0.21.0 vLLM refuses to start, vllm-project/vllm#41069; before 0.20.0 it "
                        "stalls, vllm-project/vllm#35541) [default: not known, said both ways]."),
    _engine_option(sf.MAX_PROMPT_TOKENS, "max_prompt_tokens", type=int,
                   help="Longest prompt taken in one piece; a longer one gets TensorRT-LLM's 400 (`should not exceed "
                        "max_num_tokens`), as trtllm-serve without chunked prefill answers it. A TensorRT-LLM job's "
                        "launch sets it from the recipe's --max_num_tokens (else 8192) unless it enables chunked "
                        "prefill [default: none]."),
    _engine_option(sf.TIMING, "timing", type=click.Choice(["roofline", "constant"]), show_default=True),
    click.option(sf.TTFT_MS, "ttft_ms", type=FINITE_POSITIVE, default=1e3 * _engine_default("ttft_s"),
                 show_default=True, help="constant timing: prefill step."),
    click.option(sf.ITL_MS, "itl_ms", type=FINITE_POSITIVE, default=1e3 * _engine_default("itl_s"), show_default=True,
                 help="constant timing: decode step."),
    field_option(sf.SEED, "seed", concept="seed", source=(SimConfig, "seed"), type=int, show_default=True),
    click.option(sf.SERVED_MODEL_NAME, "served_model_name", default=None,
                 help=f"Model id the API reports (default: {sf.MODEL})."),
    click.option(sf.METRICS_STYLE, "metrics_style", type=click.Choice(["sglang", "vllm", "both"]), default="both",
                 show_default=True, help="Whose metric names /metrics exposes."),
    click.option(sf.ENGINE_STYLE, "engine_style", type=click.Choice(["sglang", "vllm"]), default=None,
                 help=f"Whose log lines and efficiency defaults to mimic (default from {sf.METRICS_STYLE})."),
    click.option(sf.ROLE, "role", type=click.Choice(["server", "prefill", "decode"]), default="server",
                 show_default=True,
                 help="Disaggregated role: prefill computes prompts and hands their KV over; decode admits requests "
                 "whose KV arrives over the modelled link (`llmsweep sim router` sits in front of both)."),
    _shared("kv_transfer", "kv_transfer", default=None,
            help="Disaggregated roles: the KV-transfer backend the modelled link stands for."),
    click.option(sf.KV_LINKS, "kv_links", default=None,
                 help='Decode role: the modelled link from each prefill worker, in the router\'s order, as a JSON list '
                 '(`[{"kind":"scale-out","name":"NIC","gbps":50,"latency_s":1e-05}]`: GB/s per GPU per direction, '
                 'set-up seconds; one link: from every prefill worker). Default: one '
                 f'{DEFAULT_LINK.label()}. `llmsweep render` gives each decode worker the links the hardware catalog '
                 'gives.'),
    click.option(sf.PREFILL_TP, "prefill_tp", type=click.IntRange(min=1), default=None,
                 help="Decode role: the prefill workers' TP (each GPU moves its KV shard; default: this worker's "
                      f"{sf.TP})."),
]
"""`sim serve`'s options, in the order its `--help` lists them."""


def serve_options(f: F) -> F:
    """Declare the simulated engine's options on the command function `f` (`llmsweep sim serve`'s, and the parser of
    :func:`engine_config_from_argv`): one declaration, each command its own option objects."""
    for declare in reversed(_OPTIONS):
        f = declare(f)
    return f


@functools.cache
def _parser() -> click.Command:
    """A command that only parses `sim serve`'s options."""

    @click.command("serve")
    @serve_options
    def parse_only(**_: object) -> None:
        """The simulated engine's options, parsed."""

    return parse_only


def engine_config_from_argv(argv: list[str] | tuple[str, ...]) -> EngineConfig:
    """The `EngineConfig` a `llmsweep sim serve ...` command line would serve.

    Accepts the full argv an engine adapter renders (anything up to and including `serve` is skipped), so a planner
    can predict exactly what `llmsweep run` would launch: `predict(workload, engine_config_from_argv(spec.argv))`.
    """
    args = list(argv)
    if "serve" in args:
        args = args[args.index("serve") + 1:]
    try:
        with _parser().make_context("serve", args, resilient_parsing=False) as ctx:
            return engine_config(dict(ctx.params))
    except click.ClickException as exc:  # a recipe's flag value the simulator cannot take: that job's refusal
        raise ConfigError(f"the simulated engine cannot take this launch: {exc.format_message()}",
                          fix="fix that flag's value in the recipe's serve.args (or its override)") from exc


def engine_config(opts: dict[str, object]) -> EngineConfig:
    """The `EngineConfig` the parsed options `opts` of `sim serve` (a context's `params`) describe; a combination
    the engine cannot take is a `ConfigError` naming the option."""
    from pydantic import ValidationError

    spec = None
    try:
        if opts["spec_method"] or opts["acceptance_length"] is not None:
            method = str(opts["spec_method"] or "mtp")
            if opts["acceptance_length"] is None:  # nothing pinned: the method's typical acceptance is realised
                opts["acceptance_length"] = typical_acceptance(method, int(opts["spec_k"]))  # type: ignore[call-overload]
            spec = SpecDecodeConfig(method=method, k=opts["spec_k"],  # type: ignore[arg-type]
                                    acceptance_length=opts["acceptance_length"])  # type: ignore[arg-type]
        if opts["kv_offload"] == "dram" and not opts["dram_gb"]:
            raise ConfigError(f"{sf.KV_OFFLOAD} dram needs {sf.DRAM_GB}", fix=f"add e.g. {sf.DRAM_GB} 512")
        engine_style = opts["engine_style"] or ("vllm" if opts["metrics_style"] == "vllm" else "sglang")
        return EngineConfig(
            model=opts["model"], hardware=opts["hardware"], tp=opts["tp"], ep=opts["ep"],  # type: ignore[arg-type]
            dp_attention=opts["dp_attention"],  # type: ignore[arg-type]
            precision=opts["precision"], kv_dtype=opts["kv_dtype"], engine_style=engine_style,  # type: ignore[arg-type]
            mem_fraction_static=opts["mem_fraction_static"],  # type: ignore[arg-type]
            max_running_requests=opts["max_running_requests"],  # type: ignore[arg-type]
            chunked_prefill_size=opts["chunked_prefill_size"],  # type: ignore[arg-type]
            max_prefill_tokens=opts["max_prefill_tokens"],  # type: ignore[arg-type]
            prefill_budget=opts["prefill_budget"],  # type: ignore[arg-type]
            scheduler=opts["scheduler"], capacity=opts["capacity"],  # type: ignore[arg-type]
            dram_gb=opts["dram_gb"] if opts["kv_offload"] == "dram" else 0.0,  # type: ignore[arg-type]
            spec=spec, seed=opts["seed"], timing=opts["timing"],  # type: ignore[arg-type]
            ttft_s=float(opts["ttft_ms"]) / 1e3, itl_s=float(opts["itl_ms"]) / 1e3,  # type: ignore[arg-type]
            kv_capacity_tokens=opts["kv_capacity_tokens"],  # type: ignore[arg-type]
            max_total_tokens=opts["max_total_tokens"],  # type: ignore[arg-type]
            pinned_kv_tokens=opts["pinned_kv_tokens"],  # type: ignore[arg-type]
            kv_cache_memory_bytes=opts["kv_cache_memory_bytes"],  # type: ignore[arg-type]
            prefix_caching=opts["prefix_caching"],  # type: ignore[arg-type]
            context_length=opts["context_length"],  # type: ignore[arg-type]
            max_prompt_tokens=opts["max_prompt_tokens"],  # type: ignore[arg-type]
            vllm_version=opts["vllm_version"],  # type: ignore[arg-type]
            calibrated=not opts["no_calibration"],
        )
    except ValidationError as exc:
        raise ConfigError(f"llmsweep sim serve: invalid options: {exc.errors()[0]['msg']}",
                          fix="see `llmsweep sim serve --help`") from exc
