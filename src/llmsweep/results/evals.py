"""Eval results as the results room reads them: the strict and flexible scores of an eval block, and the InferenceX
eval rows (`collect_eval_results.py`'s shape, inferencex-wave2-spec §1.8: one per concurrency) of a stored result,
written (`inferencex_eval_rows`) and read back as eval results (`points_from_eval_rows`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from llmsweep.errors import ResultInputError
from llmsweep.evals.gate import headline, judge
from llmsweep.evals.tasks import task_label
from llmsweep.metrics.model import MEASURED, SOURCES, EvalBlock, EvalMetric, EvalRun, Summary, Validity
from llmsweep.metrics.registry import HOT_NAMES
from llmsweep.option_spellings import flag as _flag
from llmsweep.results.identity import (
    dp_attention_of,
    get_field,
    gpus_of,
    identity_from_dict,
    identity_from_job,
)
from llmsweep.results.point import ResultPoint, result_id_for

EVAL_HALF_OF = "eval-half-of"
"""The job record's key naming the run-eval job an imported eval result is the eval half of (stored beside that job's
throughput result under an id of its own: `interchange.eval_half`): its eval rows name that job when exported."""

_FORMAT = _flag("format")


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
    dataset: str | None = None
    """Where the eval's samples came from (its block's `dataset`): the task's hub dataset or a local file."""
    limit: int | None = None
    """Samples per run when limited (`--eval-limit`); None: all."""

    @property
    def task_label(self) -> str:
        """The task with what it ran on where that is not its whole hub dataset (`evals.tasks.task_label`)."""
        return task_label(self.task, self.dataset, self.limit)


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


def eval_runs(block: EvalBlock, planned_conc: int = 0) -> list[EvalRun]:
    """The runs of an eval, one per concurrency lm-eval ran at; an eval that ran at none (lm-eval never ran: the
    gate judged it invalid) as one failed run at `planned_conc` (`planned_eval_conc` of its job record), its error
    the eval's reasons, so that every listing and export has a row of it."""
    return block.runs or [EvalRun(conc=planned_conc, status="failed",
                                  error="; ".join(block.reasons) or f"eval {block.task}: lm-eval never ran")]


def eval_run_columns(block: EvalBlock, planned_conc: int = 0) -> list[dict[str, Any]]:
    """The store's `evals` columns (all but the result's ids) of each concurrency an eval ran at, in run order, the
    first run at a concurrency kept: that run's headline score (`headline`, as its InferenceX row carries it), its
    strict and flexible scores with their stderr, samples, argv and results file, beside the eval's own mode, task,
    verdict and reasons.

    An eval that ran at no concurrency (lm-eval never ran; the gate judged it invalid) still has one row, so that
    `llmsweep results evals` shows it: `status` `failed` at `planned_conc`, the concurrency its job planned the eval at
    (`planned_eval_conc` of the job record; 0 when the record does not say), its `error` the eval's reasons, no score,
    no argv; its `doc` is that run as an `EvalRun` would hold it."""
    out: dict[int, dict[str, Any]] = {}
    for run in eval_runs(block, planned_conc):
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


def inferencex_eval_rows(point: ResultPoint, *, failed: bool = False) -> list[dict[str, Any]]:
    """The InferenceX eval rows of a result: one per completed run, i.e. per concurrency the eval ran at, with that
    run's scores (`collect_eval_results.py` reads a batched eval's `_conc<N>` result files of its completed
    concurrencies, one row each: wave-2 spec §1.8, core §6.4); none when it ran no eval or no run completed.
    `failed`: also a row of each run that did not complete (`eval_runs`: an eval that never ran has one), without
    scores, its `llmsweep` block's `status` `failed` (InferenceX publishes no such row: the export marks it)."""
    block = point.eval
    if block is None:
        return []
    runs = eval_runs(block, planned_eval_conc(point.job))
    return [_eval_row(point, block, run, runs) for run in runs if failed or run.status == "completed"]


def _eval_row(point: ResultPoint, block: EvalBlock, run: EvalRun, runs: list[EvalRun]) -> dict[str, Any]:
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
        # beside InferenceX's fields, where the task is named: what it ran on (an eval of a local file, or of part of
        # its samples, is not the task's score; InferenceX's readers take the fields they know)
        "dataset": block.dataset, "limit": block.limit,
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
    # ours beside InferenceX's fields: what an import needs to store the row again as the eval it was (its whole
    # point identity, the eval's settings, verdict and every run's command: `points_from_eval_rows`)
    half_of = get_field(job, EVAL_HALF_OF)
    row["llmsweep"] = {"verdict": block.verdict, "reasons": list(block.reasons), "mode": block.mode,
                       "status": run.status, "error": run.error,
                       # an eval half stored beside its job's throughput result names that job, as it came
                       "result_id": result_id_for(point.run_id, half_of) if half_of else point.result_id,
                       "run_id": point.run_id, "job_id": half_of or point.job_id, "source": point.source,
                       "harness": f"{block.harness} {block.harness_version or ''}".strip(),
                       "eval_concs": [r.conc for r in runs], "dataset": block.dataset,
                       "limit": block.limit, "commands": [r.command for r in runs],
                       "errors": [r.error for r in runs],
                       "identity": i.as_dict(), "context_length": block.context_length,
                       "max_tokens": block.max_tokens, "num_fewshot": block.num_fewshot}
    return row


# ------------------------------------------------------------------------------------------------ import


def is_eval_row(row: Mapping[str, Any]) -> bool:
    """An InferenceX eval row (`agg_eval_all.json`, `results export --format inferencex-evals`) rather than a
    throughput row: it names its task and carries its scores."""
    return "task" in row and any(k in row for k in ("score", "score_name", "em_strict", "em_flexible"))


def points_from_eval_rows(run_id: str, rows: Sequence[tuple[int, Mapping[str, Any]]]) -> list[ResultPoint]:
    """Eval rows (with their position in the file) as eval results: the rows of one eval (an export of ours: one
    row per concurrency it completed, each naming its run and job) are one result, whose eval block holds a run per
    concurrency; an InferenceX row (no `llmsweep` block) is a result of its own, under `run_id`, judged against the
    thresholds as `llmsweep run` judges an eval (its row carries no verdict).

    Such a result has no throughput point (the rows carry none), so it is an eval-only result in the store
    (`ResultPoint.eval_only`: its job record says `eval-only`) whatever kind of job ran it; its eval keeps the mode
    it was run in (`run-eval` or `eval-only`)."""
    groups: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for n, row in rows:
        ours = _ours(row)
        key = (str(ours.get("run_id") or run_id), str(ours.get("job_id") or f"row{n:04d}"))
        groups.setdefault(key, []).append(row)
    return [_eval_point(run, job, members) for (run, job), members in groups.items()]


def _ours(row: Mapping[str, Any]) -> Mapping[str, Any]:
    block = row.get("llmsweep")
    return block if isinstance(block, Mapping) else {}


def _eval_job(row: Mapping[str, Any]) -> dict[str, Any]:
    """The job record of an eval row, as `_eval_row` reads one back: the runner label (InferenceX's collector writes
    it upper-case; labels are lower-case), the framework, model prefix, parallelism and DP attention, each role's
    for a multinode row."""
    job: dict[str, Any] = {"model": row.get("model"), "runner": str(row.get("hw") or "").lower() or None,
                           "framework": row.get("framework"), "precision": row.get("precision"),
                           "spec-decoding": row.get("spec_decoding"), "isl": row.get("isl"), "osl": row.get("osl"),
                           "tp": row.get("tp"), "ep": row.get("ep"), "conc": row.get("conc"),
                           "model-prefix": row.get("model_prefix"), "run-eval": True, "eval-only": True}
    if row.get("is_multinode"):
        job["multinode"] = job["disagg"] = True
        for role in ("prefill", "decode"):
            job[role] = {"tp": row.get(f"{role}_tp"), "ep": row.get(f"{role}_ep"),
                         "num-worker": row.get(f"{role}_num_workers"),
                         "dp-attn": bool(row.get(f"{role}_dp_attention"))}
    else:
        job["dp-attn"] = str(row.get("dp_attention")).strip().lower() == "true"
    return {k: v for k, v in job.items() if v is not None}


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _eval_run(row: Mapping[str, Any]) -> EvalRun:
    """One row's run: its headline score under its own name, and its strict and flexible `exact_match` scores."""
    conc = _positive(row.get("conc")) or 0
    metrics: list[EvalMetric] = []
    name = row.get("score_name")
    if isinstance(name, str) and name:
        metrics.append(EvalMetric(name=name, value=_number(row.get("score")), stderr=_number(row.get("score_se"))))
    for kind, default in (("strict", "exact_match,strict-match"), ("flexible", "exact_match,flexible-extract")):
        value = _number(row.get(f"em_{kind}"))
        if value is not None and not any(m.name.startswith("exact_match,") and _kind(m.name) == kind
                                         for m in metrics):
            metrics.append(EvalMetric(name=default, value=value, stderr=_number(row.get(f"em_{kind}_se"))))
    n_eff = _positive(row.get("n_eff"))
    source = row.get("source")
    return EvalRun(conc=conc, status="completed", metrics=metrics, n_samples=n_eff,
                   results_file=source if isinstance(source, str) else None)


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _eval_point(run_id: str, job_id: str, rows: list[Mapping[str, Any]]) -> ResultPoint:
    first = rows[0]
    ours = _ours(first)
    job = _eval_job(first)
    identity = (identity_from_dict(ours["identity"]) if isinstance(ours.get("identity"), Mapping)
                else identity_from_job(job))
    if ours and not ours.get("source"):  # our export always writes it: a row that lost it is not known measured
        raise ResultInputError(f"eval row of job {job_id} has an `llmsweep` block without its `source`",
                               fix=f"export the run again with `llmsweep results export {_FORMAT} inferencex-evals`, "
                                   "or give the block the source it was exported with")
    source = str(ours.get("source") or MEASURED)
    if source not in SOURCES:
        raise ResultInputError(f"eval row of job {job_id} has unknown source {source!r}",
                               fix=f"use one of {', '.join(SOURCES)}")
    by_conc: dict[int, EvalRun] = {}
    for row in rows:
        run = _eval_run(row)
        if _ours(row).get("status") == "failed":  # a run that did not complete, exported marked failed
            run = run.model_copy(update={"status": "failed", "metrics": []})
        by_conc.setdefault(run.conc, run)
    concs = [c for c in ours.get("eval_concs") or () if isinstance(c, int)] or list(by_conc)
    commands, errors = (_listed(ours.get(k)) for k in ("commands", "errors"))
    runs: list[EvalRun] = []
    for n, conc in enumerate(dict.fromkeys(concs)):  # in the order the eval ran them; a run the file has no row of
        said = errors[n] if n < len(errors) and isinstance(errors[n], str) else None  # failed: rows are of completed
        run = by_conc.pop(conc) if conc in by_conc else EvalRun(conc=conc, status="failed",
                                                                  error=said or "failed (no row of it)")
        command = commands[n] if n < len(commands) and isinstance(commands[n], list) else []
        update: dict[str, Any] = {"command": [str(c) for c in command]}
        if run.status == "failed":
            update["error"] = said or run.error or "failed (no row of it)"
        runs.append(run.model_copy(update=update))
    runs += by_conc.values()
    harness, _, version = str(ours.get("harness") or "lm-eval").partition(" ")
    mode: Literal["eval-only", "run-eval"] = "run-eval" if ours.get("mode") == "run-eval" else "eval-only"
    limit, fewshot = _positive(ours.get("limit", first.get("limit"))), ours.get("num_fewshot")
    block = judge(EvalBlock(
        mode=mode, task=str(first.get("task")), harness=harness, harness_version=version or None,
        dataset=str(ours.get("dataset") or first.get("dataset") or "unknown"), limit=limit,
        num_fewshot=fewshot if isinstance(fewshot, int) else None,
        model_prefix=str(first["model_prefix"]) if first.get("model_prefix") else None,
        # 0: not recorded (InferenceX's rows do not carry the eval's context or answer budget)
        context_length=_positive(ours.get("context_length")) or 0, max_tokens=_positive(ours.get("max_tokens")) or 0,
        runs=runs, verdict="invalid"))
    if ours.get("verdict") in ("valid", "smoke", "invalid"):  # as the run judged it (thresholds may have changed)
        block.verdict = ours["verdict"]
        said = ours.get("reasons") or []
        if not isinstance(said, list) or not all(isinstance(r, str) for r in said):
            raise ResultInputError(f"eval row of job {job_id}: `llmsweep.reasons` is {said!r}, not a list of texts",
                                   fix=f"export the run again with `llmsweep results export {_FORMAT} "
                                       "inferencex-evals`, or correct the row")
        block.reasons = list(said)
        block.checks = []  # the rows do not carry the checks behind that verdict
    summary = Summary(source=source, eval=block,
                      validity=Validity(verdict=block.verdict, reasons=list(block.reasons)))
    return ResultPoint(
        result_id=result_id_for(run_id, job_id), run_id=run_id, job_id=job_id, identity=identity, source=source,
        verdict=block.verdict, metrics=dict.fromkeys(HOT_NAMES), gpus=gpus_of(job, identity),
        origin="llmsweep-export" if ours else "inferencex", reasons=tuple(block.reasons), job=job, summary=summary)
