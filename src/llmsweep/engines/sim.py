"""The built-in simulated engine: the job's meaning, translated into `llmsweep sim serve` flags.

The simulator runs on the host (no image), so it can stand in for any job, including one the real engine would
refuse. What it honours is translated from the recipe's SGLang/vLLM/TensorRT-LLM spelling: memory fraction, a KV pool
capped (SGLang) or pinned in blocks or bytes (vLLM), running-request cap, prefill chunk, KV dtype, speculative settings
(method, K, the pinned AL) and the HiCache / offload DRAM tier.

The launch is written, and read back, in `sim serve`'s own spellings, `sim.serve_flags` (`sim_serve.HARDWARE`,
`sim_serve.PINNED_KV_TOKENS`), the ones `sim.serve_args` declares the options with; a `--...` string here is a recipe
flag of an engine the simulator stands in for (`TRANSLATED`'s keys, `UNMODELLED_SETTINGS`), which is that engine's.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from llmsweep.catalog.precision import known_names, weight_format
from llmsweep.engine_ids import SGLANG, SIM, VLLM, engine_env_prefixes, engine_for
from llmsweep.engines.base import (
    HOST_FIX,
    MODEL_FIX,
    PINNED_POOL_FLAGS,
    SERVED_NAME_FIX,
    Adapter,
    Derived,
    RoleContext,
    agentic_conc,
    in_launch,
    job_version,
    norm_flag,
    pools,
    token_count,
    topology,
)
from llmsweep.engines.launch import LaunchSpec, RoleWorker, node_host
from llmsweep.engines.running_cap import dp_running_cap
from llmsweep.errors import ConfigError, LlmsweepError
from llmsweep.option_spellings import flag as cli_flag
from llmsweep.plan.job import Job
from llmsweep.sim import serve_flags as sim_serve
from llmsweep.sim.config import ESTIMATED_DRAFT_ACCEPTANCE, typical_acceptance
from llmsweep.sim.roles import ROUTER_READY_LINE
from llmsweep.sim.transfer import Link, links_flag
from llmsweep.spec.workload import ScenarioId
from llmsweep.words import count_of

if TYPE_CHECKING:
    from llmsweep.catalog.engines import EngineDefault, PageSizeDefault
    from llmsweep.engines.memory import MemoryFraction
    from llmsweep.metrics.model import AcceptanceProvenance, KvBlockProvenance
    from llmsweep.sim.engine import EngineConfig

SIM_METHODS: dict[str, str] = {
    "mtp": "mtp", "eagle": "eagle", "eagle3": "eagle3", "draft_model": "draft_model", "ngram": "ngram",
    "dspark": "draft_model", "medusa": "mtp",
}
DEFAULT_HARDWARE = "h200"
LOOPBACK = "127.0.0.1"
"""The simulator runs on the host (never in a container whose port needs every interface) and speaks to a client on
the same machine: it binds loopback, so an unauthenticated server is never reachable from the network."""

TRANSLATED: dict[str, str] = {
    "--mem-fraction-static": sim_serve.MEM_FRACTION_STATIC,
    "--gpu-memory-utilization": sim_serve.MEM_FRACTION_STATIC,
    "--max-running-requests": sim_serve.MAX_RUNNING_REQUESTS,
    "--max-num-seqs": sim_serve.MAX_RUNNING_REQUESTS,
    "--chunked-prefill-size": sim_serve.CHUNKED_PREFILL_SIZE,
    "--max-prefill-tokens": sim_serve.MAX_PREFILL_TOKENS,
    "--max-num-batched-tokens": sim_serve.CHUNKED_PREFILL_SIZE,
    "--max-batch-size": sim_serve.MAX_RUNNING_REQUESTS,
    "--max-num-tokens": sim_serve.CHUNKED_PREFILL_SIZE,
    "--max-total-tokens": sim_serve.MAX_TOTAL_TOKENS,
}
"""Recipe flags (SGLang, vLLM or TensorRT-LLM spelling, as `norm_flag` writes them) → the simulator flag with the
same meaning. SGLang's `--max-total-tokens` caps each rank's KV pool at that many tokens (`min(profiled, cap)`),
as the simulator's does. SGLang's `--max-prefill-tokens` (default 16384, the simulator's too) is a step's prefill budget
(`PrefillAdder`'s `rem_input_tokens`; the first request of a step may run past it), the simulator's step budget.
TensorRT-LLM's `--max_num_tokens` bounds a whole step (context and generation tokens); like vLLM's
`--max-num-batched-tokens` the simulator reads it as its chunk and keeps its own step (docs/simulator.md). Its
`--kv_cache_free_gpu_memory_fraction` is no share of HBM: `engines.memory.launch_memory_fraction` answers for it and
the launch converts it (`SimAdapter._free_share_of_hbm`)."""

@dataclass(frozen=True)
class AcceptanceEstimate:
    """The acceptance length the simulator runs a speculative job at, and where it comes from. The result's record
    of it is `metrics.model`'s AcceptanceProvenance (:meth:`record`), the one shape `provenance.acceptance` has."""

    value: float
    source: Literal["pinned", "golden", "estimate"]
    basis: str

    def record(self) -> AcceptanceProvenance:
        """What a result records of it (`provenance.acceptance`): the one shape of it, `metrics.model`'s."""
        from llmsweep.metrics.model import AcceptanceProvenance

        return AcceptanceProvenance(value=self.value, source=self.source, basis=self.basis)

    def provenance(self) -> dict[str, Any]:
        return {"acceptance": self.record().model_dump(mode="json", exclude_none=True)}


DP_ATTENTION_UNMODELLED = "DP attention's per-rank prefix caches and replicated attention weights"
"""What a DP-attention job's result says the simulator left out (`unmodelled`): it runs the ranks as balanced shares
of one engine (`--dp-attention`), sharing one prefix cache and leaving out the attention weights each rank holds
whole."""


def unmodelled(job: Job) -> list[str]:
    """What the job sets that the simulator does not model (it predicts the job without them): pipeline,
    decode- and prefill-context parallelism, of the server or of either pool of a disaggregated job; of DP
    attention, which it models as balanced ranks (`--dp-attention`), what is left out: each rank's own prefix cache
    (a conversation's next turn may land on another rank) and the attention weights every rank holds whole; a
    sparse attention it prices dense (:func:`_sparse_attention`); a KV-offload backend no adapter launches
    (:func:`_offload_backend`); and the serving settings of its recipe the
    simulator runs without (:func:`unmodelled_settings`). A result records them (`provenance.unmodelled`), so its
    planned label is never read as modelled."""
    out: list[str] = []
    for pool in pools(job).values():
        out += ([DP_ATTENTION_UNMODELLED] if pool.dp_attn else []) \
            + ([f"pipeline parallelism (pp {pool.pp})"] if pool.pp > 1 else []) \
            + ([f"decode context parallelism (dcp {pool.dcp})"] if pool.dcp > 1 else []) \
            + ([f"prefill context parallelism (pcp {pool.pcp})"] if pool.pcp > 1 else [])
    if job.router is not None and not (job.multinode or job.disagg):  # a disaggregated deployment runs its router
        out.append(f"the row's router ({job.router.name} {job.router.version}; it balances the DP ranks evenly)")
    return list(dict.fromkeys(out + _sparse_attention(job) + _offload_backend(job) + unmodelled_settings(job)
                              + _mla_pinned_blocks(job)))


def _offload_backend(job: Job) -> list[str]:
    """A KV-offload backend the engine the job stands in for has no launch of in llmsweep (`Adapter.
    kv_offload_backends`; the policy refuses it for a real run, `serve.kv-offload-backend`): the simulator serves it
    as every backend, a DRAM tier of the job's `total-cpu-dram-gb` (:meth:`SimAdapter._kv`), without the backend's
    own sizing and eviction (InferenceX's vLLM Mooncake store: a per-rank segment of the DRAM budget less the
    checkpoint's page cache and a 4 GiB local buffer, evicting from 80 % full; agentx-spec §1.3)."""
    from llmsweep.engines import ADAPTERS

    backend = job.kv_offload_backend
    engine = SimAdapter().stands_in_for(job)
    adapter = ADAPTERS.get(engine) if engine is not None else None
    if job.kv_offloading != "dram" or backend is None or adapter is None \
            or backend.name in adapter.kv_offload_backends:
        return []
    return [f"the {backend.name} KV-offload backend's own sizing and eviction ({adapter.name} in llmsweep launches "
            f"none; served as a DRAM tier of the job's total-cpu-dram-gb, {job.total_cpu_dram_gb or 0:g} GB)"]


def _sparse_attention(job: Job) -> list[str]:
    """The job's model's sparse attention where the simulator prices it as dense attention over the whole context
    (`ModelSpec.sparse_attention_gap`: a DSA whose top-k or indexer the catalog does not record), so a long-context
    prediction that overstates its attention cost says so."""
    from llmsweep.catalog.models import find_model

    model = find_model(job.model)
    gap = model.sparse_attention_gap() if model is not None else None
    return [gap] if gap is not None else []


def _mla_pinned_blocks(job: Job) -> list[str]:
    """A vLLM pool pinned in blocks (`--num-gpu-blocks-override`) of an MLA model without `--block-size`: the
    simulator sizes it in vLLM's default blocks (:func:`engine_page`, 16 tokens), but an MLA attention backend may
    force 64 or 128 (FlashMLA, CUTLASS MLA), a pool 4-8 times larger; the result says so, not only the launch's
    note."""
    from llmsweep.catalog.models import find_model

    sim = SimAdapter()
    if sim.stands_in_for(job) != VLLM.id:
        return []
    written = {sim.parsed_flag(job, flag) for _, (flag, value) in sim._written_args(job) if in_launch(value)}
    page = engine_page(job)
    model = find_model(job.model)
    if "--num-gpu-blocks-override" not in written or page is None or page.pinned or model is None \
            or model.attention.kind != "mla":
        return []
    return ["vLLM's KV block for an MLA model (its attention backend may force 64 or 128 tokens; the pinned "
            f"`--num-gpu-blocks-override` pool is sized in the default {page.default.tokens}: write "
            f"`{page.default.flag}` to pin it)"]


def _unless(modelled: str, why: str) -> Callable[[Any], str | None]:
    """A setting the simulator models at the value `modelled` only (its own behaviour): any other value is `why`."""
    return lambda value: None if str(value).strip().lower() == modelled else why


def _number(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _block_size(value: Any) -> str | None:
    from llmsweep.sim.engine import EngineConfig

    own = int(EngineConfig.model_fields["block_size"].default)
    return None if token_count(value) == own else f"its KV and prefix-hash blocks are {own} tokens"


UNMODELLED_SETTINGS: dict[str, Callable[[Any], str | None]] = {
    "--schedule-policy": _unless("fcfs", "it admits waiting requests first come, first served"),
    "--scheduling-policy": _unless("fcfs", "it admits waiting requests first come, first served"),
    "--schedule-conservativeness": lambda value: None if _number(value) == 1.0 else (
        "it admits while KV blocks are free, reserving none for running requests' outputs"),
    "--page-size": _block_size,
    "--block-size": _block_size,
    "--cpu-offload-gb": lambda _: "its weights stay in HBM",
    "--no-enable-chunked-prefill": lambda _: "it chunks every prompt at its prefill chunk",
    "--max-num-partial-prefills": lambda _: "it prefills every admitted prompt in the same step",
    "--max-long-partial-prefills": lambda _: "it prefills every admitted prompt in the same step",
    "--long-prefill-token-threshold": lambda _: "it gives every prompt the same chunk",
    "--max-queued-requests": lambda _: "its waiting queue has no bound",
}
"""Serving settings of SGLang, vLLM and ATOM (as the engine's parser reads them, `SimAdapter.parsed_flag`) that
change how the engine schedules or sizes its memory and that the simulator runs without, each with what the simulator
does instead at a value that is not its own: its FCFS admission (SGLang's `--schedule-policy` and vLLM's
`--scheduling-policy`, default `fcfs`), no reservation for running requests' outputs (SGLang's
`--schedule-conservativeness`, default 1.0: `new_token_ratio`, docs/simulator.md), 64-token blocks (SGLang's
`--page-size`, vLLM's `--block-size`), weights in HBM (`--cpu-offload-gb`), chunked prefill (vLLM's
`--no-enable-chunked-prefill`), vLLM's partial-prefill limits and SGLang's bounded waiting queue. A simulated job whose
recipe sets one says so in its result (:func:`unmodelled`) and `validate --simulate` warns (`serve.sim-ignored`). A KV
pool pinned in blocks or bytes is modelled (:data:`PINNED_POOL_FLAGS`), as SGLang's `--max-total-tokens` is."""


def unmodelled_flags(job: Job) -> list[tuple[str, Any, str]]:
    """(the key as the recipe wrote it, its value, what the simulator does instead) for each of `job`'s
    `serve.args` the simulator runs without (:data:`UNMODELLED_SETTINGS`, as the engine it stands in for reads the
    flag; a switch written `false` is not in the launch)."""
    sim = SimAdapter()
    out: list[tuple[str, Any, str]] = []
    for written, (flag, value) in sim._written_args(job):
        check = UNMODELLED_SETTINGS.get(sim.parsed_flag(job, flag)) if in_launch(value) else None
        if check is not None and (instead := check(value)) is not None:
            out.append((written, value, instead))
    return out


def setting_said(written: str, value: Any) -> str:
    """A recipe's serving setting as the simulator's warnings write it: `` `--page-size 1` ``, a switch
    `` `--no-enable-chunked-prefill` `` (`written`: the key as the recipe wrote it). The one spelling of a setting
    the simulator runs without, in a result's `provenance.unmodelled` (:func:`unmodelled_settings`) as in
    `validate --simulate`'s `serve.sim-ignored` warning."""
    return f"`{written}`" if value is True else f"`{written} {value}`"


def unmodelled_settings(job: Job) -> list[str]:
    """The serving settings of `job`'s recipe the simulator runs without (:func:`unmodelled_flags`), each as
    `` `--flag value` (what the simulator does instead)`` (:func:`setting_said`); and a draft tree
    (`serve.spec-decoding` top-k above 1), which it verifies as a chain of K + 1 tokens."""
    out = [f"{setting_said(written, value)} ({instead})" for written, value, instead in unmodelled_flags(job)]
    sd = job.serve.spec_decoding if job.serve is not None else None
    if sd is not None and job.spec_decoding != "none" and (sd.topk or 1) > 1:
        k = sd.num_steps or DEFAULT_DRAFT_LENGTH
        out.append(f"a draft tree (top-k {sd.topk}, {sd.num_draft_tokens} draft tokens; it verifies a chain of "
                   f"K + 1 = {k + 1})")
    return out


@dataclass(frozen=True)
class EnginePage:
    """The KV page (block) an engine launches a job with (:func:`engine_page`): the recipe's value of the engine's
    page flag where the launch carries one, else the engine's default from the engines catalog."""

    engine: str
    """The engine's display name."""
    default: PageSizeDefault
    """Its catalog entry's `page_size_default`: the flag, the default tokens and where they are read from."""
    written: Any = None
    """The recipe's value of `default.flag` (the last the launch carries, as the engine's parser reads the flag);
    None where it sets none."""
    written_as: str | None = None
    """The recipe's key that sets it, as written (`--block_size`, `--block-size=32`); None where it sets none."""

    @property
    def pinned(self) -> bool:
        """Whether the recipe sets the page."""
        return self.written is not None

    @property
    def tokens(self) -> int | None:
        """Tokens of one page: the recipe's (None where it is no positive whole number), else the default."""
        if not self.pinned:
            return self.default.tokens
        count = token_count(self.written)
        return count if count is not None and count > 0 else None


def engine_page(job: Job, engine: str | None = None) -> EnginePage | None:
    """The KV page `engine` (by default the engine `job` stands in for) launches `job` with: its page flag as the
    recipe writes it, read as that engine's parser reads it (`SimAdapter.parsed_flag`: `--block_size`, a unique
    prefix), else the engines catalog's `page_size_default`. The one reading of a job's page: the simulator's
    launch note and `provenance.kv_block` (:func:`engine_kv_block`), the block a vLLM `--num-gpu-blocks-override`
    counts (`SimAdapter._pinned_pool`), the MLA caveat of :func:`unmodelled` and `validate`'s check of the value
    (`serve.page-size`). None for a recipe of the simulator
    itself (without `engine`), or an engine the catalog records no page for."""
    from llmsweep.catalog.engines import default_page_size

    sim = SimAdapter()
    engine = engine or sim.stands_in_for(job)
    found = default_page_size(engine) if engine is not None else None
    if found is None:
        return None
    name, default = found
    written = [(key, value) for key, (flag, value) in sim._written_args(job)
               if default.flag is not None and in_launch(value) and sim.parsed_flag(job, flag) == default.flag]
    key, value = written[-1] if written else (None, None)
    return EnginePage(engine=name, default=default, written=value, written_as=key)


@dataclass(frozen=True)
class EngineKvBlock:
    """The KV block the simulator serves a job with (its own, `EngineConfig.block_size`) where the engine the job
    stands in for pages its KV cache otherwise at its default (:func:`engine_kv_block`): the simulator's tokens and
    the engine's page, from which the result's record (:meth:`record`, `provenance.kv_block`) and the launch's note
    are both written."""

    tokens: int
    """Tokens of the simulator's KV and prefix-cache block."""
    page: EnginePage
    """The engine's page at its default (the recipe pins none)."""

    def record(self) -> KvBlockProvenance:
        """What a result records of it (`provenance.kv_block`): the one shape of it, `metrics.model`'s."""
        from llmsweep.metrics.model import KvBlockProvenance

        return KvBlockProvenance(tokens=self.tokens, engine=self.page.engine, engine_tokens=self.page.default.tokens,
                                 source=self.page.default.source)

    def note(self) -> str:
        """One line for the launch's notes (`server_command.txt`, `render`)."""
        default = self.page.default
        unset = f"{default.flag} unset" if default.flag is not None else "its default"
        pages = f"{default.tokens} token" + ("s" if default.tokens != 1 else "")
        return (f"KV blocks of {self.tokens} tokens, the simulator's own, where {self.page.engine} pages its KV cache "
                f"in {pages} ({unset}: {default.source}): a cached prefix is reused up to its last whole "
                f"{self.tokens}-token block, not its last {default.tokens}-token page, and a request's KV is held in "
                f"whole {self.tokens}-token blocks; not modelled (docs/simulator.md, \"The KV block\")")

    def provenance(self) -> dict[str, Any]:
        return {"kv_block": self.record().model_dump(mode="json", exclude_none=True)}


def engine_kv_block(job: Job) -> EngineKvBlock | None:
    """The simulator's KV block against the page of the engine `job` stands in for, where they differ and the
    recipe pins no page (a pinned one other than the simulator's is in :func:`unmodelled`): SGLang's 1 token, vLLM's
    16, TensorRT-LLM's 32, from the engines catalog's `page_size_default`. The simulator keeps its own 64-token
    blocks: a block of 1 costs the predictor ~18 times its CPU for a prediction that moves by 0.2 % (docs/
    simulator.md, "The KV block"). None for a recipe of the simulator itself, an engine the catalog records no page
    for, or one whose page is the simulator's."""
    from llmsweep.sim.engine import EngineConfig

    page = engine_page(job)
    own = int(EngineConfig.model_fields["block_size"].default)
    if page is None or page.pinned or page.default.tokens == own:
        return None
    return EngineKvBlock(tokens=own, page=page)


NAMING_FIELDS = frozenset({"hf_architecture"})
"""Catalog fields that name rather than size (the architecture an engine registers): an estimate of one moves no
figure the simulator computes, so a result does not list it among the estimates it stands on."""


def estimated_figures(job: Job) -> list[str]:
    """The catalog figures the simulator's model of `job` stands on that the catalog marks as estimates (its model's
    and each simulated GPU's `estimates`, e.g. `glm-5.2 attention`, `b300 hbm_tbps`): a result records them
    (`provenance.estimated`), so a prediction built on a placeholder shape or an unsourced bandwidth says so.
    `llmsweep catalog --json models` and `hardware` give each estimate's note."""
    from llmsweep.catalog.hardware import find_hardware
    from llmsweep.catalog.models import find_model

    entries: list[Any] = [find_model(job.model)]
    skus = [job.sku or DEFAULT_HARDWARE, *(w.hardware for w in (job.prefill, job.decode) if w is not None)]
    entries += [find_hardware(sku) for sku in dict.fromkeys(s for s in skus if s)]
    return [f"{entry.id} {name}" for entry in entries if entry is not None
            for name in entry.estimates if name not in NAMING_FIELDS]


def simulated_acceptance(job: Job) -> AcceptanceEstimate | None:
    """The AL a speculative job runs at on the simulator (None: no speculative decoding).

    A job that pins its AL (agentic jobs: the golden curve) runs at the pin. A job that measures real acceptance
    (fixed-seq-len) cannot on the simulator, which drafts nothing: it runs at an *estimate* for its (model, method,
    thinking, K) — the golden curve's value where one covers it, else the method's typical acceptance
    (:data:`ESTIMATED_DRAFT_ACCEPTANCE`) — labelled as an estimate in the launch notes and the provenance. An eval's
    server (an eval-only job, a run-eval row's eval) pins nothing, its answers being the model's: it serves the
    method at K, and `sim serve` realises the method's typical acceptance (:func:`eval_acceptance`), an estimate too.
    """
    from llmsweep.engines.base import synthetic_acceptance

    draft = _draft(job)
    if draft is None:
        return None
    method, k, thinking, draft_model, served_draft = draft
    pinned = synthetic_acceptance(job)  # never an eval-only job's: an eval pins none
    if pinned is not None:
        source = job.acceptance.source if job.acceptance is not None else "pinned"
        cited = f" (measured as {job.acceptance.cited})" if job.acceptance is not None and job.acceptance.cited else ""
        return AcceptanceEstimate(pinned, source, f"the job's {source} acceptance length{cited}")
    if serves_eval(job):
        return eval_acceptance(job, method, k)
    try:
        from llmsweep.catalog.golden import resolve_acceptance

        golden = resolve_acceptance(job.model_prefix, job.model, job.precision, method, thinking, k,
                                    draft_model=draft_model, served_draft=served_draft)
    except LlmsweepError:
        golden = None
    if golden is not None:
        return AcceptanceEstimate(golden.value, "estimate",
                                  f"golden curve {golden.curve} (thinking {thinking}, K={k}) for "
                                  f"{job.model} {method}; the job itself measures real acceptance")

    sim_method = SIM_METHODS.get(method, "mtp")
    p = ESTIMATED_DRAFT_ACCEPTANCE.get(sim_method, 0.7)
    return AcceptanceEstimate(typical_acceptance(sim_method, k), "estimate",
                              f"typical {sim_method} acceptance (p={p} per draft token, K={k}) for {job.model}: no "
                              "golden curve covers it, and the job itself measures real acceptance")


def serves_eval(job: Job) -> bool:
    """The job's server runs an eval with nothing pinned: an eval-only job, or a run-eval row whose point pins no
    acceptance (its eval shares the server) or that is its eval's relaunch (:func:`~llmsweep.engines.base.
    real_verification`). A pinned run-eval row's own launch runs its throughput point at the pin."""
    from llmsweep.engines.base import synthetic_acceptance

    return bool(job.eval_only or (job.run_eval and synthetic_acceptance(job) is None))


def eval_acceptance(job: Job, method: str, k: int) -> AcceptanceEstimate:
    """The AL an eval's simulated server runs at: nothing is pinned (an eval's server verifies for real), so `sim
    serve`, given the method and K without `--acceptance-length`, realises the method's typical acceptance at K
    (:func:`typical_acceptance`), which its /metrics report and the eval records as read back — the simulator's
    estimate, never a measured acceptance."""
    sim_method = SIM_METHODS.get(method, "mtp")
    p = ESTIMATED_DRAFT_ACCEPTANCE.get(sim_method, 0.7)
    return AcceptanceEstimate(typical_acceptance(sim_method, k), "estimate",
                              f"typical {sim_method} acceptance (p={p} per draft token, K={k}) that the simulator "
                              f"realises serving the eval of {job.model}: nothing is pinned (an eval's server "
                              "verifies for real), and the simulator drafts nothing to verify")


DEFAULT_DRAFT_LENGTH = 3
"""K of a speculative job whose recipe names only the method (an InferenceX master entry without `serve`) and whose
row names no draft steps of its own (a multinode row's `DECODE_MTP_SIZE`)."""


def _draft(job: Job) -> tuple[str, int, str, str | None, str | None] | None:
    """(method, K, thinking, curve selector, the drafter a `golden-curve` must have measured) of a speculative job:
    its `serve.spec-decoding`, else the matrix entry's method at the row's own draft steps (`DECODE_MTP_SIZE`) or the
    default K; None when it does not speculate or the simulator has no such method."""
    sd = job.serve.spec_decoding if job.serve is not None else None
    if job.spec_decoding == "none" or (sd is None and not job.spec_decoding):
        return None
    if sd is not None:
        return sd.method, sd.draft_length or DEFAULT_DRAFT_LENGTH, sd.thinking, sd.curve_selector, sd.curve_drafter
    if job.spec_decoding not in SIM_METHODS:
        return None
    from llmsweep.engines.base import row_draft_steps

    return job.spec_decoding, row_draft_steps(job) or DEFAULT_DRAFT_LENGTH, "on", None, None


HICACHE_RATIO_DEFAULT = 2.0
"""SGLang's `--hicache-ratio` (`ServerArgs.hicache_ratio`): a rank's HiCache host pool in device pools when the launch
gives no `--hicache-size`."""


def launch_engine(args: dict[str, Any]) -> EngineConfig:
    """The engine, as far as its KV pool goes, that the simulator's launch `args` describe so far (model, GPU, TP,
    EP, DP attention, precision, KV dtype, memory fraction, pool cap, pinned pool, context length): what the launch
    sizes its defaults from. Raises ValueError or LlmsweepError where those cannot make one."""
    from llmsweep.sim.engine import EngineConfig

    fraction, cap = args.get(sim_serve.MEM_FRACTION_STATIC), args.get(sim_serve.MAX_TOTAL_TOKENS)
    pinned, size = args.get(sim_serve.PINNED_KV_TOKENS), args.get(sim_serve.KV_CACHE_MEMORY_BYTES)
    context, release = args.get(sim_serve.CONTEXT_LENGTH), args.get(sim_serve.VLLM_VERSION)
    return EngineConfig(model=str(args[sim_serve.MODEL]), hardware=str(args[sim_serve.HARDWARE]),
                        tp=int(args[sim_serve.TP]), ep=int(args[sim_serve.EP]),
                        dp_attention=int(args.get(sim_serve.DP_ATTENTION, 1)), precision=str(args[sim_serve.PRECISION]),
                        kv_dtype=str(args.get(sim_serve.KV_DTYPE) or "bf16"),
                        mem_fraction_static=EngineConfig.model_fields["mem_fraction_static"].default
                        if fraction is None else float(fraction),
                        max_total_tokens=None if cap is None else int(cap),
                        pinned_kv_tokens=None if pinned is None else int(pinned),
                        kv_cache_memory_bytes=None if size is None else int(size),
                        context_length=None if context is None else int(context),
                        vllm_version=None if release is None else str(release))


@dataclass(frozen=True)
class PinnedPool:
    """The KV pool a job's recipe pins in vLLM's terms (:func:`pinned_pool`): which of :data:`PINNED_POOL_FLAGS` its
    launch carries, and why that pool cannot serve the job, if it cannot."""

    flags: frozenset[str]
    """The pins the launch carries, as vLLM's parser reads them."""
    vllm_version: str | None
    """The vLLM release the job launches (:func:`pinned_vllm_version`), which decides what vLLM makes of the block
    override; None where it is not known."""
    refusal: ConfigError | None
    """The simulator's own check of the pool (`EngineConfig.pinned_pool_refusal`: it does not fit the GPU beside the
    weights, or holds less than one request at the context): what `sim serve` refuses the job with; None where the
    pool serves the job, or the simulator cannot size it (a model or GPU it has no figures for, a value that is no
    whole number: the launch says why)."""

    @property
    def sizes_from_fraction(self) -> bool:
        """Whether vLLM still sizes anything of its KV memory from its memory fraction (`--gpu-memory-utilization`):
        not under :data:`FRACTION_BYPASSING_PIN`, whose bytes it takes as the memory for KV without profiling; nor
        under the block override from the release that carries vllm-project/vllm#41069
        (`sim.engine.VLLM_BLOCK_PIN_CHECKED`), where the override "takes precedence over the measured available kv
        cache size" in the start-up check. Before it (and where the release is not known) it does: vLLM profiles at
        the fraction and checks that memory holds one request at its context, then replaces the count, so the
        weights + one request within the fraction still apply."""
        from llmsweep.sim.engine import vllm_checks_pinned_blocks

        return FRACTION_BYPASSING_PIN not in self.flags and not vllm_checks_pinned_blocks(self.vllm_version)


def pinned_pool(job: Job) -> PinnedPool | None:
    """The KV pool `job`'s recipe pins in vLLM's terms (:data:`PINNED_POOL_FLAGS`, as the engine it stands in for
    reads them), with the simulator's own check of the engine its launch describes (`SimAdapter.derive`: the blocks
    x the block x the DP ranks, or the bytes; its context length), so `validate`'s `resources.hbm-fit` judges the
    job as `sim serve`, `predict` and `run --simulate` do, in the same words. None where the recipe pins none."""
    sim = SimAdapter()
    flags = frozenset(name for _, (flag, value) in sim._written_args(job)
                      if (name := sim.parsed_flag(job, flag)) in PINNED_POOL_FLAGS and in_launch(value))
    if not flags:
        return None
    try:
        refusal = launch_engine(sim.derive(job, sim.info().default_port).args).pinned_pool_refusal()
    except (LlmsweepError, ValueError):
        refusal = None
    return PinnedPool(flags=flags, vllm_version=pinned_vllm_version(job), refusal=refusal)


def pinned_vllm_version(job: Job) -> str | None:
    """The vLLM release whose terms a pool `job` pins in vLLM's flags is judged in: the version its image tag names,
    else its recipe's `serve.engine.version` (`engines.base.job_version`), where the job stands in for vLLM; None for a
    recipe of the simulator itself (or one that names no version), whose release is not known."""
    return job_version(job) if SimAdapter.stands_in_for(job) == VLLM.id else None


def sglang_default_cap(job: Job, args: dict[str, Any]) -> EngineDefault | None:
    """The running-request cap SGLang takes for `job` when its launch sets none: 48 when the job speculates, else
    its request pool from the KV pool the simulator sizes for these launch `args` (model, GPU, TP, precision, KV
    dtype, memory fraction) and the context SGLang serves (the job's, else the model's native context):
    :func:`llmsweep.sim.engine.sglang_running_cap`. None when the simulator cannot size the pool (a model or GPU it
    has no figures for, or one that does not fit: the launch refuses it itself) or knows no context for the model."""
    from llmsweep.catalog.engines import EngineDefault, get_engine
    from llmsweep.catalog.models import find_model
    from llmsweep.sim.engine import (
        SGLANG_POOL_CAP_SOURCE,
        SGLANG_SPECULATIVE_CAP_SOURCE,
        SGLANG_SPECULATIVE_RUNNING_CAP,
        sglang_pinned_cap,
        sglang_running_cap,
    )

    flag, hardware, name = "--max-running-requests", str(args[sim_serve.HARDWARE]), get_engine(SGLANG.id).display_name
    dp = int(args.get(sim_serve.DP_ATTENTION, 1))
    ranks = f", over {dp} DP-attention ranks" if dp > 1 else ""
    if _draft(job) is not None:  # the engine's own launch speculates, whether or not the simulator serves it so
        return EngineDefault(value=sglang_pinned_cap(SGLANG_SPECULATIVE_RUNNING_CAP, dp), flag=flag, engine=name,
                             gpu=hardware, condition=f"a speculative launch ({job.spec_decoding}){ranks}" + (
                                 f": {SGLANG_SPECULATIVE_RUNNING_CAP} // {dp} a rank" if dp > 1 else ""),
                             source=SGLANG_SPECULATIVE_CAP_SOURCE)
    model = find_model(job.model)
    context = job.max_model_len or (model.native_context if model is not None else None)
    if context is None:
        return None
    try:
        config = launch_engine(args)
        tokens = config.kv_pool_tokens()
    except (LlmsweepError, ValueError):
        return None
    if tokens < config.block_size:
        return None
    value = sglang_running_cap(tokens, context, dp)
    rule = "min(max(int(T / C * 512), 2048), 4096, T // 2)"
    return EngineDefault(value=value, flag=flag, engine=name, gpu=hardware,
                         condition=f"a KV pool of {tokens} tokens and a context of {context} on {config.tp} x "
                                   f"{hardware}{ranks}: " + (f"{dp} x {rule} of each rank's T = {tokens // dp}"
                                                              if dp > 1 else rule),
                         source=SGLANG_POOL_CAP_SOURCE)


CONTEXT_FLAGS = frozenset({"--context-length", "--max-model-len", "--max-seq-len"})
"""Recipe flags that set the context length, as `norm_flag` writes them (SGLang, vLLM/ATOM, TensorRT-LLM spelling):
the launched job's `max-model-len` (`engines.launched_job`), which the simulator serves as `--context-length`."""

PREFIX_CACHE_SWITCHES: dict[str, bool] = {
    "--disable-radix-cache": False, "--no-enable-prefix-caching": False, "--enable-prefix-caching": True,
}
"""Recipe switches that turn the engine's prefix cache off or on (SGLang's `--disable-radix-cache`; vLLM's and ATOM's
`--enable-prefix-caching` / `--no-enable-prefix-caching`, as `norm_flag` writes them), and the state each asks for:
the last one the launch carries decides, as argparse reads them. Off, the simulator caches no prompt block
(`--no-prefix-caching`); a switch written `false` is left out of the launch, so the engine's default (on) stays."""

FRACTION_BYPASSING_PIN = "--kv-cache-memory-bytes"
"""The pin under which vLLM sizes nothing of its KV memory from `--gpu-memory-utilization`, whatever its release:
`Worker.determine_available_memory` returns the bytes without profiling ("This does not respect the
gpu_memory_utilization config"), and its start-up check reads them as the memory for KV. The block override is one
only from vllm-project/vllm#41069 (`sim.engine.VLLM_BLOCK_PIN_CHECKED`), whose start-up check reads the override's
blocks; before it vLLM profiles at the fraction, checks that the profiled memory holds one request at its context
(`v1/core/kv_cache_utils.py` `get_kv_cache_configs`), then replaces the count (`may_override_num_blocks`):
`PinnedPool.sizes_from_fraction` tells the two apart."""

MODELLED: frozenset[str] = frozenset({*TRANSLATED, *CONTEXT_FLAGS, *PREFIX_CACHE_SWITCHES, *PINNED_POOL_FLAGS,
                                      "--kv-cache-dtype", "--hicache-size", "--hicache-ratio",
                                      "--enable-hierarchical-cache"})
"""Recipe flags whose meaning the simulator reproduces; the rest it runs without (policy warns on `sim` recipes)."""


def kv_cache_dtype(args: dict[str, Any]) -> str | None:
    """The KV-cache dtype a recipe's flags ask for, as the simulator and the HBM-fit rule size it: the name of its
    format (`catalog.precision.kv_cache_format`: `fp8` for fp8_e4m3, `mxfp8`, `nvfp4`, `fp4` for fp4_e2m1, the
    model's dtype for `auto`); None when they set none (the engine's default: the model's dtype). Raises ConfigError
    for a spelling of no known size, which is never read as bf16."""
    from llmsweep.catalog.precision import kv_cache_format

    for flag, value in args.items():
        if norm_flag(flag) == "--kv-cache-dtype" and isinstance(value, str):
            return kv_cache_format(value).name
    return None


ROUTER_PORT_OFFSET = 1
"""The simulated PD router serves on the workers' port + 1 (it shares node 0 with the first prefill worker)."""


class SimAdapter(Adapter):
    identity = SIM
    port_flag: ClassVar[str] = sim_serve.PORT
    launch_flags: ClassVar[dict[str, str]] = {sim_serve.HOST: HOST_FIX, sim_serve.MODEL: MODEL_FIX,
                                              sim_serve.SERVED_MODEL_NAME: SERVED_NAME_FIX}
    disagg_transfer_default: ClassVar[str | None] = "nixl"
    """The simulator models any KV-transfer backend as a link (`sim.roles`); a job naming none is labelled nixl."""
    context_flag: ClassVar[str | None] = sim_serve.CONTEXT_LENGTH

    def recipe_context(self, job: Job) -> tuple[str, Any] | None:
        """(as written, value) of a `sim` recipe's context flag, in any engine's spelling it stands in for
        (`CONTEXT_FLAGS`): the simulator serves it as `--context-length`; the last one when it sets several."""
        found = [(written, value) for written, (flag, value) in self._written_args(job)
                 if self.parsed_flag(job, flag) in CONTEXT_FLAGS]
        return found[-1] if found else None

    def context_reader(self, job: Job) -> Adapter:
        """The engine the job stands in for reads its context flag (vLLM's `32k`, `auto`), as it reads its others."""
        return self.flag_reader(job) or self

    def flag_reader(self, job: Job) -> Adapter | None:
        """The adapter of the engine the job stands in for, whose parser reads the job's flags (aliases, `_`/`-`,
        unique prefixes); None for a recipe of the simulator itself."""
        from llmsweep.engines import ADAPTERS

        return ADAPTERS.get(self.stands_in_for(job) or "")

    def parsed_flag(self, job: Job, flag: str) -> str:
        """`flag` as the engine the job stands in for reads it (`flag_reader`: `--mem-frac` is SGLang's
        `--mem-fraction-static`), so the simulator honours what that engine would; a recipe of the simulator itself
        gets the normalised spelling."""
        real = self.flag_reader(job)
        return real.canonical(flag) if real is not None else norm_flag(flag)

    def launcher(self, job: Job) -> list[str]:
        return [sys.executable, "-m", "llmsweep.cli.main", "sim", "serve"]

    def style(self, job: Job) -> str:
        """Whose log lines and metric names to mimic: the engine the job stands in for."""
        return SGLANG.id if SGLANG.id in (job.engine, engine_for(job.framework)) else VLLM.id

    @staticmethod
    def stands_in_for(job: Job) -> str | None:
        """The real engine the simulator stands in for: the job's own, else its framework's; None for a recipe of
        the simulator itself."""
        for name in (job.engine, engine_for(job.framework)):
            if name is not None and name != SIM.id:
                return name
        return None

    def derive(self, job: Job, port: int) -> Derived:
        d = Derived(notes=["simulated engine: no GPU, no weights; timings come from the roofline model"])
        parallel = topology(job)
        tp, ep, dp = parallel.tp, parallel.ep, parallel.dp_ranks
        recipe = {self.parsed_flag(job, k): v for k, v in self.recipe_args(job).items()}
        a = d.args
        a[sim_serve.MODEL] = job.model
        a[sim_serve.SERVED_MODEL_NAME] = job.workload.served_model_name
        a[sim_serve.HARDWARE] = job.sku or DEFAULT_HARDWARE
        if job.sku is None:
            d.notes.append(f"runner {job.runner_label!r} names no known GPU SKU; simulating {DEFAULT_HARDWARE}")
        a[sim_serve.TP] = tp
        a[sim_serve.EP] = ep
        if dp > 1:
            a[sim_serve.DP_ATTENTION] = dp
        a[sim_serve.HOST] = LOOPBACK
        a[sim_serve.PORT] = port
        fmt = weight_format(job.precision)
        if fmt is None:  # the recipe check refuses it first; a job built some other way must not run as bf16
            raise LlmsweepError(f"precision {job.precision!r} is not a weight format the simulator knows",
                                fix=f"use one of: {known_names()}")
        a[sim_serve.PRECISION] = fmt.compute
        kv_dtype = kv_cache_dtype(recipe)
        if kv_dtype:
            a[sim_serve.KV_DTYPE] = kv_dtype
        style = self.style(job)
        a[sim_serve.ENGINE_STYLE] = style
        real = self.stands_in_for(job)
        if real is not None and real != style:
            # calibrations are fitted per engine style on that engine's runs: a TensorRT-LLM or ATOM job served in
            # vLLM's style must not carry vLLM's factors under a "calibrated: vllm-…" label it did not earn
            a[sim_serve.NO_CALIBRATION] = True
            d.notes.append(f"no calibration of the simulator was fitted on {real}: it serves the roofline's default "
                           "efficiency (uncalibrated)")
        if job.scenario is ScenarioId.AGENTIC_CODING:
            a[sim_serve.MAX_RUNNING_REQUESTS] = 2 * agentic_conc(job)
        for flag, value in recipe.items():
            target = TRANSLATED.get(flag)
            if target == sim_serve.MEM_FRACTION_STATIC and real is not None:
                continue  # the fraction the stood-in engine launches with, pinned or not: `_engine_memory_fraction`
            if target is not None and value is not None and value is not False:
                a[target] = value
        self._pinned_pool(job, recipe, d)
        if real is not None:
            self._engine_memory_fraction(job, d)  # first: SGLang's running cap is sized from this pool
        if real is not None and sim_serve.MAX_RUNNING_REQUESTS in a and dp > 1:
            self._dp_pinned_cap(real, dp, d)  # the launch's own (the recipe's, an agentic job's 2 x conc)
        if real is not None and sim_serve.MAX_RUNNING_REQUESTS not in a:
            self._engine_running_cap(job, real, d)
        if real is not None:
            self._engine_scheduler(real, d)
            self._engine_prompt_limit(job, real, d)
        if real == SGLANG.id and sim_serve.CHUNKED_PREFILL_SIZE not in a:
            self._sglang_chunk(job, d)
        if real is not None and dp > 1:
            self._dp_step_budget(real, dp, d)
        self._prefix_caching(recipe, d)
        if job.max_model_len:  # the context the job's engine launches with (its flag, or a fixed-seq-len's derived)
            a[sim_serve.CONTEXT_LENGTH] = job.max_model_len
        elif self.fits_context(job):
            # vLLM's `auto`: the longest context its KV memory holds, at most the model's own — the simulator serves
            # the model's, and its KV pool bounds the rest as the engine's would
            from llmsweep.catalog.models import find_model

            if (model := find_model(job.model)) is not None:
                a[sim_serve.CONTEXT_LENGTH] = model.native_context
                d.notes.append(f"context fitted to memory at start-up (the recipe's `auto`): served at {model.id}'s "
                               f"native {model.native_context:,} tokens, bounded by the simulated KV pool")
        self._spec(job, d)
        self._kv(job, d, recipe, tp)
        if (block := engine_kv_block(job)) is not None:
            d.notes.append(block.note())
        return d

    def _pinned_pool(self, job: Job, recipe: dict[str, Any], d: Derived) -> None:
        """The KV pool a recipe pins in vLLM's terms (:data:`PINNED_POOL_FLAGS`), whatever the memory fraction:
        `--num-gpu-blocks-override` blocks on each DP rank, of vLLM's page as the job launches it (:func:`engine_page`:
        the recipe's `--block-size`, else the engines catalog's `page_size_default`; one that is no positive whole
        number is refused), written as `--pinned-kv-tokens` (blocks x block x ranks);
        else `--kv-cache-memory-bytes` on each GPU, passed on. With a note; `sim serve` refuses a pool that does not
        fit beside the weights (`EngineConfig.pinned_pool_tokens`). A value that is no whole number is refused here
        (vLLM reads `20G` and the like, whose suffixes its releases read differently), and so is a pin of a job that
        stands in for an engine whose parser has no such flag (its adapter's `unsupported_args`: ATOM's), which the
        simulator would otherwise count in vLLM's blocks under that engine's label."""
        from llmsweep.catalog.models import find_model

        pins = {flag: value for flag, value in recipe.items() if flag in PINNED_POOL_FLAGS and in_launch(value)}
        reader = self.flag_reader(job)
        refused = dict(reader.unsupported(job)) if reader is not None and pins else {}
        for written, (flag, value) in self._written_args(job):
            if written in refused and self.parsed_flag(job, flag) in pins and in_launch(value):
                assert reader is not None
                engine = reader.info().display_name
                raise ConfigError(f"the recipe pins the KV pool with {written}, which {engine}'s parser does not "
                                  f"define: {engine} would refuse to start, and the simulator does not serve a vLLM "
                                  "pool under its name", fix=refused[written])
        for flag, value in pins.items():
            if (token_count(value) or 0) < 1:  # a negative int is a whole number to token_count
                unit = "bytes (21474836480 for 20 GiB)" if flag == "--kv-cache-memory-bytes" else "blocks"
                raise ConfigError(f"the simulator reads the recipe's {flag} as a positive whole number, and it is "
                                  f"{value!r}", fix=f"write {flag} as a whole number of {unit}")
        blocks = token_count(pins.get("--num-gpu-blocks-override"))
        size = token_count(pins.get("--kv-cache-memory-bytes"))
        if blocks is not None:
            dp = int(d.args.get(sim_serve.DP_ATTENTION, 1))
            page = engine_page(job, VLLM.id)  # the flags are vLLM's: they count blocks of vLLM's page
            if page is None:
                raise ConfigError("the simulator counts the recipe's --num-gpu-blocks-override in vLLM's KV blocks, "
                                  "and the engines catalog records no page_size_default for vLLM",
                                  fix="restore vLLM's `page_size_default` in the engines catalog "
                                      f"(`llmsweep catalog {cli_flag('json')} engines`), or pin the pool in "
                                      "--kv-cache-memory-bytes")
            block = page.tokens
            if block is None:
                raise ConfigError(f"the simulator reads the recipe's {page.default.flag} as a positive whole number "
                                  f"of tokens (the block --num-gpu-blocks-override counts), and it is "
                                  f"{page.written!r}", fix=f"write {page.default.flag} as a whole number of tokens "
                                                           f"(vLLM's default: {page.default.tokens})")
            whose = f"the recipe's {page.default.flag}" if page.pinned else \
                f"vLLM's default block: {page.default.source}"
            model = find_model(job.model)
            forced = "" if page.pinned or model is None or model.attention.kind != "mla" else (
                f"; not modelled for this MLA model: {page.default.varies or ''}"
                " — a larger block makes the engine's pool that many times larger")
            d.args[sim_serve.PINNED_KV_TOKENS] = dp * blocks * block
            if (release := pinned_vllm_version(job)) is not None:
                d.args[sim_serve.VLLM_VERSION] = release  # whose terms a pool short of one request is refused in
            d.notes.append(
                f"KV pool pinned at {blocks} blocks of {block} tokens ({whose})"
                + (f" on each of the {dp} DP ranks" if dp > 1 else "") + f": {dp * blocks * block} tokens, "
                "whatever the memory fraction, as vLLM's --num-gpu-blocks-override replaces its profiled block count "
                "(v1/core/kv_cache_utils.py may_override_num_blocks)"
                + (" and its --kv-cache-memory-bytes with it" if size is not None else "")
                + "; a pool that does not fit beside the weights is refused (the engine's allocation fails)" + forced)
        elif size is not None:
            d.args[sim_serve.KV_CACHE_MEMORY_BYTES] = size
            try:
                tokens = f": {launch_engine(d.args).kv_pool_tokens()} tokens of {job.model}'s KV"
            except (LlmsweepError, ValueError):  # no figures, or it does not fit: `sim serve` says why
                tokens = ""
            d.notes.append(f"KV pool pinned at {size} bytes on each GPU (the recipe's --kv-cache-memory-bytes)"
                           f"{tokens}, whatever the memory fraction, as vLLM skips its memory profiling for it "
                           "(v1/worker/gpu_worker.py Worker.determine_available_memory); a pool that does not fit "
                           "beside the weights is refused (the engine's allocation fails)")

    @staticmethod
    def _prefix_caching(recipe: dict[str, Any], d: Derived) -> None:
        """The recipe's prefix-cache switch (:data:`PREFIX_CACHE_SWITCHES`; the last in the launch wins): off, the
        simulator serves without a prefix cache (`--no-prefix-caching`), as the engine would, with a note."""
        said = [(flag, on) for flag, on in ((f, PREFIX_CACHE_SWITCHES.get(f)) for f, v in recipe.items()
                                            if in_launch(v)) if on is not None]
        if said and not said[-1][1]:
            d.args[sim_serve.NO_PREFIX_CACHING] = True
            d.notes.append(f"prefix caching off (the recipe's {said[-1][0]}): no prompt block is reused")

    @staticmethod
    def _engine_memory_fraction(job: Job, d: Derived) -> None:
        """The memory fraction of the engine the job stands in for, from the one answer the policy reads too
        (`engines.memory.launch_memory_fraction`): the recipe's pin (SGLang's cut by 0.85 where SGLang cuts it), else
        the engine's own default at the version its
        image names (else the recipe's `serve.engine.version`) from the engines catalog (vLLM's 0.92 from 0.20.0,
        0.9 before, ATOM's 0.9), written into the launch (`--mem-fraction-static`) with a note naming its source.
        SGLang's is computed per launch as its `ServerArgs._handle_gpu_memory_settings` does, at the releases whose
        source was read and on ROCm GPUs (`engines.sglang_memory`), with a note giving the terms. Where the catalog
        records a default for the engine but none for this version, the simulator's own fraction stays, with a note
        saying why; SGLang elsewhere and an engine the catalog records none for keep it without one. TensorRT-LLM's
        (0.9, or the recipe's `--kv_cache_free_gpu_memory_fraction`) is a share of the memory the weights leave: it
        is converted to the share of HBM that sizes the same pool (:meth:`_free_share_of_hbm`)."""
        from llmsweep.engines.memory import launch_memory_fraction

        fraction = launch_memory_fraction(job, str(d.args[sim_serve.HARDWARE]))
        if fraction is None:
            return
        if fraction.share_of == "free":
            SimAdapter._free_share_of_hbm(fraction, d)
            return
        if fraction.origin in ("engine", "recipe"):
            d.args[sim_serve.MEM_FRACTION_STATIC] = fraction.value
        if fraction.note is not None:
            d.notes.append(fraction.note)

    @staticmethod
    def _free_share_of_hbm(fraction: MemoryFraction, d: Derived) -> None:
        """A fraction of the memory the weights leave (TensorRT-LLM's `kv_cache_free_gpu_memory_fraction`), as the
        share of HBM the simulator sizes its pool with (`--mem-fraction-static`): weights per GPU + the pool's reserve
        + f x the rest (`MemoryFraction.budget_bytes`), so the pool is f x (HBM - weights - reserve), with a note
        giving the terms and what is not modelled. Where the simulator has no figures for the model or GPU, the launch
        keeps its own fraction (and fails on its own)."""
        from llmsweep.sim.inputs import perf_inputs
        from llmsweep.sim.perf import GIB, KV_RESERVE_BYTES_PER_GPU

        a = d.args
        try:
            inputs = perf_inputs(str(a[sim_serve.MODEL]), str(a[sim_serve.HARDWARE]),
                                 precision=str(a[sim_serve.PRECISION]))
        except LlmsweepError:
            return
        hbm, weights = inputs.hbm_bytes, inputs.weight_bytes / int(a[sim_serve.TP])
        share = round(fraction.budget_bytes(hbm, weights, KV_RESERVE_BYTES_PER_GPU) / hbm, 4)
        if share > 1:  # the weights alone overflow the GPU: the launch refuses it itself
            return
        a[sim_serve.MEM_FRACTION_STATIC] = share
        rest = max(0.0, hbm - weights - KV_RESERVE_BYTES_PER_GPU)
        d.notes.append(
            f"memory fraction {share:g} of HBM: {fraction.describe()} — {weights / 1e9:.1f} GB of weights per GPU + "
            f"the simulator's {KV_RESERVE_BYTES_PER_GPU / GIB:g} GiB reserve + {fraction.value:g} x the "
            f"{rest / 1e9:.1f} GB left of {a[sim_serve.HARDWARE]}'s {hbm / 1e9:.1f} GB; not modelled: the activation "
            f"peak of the engine's profiling run (a max_num_tokens forward pass), which it also leaves out of the free "
            f"memory" + (f" ({fraction.note})" if fraction.note is not None else ""))

    @staticmethod
    def _engine_scheduler(engine: str, d: Derived) -> None:
        """The step shape and admission of the engine the job stands in for, where the engines catalog records ones
        other than the simulator's unified steps and on-demand admission (`EngineInfo.scheduler`: ATOM's
        prefill-first steps, TensorRT-LLM's no-evict admission): the simulator's scheduler and capacity policies for
        it, and, where the shape has a step budget of its own, that budget as the engine takes it — the recipe's
        budget flag (translated to `--chunked-prefill-size`), else the engine's default — with no per-request chunk
        cap below it; written into the launch with a note naming the source."""
        from llmsweep.catalog.engines import get_engine

        try:
            info = get_engine(engine)
        except ConfigError:
            return
        shape = info.scheduler
        if shape is None:
            return
        if shape.policy != "unified":
            d.args[sim_serve.SCHEDULER] = shape.policy
        if shape.capacity != "on-demand":
            d.args[sim_serve.CAPACITY] = shape.capacity
        said = []
        if shape.policy == "prefill-first":
            said.append(f"scheduler {shape.policy}: {info.display_name}'s step shape — a step that can prefill "
                        "prefills only, a prompt's KV is taken whole at admission")
        if shape.capacity == "no-evict":
            said.append(f"capacity {shape.capacity}: {info.display_name}'s admission — a request starts only when "
                        "its whole length (prompt + max_tokens) fits the KV blocks the running requests have not "
                        "reserved to their completion, its prompt's KV taken at admission, nothing ever preempted")
        if shape.budget_flag is not None and shape.budget_tokens is not None:
            # the recipe's budget flag, in any spelling, as translated into the launch
            pinned = token_count(d.args.get(sim_serve.CHUNKED_PREFILL_SIZE))
            budget = pinned if pinned is not None else shape.budget_tokens
            d.args[sim_serve.CHUNKED_PREFILL_SIZE] = d.args[sim_serve.MAX_PREFILL_TOKENS] = budget
            whose = f"the recipe's {shape.budget_flag}" if pinned is not None else \
                f"{info.display_name}'s default {shape.budget_flag}"
            said.append(f"a step budget of {budget} prompt tokens ({whose}), one prompt may take all of it")
        d.notes.append("; ".join(said) + f" ({shape.source})")

    @staticmethod
    def _engine_prompt_limit(job: Job, engine: str, d: Derived) -> None:
        """The longest prompt the stood-in engine takes where it refuses longer ones outright (TensorRT-LLM without
        chunked prefill: its `Adapter.prompt_limit`), written into the launch with a note: the simulator answers
        a longer prompt with the engine's 400, as the run on the GPUs would."""
        from llmsweep.engines import get_adapter

        try:
            limit = get_adapter(engine).prompt_limit(job)
        except LlmsweepError:
            return
        if limit is None:
            return
        d.args[sim_serve.MAX_PROMPT_TOKENS] = limit.tokens
        d.notes.append(f"prompts over {limit.tokens} tokens are refused with the engine's 400 ({limit.why}), as "
                       "`validate` says (serve.prompt-budget)")

    @staticmethod
    def _dp_pinned_cap(engine: str, dp: int, d: Derived) -> None:
        """A running cap the launch itself sets (the recipe's pin, an agentic job's 2 x conc), as the engine's
        total over its `dp` DP-attention ranks, counted as the stood-in engine counts it
        (`engines.running_cap.dp_running_cap`: SGLang divides it among them, and a pin below `dp`, which leaves each
        rank none, is refused; vLLM's, ATOM's and TensorRT-LLM's ranks each take it, so the engine runs `dp` times
        it). Written into the launch with a note; a value that is no count is left for the launch to refuse."""
        pinned = token_count(d.args[sim_serve.MAX_RUNNING_REQUESTS])
        if pinned is None or pinned <= 0:
            return
        cap = dp_running_cap(engine, sim_serve.MAX_RUNNING_REQUESTS, pinned, dp)
        d.args[sim_serve.MAX_RUNNING_REQUESTS] = cap.total
        how = f"SGLang gives each of the {dp} DP-attention ranks {pinned} // {dp}" if cap.split else \
            f"each of the {dp} DP ranks runs up to {pinned}"
        d.notes.append(f"running cap {cap.total}: the launch's {pinned}, {how}")

    @staticmethod
    def _dp_step_budget(engine: str, dp: int, d: Derived) -> None:
        """With DP attention each of the `dp` ranks schedules its own step: the engine's step budget (prompt and
        decode tokens, `--max-prefill-tokens`) is the ranks' together, `dp` x the launch's. vLLM's, ATOM's and
        TensorRT-LLM's ranks each prefill up to their own budget; SGLang divides its prefill chunk among the ranks
        (`ServerArgs._handle_data_parallelism`: `chunked_prefill_size // dp_size`) and a rank prefills at most its
        chunk a step (`PrefillAdder`'s `rem_chunk_tokens`), so one prompt takes at most the rank's chunk and the
        ranks together take the prompt tokens the launch takes without DP attention (`--prefill-budget`). Written
        into the launch with a note; values that are no token count are left for the launch to refuse."""
        from llmsweep.sim.engine import EngineConfig

        a = d.args
        fields = EngineConfig.model_fields
        chunk, budget = (token_count(a[flag]) if flag in a else int(fields[name].default)
                         for flag, name in ((sim_serve.CHUNKED_PREFILL_SIZE, "chunked_prefill_size"),
                                            (sim_serve.MAX_PREFILL_TOKENS, "max_prefill_tokens")))
        if chunk is None or budget is None or chunk <= 0 or budget <= 0:
            return
        said = []
        rank_chunk = chunk
        if engine == SGLANG.id:
            rank_chunk = max(1, chunk // dp)
            a[sim_serve.CHUNKED_PREFILL_SIZE] = rank_chunk
            a[sim_serve.PREFILL_BUDGET] = max(budget, chunk)
            said.append(f"a prompt takes at most its rank's prefill chunk, {rank_chunk} tokens a step (SGLang's "
                        f"chunked prefill size {chunk} // {dp}), and the ranks together {a[sim_serve.PREFILL_BUDGET]} "
                        "prompt tokens, as the launch without DP attention")
        a[sim_serve.MAX_PREFILL_TOKENS] = dp * max(budget, rank_chunk)
        said.append(f"the step budget is the {dp} ranks' together, {a[sim_serve.MAX_PREFILL_TOKENS]} tokens")
        d.notes.append(f"DP attention over {dp} ranks modelled as one engine of balanced ranks: each rank keeps its "
                       "own requests' KV (the pool is theirs together) and a step waits for the busiest rank's KV "
                       "reads; " + "; ".join(said))

    @staticmethod
    def _sglang_chunk(job: Job, d: Derived) -> None:
        """SGLang's own prefill chunk when the recipe pins none and it is not the simulator's 8192 (16384 on a GPU of
        160 GiB or more, at the releases whose source was read: `engines.sglang_memory.sglang_chunk_default`),
        written into the launch with a note naming its source (with DP attention, SGLang's ranks divide it:
        :meth:`_dp_step_budget`)."""
        from llmsweep.engines.sglang_memory import sglang_chunk_default
        from llmsweep.sim.inputs import simulated_gpu

        gpu = simulated_gpu(str(d.args[sim_serve.HARDWARE]))
        default = sglang_chunk_default(job, gpu) if gpu is not None else None
        if default is not None:
            d.args[sim_serve.CHUNKED_PREFILL_SIZE] = default.value
            d.notes.append(default.note())

    @staticmethod
    def _engine_running_cap(job: Job, engine: str, d: Derived) -> None:
        """The running-request cap of the engine the job stands in for, on its GPU, when the recipe pins none: the
        engine's own default, written into the launch with a note naming its source — vLLM's, ATOM's and
        TensorRT-LLM's by GPU from the engines catalog (`catalog.engines.default_max_running`: vLLM's 1024 on a GPU
        of 70 GiB or more, TensorRT-LLM's `--max_batch_size` 2048 on any), SGLang's
        from the KV pool the simulator sizes for the launch (:func:`sglang_default_cap`); the simulator's own default
        when neither gives one."""
        from llmsweep.catalog.engines import default_max_running
        from llmsweep.sim.inputs import simulated_gpu

        hardware = str(d.args[sim_serve.HARDWARE])
        gpu = simulated_gpu(hardware)
        default = sglang_default_cap(job, d.args) if engine == SGLANG.id else \
            default_max_running(engine, gpu) if gpu is not None else None
        if default is None:
            return
        dp = int(d.args.get(sim_serve.DP_ATTENTION, 1))
        d.args[sim_serve.MAX_RUNNING_REQUESTS] = default.value if engine == SGLANG.id else dp * default.value
        d.notes.append(default.note() + ("" if engine == SGLANG.id or dp == 1 else
                                          f", on each of the {dp} DP ranks: {dp * default.value} for the engine"))

    def _spec(self, job: Job, d: Derived) -> None:
        sd = job.serve.spec_decoding if job.serve is not None else None
        if sd is None or job.spec_decoding == "none":
            self._recipe_less_spec(job, d)
            return
        d.args[sim_serve.SPEC_METHOD] = SIM_METHODS[sd.method]
        if sd.num_steps is not None:
            d.args[sim_serve.SPEC_K] = sd.num_steps
        pin = self.pinned_acceptance(job)
        if pin is not None:
            d.args.update(pin.args)
            return
        estimate = simulated_acceptance(job)
        if estimate is not None:
            self._at_estimate(job, d, estimate)

    def _recipe_less_spec(self, job: Job, d: Derived) -> None:
        """A speculative matrix entry without `serve.spec-decoding` (an InferenceX master file): its method at the
        default K, at the estimated acceptance length."""
        draft = _draft(job) if job.spec_decoding != "none" else None
        estimate = simulated_acceptance(job) if draft is not None else None
        if draft is None or estimate is None:
            return
        d.args[sim_serve.SPEC_METHOD] = SIM_METHODS[draft[0]]
        d.args[sim_serve.SPEC_K] = draft[1]
        self._at_estimate(job, d, estimate)

    @staticmethod
    def _at_estimate(job: Job, d: Derived, estimate: AcceptanceEstimate) -> None:
        """Run the launch at the simulator's estimate: pinned with `--acceptance-length`, except on an eval's server,
        which pins nothing (no engine's eval launch spells synthetic acceptance): `sim serve` realises the same
        typical acceptance at the `--spec-k` it is given (:func:`eval_acceptance`)."""
        if not serves_eval(job):
            d.args[sim_serve.ACCEPTANCE_LENGTH] = f"{estimate.value:g}"
            d.notes.append(f"acceptance length {estimate.value:g} is the simulator's estimate: {estimate.basis}")
            return
        draft = _draft(job)
        k = draft[1] if draft is not None else DEFAULT_DRAFT_LENGTH
        d.args[sim_serve.SPEC_K] = k  # the K the estimate is for, named in the launch
        d.notes.append(f"{'eval-only' if job.eval_only else 'run-eval'} job: nothing pinned (real verification); the "
                       f"simulator realises the typical {d.args[sim_serve.SPEC_METHOD]} acceptance at K={k}, "
                       f"{estimate.value:g}, its estimate: {estimate.basis}")

    def _kv(self, job: Job, d: Derived, recipe: dict[str, Any], tp: int) -> None:
        """The CPU KV tier: the recipe's `--hicache-size` (GB per rank) over the job's ranks, else the job's
        `total-cpu-dram-gb`; HiCache with neither sizes it as SGLang does (:meth:`_hicache_ratio_gb`)."""
        hicache = bool(recipe.get("--enable-hierarchical-cache"))
        if job.kv_offloading != "dram" and not hicache:
            return
        gb = float(job.total_cpu_dram_gb or 0)
        per_rank = recipe.get("--hicache-size")
        if not isinstance(per_rank, bool) and (size := _number(per_rank)) is not None and size > 0:
            gb = size * tp
        elif hicache and gb <= 0:
            gb = self._hicache_ratio_gb(recipe, d) or 0.0
        d.args[sim_serve.KV_OFFLOAD] = "dram"
        d.args[sim_serve.DRAM_GB] = f"{gb:.12g}"  # whole figures as before (1947); a ratio-sized pool to the token

    @staticmethod
    def _hicache_ratio_gb(recipe: dict[str, Any], d: Derived) -> float | None:
        """The DRAM of SGLang's HiCache host pools when the launch gives no `--hicache-size`: each rank's pool holds
        `--hicache-ratio` (default 2.0) times its device pool's tokens (`HostKVCache.__init__`: `device_pool.size *
        host_to_device_ratio`), so the engine's DRAM is that many tokens at the KV bytes its GPUs hold
        (`sim.perf.host_capacity_tokens` reads it back), with a note. None where the simulator cannot size the
        pool (the launch then says why)."""
        from llmsweep.sim.perf import GB

        ratio = _number(recipe.get("--hicache-ratio"))
        ratio = HICACHE_RATIO_DEFAULT if ratio is None or ratio <= 0 else ratio
        try:
            config = launch_engine(d.args)
            inputs = config.perf_inputs()
            tokens = config.kv_pool_tokens(inputs)
        except (LlmsweepError, ValueError):
            return None
        host = int(tokens * ratio)
        gb = host * config.tp * inputs.kv_bytes_per_token_per_gpu(config.tp, config.dp_attention) / GB
        gpus = count_of(config.tp, "GPU")
        d.notes.append(f"HiCache host pools without --hicache-size: --hicache-ratio {ratio:g} x the device pool of "
                       f"{tokens} tokens = {host} tokens, {gb:.4g} GB of DRAM over {gpus} (SGLang's HostKVCache "
                       "sizing)")
        return gb

    def merged_args(self, job: Job, port: int, role: RoleContext | None = None) -> tuple[dict[str, Any], Derived]:
        """The simulator takes only its own flags: the recipe's were translated in :meth:`derive`; a disaggregated
        worker adds its role's (:meth:`derive_role`)."""
        derived = self.derive(job, port)
        if role is not None:
            self.derive_role(job, port, role, derived)
        return dict(derived.args), derived

    def engine_disagg_refusal(self, job: Job) -> str | None:
        """None: the simulator stands in for every engine's workers, NVIDIA Dynamo's included (its own router then
        replaces the Dynamo frontend)."""
        return None

    def derive_role(self, job: Job, port: int, role: RoleContext, d: Derived) -> None:
        """A live simulator worker of a disaggregated job (`llmsweep sim serve --role`): it binds its node's address
        (its peers and the router are on other nodes) and, on the decode side, models the KV transfer as virtual
        time does (`sim.transfer`): over the link the hardware catalog gives between each prefill worker's nodes and
        its own (:meth:`~llmsweep.sim.transfer.Fabric.link`, `--kv-links`), each GPU moving its shard, the prefill
        workers' TP given (`--prefill-tp`). A worker wider than a node runs as one simulator process on its first
        node that models all its GPUs. Unlike the aggregated simulator (loopback only), a role is reachable,
        unauthenticated, from the allocation's network, as any engine server in a Slurm job is."""
        a = d.args
        a[sim_serve.ROLE] = role.kind
        a[sim_serve.HOST] = role.head
        a[sim_serve.KV_TRANSFER] = role.transfer
        nodes = count_of(len(role.nodes), "node")
        note = f"live simulator {role.kind} worker on node {role.nodes[0]}" + (
            f" (one process modelling the GPUs of all {nodes})" if len(role.nodes) > 1 else "")
        if role.kind == "decode":
            links, prefill_tp = self.kv_links(job, role, a)
            a[sim_serve.KV_LINKS] = links_flag(links)
            a[sim_serve.PREFILL_TP] = prefill_tp
            labels = list(dict.fromkeys(link.label() for link in links))
            note += (f"; KV arrives from TP{prefill_tp} prefill workers over the modelled link"
                     f"{'s' if len(labels) > 1 else ''} {'; '.join(labels)}, standing for {role.transfer}")
        d.notes.append(note)

    @staticmethod
    def kv_links(job: Job, role: RoleContext, args: dict[str, Any]) -> tuple[list[Link], int]:
        """The link from each prefill worker to the decode worker `role` renders (the catalog's, by the nodes each
        occupies: `sim.transfer.catalog_fabric`, as virtual time's deployment has them) and the prefill TP."""
        from llmsweep.sim.engine import EngineConfig
        from llmsweep.sim.transfer import catalog_fabric

        assert job.prefill is not None, "a decode role belongs to a disaggregated job"
        decode = EngineConfig(model=str(args[sim_serve.MODEL]), hardware=str(args[sim_serve.HARDWARE]),
                              precision=str(args[sim_serve.PRECISION]),
                              kv_dtype=str(args.get(sim_serve.KV_DTYPE) or "bf16"))
        fabric = catalog_fabric(decode.hardware, role.gpus_per_node,
                                scaleup_latency_s=decode.perf_inputs().link_latency_s)
        return [fabric.link(nodes, role.nodes) for nodes in role.prefill_nodes], job.prefill.tp

    def router_spec(self, job: Job, prefill: list[RoleWorker], decode: list[RoleWorker], node: int,
                    transfer: str) -> LaunchSpec:
        """`llmsweep sim router --prefill URL … --decode URL …` on `node` (the analogue of SGLang's PD router)."""
        port = (prefill[0].spec.port if prefill else self.info().default_port) + ROUTER_PORT_OFFSET
        argv = [sys.executable, "-m", "llmsweep.cli.main", "sim", "router"]
        for w in prefill:
            argv += [cli_flag("prefill_urls"), f"http://{w.spec.host}:{w.spec.port}"]
        for w in decode:
            argv += [cli_flag("decode_urls"), f"http://{w.spec.host}:{w.spec.port}"]
        argv += [cli_flag("kv_transfer"), transfer, cli_flag("bind_host"), node_host(node), sim_serve.PORT, str(port)]
        return LaunchSpec(engine=self.name, argv=tuple(argv), host=node_host(node), port=port,
                          health_path="/health", metrics_path=None, ready_log_markers=(ROUTER_READY_LINE,),
                          served_model_name=job.workload.served_model_name,
                          notes=(f"simulated PD router over {len(prefill)} prefill and "
                                 f"{count_of(len(decode), 'decode worker')}; KV moves prefill→decode over a modelled "
                                 f"link standing for {transfer}",))

    def conflicts(self, job: Job, kind: str = "parallel") -> list[Any]:
        return []

    def render(self, job: Job, *, port: int | None = None, role: RoleContext | None = None) -> LaunchSpec:
        spec = super().render(job, port=port, role=role)
        env = {k: v for k, v in spec.env.items() if not k.startswith(engine_env_prefixes())}
        prefix = (SGLANG if self.style(job) == SGLANG.id else VLLM).metric_prefix
        return spec.model_copy(update={"image": None, "engine_version": None, "gpus": 0, "env": env,
                                       "metrics_prefix": prefix})

    def port_of(self, job: Job, port: int | None) -> int:
        return port if port is not None else super().port_of(job, None)
