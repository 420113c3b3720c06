"""Golden acceptance length: speculative throughput jobs pin the committed AL; submitters pick K, never AL.

The planner resolves `job.acceptance` from the golden curves by (model family, draft method, thinking mode, K); these
rules say when it could not, when the curve was measured on another checkout, when a recipe pins its own value, and
make sure eval jobs and hand-written engine knobs never carry synthetic acceptance.
"""

from __future__ import annotations

from collections.abc import Iterator

from llmsweep.catalog.golden import (
    AcceptanceResolution,
    GoldenCurve,
    find_curves,
    local_draft,
    other_drafters_curve,
    reference_curve,
)
from llmsweep.catalog.models import ModelSpec, find_model
from llmsweep.engine_ids import acceptance_knobs
from llmsweep.findings import Finding, Severity
from llmsweep.plan.build import golden_for
from llmsweep.plan.job import Job
from llmsweep.policy.context import Context, engine_flags, entry_path, serve_arg_path, serve_env_path
from llmsweep.policy.registry import rule
from llmsweep.spec.recipe import Recipe
from llmsweep.spec.serve import SpecDecoding
from llmsweep.spec.workload import ScenarioId

SYNTHETIC_ENV = tuple(sorted(acceptance_knobs(simulated=False).env))
"""Env names real engines pin acceptance with (their identities' spellings)."""
SYNTHETIC_ARGS = tuple(sorted(acceptance_knobs(simulated=False).args))
"""Flags real engines pin acceptance with (ATOM's length and rate)."""
INFERENCEX_SYNTHETIC = ("SYNTHETIC_ACCEPTANCE", "SYNTHETIC_ACCEPTANCE_LENGTH")
"""InferenceX's multinode spelling of a pin (core spec §5.3/§5.4: its launcher's injector reads them into the
engine's own knobs): no engine reads them, so under llmsweep they would reach the workers as dead variables while
the row reads as pinned, and the job measures real acceptance."""
CHECKLIST = "InferenceX docs/PR_REVIEW_CHECKLIST.md and golden_al_distribution/README.md (agentx-spec §4.1)"


def _pins_synthetic(job: Job) -> bool:
    """A throughput job that must pin AL: agentic spec-decoding (AgentX policy), not an eval."""
    return job.scenario is ScenarioId.AGENTIC_CODING and job.spec_decoding != "none" and not job.eval_only


@rule("golden-al.missing", Severity.ERROR,
      "Agentic speculative jobs need a golden acceptance-length curve for (model, method, thinking, K)",
      "pick a K the curve has (`llmsweep al` lists them), collect a curve with `llmsweep al collect`, or pin the "
      "measured value as `acceptance-length` and cite where it was measured in `acceptance-length-source`",
      CHECKLIST)
def missing(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        sd = job.serve.spec_decoding if job.serve else None
        acc = job.acceptance
        if not _pins_synthetic(job) or sd is None or (acc is not None and (acc.golden is not None or acc.cited)):
            continue
        if _other_drafters_curve(recipe, sd) is not None:
            continue  # golden-al.curve-drafter says why no curve answers
        family = find_curves(recipe.model_prefix, sd.method, recipe.model)
        unnamed = sd.curve_selector is not None and reference_curve(
            recipe.model_prefix, sd.method, recipe.model, sd.curve_selector, served_draft=sd.curve_drafter) is None
        named = f" (its curve named by `{sd.curve_selector}`: no curve measured that drafter or variant)" \
            if unnamed else ""
        yield ctx.hit("golden-al.missing", recipe, ("serve", "spec-decoding", "num-steps"),
                      f"no golden AL for {recipe.model_prefix} {sd.method} thinking {sd.thinking} K={sd.num_steps}"
                      + named, job=job, fix=_naming_fix(sd, family) if unnamed and family else None)


def _naming_fix(sd: SpecDecoding, family: list[GoldenCurve]) -> str:
    """How a recipe whose `draft-model` (or `golden-curve`) selects none of its family's curves says which one
    applies: `golden-curve: <curve id>` for a drafter at a local path (no curve header names a path) or a
    `golden-curve` naming no curve; for a hub id no curve measured, the drafters the curves measured. Either way a
    collection of its own, or a cited pin."""
    curves = ", ".join(f"{c.id}{f' ({c.draft_model})' if c.draft_model else ''}" for c in family)
    own = "collect the drafter's own curve with `llmsweep al collect`, or pin the AL measured on it as " \
        "`acceptance-length` with its `acceptance-length-source`"
    if sd.golden_curve is None and sd.draft_model is not None and not local_draft(sd.draft_model):
        drafters = ", ".join(dict.fromkeys(c.draft_model for c in family if c.draft_model))
        return f"launch a drafter a curve measured as `draft-model` ({drafters}), or {own}"
    return (f"say which curve the drafter `{sd.draft_model or sd.method}` is with `serve.spec-decoding.golden-curve: "
            f"<curve id>` (this family's curves: {curves}), or {own}")


@rule("golden-al.other-model", Severity.WARNING,
      "The golden AL comes from another model's curve: the recipe's model-prefix names a family the model is not of",
      "set `model-prefix` to the model's own family (`llmsweep catalog models`), or pin the AL you measured on it as "
      "`acceptance-length` with its `acceptance-length-source`",
      "golden curves are keyed per model (core spec §5.2); a prefix borrowed from another family borrows its AL")
def other_model(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        served = find_model(recipe.model)
        res = _pinned_golden(job, recipe) if served is not None else None
        if served is None or res is None or _measured_on_served(res, recipe, served):
            continue
        yield ctx.hit("golden-al.other-model", recipe, ("model-prefix",),
                      f"golden AL {res.value:g} is {res.model_prefix}'s curve ({res.curve}, measured on "
                      f"{res.checkpoint}), but the recipe serves {recipe.model}, a {served.prefix} model: the pin is "
                      "another model's acceptance", job=job)


def _measured_on_served(res: AcceptanceResolution, recipe: Recipe, served: ModelSpec) -> bool:
    """Whether the curve `res` answers from measured the model the recipe serves: its family's curve (the served
    model's catalogue prefix); else whose checkpoint the curve body names, where the catalogue knows it (the model key
    `llmsweep al collect` writes: ``llama-1b`` for ``llmsweep/llama-1b``); else a curve under the recipe's own
    `model-prefix`, where that prefix names no other catalogued model (a curve is found through a prefix for the model
    the recipe serves under it). A prefix that is another catalogued model's (Qwen3-30B-A3B under `qwen3.5`) borrows
    that model's curve."""
    if res.model_prefix == served.prefix:
        return True
    measured = find_model(res.checkpoint)
    if measured is not None:
        return measured.id == served.id
    named = find_model(recipe.model_prefix)
    return res.model_prefix == recipe.model_prefix.strip().lower() and (named is None or named.id == served.id)


def _pinned_golden(job: Job, recipe: Recipe) -> AcceptanceResolution | None:
    """The curve a job's pinned golden AL comes from (None when it pins none from a curve)."""
    sd = job.serve.spec_decoding if job.serve else None
    acc = job.acceptance
    if sd is None or acc is None or acc.source != "golden":
        return None
    return golden_for(recipe, sd)


def _other_drafters_curve(recipe: Recipe, sd: SpecDecoding) -> GoldenCurve | None:
    """The curve `golden-curve` names when it measured another drafter than `draft-model` launches (no AL is pinned
    from it: `catalog.golden.drafter_conflict`)."""
    return other_drafters_curve(recipe.model_prefix, sd.method, recipe.model, sd.golden_curve, sd.curve_drafter)


@rule("golden-al.curve-drafter", Severity.ERROR,
      "serve.spec-decoding.golden-curve names a curve measured on another drafter than the draft-model launched",
      "delete `golden-curve` (the draft model picks its own drafter's curve), or launch the drafter the curve "
      "measured as `draft-model`",
      "golden curves are keyed per drafter (MiniMax-M3 EAGLE3 K=3: 2.83 for Inferact/MiniMax-M3-EAGLE3, 2.78 for "
      "its GQA heads); `golden-curve` chooses among one drafter's sampling variants (Kimi-K3 DSpark)")
def curve_drafter(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        sd = job.serve.spec_decoding if job.serve else None
        if sd is None or job.spec_decoding == "none":
            continue
        named = _other_drafters_curve(recipe, sd)
        if named is None:
            continue
        own = reference_curve(recipe.model_prefix, sd.method, recipe.model, sd.draft_model)
        keep = f"delete `golden-curve` (the launched drafter's own curve is {own.id})" if own is not None else \
            f"delete `golden-curve` (no curve measured {sd.draft_model}: pin the AL you measured as " \
            "`acceptance-length` with its `acceptance-length-source`)"
        yield ctx.hit("golden-al.curve-drafter", recipe, ("serve", "spec-decoding", "golden-curve"),
                      f"golden-curve `{sd.golden_curve}` is curve {named.id}, measured on drafter {named.draft_model}, "
                      f"but draft-model launches {sd.draft_model}: its AL is another drafter's, and none is pinned",
                      job=job, fix=f"{keep}, or launch `draft-model: {named.draft_model}`, the drafter the curve "
                      "measured (a draft model at a local path is taken as the curve's drafter)")


@rule("golden-al.variant", Severity.WARNING,
      "Several golden curves measured the job's drafter (variants of its sampling) and the recipe names none",
      "name the one the served engine's sampling matches as `serve.spec-decoding.golden-curve` (a curve id or "
      "variant tag; `llmsweep al` lists them)",
      "InferenceX amd-master kimik3 rows pin 2.51 (probabilistic/block variant) where the default curve says 2.45")
def variant(ctx: Context) -> Iterator[Finding]:
    from llmsweep.catalog.golden import normalise_thinking, variant_siblings

    for job, recipe in ctx.runnable_pairs():
        sd = job.serve.spec_decoding if job.serve else None
        res = _pinned_golden(job, recipe)
        if sd is None or sd.golden_curve or res is None or job.acceptance is None:
            continue
        acc = job.acceptance
        chosen = res.curve
        others = variant_siblings(recipe.model_prefix, sd.method, recipe.model, chosen)
        if not others:
            continue
        mode = normalise_thinking(sd.thinking)
        said = ", ".join(f"{c.variant or c.id} {c.values.get(mode, {}).get(int(sd.num_steps or 0), '-')}"
                         for c in others)
        yield ctx.hit("golden-al.variant", recipe, ("serve", "spec-decoding"),
                      f"golden AL {acc.value:g} is curve {chosen}'s; the same drafter was measured under other "
                      f"sampling too ({said}): the pin is the one the engine's sampling matches", job=job)


TEMPLATE_KWARGS_FLAGS = ("--default-chat-template-kwargs", "--chat-template-kwargs")
"""Server flags that set the chat template's default kwargs (vLLM's, and the spelling other servers use)."""
THINKING_ENV = "DYN_DEFAULT_THINKING_MODE"
"""NVIDIA Dynamo's default thinking mode (`enabled`/`disabled`), as InferenceX's DSv4 GB300 recipes set it."""


def served_thinking(job: Job) -> tuple[str, str, str] | None:
    """(mode, where, spelling) of the thinking mode the job's server is told to default to (`serve.args` chat-template
    kwargs, Dynamo's env); None when the launch says nothing (the template's own default, what the recipe declares)."""
    import json

    for flag, name, value in engine_flags(job):
        if name not in TEMPLATE_KWARGS_FLAGS:
            continue
        kwargs = value
        if isinstance(value, str):
            try:
                kwargs = json.loads(value)
            except ValueError:
                continue
        for key in ("enable_thinking", "thinking", "thinking_mode"):  # MiniMax-M3's template: thinking_mode
            mode = _switch(kwargs.get(key)) if isinstance(kwargs, dict) else None
            if mode is not None:
                return ("thinking_on" if mode else "thinking_off", f"arg:{flag}", f"{key}: {kwargs[key]}")
    env = job.serve.env if job.serve is not None else {}
    value = env.get(THINKING_ENV)
    on = _switch(value)
    if on is not None:
        return ("thinking_on" if on else "thinking_off", f"env:{THINKING_ENV}", f"{THINKING_ENV}={value}")
    return None


def _switch(value: object) -> bool | None:
    """A thinking switch as templates and servers spell it: a boolean, or `enabled`/`disabled` (`on`/`off`,
    `true`/`false`) in any case; None for anything else."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("enabled", "disabled", "on", "off", "true", "false"):
        return value.strip().lower() in ("enabled", "on", "true")
    return None


@rule("golden-al.thinking-mismatch", Severity.ERROR,
      "The server is told to think (or not) otherwise than serve.spec-decoding.thinking, which keys the golden AL",
      "set `serve.spec-decoding.thinking` to the mode the server runs in (the pinned AL follows), or drop the "
      "server's default that contradicts it",
      "wave-2 spec §4: key the golden AL on the served thinking mode; qwen3.5 MTP K=3 is 3.39 thinking on, 3.33 off")
def thinking_mismatch(ctx: Context) -> Iterator[Finding]:
    from llmsweep.catalog.golden import normalise_thinking

    for job, recipe in ctx.runnable_pairs():
        sd = job.serve.spec_decoding if job.serve else None
        if sd is None or not _pins_synthetic(job) or sd.thinking is None:
            continue
        served = served_thinking(job)
        declared = normalise_thinking(sd.thinking)
        if served is None or served[0] == declared:
            continue
        mode, where, spelling = served
        kind, name = where.split(":", 1)
        path = serve_arg_path(recipe, job, name) if kind == "arg" else serve_env_path(recipe, job, name)
        yield ctx.hit("golden-al.thinking-mismatch", recipe, path,
                      f"the server defaults to {mode.replace('_', ' ')} ({spelling}) but serve.spec-decoding.thinking "
                      f"is {declared.replace('thinking_', '')}: the pinned acceptance length is the {declared} one",
                      job=job)


@rule("golden-al.precision-provenance", Severity.WARNING,
      "The golden curve was measured on a different checkout/precision than the recipe serves",
      "collect a curve on this checkpoint (`llmsweep al collect`, or speedbench-al.yml) if acceptance is "
      "precision-sensitive; do not hand-adjust the value",
      "seed PR provenance note: qwen3.5_mtp.yaml was measured on the NVFP4 checkpoint, the recipe serves FP8 (an "
      "MXFP4 checkpoint, AMD's, is no more NVFP4's than FP8 is)")
def precision_provenance(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        sd = job.serve.spec_decoding if job.serve else None
        # Only a job that pins an acceptance length: a fixed-length or eval job measures its own (real verification)
        if sd is None or sd.num_steps is None or job.spec_decoding == "none" or job.acceptance is None \
                or job.eval_only:
            continue
        res = golden_for(recipe, sd)
        if res is None or not res.precision_mismatch():  # the served format: the model id's, else `precision`
            continue
        served = res.served_precision or recipe.precision
        note = res.served_precision_note(served) if res.better or res.unlike else ""
        named = "" if served == recipe.precision.strip().lower() else \
            f", as its id names it; precision {recipe.precision}"
        yield ctx.hit("golden-al.precision-provenance", recipe, ("serve", "spec-decoding"),
                      f"golden AL {res.value:g} comes from {res.checkpoint} ({res.precision_measured}), "
                      f"but the recipe serves {recipe.model} ({served}{named}){note}",
                      job=job, evidence=f"{res.provenance()}")


@rule("golden-al.simulated-curve", Severity.ERROR,
      "The golden AL comes from a curve collected on llmsweep's simulator: a modelled value, not a measurement",
      "collect the curve on a real engine (`llmsweep al collect` without --simulate), or take the simulated curve "
      "out of $LLMSWEEP_GOLDEN_AL_DIR", CHECKLIST, softens_in_sim=True)
def simulated_curve(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        acc = job.acceptance
        if acc is None or acc.source != "golden" or not acc.simulated:
            continue
        yield ctx.hit("golden-al.simulated-curve", recipe, ("serve", "spec-decoding"),
                      f"golden AL {acc.value:g} for K={acc.k} thinking {acc.thinking} comes from a curve collected on "
                      "the simulator: a real engine would be pinned to an acceptance nobody measured", job=job,
                      evidence=acc.provenance)


@rule("golden-al.pinned-differs", Severity.ERROR,
      "An explicit acceptance-length differs from the golden one (submitters may pick K, not AL)",
      "delete `serve.spec-decoding.acceptance-length`; the planner pins the golden value", CHECKLIST)
def pinned_differs(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        acc = job.acceptance
        # only where the planner would pin the golden value: a fixed-length job's pin is a probe or a calibration
        # (`golden-al.fixed-pinned` warns of it), and deleting it verifies for real rather than pinning the curve
        if acc is None or acc.source != "pinned" or acc.golden is None or abs(acc.value - acc.golden) < 0.005 \
                or not _pins_synthetic(job):
            continue
        yield ctx.hit("golden-al.pinned-differs", recipe, ("serve", "spec-decoding", "acceptance-length"),
                      f"acceptance-length {acc.value:g} but the golden AL for K={acc.k} thinking {acc.thinking} "
                      f"is {acc.golden:g}", job=job)


@rule("golden-al.fixed-pinned", Severity.WARNING,
      "A fixed-length throughput job pins a synthetic acceptance length: its throughput is not real acceptance's",
      "delete `serve.spec-decoding.acceptance-length` to measure real acceptance as InferenceX's fixed-length rows "
      "do, or keep it knowingly (a calibration or a pin probe): the launch notes and results record the pin",
      "golden_al_distribution/README.md: synthetic acceptance is for agentic spec-decode rows only (wave-2 spec §4)")
def fixed_pinned(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        acc = job.acceptance
        if acc is None or job.scenario is ScenarioId.AGENTIC_CODING or job.eval_only or job.spec_decoding == "none":
            continue
        yield ctx.hit("golden-al.fixed-pinned", recipe, ("serve", "spec-decoding", "acceptance-length"),
                      f"the {job.scenario.value} job pins acceptance length {acc.value:g} ({acc.method} K={acc.k}): "
                      "its throughput is at a synthetic acceptance, not comparable with a row that verified for real",
                      job=job)


@rule("golden-al.citation-unused", Severity.WARNING,
      "An acceptance-length-source is cited for a key a golden curve covers: the curve is the source",
      "delete `serve.spec-decoding.acceptance-length-source` (and `acceptance-length`: the planner pins the curve's "
      "value)", CHECKLIST)
def citation_unused(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        acc = job.acceptance
        # only where the planner pins the curve's value: a fixed-length pin is golden-al.fixed-pinned's to flag
        if acc is None or not acc.cited or acc.golden is None or not _pins_synthetic(job):
            continue
        yield ctx.hit("golden-al.citation-unused", recipe, ("serve", "spec-decoding", "acceptance-length-source"),
                      f"the golden curve gives {acc.golden:g} for {acc.method} K={acc.k} thinking {acc.thinking} "
                      f"({acc.provenance}); the cited source {acc.cited!r} does not replace it", job=job)


@rule("golden-al.hand-written", Severity.ERROR,
      "Synthetic acceptance is written by hand in serve env/args",
      "delete it: the engine adapter spells the golden AL per engine and leaves eval jobs on real verification",
      "InferenceX spec §8 lesson 13 (copy-pasted AL, eval twins must remember to disable it)")
def hand_written(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        assert job.serve is not None
        for name in job.serve.env:
            if name in SYNTHETIC_ENV:
                yield ctx.hit("golden-al.hand-written", recipe, serve_env_path(recipe, job, name),
                              f"`{name}` is written in the recipe", job=job)
            elif name in INFERENCEX_SYNTHETIC and not _switched_off(job.serve.env[name]):
                yield ctx.hit("golden-al.hand-written", recipe, serve_env_path(recipe, job, name),
                              f"`{name}` is InferenceX's launcher's spelling of a pin, which no engine reads",
                              job=job)
        # a multinode row's additional-settings reach its workers' environment too (InferenceX writes them there)
        for kind, worker in (("prefill", job.prefill), ("decode", job.decode)):
            for index, item in enumerate(worker.additional_settings or [] if worker is not None else []):
                name, _, value = (part.strip() for part in item.partition("="))
                if name in SYNTHETIC_ENV:
                    yield ctx.hit("golden-al.hand-written", recipe,
                                  (*entry_path(recipe, job), kind, "additional-settings", index),
                                  f"`{name}` is written in the {kind} workers' additional-settings", job=job)
                elif name in INFERENCEX_SYNTHETIC and not _switched_off(value):
                    yield ctx.hit("golden-al.hand-written", recipe,
                                  (*entry_path(recipe, job), kind, "additional-settings", index),
                                  f"`{name}` is InferenceX's launcher's spelling of a pin, which no engine reads: "
                                  "the job would measure real acceptance while the row reads as pinned", job=job)
        for flag, name, value in engine_flags(job):
            text = str(value)
            if name in SYNTHETIC_ARGS or (name == "--speculative-config" and "synthetic" in text):
                yield ctx.hit("golden-al.hand-written", recipe, serve_arg_path(recipe, job, flag),
                              f"`{flag}` pins acceptance by hand" + (f" (the engine reads `{name}`)"
                                                                     if name != flag else ""), job=job)


def _switched_off(value: object) -> bool:
    """InferenceX's `SYNTHETIC_ACCEPTANCE=false` (0, no, off, empty): the row measures real acceptance, as the
    engine does without a pin, so it reads as nothing it is not."""
    return str(value).strip().lower() in ("", "0", "false", "no", "off")


@rule("golden-al.eval-synthetic", Severity.ERROR,
      "Eval jobs never carry synthetic acceptance (it bypasses verification and corrupts outputs)",
      "eval jobs use real verification; remove hand-written synthetic knobs",
      "InferenceX spec §5.1: SWE-bench 0.0000 under synthetic AL")
def eval_synthetic(ctx: Context) -> Iterator[Finding]:
    from llmsweep.engines import render
    from llmsweep.engines.base import real_verification

    for job, recipe in ctx.runnable_pairs():
        if not (job.eval_only or job.run_eval) or job.engine is None:
            continue
        # The eval's launch: a run-eval row that pins acceptance for its throughput point relaunches without it.
        spec = render(real_verification(job), simulate=ctx.simulated(job))
        # (and the environment a multinode row's workers get from their additional-settings)
        settings = [item.partition("=")[0].strip() for w in (job.prefill, job.decode) if w is not None
                    for item in w.additional_settings or []]
        text = " ".join([*spec.argv, *spec.env, *settings])
        knobs = acceptance_knobs()
        # A recipe flag counts as the engine reads it: `--spec-decode-acceptance-len` is ATOM's length flag.
        text += " " + " ".join(name for _, name, _ in engine_flags(job))
        if any(k in text for k in (*knobs.env, *knobs.args, *knobs.speculative_config_keys)):
            yield ctx.hit("golden-al.eval-synthetic", recipe, ("serve",),
                          "the eval job's launch pins a synthetic acceptance length", job=job)
