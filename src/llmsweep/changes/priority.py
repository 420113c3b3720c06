"""The CI queue's priority score of a job, as InferenceX's `utils/ci_priority.py` with `configs/ci-priority.yaml`.

Score = base 1.0 + event `push` 2.0 + multi-node 1.25 + agentic 1.0 + precision `fp4` 0.75 + spec decoding
`mtp|eagle|eagle3` 0.75 + the first framework-prefix match (`sglang|vllm|dynamo-sglang|dynamo-vllm`, equal or
`<prefix>-…`) 0.5 + model prefix (exact key) `kimik3` 1.5, `glm5`, `glm5.1`, `kimik2.5`, `dsv4`, `minimaxm3`,
`qwen3.5`, `dsr1` 0.75 each; eval-only jobs add nothing for being
evals. Quantised half-up to 0.001. Labels: `ci-checklist-complete` +0.25; `ci-patchwork` / `engine-patch` force
0.0 unless `ci-patchwork-waived`. Higher runs first.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import ROUND_HALF_UP, Decimal

from llmsweep.plan import Job
from llmsweep.spec.workload import ScenarioId

BASE = Decimal("1.0")
EVENT = {"push": Decimal("2.0")}
MULTI_NODE = Decimal("1.25")
AGENTIC = Decimal("1.0")
PRECISION = {"fp4": Decimal("0.75")}
SPEC = {"mtp": Decimal("0.75"), "eagle": Decimal("0.75"), "eagle3": Decimal("0.75")}
FRAMEWORK_PREFIXES = (("sglang", Decimal("0.5")), ("vllm", Decimal("0.5")), ("dynamo-sglang", Decimal("0.5")),
                      ("dynamo-vllm", Decimal("0.5")))
MODEL_PREFIX = {"kimik3": Decimal("1.5"),
                **{p: Decimal("0.75") for p in ("glm5", "glm5.1", "kimik2.5", "dsv4", "minimaxm3", "qwen3.5", "dsr1")}}
"""Exact model-prefix keys: kimik3 1.5; 0.75 for each prefix the policy lists (configs/ci-priority.yaml)."""
CHECKLIST_LABEL, CHECKLIST = "ci-checklist-complete", Decimal("0.25")
PATCHWORK_LABELS = frozenset({"ci-patchwork", "engine-patch"})
WAIVER_LABEL = "ci-patchwork-waived"


def priority(job: Job, *, event: str | None = None, labels: Iterable[str] = ()) -> Decimal:
    """The job's priority score (higher first)."""
    labels = set(labels)
    if labels & PATCHWORK_LABELS and WAIVER_LABEL not in labels:
        return Decimal("0.000")
    score = BASE + EVENT.get(event or "", Decimal(0))
    if job.multinode:
        score += MULTI_NODE
    if job.scenario is ScenarioId.AGENTIC_CODING:
        score += AGENTIC
    score += PRECISION.get(job.precision, Decimal(0)) + SPEC.get(job.spec_decoding, Decimal(0))
    for prefix, weight in FRAMEWORK_PREFIXES:
        if job.framework == prefix or job.framework.startswith(prefix + "-"):
            score += weight
            break
    score += MODEL_PREFIX.get(job.model_prefix, Decimal(0))
    if CHECKLIST_LABEL in labels:
        score += CHECKLIST
    return score.quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)


def by_priority(jobs: Iterable[Job], *, event: str | None = None,
                labels: Iterable[str] = ()) -> list[tuple[Job, Decimal]]:
    """Jobs with their scores, highest first (ties keep plan order)."""
    labels = tuple(labels)
    scored = [(job, priority(job, event=event, labels=labels)) for job in jobs]
    return sorted(scored, key=lambda pair: -pair[1])
