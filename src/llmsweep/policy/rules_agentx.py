"""AgentX policy beyond the schema: spec-decode-only agentic arms, and fixed-length speculative jobs templated.

The schema rules (exact `cluster:` runners, kv-offloading stated, backend iff dram, router/kv-p2p-transfer scope,
disagg needs kv-p2p-transfer) run in the loader and are listed in `schema_rules`.
"""

from __future__ import annotations

from collections.abc import Iterator

from llmsweep.findings import Finding, Severity
from llmsweep.policy.context import Context
from llmsweep.policy.registry import rule
from llmsweep.spec.workload import ScenarioId


@rule("agentx.spec-decode-only", Severity.WARNING,
      "Agentic arms run with speculative decoding (AgentX spec-decode-only policy)",
      "set `spec-decoding: mtp` with a `serve.spec-decoding` block; non-spec arms are being retired",
      "MODELS.md AgentX guidelines (agentx-spec §4.1): no more spec vs non-spec A/B")
def spec_decode_only(ctx: Context) -> Iterator[Finding]:
    for recipe in ctx.recipes.values():
        for path, entry in recipe.search_space_entries():
            if path[1] == ScenarioId.AGENTIC_CODING and entry.spec_decoding == "none":
                yield ctx.hit("agentx.spec-decode-only", recipe, (*path, "spec-decoding"),
                              "agentic arm without speculative decoding")


@rule("workload.chat-template", Severity.ERROR,
      "Speculative jobs send chat-templated prompts",
      "delete `workload.use-chat-template: false` (spec jobs default to the chat template)",
      "InferenceX #649, #1079, #1257, #1627: MTP without --use-chat-template inflates acceptance (spec §5.1)")
def chat_template(ctx: Context) -> Iterator[Finding]:
    for job, recipe in ctx.job_pairs():
        if job.spec_decoding == "none" or job.workload.use_chat_template:
            continue
        yield ctx.hit("workload.chat-template", recipe, ("workload", "use-chat-template"),
                      "speculative decoding with raw random tokens: acceptance is inflated without the chat template",
                      job=job)


_FIXED, _AGENTIC, _REPLAY = ScenarioId.FIXED_SEQ_LEN, ScenarioId.AGENTIC_CODING, ScenarioId.MOONCAKE_REPLAY
_READ_BY: dict[str, tuple[ScenarioId, ...]] = {
    "num-prompts": (_FIXED,), "num-prompts-per-conc": (_FIXED,), "range-ratio": (_FIXED,), "num-warmups": (_FIXED,),
    "traces": (_AGENTIC,), "warmup-per-lane": (_AGENTIC,), "duration": (_AGENTIC, _REPLAY), "replay": (_REPLAY,),
}
"""The `workload` fields only some scenarios read (the others — tokenizer, served model name, seed, chat template —
every scenario reads): a field none of a recipe's scenarios reads changes nothing."""


@rule("workload.unused", Severity.WARNING,
      "A workload field that no scenario of the recipe reads (it changes nothing)",
      "delete it, or add the scenario it belongs to (the message names it)",
      "DESIGN.md principle 3 (every declared field is consumed or rejected)")
def workload_unused(ctx: Context) -> Iterator[Finding]:
    for recipe in ctx.recipes.values():
        spec = recipe.workload
        if spec is None:
            continue
        runs: set[ScenarioId] = set()
        if recipe.fixed_seq_len():
            runs.add(_FIXED)
        if recipe.scenarios.agentic_coding:  # an agentic entry replays the Mooncake trace when `replay` names one
            runs.add(_REPLAY if spec.replay is not None else _AGENTIC)
        given = spec.model_dump(by_alias=True, exclude_unset=True)
        for name, readers in _READ_BY.items():
            if given.get(name) is None or runs & set(readers):
                continue
            planned = ", ".join(sorted(r.value for r in runs))
            replayed = _REPLAY in runs and _AGENTIC in readers
            why = ("its agentic-coding entries replay `workload.replay` instead" if replayed
                   else f"it applies to {' or '.join(r.value for r in readers)} jobs")
            yield ctx.hit("workload.unused", recipe, ("workload", name),
                          f"`workload.{name}` changes nothing: {why}, and this recipe plans {planned} jobs")
