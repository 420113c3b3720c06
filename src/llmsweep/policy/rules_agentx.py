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
