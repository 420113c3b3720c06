"""Eval results as the results room reads them: the strict and flexible scores of an eval block, and the InferenceX
eval rows (`collect_eval_results.py`'s shape, inferencex-wave2-spec §1.8: one per concurrency) of a stored result."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from llmsweep.evals.gate import headline
from llmsweep.metrics.model import EvalBlock, EvalMetric, EvalRun
from llmsweep.results.identity import dp_attention_of, get_field
from llmsweep.results.point import ResultPoint


@dataclass(frozen=True, slots=True)
class StoredEval:
    """One row of the store's `evals` table: one concurrency a result's eval ran at (an eval batched over several
    concurrencies has a row for each, as its InferenceX eval rows do), with that run's headline score. `verdict` and
    `reasons` are the eval's own, judged over all its runs."""

    result_id: str
    run_id: str
    job_id: str
    conc: int
    status: str
    """`completed`, or `failed` (then no score; `error` says why)."""
    mode: str
    task: str
    score: float | None
    score_name: str | None
    score_stderr: float | None
    n_samples: int | None
    verdict: str
    reasons: tuple[str, ...]
    harness_version: str | None
    error: str | None = None
    source: str | None = None
    """The result's source (`measured`, `simulated`, `imported`): a simulator's score is no model's accuracy."""


def _kind(name: str) -> str | None:
    """InferenceX's filter classes: `strict`/`resolved` → strict, `flex`/`extract` → flexible."""
    _, _, filt = name.partition(",")
    if "strict" in filt or "resolved" in filt:
        return "strict"
    if "flex" in filt or "extract" in filt:
        return "flexible"
    return None


def run_scores(run: EvalRun) -> tuple[EvalMetric | None, EvalMetric | None]:
    """(strict, flexible) `exact_match` of one run."""
    found: dict[str, EvalMetric] = {}
    for metric in run.metrics:
        kind = _kind(metric.name)
        if metric.name.startswith("exact_match,") and kind is not None and kind not in found:
            found[kind] = metric
    return found.get("strict"), found.get("flexible")


def planned_eval_conc(job: Mapping[str, Any] | None) -> int:
    """The concurrency a job planned its (first) eval run at, read from its record as
    `llmsweep.evals.context.eval_concurrencies` plans it: a multinode row's `eval-conc`, else its highest conc, or its
    lowest when it evaluates every one (`eval-all-concs`); a single server's conc (its first). 0 when the record
    names none (no job record, an imported row without `conc`)."""
    if not job:
        return 0
    raw = get_field(job, "conc")
    concs = [c for c in (_positive(v) for v in (raw if isinstance(raw, (list, tuple)) else [raw])) if c]
    if not (get_field(job, "multinode") or isinstance(get_field(job, "prefill"), Mapping)):
        return concs[0] if concs else 0
    if get_field(job, "eval-all-concs"):
        return min(concs) if concs else 0
    return _positive(get_field(job, "eval-conc")) or (max(concs) if concs else 0)


def _positive(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        n = int(value)
    except (TypeError, ValueError):
        return None
    return n if n > 0 else None


def eval_run_columns(block: EvalBlock, planned_conc: int = 0) -> list[dict[str, Any]]:
    """The store's `evals` columns (all but the result's ids) of each concurrency an eval ran at, in run order, the
    first run at a concurrency kept: that run's headline score (`headline`, as its InferenceX row carries it), its
    strict and flexible scores with their stderr, samples, argv and results file, beside the eval's own mode, task,
    verdict and reasons.

    An eval that ran at no concurrency (lm-eval never ran; the gate judged it invalid) still has one row, so that
    `llmsweep results evals` shows it: `status` `failed` at `planned_conc`, the concurrency its job planned the eval at
    (`planned_eval_conc` of the job record; 0 when the record does not say), its `error` the eval's reasons, no score,
    no argv; its `doc` is that run as an `EvalRun` would hold it."""
    runs = block.runs or [EvalRun(conc=planned_conc, status="failed",
                                  error="; ".join(block.reasons) or f"eval {block.task}: lm-eval never ran")]
    out: dict[int, dict[str, Any]] = {}
    for run in runs:
        if run.conc in out:
            continue
        strict, flexible = run_scores(run)
        score = headline(run.metrics) if run.status == "completed" else None
        out[run.conc] = {
            "conc": run.conc, "status": run.status, "error": run.error, "mode": block.mode, "task": block.task,
            "score": score.value if score else None, "score_name": score.name if score else None,
            "score_stderr": score.stderr if score else None,
            "em_strict": strict.value if strict else None, "em_strict_se": strict.stderr if strict else None,
            "em_flexible": flexible.value if flexible else None,
            "em_flexible_se": flexible.stderr if flexible else None, "n_samples": run.n_samples,
            "verdict": block.verdict, "reasons": list(block.reasons), "harness_version": block.harness_version,
            "command": list(run.command), "results_file": run.results_file, "doc": run.model_dump(mode="json")}
    return list(out.values())


def inferencex_eval_rows(point: ResultPoint) -> list[dict[str, Any]]:
    """The InferenceX eval rows of a result: one per completed run, i.e. per concurrency the eval ran at, with that
    run's scores (`collect_eval_results.py` reads a batched eval's `_conc<N>` result files of its completed
    concurrencies, one row each: wave-2 spec §1.8, core §6.4); none when it ran no eval or no run completed."""
    block = point.eval
    if block is None:
        return []
    return [_eval_row(point, block, run) for run in block.runs if run.status == "completed"]


def _eval_row(point: ResultPoint, block: EvalBlock, run: EvalRun) -> dict[str, Any]:
    i, job = point.identity, point.job
    dpa = dp_attention_of(job)  # what ran, read and spelt as the throughput row reads and spells it
    strict, flexible = run_scores(run)
    score = headline(run.metrics)  # the block's headline score is this of its first completed run
    row: dict[str, Any] = {
        "is_multinode": bool(get_field(job, "prefill")),
        "model_prefix": get_field(job, "model-prefix") or block.model_prefix,
        "model": i.model, "hw": str(get_field(job, "runner-label", "runner") or i.hardware).upper(),
        "framework": str(get_field(job, "framework") or i.engine).lower(), "precision": str(i.precision).lower(),
        "spec_decoding": i.spec, "isl": i.isl, "osl": i.osl, "tp": i.tp, "ep": i.ep, "conc": run.conc,
        "dp_attention": dpa.inferencex(), "task": block.task,
        "em_strict": strict.value if strict else None, "em_strict_se": strict.stderr if strict else None,
        "em_flexible": flexible.value if flexible else None,
        "em_flexible_se": flexible.stderr if flexible else None,
        "n_eff": run.n_samples, "source": run.results_file,
        "score": score.value if score else None, "score_name": score.name if score else None,
        "score_se": score.stderr if score else None,
    }
    for role in ("prefill", "decode"):
        worker = get_field(job, role)
        if isinstance(worker, dict):
            row.update({f"{role}_tp": get_field(worker, "tp"), f"{role}_ep": get_field(worker, "ep"),
                        f"{role}_num_workers": get_field(worker, "num-worker"),
                        f"{role}_dp_attention": dpa.role_flag(role)})
    row["llmsweep"] = {"verdict": block.verdict, "reasons": list(block.reasons), "mode": block.mode,
                       "result_id": point.result_id, "run_id": point.run_id, "job_id": point.job_id,
                       "source": point.source, "harness": f"{block.harness} {block.harness_version or ''}".strip(),
                       "eval_concs": [r.conc for r in block.runs], "dataset": block.dataset,
                       "limit": block.limit, "commands": [r.command for r in block.runs]}
    return row
