"""What the recipe names must exist and agree: the model (and its context), the runner label, the checkpoint's
precision, and a topology that divides the node.

Each of these used to pass validation and fail later: an unknown runner label silently simulated the default GPU,
an `isl` beyond the model's context spent 88 s per job before the server refused it, `fp4` on an FP8 checkpoint
started an engine that cannot serve it.
"""

from __future__ import annotations

from collections.abc import Iterator

from llmsweep.catalog.models import (
    MODELS_FILE,
    ModelSpec,
    checkpoint_precision,
    find_model,
    model_for_prefix,
)
from llmsweep.catalog.sources import ENV_VAR as CATALOG_ENV_VAR
from llmsweep.findings import Finding, Severity
from llmsweep.plan.job import Job
from llmsweep.policy.context import Context, entry_path
from llmsweep.policy.registry import rule
from llmsweep.spec.components import ScenarioId
from llmsweep.spec.recipe import Recipe
from llmsweep.spec.source import FieldPath
from llmsweep.words import count_of

PRECISION_BITS: dict[str, int] = {
    "fp4": 4, "mxfp4": 4, "nvfp4": 4, "int4": 4, "w4a16": 4, "w4a8": 4,
    "fp8": 8, "mxfp8": 8, "int8": 8, "w8a8": 8,
    "bf16": 16, "fp16": 16,
    "fp32": 32,
}
"""Bits per weight of a precision name; names not listed are not compared."""


def recipe_model(recipe: Recipe) -> ModelSpec | None:
    """The catalog model a recipe serves: by `model` (HF id, any org or precision variant), else by `model-prefix`."""
    return find_model(recipe.model) or model_for_prefix(recipe.model_prefix)


@rule("input.unknown-model", Severity.ERROR,
      "The model is in no catalog, so its size, context and the simulator's figures are unknown",
      f"use a model of `llmsweep catalog models`, add it to {MODELS_FILE} in ${CATALOG_ENV_VAR}, or serve local "
      "weights with `serve.model-path`",
      "DESIGN.md principle 1 (checked before any GPU hour)")
def unknown_model(ctx: Context) -> Iterator[Finding]:
    for recipe in ctx.recipes.values():
        if find_model(recipe.model) is not None:
            continue
        serve = recipe.serve
        if serve is not None and serve.model_path:  # local weights: the recipe says what a real engine serves
            from llmsweep.sim.inputs import model_entry_fix, simulates_model

            if ctx.simulate and not simulates_model(recipe.model):  # but they give the simulator no figures
                yield ctx.hit("input.unknown-model", recipe, ("model",),
                              f"model `{recipe.model}` is in no catalog and the simulator has no figures for it: "
                              f"`run --simulate`, `predict` and `al collect --simulate` refuse its jobs",
                              severity=Severity.WARNING, fix=model_entry_fix())
            continue
        # A plan-only recipe (no serve: InferenceX master files) keeps a warning, as `matrix` plans it anyway.
        severity = Severity.ERROR if serve is not None else Severity.WARNING
        prefix = model_for_prefix(recipe.model_prefix)
        hint = f"; model-prefix `{recipe.model_prefix}` is {prefix.id}, but the id does not name it" if prefix else ""
        yield ctx.hit("input.unknown-model", recipe, ("model",),
                      f"model `{recipe.model}` is not in the model catalog{hint}", severity=severity)


@rule("input.unknown-hardware", Severity.WARNING,
      "The runner's GPU is in no hardware catalog: the HBM-fit and DRAM checks are skipped and the simulator has no "
      "figures for it",
      "add the SKU to hardware.yaml in $LLMSWEEP_CATALOG_DIR (`llmsweep catalog hardware` lists the known ones), or "
      "run on a runner whose label names a known GPU",
      "DESIGN.md principle 1 (checked before any GPU hour): a check that cannot run says so")
def unknown_hardware(ctx: Context) -> Iterator[Finding]:
    from llmsweep.catalog.fleet import gpu_sku
    from llmsweep.catalog.hardware import hardware_for_runner

    for recipe in ctx.recipes.values():
        # a label that names a GPU (`rtx6000pro`) the catalog lacks; one that names none (`cluster:cpu-local`) is a
        # host without GPUs, whose memory no GPU check reads
        sku = gpu_sku(recipe.runner)
        if sku is not None and hardware_for_runner(recipe.runner) is None:
            yield ctx.hit("input.unknown-hardware", recipe, ("runner",),
                          f"runner `{recipe.runner}` names GPU `{sku}`, which is in no hardware catalog: whether the "
                          "model fits its memory is not checked")


@rule("fleet.unknown-label", Severity.ERROR,
      "The runner label is not in the runner (fleet) file",
      "add the label to the runner file (--runner-config); if your runners carry it, vouch for it with "
      "`--runner-label LABEL` (`validate`, `run`, `render`, `predict`, `discover`, `al collect`, `ci`); or check its "
      "spelling",
      "InferenceX runners.yaml (a job is scheduled by its exact label)")
def unknown_label(ctx: Context) -> Iterator[Finding]:
    """An error wherever the jobs would run: with a `serve` block (a real engine), or on the simulator
    (`--simulate`), which serves a serve-less recipe on its defaults. Either way the GPU (the simulator's hardware,
    every fit check, the result's label) would be a guess from the label's spelling. A serve-less recipe checked
    without `--simulate` (an InferenceX master file) runs nowhere: a warning, as `matrix` gives, keeping the label."""
    for recipe in ctx.recipes.values():
        if ctx.fleet.has_label(recipe.runner):
            continue
        runs = recipe.serve is not None or ctx.simulate
        severity = Severity.ERROR if runs else Severity.WARNING
        yield ctx.hit("fleet.unknown-label", recipe, ("runner",), unknown_label_message(recipe.runner, ctx.fleet.file),
                      severity=severity)


def unknown_label_message(label: str, fleet_file: str) -> str:
    """`fleet.unknown-label`'s message (`matrix` gives the same warning without the policy pass)."""
    return f"runner label `{label}` is not in the runner file ({fleet_file}); jobs keep the label"


def _isl_path(recipe: Recipe, job: Job) -> FieldPath:
    path = entry_path(recipe, job)
    return (*path[:3], "isl") if len(path) >= 3 and path[1] == ScenarioId.FIXED_SEQ_LEN else (*path, "isl")


@rule("input.context-length", Severity.ERROR,
      "isl + osl exceed the model's context window",
      "lower isl/osl to fit the model's native context",
      "catalog models (native_context)")
def context_length(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.job_pairs():
        if job.isl is None or job.osl is None:
            continue
        model = recipe_model(recipe)
        if model is None:
            continue
        total = job.isl + job.osl
        if total > model.native_context:
            yield ctx.hit("input.context-length", recipe, _isl_path(recipe, job),
                          f"isl {job.isl} + osl {job.osl} = {total} tokens exceed {model.id}'s context of "
                          f"{model.native_context} tokens: every request would be refused", job=job)


@rule("input.precision-checkpoint", Severity.ERROR,
      "The recipe's precision is below the checkpoint's: a quantized checkpoint cannot be served at fewer bits",
      "serve a checkpoint of that precision (e.g. an -MXFP4 / -NVFP4 id), or set `precision` to the checkpoint's",
      "checkpoint id suffix (-FP8, -MXFP4, ...) or the catalog model's native precision")
def precision_checkpoint(ctx: Context) -> Iterator[Finding]:
    for recipe in ctx.recipes.values():
        model = find_model(recipe.model)
        stated = checkpoint_precision(recipe.model, default="")
        ckpt = stated or (model.native_precision if model is not None else "")
        have, want = PRECISION_BITS.get(ckpt.lower()), PRECISION_BITS.get(recipe.precision.lower())
        if have is None or want is None or have > 8:
            continue  # unknown names, or a bf16 checkpoint (engines quantize those online)
        if want < have:
            source = "its id says" if stated else "the catalog's native precision"
            yield ctx.hit("input.precision-checkpoint", recipe, ("precision",),
                          f"precision `{recipe.precision}` ({want}-bit) on checkpoint `{recipe.model}`, which is "
                          f"{ckpt} ({have}-bit, {source}): the weights are not there to serve at {want} bits")


ONLINE_QUANTISATION_FLAG = "--quantization"
"""The engine flag that quantises unquantised weights as they load (vLLM's and SGLang's `--quantization fp8`): with it
the weights' own format is not what runs, so `input.weights-precision` does not judge them."""


@rule("input.weights-precision", Severity.ERROR,
      "The local weights a real engine would serve are of another precision than the recipe's `precision`",
      "set `precision` to the weights' (each row is labelled with it), or point `serve.model-path` at weights of that "
      "precision (or quantise them as they load: the engine's `--quantization`)",
      "review: a SmolLM2-135M import (bf16, llmsweep-import.json) at `precision: fp8` on transformers serve validated "
      "clean, loaded bf16 (`--dtype auto`) and was stored as a valid fp8 row")
def weights_precision(ctx: Context) -> Iterator[Finding]:
    """Weights a local folder holds (`engines.weights`: llmsweep's import record, a quantisation, config.json's
    dtype) against the recipe's precision, where either is quantised (an engine casts one unquantised dtype to
    another: transformers serve renders `--dtype` from `precision`). A folder this host does not hold (weights on the
    cluster's nodes) or does not say is not judged; nor a job the simulator serves (no weights are loaded)."""
    from pathlib import Path

    from llmsweep.catalog.precision import families_agree, weight_format
    from llmsweep.engines import adapter_for
    from llmsweep.engines.sglang import model_path
    from llmsweep.engines.weights import read_weights
    from llmsweep.errors import ConfigError

    for job, recipe in ctx.runnable_pairs():
        if job.engine is None or ctx.simulated(job) or job.serve is None or not job.serve.model_path:
            continue
        folder = Path(model_path(job))
        if not folder.is_dir():
            continue
        try:
            weights = read_weights(folder, why="the weights' precision is checked against the recipe's")
        except ConfigError:
            continue  # a record that does not read: the engine loading the folder says it, not this rule
        if weights is None or weights.word is None:
            continue
        given, read = weight_format(job.precision), weight_format(weights.word)
        if given is None or read is None:
            continue
        quantised = min(PRECISION_BITS.get(given.name, 16), PRECISION_BITS.get(read.name, 16)) <= 8
        if not quantised or families_agree(given.name, read.name):
            continue
        if adapter_for(job).recipe_value(job, ONLINE_QUANTISATION_FLAG) is not None:
            continue
        yield ctx.hit("input.weights-precision", recipe, ("precision",),
                      f"precision `{job.precision}`, but the weights {job.engine} would load are {weights.word} "
                      f"({weights.where}): the row would be labelled {job.precision} for a run at {weights.word}",
                      job=job)


@rule("resources.gpu-divisibility", Severity.ERROR,
      "The job's GPUs do not divide the node, or ep does not divide them",
      "use tp·pp·pcp that divides the runner's GPUs per node, and an ep that divides tp·pp·pcp",
      "InferenceX spec §2.4 (single-node topologies tile the node)")
def gpu_divisibility(ctx: Context) -> Iterator[Finding]:
    from llmsweep.policy.rules_resources import gpus_per_node_of

    for job, recipe in ctx.job_pairs():
        if job.multinode or job.tp is None:
            continue
        path = entry_path(recipe, job)
        per_node = gpus_per_node_of(ctx, job)
        gpus = job.gpus
        if per_node is not None and gpus <= per_node and per_node % gpus != 0:
            yield ctx.hit("resources.gpu-divisibility", recipe, (*path, "tp"),
                          f"tp·pp·pcp = {count_of(gpus, 'GPU')} does not divide the "
                          f"{count_of(per_node, 'GPU')} per node of `{job.runner_label}`", job=job)
        ep = job.ep or 1
        if ep > gpus or gpus % ep != 0:
            yield ctx.hit("resources.gpu-divisibility", recipe, (*path, "ep"),
                          f"ep {ep} does not divide the job's tp·pp·pcp = {count_of(gpus, 'GPU')}: experts are "
                          "sharded over the GPUs the job has", job=job)
