"""Engine and image contracts: version gates, known incompatibilities, image ↔ hardware, client isolation.

Each rule renders the launch the adapter would run and asks the catalog about it, so what is checked is exactly what
would start. Under simulation (the `sim` engine or `--simulate`) image, version and incompatibility findings are
warnings: the simulator runs what the real engine would refuse.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from llmsweep.catalog.engines import (
    GateVerdict,
    check_launch,
    flag_default,
    kv_transfer_keys,
    match_incompatibilities,
)
from llmsweep.catalog.images import ImageRef, image_fits_hardware, parse_image
from llmsweep.catalog.version import Version, as_version
from llmsweep.engine_ids import SIM, acceptance_knobs
from llmsweep.engines import LaunchSpec, adapter_for
from llmsweep.engines.base import (
    MULTINODE_NOT_DISAGG,
    MULTINODE_NOT_DISAGG_FIX,
    MULTINODE_NOT_DISAGG_REFUSAL,
    split_flag,
    stated_version,
    tag_version,
)
from llmsweep.errors import LlmsweepError
from llmsweep.findings import Finding, Severity
from llmsweep.plan.job import Job
from llmsweep.policy.context import Context, engine_flags, entry_path, serve_arg_path, serve_env_path
from llmsweep.policy.registry import rule
from llmsweep.spec.recipe import Recipe

CLIENT_PYTHON = "3.11"
"""The load client (like AIPerf) needs Python >= 3.11."""


def _image(ref: str) -> ImageRef | None:
    try:
        return parse_image(ref)
    except LlmsweepError:
        return None


def _real_launch(job: Job) -> LaunchSpec | None:
    """The real engine's launch (None for the sim engine or a job no adapter can render)."""
    if job.engine is None or job.engine == SIM.id:
        return None
    try:
        return adapter_for(job).render(job)
    except LlmsweepError:
        return None


def _launch_knobs(job: Job, spec: LaunchSpec) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None]:
    """(env, args without dashes, speculative-config) of a rendered launch; each flag named as the engine's parser
    resolves it (`--speculative-conf` is vLLM's `--speculative-config`, `--flag=value` is `--flag`)."""
    adapter = adapter_for(job)
    args: dict[str, Any] = {}
    argv = list(spec.argv)
    def is_flag(token: str) -> bool:
        return token.startswith("-") and len(token) > 1 and not (token[1].isdigit() or token[1] == ".")

    for i, token in enumerate(argv):
        if is_flag(token):
            name, value = split_flag(token, True)
            if value is True:
                value = argv[i + 1] if i + 1 < len(argv) and not is_flag(argv[i + 1]) else True
            args[adapter.canonical(name).lstrip("-")] = value
    return dict(spec.env), args, adapter.speculative_config(job)


def _knob_path(recipe: Recipe, job: Job, kind: str, name: str) -> tuple[str | int, ...]:
    if kind == "env":
        if job.serve is not None and name in job.serve.env:
            return serve_env_path(recipe, job, name)
        return ("serve", "spec-decoding") if name in acceptance_knobs().env else ("image",)
    if kind == "arg":
        written = next((f for f, n, _ in engine_flags(job) if n.lstrip("-") == name.lstrip("-").replace("_", "-")),
                       None)
        if written is not None:
            return serve_arg_path(recipe, job, written)
        if name.startswith("speculative-"):  # rendered from serve.spec-decoding
            return ("serve", "spec-decoding")
    if kind == "kv-transfer-config-key":
        written = next((f for f, n, _ in engine_flags(job) if n == "--kv-transfer-config"), None)
        if written is not None:
            return serve_arg_path(recipe, job, written)
        return (*entry_path(recipe, job), "kv-offload-backend") if job.kv_offload_backend is not None else ("image",)
    return ("serve", "spec-decoding") if kind == "speculative-config-key" else ("image",)


def _kv_transfer(job: Job, spec: LaunchSpec) -> dict[str, Any]:
    """The keys of the launch's `--kv-transfer-config` (and of its connectors' extra config), the last one written
    being the one the engine reads; the flag named as the engine's parser resolves it."""
    adapter = adapter_for(job)
    argv = list(spec.argv)
    value: Any = None
    for i, token in enumerate(argv):
        if not token.startswith("--"):
            continue
        name, inline = split_flag(token, True)
        if adapter.canonical(name) == "--kv-transfer-config":
            value = inline if inline is not True else (argv[i + 1] if i + 1 < len(argv) else None)
    return kv_transfer_keys(value)


def launch_gates(job: Job, spec: LaunchSpec, version: str | None) -> list[GateVerdict]:
    """The verdict of every gated knob of `job`'s rendered launch `spec` at engine `version`: what
    `engine.feature-gate` judges at the recipe's version, and what a run judges again at the version that ran
    (`execute.lifecycle.EngineVersionDrift`)."""
    env, args, spec_cfg = _launch_knobs(job, spec)
    return check_launch(spec.engine, version, env=env, args=args, speculative_config=spec_cfg,
                        kv_transfer_config=_kv_transfer(job, spec))


@rule("engine.feature-gate", Severity.ERROR,
      "A knob the image's engine version ignores or rejects",
      "use an image whose engine version satisfies the gate, or drop the knob",
      "seed PR: SGLANG_SIMULATE_ACC_TOKEN_MODE is only read from SGLang 0.5.16 (InferenceX spec §8 lesson 5)",
      softens_in_sim=True)
def feature_gate(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        spec = _real_launch(job)
        if spec is None or spec.engine_version is None:
            continue
        for verdict in launch_gates(job, spec, spec.engine_version):
            if verdict.honoured is not False or verdict.gate is None:
                continue
            gate = verdict.gate
            severity = Severity.WARNING if gate.estimate else None
            yield ctx.hit("engine.feature-gate", recipe, _knob_path(recipe, job, verdict.kind, verdict.name),
                          f"{verdict.reason} (image {job.image}): {gate.message}", job=job, severity=severity,
                          evidence=gate.evidence)


@rule("engine.version-unknown", Severity.WARNING,
      "The image's engine version is unknown (nightly/dev tag): version gates cannot be checked",
      "pin a release image, or state the version with `serve.engine.version`",
      "InferenceX spec §8 lesson 5 (engines silently ignore knobs)", softens_in_sim=True)
def version_unknown(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        spec = _real_launch(job)
        if spec is None or spec.engine_version is not None:
            continue
        gated = [v.name for v in launch_gates(job, spec, None)]
        detail = f"; gated knobs unchecked: {', '.join(gated)}" if gated else ""
        yield ctx.hit("engine.version-unknown", recipe, ("image",),
                      f"cannot tell the {spec.engine} version of image {job.image}{detail}", job=job)


@rule("engine.version-mismatch", Severity.ERROR,
      "`serve.engine.version` disagrees with the engine version the image tag names",
      "delete `serve.engine.version` (the tag tells the version), or use the image of the version you mean",
      "audit: lmsysorg/sglang:v0.5.12-rocm720-mi30x stated as 0.5.16 passed the SGLANG_SIMULATE_ACC_TOKEN_MODE gate "
      "and ran 0.5.12 under a 0.5.16 label (seed PR: the knob is only read from 0.5.16)",
      softens_in_sim=True)
def version_mismatch(ctx: Context) -> Iterator[Finding]:
    """The stated version is for tags that name none (nightly, dev, latest); where the tag names one, that build is
    what runs, so gates and the recorded version follow the tag (`EngineAdapter.image_and_version`) and a stated
    version that says otherwise is refused rather than believed."""
    said: set[tuple[str, str]] = set()  # recipe-wide (one image, one `serve.engine`): once per recipe and image
    for job, recipe in ctx.runnable_pairs():
        if job.engine is None or job.engine == SIM.id or (recipe.key, job.image) in said:
            continue
        stated, tagged = stated_version(job), tag_version(job.image)
        if stated is None or tagged is None or Version.try_parse(stated) == Version.parse(tagged):
            continue
        said.add((recipe.key, job.image))
        yield ctx.hit("engine.version-mismatch", recipe, ("serve", "engine", "version"),
                      f"`serve.engine.version` says {job.engine} {stated}, but image {job.image} is {job.engine} "
                      f"{tagged}: the image's {tagged} is what would run, and what gates and results go by")


@rule("engine.known-incompatibility", Severity.ERROR,
      "A combination known to break (catalog incompatibilities)",
      "see the entry's fix", "catalog incompatibilities.yaml (each entry names its own evidence)",
      softens_in_sim=True)
def known_incompatibility(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.runnable_pairs():
        spec = _real_launch(job)
        if spec is None:
            continue
        env, written, _ = _launch_knobs(job, spec)
        # matched as the engine runs them: SGLang rewrites some HiCache settings at start-up (a mooncake storage
        # backend runs a layer_first layout as page_first)
        args, rewritten = adapter_for(job).as_launched(written, as_version(spec.engine_version))
        try:
            hits = match_incompatibilities(spec.engine, spec.engine_version, job.sku or job.runner_label,
                                           job.model_prefix, args=args, env=env, kv_offloading=job.kv_offloading)
        except LlmsweepError:
            continue
        for inc in hits:
            resolved = {n.lstrip("-"): f for f, n, _ in engine_flags(job)}
            flag = next((resolved[k.lstrip("-").replace("_", "-")] for k in inc.conditions.args
                         if k.lstrip("-").replace("_", "-") in resolved), None)
            # a condition on a flag the recipe did not write: the field that renders it (a speculative flag comes
            # from serve.spec-decoding), else the image
            first = next(iter(inc.conditions.args), None)
            path = (serve_arg_path(recipe, job, flag) if flag else
                    _knob_path(recipe, job, "arg", first.lstrip("-")) if first else ("image",))
            severity = Severity.WARNING if inc.severity == "warning" else None
            unset = [d for k, w in inc.conditions.args.items() if k.lstrip("-").replace("_", "-") not in args
                     and w is not None and w != "*"
                     and (d := flag_default(spec.engine, k, spec.engine_version)) is not None]
            said = "".join(f"; {d.flag} is unset, so {spec.engine} {d.version} launches with its default {d.value}"
                           for d in unset)
            said += "".join(f"; {rewritten[k]}" for k in dict.fromkeys(
                c.lstrip("-").replace("_", "-") for c in inc.conditions.args) if k in rewritten)
            evidence = inc.evidence + "".join(f"; default of {d.flag}: {d.source}" for d in unset)
            yield ctx.hit("engine.known-incompatibility", recipe, path,
                          f"[{inc.id}] {inc.message}{said}", job=job, fix=inc.fix, evidence=evidence,
                          severity=severity)


@rule("image.hardware-fit", Severity.ERROR,
      "The image is built for another platform or GPU family than the runner's hardware",
      "use the image family built for the runner's GPUs (e.g. -mi30x for MI300X/MI325X, -mi35x for MI355X)",
      "InferenceX amd-master.yaml image tags (mi30x vs mi35x ROCm builds)", softens_in_sim=True)
def hardware_fit(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.job_pairs():
        image = _image(job.image)
        if image is None or job.sku is None:
            continue
        try:
            fits, why = image_fits_hardware(image, job.sku)
        except LlmsweepError:
            continue
        if fits is False:
            yield ctx.hit("image.hardware-fit", recipe, ("image",), why, job=job)


@rule("launch.multinode-not-disagg", Severity.WARNING,
      "A multinode job whose prefill/decode pools are not disaggregated: planned as InferenceX plans it, but llmsweep "
      "launches (and simulates) a multinode job only as a disaggregated deployment, so `run` refuses it",
      MULTINODE_NOT_DISAGG_FIX)
def multinode_not_disagg(ctx: Context) -> Iterator[Finding]:
    from llmsweep.engines import launch_refusal

    for job, recipe in ctx.job_pairs():
        # the simulator's answer is the real engines' too: no executor runs a multinode aggregated deployment
        if job.multinode and launch_refusal(job, simulate=True) == MULTINODE_NOT_DISAGG_REFUSAL:
            yield ctx.hit("launch.multinode-not-disagg", recipe, ("disagg",) if "disagg" in recipe.model_fields_set
                          else ("multinode",), MULTINODE_NOT_DISAGG, job=job)


@rule("launch.disagg-real-engine", Severity.WARNING,
      "A disaggregated prefill/decode job on a real engine whose roles llmsweep does not launch: planned and rendered "
      "role by role, but `run` refuses it (only vLLM's roles with NIXL are launched, under --executor local)",
      "run it on the simulator (`--simulate`), or plan and render it only (`matrix`, `render`): `run` refuses it "
      "rather than run one aggregated server under the disaggregated job's name")
def disagg_real_engine(ctx: Context) -> Iterator[Finding]:
    from llmsweep.engines import launch_refusal

    for job, recipe in ctx.job_pairs():
        # only where the job would run: a serve-less master file checked without --simulate runs nowhere
        if recipe.serve is None or ctx.simulated(job) or not (job.multinode or job.disagg):
            continue  # (an aggregated row's refusal, a router llmsweep does not launch, is `run`'s to say)
        # under the executor that launches it (vLLM's roles: the local one); a multinode aggregated job has its rule
        refusal = launch_refusal(job, simulate=ctx.simulate)
        if refusal is not None and refusal != MULTINODE_NOT_DISAGG_REFUSAL:
            yield ctx.hit("launch.disagg-real-engine", recipe, ("disagg",), refusal, job=job)


@rule("client.isolation", Severity.ERROR,
      "The load client runs outside the engine image; a client image must have Python >= 3.11",
      "delete `serve.client-image` (llmsweep runs the client in its own environment), or name an image with "
      "Python >= 3.11",
      "seed PR revision 3: lmsysorg/sglang:v0.5.16-rocm720-mi30x ships Python 3.10.12 and AIPerf needs >= 3.11 "
      "(InferenceX spec §8 lesson 6)")
def client_isolation(ctx: Context) -> Iterator[Finding]:
    for recipe in ctx.recipes.values():
        serve = recipe.serve
        if serve is None or serve.client_image is None:
            continue
        image = _image(serve.client_image)
        python = serve.client_python or (image.python_version if image else None)
        ok: bool | None
        known = image.python_version if image is not None and not image.python_estimate else None
        stated = serve.client_python
        if stated is not None and known is not None and stated.split(".")[:2] != known.split(".")[:2]:
            # the catalog observed this image's Python: a stated one that contradicts it does not make it so (the
            # seed's image, 3.10.12, passed with `client-python: "3.11"`)
            yield ctx.hit("client.isolation", recipe, ("serve", "client-python"),
                          f"serve.client-python says {stated}, but client image {serve.client_image} ships Python "
                          f"{known} (observed)" + ("" if image is not None and image.python_at_least(CLIENT_PYTHON)
                                                  else f"; the client needs >= {CLIENT_PYTHON}"),
                          fix=f"delete `serve.client-python` (the image's is known), or name an image with Python >= "
                              f"{CLIENT_PYTHON}")
            continue
        if serve.client_python is not None:
            ok = tuple(int(x) for x in serve.client_python.split(".")[:2] if x.isdigit()) >= (3, 11)
        else:
            ok = image.python_at_least(CLIENT_PYTHON) if image is not None else None
        if ok is False:
            yield ctx.hit("client.isolation", recipe, ("serve", "client-image"),
                          f"client image {serve.client_image} has Python {python}; the client needs >= "
                          f"{CLIENT_PYTHON}")
        elif ok is None:
            yield ctx.hit("client.isolation", recipe, ("serve", "client-image"),
                          f"the Python of client image {serve.client_image} is unknown; the client needs >= "
                          f"{CLIENT_PYTHON}", severity=Severity.WARNING,
                          fix="state it with `serve.client-python`, or delete `serve.client-image`")
