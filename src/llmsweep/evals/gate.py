"""The score gate (InferenceX `validate_scores.py`): every numeric `exact_match,*` metric of every run must reach the
model prefix's threshold for the task (`catalog/data/eval_thresholds.yaml`); a run that did not complete, or one with
no `exact_match` metric to check, fails. The reasons name metric, score and threshold."""

from __future__ import annotations

from collections.abc import Iterable

from llmsweep.catalog.eval_thresholds import threshold_for
from llmsweep.metrics.model import EvalBlock, EvalCheck, EvalMetric

GATED_METRIC = "exact_match"


def check_thresholds(model_prefixes: Iterable[str | None], task: str) -> None:
    """Resolve the floor `judge` will hold `task`'s scores against, for each model prefix: every thresholds file is
    loaded, so that a malformed user file or a task no floor covers stops a run before any server starts, not after
    its eval (a ConfigError naming file:line, the field and the fix)."""
    for prefix in sorted({p or "" for p in model_prefixes}):
        threshold_for(prefix or None, task, GATED_METRIC)


def headline(metrics: list[EvalMetric]) -> EvalMetric | None:
    """The score a table shows: the strict match, else the first `exact_match` filter, else accuracy."""
    ranked = ([m for m in metrics if m.name.startswith(GATED_METRIC + ",") and "strict" in m.name],
              [m for m in metrics if m.name.startswith(GATED_METRIC + ",")],
              [m for m in metrics if m.name.startswith("acc,")])
    for group in ranked:
        if group:
            return group[0]
    return None


def judge(block: EvalBlock) -> EvalBlock:
    """Set the block's checks, headline score and verdict from its runs."""
    checks: list[EvalCheck] = []
    reasons: list[str] = []
    for run in block.runs:
        where = f" (conc {run.conc})" if len(block.runs) > 1 else ""
        if run.status != "completed":
            reasons.append(f"eval {block.task}{where} did not complete: {run.error or 'no reason recorded'}")
            continue
        gated = [m for m in run.metrics if m.name.startswith(GATED_METRIC + ",")]
        if not gated:
            reasons.append(f"eval {block.task}{where}: no {GATED_METRIC} metric to check in lm-eval's results")
        for metric in gated:
            threshold, source = threshold_for(block.model_prefix, block.task, metric.name)
            ok = metric.value is not None and metric.value >= threshold
            checks.append(EvalCheck(metric=metric.name, score=metric.value, threshold=threshold,
                                    threshold_from=source, ok=ok))
            if not ok:
                score = "none" if metric.value is None else f"{metric.value:.4f}"
                reasons.append(f"eval {block.task}{where}: {metric.name} = {score} is below the threshold "
                               f"{threshold:.2f} ({source})")
    if not block.runs:
        reasons.append(f"eval {block.task}: lm-eval never ran")
    first = next((r for r in block.runs if r.status == "completed"), None)
    best = headline(first.metrics) if first is not None else None
    block.checks = checks
    block.score = best.value if best is not None else None
    block.score_name = best.name if best is not None else None
    block.score_stderr = best.stderr if best is not None else None
    block.reasons = reasons
    block.verdict = "invalid" if reasons else "valid"
    return block
