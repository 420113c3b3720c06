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
from llmsweep.spec.serve import ResolvedServe, SpecDecoding
from llmsweep.spec.workload import ResolvedWorkload, ScenarioId, WorkloadSpec
from llmsweep.workload.scenario import get_scenario

log = logging.getLogger(__name__)

_ENTRY_TO_FIELD: dict[str, str | None] = {
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
    agentic = entry.get("scenario-type") == ScenarioId.AGENTIC_CODING
    scenario = ScenarioId.AGENTIC_CODING if agentic else ScenarioId.FIXED_SEQ_LEN
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
        require_power=recipe.require_power,
        **fields,
    )
    return job


def job_from_cell(cell: Cell) -> Job:
    return job_from_entry(cell.entry, cell.recipe, cell.arm)


def resolve_workload(recipe: Recipe, entry: dict[str, Any], scenario: ScenarioId) -> ResolvedWorkload:
    """`recipe.workload` with its scenario's defaults (InferenceX's, for its two) filled in for this job.

    `scenario` is the recipe block the entry came from; an agentic-coding entry of a recipe whose workload names a
    `replay` trace runs the `mooncake-replay` scenario.
    """
    spec = recipe.workload or WorkloadSpec()
    if scenario is ScenarioId.AGENTIC_CODING and spec.replay is not None:
        scenario = ScenarioId.MOONCAKE_REPLAY
    common: dict[str, Any] = {
        "tokenizer": spec.tokenizer or recipe.model,
        "served-model-name": spec.served_model_name or recipe.model,
        "seed": spec.seed if spec.seed is not None else 42,
    }
    return get_scenario(scenario).resolve(spec, common=common, entry=entry, model_prefix=recipe.model_prefix,
                                          spec_decoding=entry.get("spec-decoding", "none") != "none")


def resolve_job_acceptance(
    recipe: Recipe, entry: dict[str, Any], scenario: ScenarioId, serve: ResolvedServe | None
) -> Acceptance | None:
    """Acceptance to pin for a speculative throughput job.

    Agentic jobs pin the golden AL (or the recipe's explicit pin, with the golden one kept alongside). Fixed-seq-len
    jobs use real acceptance (chat-templated prompts) unless the recipe pins a value explicitly.
    """
    if entry.get("spec-decoding", "none") == "none" or serve is None or serve.spec_decoding is None:
        return None
    sd = serve.spec_decoding
    golden = golden_for(recipe, sd)
    golden_value = golden.value if golden is not None else None
    provenance = golden.provenance() if golden is not None else None
    source: Literal["golden", "pinned"]
    if sd.acceptance_length is not None:
        value, source = sd.acceptance_length, "pinned"
    elif scenario is ScenarioId.AGENTIC_CODING and golden_value is not None:
        value, source = golden_value, "golden"
    else:
        return None
    return Acceptance(value=value, source=source, golden=golden_value, method=sd.method, thinking=sd.thinking,
                      k=sd.draft_length, draft_model=sd.draft_model, provenance=provenance,
                      simulated=golden is not None and golden.simulated,
                      cited=sd.acceptance_length_source if source == "pinned" else None)


def golden_for(recipe: Recipe, sd: SpecDecoding) -> AcceptanceResolution | None:
    """The golden curve's answer for a recipe's speculative decoding (its model, served precision, method, thinking
    mode, K and drafter), as the planner pins it and the golden-AL rules judge it; None when none answers (or the
    curves do not read: the policy reports a missing golden AL)."""
    k = sd.draft_length
    if k is None:
        return None
    try:
        return resolve_acceptance(recipe.model_prefix, recipe.model, recipe.precision, sd.method, sd.thinking, k,
                                  draft_model=sd.curve_selector, served_draft=sd.curve_drafter)
    except LlmsweepError as exc:  # a broken catalog file must not stop planning; policy reports missing goldens
        log.warning("golden AL lookup failed for %s (%s K=%s): %s", recipe.key, sd.method, k, exc)
        return None
