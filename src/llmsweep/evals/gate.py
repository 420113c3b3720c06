"""The score gate (InferenceX `validate_scores.py`): every numeric `exact_match,*` metric of every run must reach the
model prefix's threshold for the task (`catalog/data/eval_thresholds.yaml`); a run that did not complete, or one with
no `exact_match` metric to check, fails. The reasons name metric, score and threshold.

An eval that passes on samples that cannot tell it is `smoke`, not `valid`, the reason said (as a throughput run too
short to count is): one that scored a part of its samples (`--eval-limit`), and one on a local file
(`--eval-dataset`) whose score lies within a standard error of its threshold — the score's own, or, where it is 0
(every answer right, or none), the binomial one of the threshold at that sample count. The task's whole hub dataset is
judged as InferenceX judges it."""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable
from pathlib import Path

from llmsweep.catalog.eval_thresholds import ANY_TASK, FILE, GATED_METRIC, SECTION, floors, threshold_for
from llmsweep.catalog.sources import cached, catalog_dirs
from llmsweep.errors import CatalogError
from llmsweep.evals.tasks import known_tasks, local_dataset, task_filters
from llmsweep.metrics.model import EvalBlock, EvalCheck, EvalMetric, EvalRun
from llmsweep.option_spellings import flag as _flag
from llmsweep.words import count_of

log = logging.getLogger(__name__)


def check_thresholds(model_prefixes: Iterable[str | None], task: str) -> None:
    """Resolve the floor `judge` will hold `task`'s scores against, for each model prefix: every thresholds file is
    loaded, so that a malformed user file or a task no floor covers stops a run before any server starts, not after
    its eval (a CatalogError naming file:line, the field and the fix). Every floor's filter must be one lm-eval
    reports for its task (or for a task of llmsweep's, under `"*"`); a user's floor of a task llmsweep does not run
    is never read, and is said (a warning, on stderr as the CLI logs them: the packaged file keeps InferenceX's
    `swebench_lite`, and a user's file may too)."""
    _check_floors(catalog_dirs())
    for prefix in sorted({p or "" for p in model_prefixes}):
        threshold_for(prefix or None, task, GATED_METRIC)


@cached
def _check_floors(dirs: tuple[Path, ...]) -> None:
    """Once per catalog (`dirs`: the cache's key) for a command that checks more than one run's evals."""
    filters = {task: task_filters(task) for task in known_tasks()}
    tasks = ", ".join(filters)
    warned: set[tuple[str, str]] = set()
    for floor in floors():
        known = sorted({f for fs in filters.values() for f in fs}) if floor.task == ANY_TASK \
            else filters.get(floor.task)
        if known is None:
            if not floor.origin.packaged and (floor.prefix, floor.task) not in warned:
                warned.add((floor.prefix, floor.task))
                log.warning("%s: eval threshold %s.%s: llmsweep runs no eval task %r (it runs %s; \"%s\" is any "
                            "task), so its floors are never read: name one of those tasks", floor.where(metric=False),
                            floor.prefix, floor.task, floor.task, tasks, ANY_TASK)
            continue
        if floor.filter is not None and floor.filter not in known:
            on = f"any task llmsweep runs ({tasks})" if floor.task == ANY_TASK else floor.task
            raise CatalogError(f"eval threshold {floor.field}: lm-eval reports no filter {floor.filter!r} for {on}, "
                               "so the gate never reads this floor", file=floor.origin.path, line=floor.line(),
                               field=f"{SECTION}.{floor.field}",
                               fix=f"name the metric {', '.join(f'`{GATED_METRIC},{f}`' for f in known)}, or "
                                   f"`{GATED_METRIC}` for every filter, in {FILE}")


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
    if not reasons and (smoke := smoke_reason(block)) is not None:
        block.verdict, block.reasons = "smoke", [smoke]
    return block


def _cut(run: EvalRun, limit: int | None) -> bool:
    """The run scored a part of its samples: fewer than the split holds, or, where lm-eval did not say, a limit."""
    if run.n_samples is not None and run.n_samples_original is not None:
        return run.n_samples < run.n_samples_original
    return limit is not None


def smoke_reason(block: EvalBlock) -> str | None:
    """Why an eval whose checks all passed is `smoke` (module doc); None when its samples tell the pass."""
    done = [r for r in block.runs if r.status == "completed"]
    for run in done:
        if _cut(run, block.limit):
            scored = (f"{count_of(run.n_samples, 'sample')} of {run.n_samples_original:,}"
                      if run.n_samples is not None and run.n_samples_original is not None
                      else f"at most {count_of(block.limit or 0, 'sample')}")
            return (f"smoke eval: {block.task} scored {scored} ({_flag('eval_limit')} {block.limit}); a pass on "
                    "part of the samples is not the task's score (drop the limit to judge it)")
    if not local_dataset(block.task, block.dataset):
        return None
    for run in done:
        n = run.n_samples
        for check in block.checks:
            metric = next((m for m in run.metrics if m.name == check.metric), None)
            if metric is None or metric.value is None or not n:
                continue
            t = check.threshold
            se = max(metric.stderr or 0.0, math.sqrt(t * (1 - t) / n))
            if metric.value - se < t:
                return (f"smoke eval: {check.metric} = {metric.value:.4f} ± {se:.4f} over {count_of(n, 'sample')} of "
                        f"{block.dataset} lies within a standard error of its threshold {t:.2f}: too few samples to "
                        "tell it passes (score more of them)")
    return None
