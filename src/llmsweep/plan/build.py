"""Cell → Job: attach the fingerprint, id, resolved serve/workload, engine, GPU count and acceptance length."""

from __future__ import annotations

import logging
from typing import Any, Literal

from llmsweep.catalog.fleet import gpu_sku
from llmsweep.catalog.golden import AcceptanceResolution, resolve_acceptance
from llmsweep.errors import LlmsweepError
from llmsweep.plan.expand import Cell
from llmsweep.plan.fingerprint import recipe_fingerprint, throughput_entry
from llmsweep.plan.job import Acceptance, Job, Worker
from llmsweep.plan.names import job_id
from llmsweep.spec.engines import resolve_engine
from llmsweep.spec.recipe import Recipe
from llmsweep.spec.serve import ResolvedServe
from llmsweep.spec.workload import (
    CORPUS_DATASETS,
    DEFAULT_PROMPTS_PER_CONC,
    DEFAULT_RANGE_RATIO,
    DEFAULT_WARMUP_PER_LANE,
    DEFAULT_WARMUPS_PER_CONC,
    ResolvedWorkload,
    TraceSource,
    WorkloadSpec,
    default_corpus,
)

log = logging.getLogger(__name__)

_ENTRY_TO_FIELD: dict[str, str] = {
    "model-prefix": "model_prefix",
    "dcp-size": "dcp_size",
    "pcp-size": "pcp_size",
    "dp-attn": "dp_attn",
    "spec-decoding": "spec_decoding",
    "max-model-len": "max_model_len",
    "kv-offloading": "kv_offloading",
    "kv-offload-backend": "kv_offload_backend",
    "total-cpu-dram-gb": "total_cpu_dram_gb",
    "exp-name": "exp_name",
    "kv-p2p-transfer": "kv_p2p_transfer",
    "run-eval": "run_eval",
    "eval-only": "eval_only",
    "eval-conc": "eval_conc",
    "eval-all-concs": "eval_all_concs",
    "scenario-type": None,  # derived from `scenario`
}


def job_from_entry(
    entry: dict[str, Any],
    recipe: Recipe,
    arm: dict[str, Any],
    *,
    fingerprint: str | None = None,
) -> Job:
    """Build a Job whose :meth:`Job.matrix_entry` equals `entry`."""
    scenario = "agentic-coding" if entry.get("scenario-type") == "agentic-coding" else "fixed-seq-len"
    multinode = "prefill" in entry
    fp = fingerprint or recipe_fingerprint(throughput_entry(entry))
    fields: dict[str, Any] = {}
    for key, value in entry.items():
        name = _ENTRY_TO_FIELD.get(key, key)
        if name is None:
            continue
        if key in ("prefill", "decode"):
            value = Worker.model_validate(value)
        fields[name] = value
    serve = recipe.serve.resolve(arm) if recipe.serve is not None else None
    engine = resolve_engine(recipe) if serve is not None else None
    prefill: Worker | None = fields.get("prefill")
    decode: Worker | None = fields.get("decode")
    gpus = prefill.gpus + decode.gpus if prefill and decode else entry["tp"] * entry["pp"] * entry["pcp-size"]
    eval_only = bool(entry.get("eval-only"))
    job = Job(
        id=job_id(entry, fp, eval_only=eval_only),
        recipe_key=recipe.key,
        recipe_file=recipe.source.file if recipe.key else None,
        recipe_fingerprint=fp,
        scenario=scenario,
        multinode=multinode,
        runner_label=recipe.runner,
        sku=gpu_sku(recipe.runner),
        engine=engine,
        gpus=gpus,
        serve=serve,
        workload=resolve_workload(recipe, entry, scenario),
        acceptance=None if eval_only else resolve_job_acceptance(recipe, entry, scenario, serve),
        **fields,
    )
    return job


def job_from_cell(cell: Cell) -> Job:
    return job_from_entry(cell.entry, cell.recipe, cell.arm)


def resolve_workload(recipe: Recipe, entry: dict[str, Any], scenario: str) -> ResolvedWorkload:
    """`recipe.workload` with InferenceX's defaults filled in for this job."""
    spec = recipe.workload or WorkloadSpec()
    spec_on = entry.get("spec-decoding", "none") != "none"
    common: dict[str, Any] = {
        "scenario": scenario,
        "tokenizer": spec.tokenizer or recipe.model,
        "served-model-name": spec.served_model_name or recipe.model,
        "seed": spec.seed if spec.seed is not None else 42,
    }
    if scenario == "agentic-coding":
        traces = spec.traces or TraceSource(hf=CORPUS_DATASETS[default_corpus(recipe.model_prefix)])
        return ResolvedWorkload.model_validate({
            **common,
            "use-chat-template": spec.use_chat_template if spec.use_chat_template is not None else True,
            "traces": traces,
            "duration": spec.duration if spec.duration is not None else entry["duration"],
            "warmup-per-lane": spec.warmup_per_lane if spec.warmup_per_lane is not None else DEFAULT_WARMUP_PER_LANE,
        })
    conc = entry["conc"]
    single = conc if isinstance(conc, int) else None
    per_conc = spec.num_prompts_per_conc or DEFAULT_PROMPTS_PER_CONC
    num_prompts = spec.num_prompts if spec.num_prompts is not None else (per_conc * single if single else None)
    num_warmups = spec.num_warmups if spec.num_warmups is not None else (
        DEFAULT_WARMUPS_PER_CONC * single if single else None)
    return ResolvedWorkload.model_validate({
        **common,
        "use-chat-template": spec.use_chat_template if spec.use_chat_template is not None else spec_on,
        "isl": entry["isl"],
        "osl": entry["osl"],
        "num-prompts": num_prompts,
        "num-prompts-per-conc": None if spec.num_prompts is not None else per_conc,
        "range-ratio": spec.range_ratio if spec.range_ratio is not None else DEFAULT_RANGE_RATIO,
        "num-warmups": num_warmups,
    })


def resolve_job_acceptance(
    recipe: Recipe, entry: dict[str, Any], scenario: str, serve: ResolvedServe | None
) -> Acceptance | None:
    """Acceptance to pin for a speculative throughput job.

    Agentic jobs pin the golden AL (or the recipe's explicit pin, with the golden one kept alongside). Fixed-seq-len
    jobs use real acceptance (chat-templated prompts) unless the recipe pins a value explicitly.
    """
    if entry.get("spec-decoding", "none") == "none" or serve is None or serve.spec_decoding is None:
        return None
    sd = serve.spec_decoding
    golden = _lookup_golden(recipe, sd.method, sd.thinking, sd.draft_length, sd.draft_model)
    golden_value = golden.value if golden is not None else None
    provenance = golden.provenance() if golden is not None else None
    source: Literal["golden", "pinned"]
    if sd.acceptance_length is not None:
        value, source = sd.acceptance_length, "pinned"
    elif scenario == "agentic-coding" and golden_value is not None:
        value, source = golden_value, "golden"
    else:
        return None
    return Acceptance(value=value, source=source, golden=golden_value, method=sd.method, thinking=sd.thinking,
                      k=sd.draft_length, draft_model=sd.draft_model, provenance=provenance)


def _lookup_golden(recipe: Recipe, method: str, thinking: str, k: int | None,
                   draft_model: str | None) -> AcceptanceResolution | None:
    if k is None:
        return None
    try:
        return resolve_acceptance(recipe.model_prefix, recipe.model, recipe.precision, method, thinking, k,
                                  draft_model=draft_model)
    except LlmsweepError as exc:  # a broken catalog file must not stop planning; policy reports missing goldens
        log.warning("golden AL lookup failed for %s (%s K=%s): %s", recipe.key, method, k, exc)
        return None
