"""An eval against a running server, its files in the job folder, and its place in the job's summary.

`run_eval` runs lm-eval once per eval concurrency into `<job>/eval/conc<N>/`, scrapes the server's `/metrics` just
before and after (`eval/server_metrics.jsonl`: the realised acceptance over the eval, since an eval never pins it)
and writes `eval/eval.json` and InferenceX's `eval/meta_env.json`. `attach` is what `summarise_job` calls (for `run`
and `summarize` alike): it reads those files back, re-applies the score gate and puts the typed block in the summary;
an eval-only job's summary has no throughput and takes the eval's verdict as its own.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

from llmsweep.catalog.eval_thresholds import warn_unread_prefixes
from llmsweep.client.files import SERVER_METRICS_FILE
from llmsweep.direct import DIRECT
from llmsweep.errors import ResultError
from llmsweep.evals.context import eval_concurrencies, eval_context_length, eval_max_tokens
from llmsweep.evals.gate import check_thresholds, judge
from llmsweep.evals.harness import Asked, EvalSettings, Progress, build_command, check_harness, run_once
from llmsweep.evals.tasks import check_dataset, task_file
from llmsweep.metrics.model import MEASURED, EvalBlock, EvalRun, ServerMetrics, Summary
from llmsweep.plan.job import Job

log = logging.getLogger(__name__)

EVAL_DIR = "eval"
EVAL_FILE = "eval.json"
EVAL_METRICS_FILE = SERVER_METRICS_FILE


def wants_eval(job: Job) -> bool:
    """The job runs an eval: an eval-only row, or a row that runs one after its throughput point."""
    return bool(job.eval_only or job.run_eval)


def check_inputs(jobs: Iterable[Job], settings: EvalSettings) -> None:
    """What the evals of `jobs` read besides their server, checked before any server starts: the score floors their
    results will be judged against and the local samples (`--eval-dataset`), which lm-eval and the gate read only
    once a server ran the eval. Raises the input's error (exit 2); nothing to check when no job runs an eval. A
    model prefix of the user's thresholds that no evaluated job has is said in a warning (its floors are not read)."""
    evaluated = [job for job in jobs if wants_eval(job)]
    if not evaluated:
        return
    if settings.dataset is not None:
        check_dataset(settings.task, settings.dataset)
    prefixes = [job.model_prefix for job in evaluated]
    check_thresholds(prefixes, settings.task)
    warn_unread_prefixes(prefixes)  # a user's floors no evaluated model reads (`Qwen3.5` for `qwen3.5`): said


def mode_of(job: Job) -> Literal["eval-only", "run-eval"]:
    return "eval-only" if job.eval_only else "run-eval"


def _scrape(url: str | None, out: Path) -> float:
    """One scrape of the server's /metrics appended to `out` (the client's scrape format); returns its time."""
    from llmsweep.client.scrape import parse_exposition

    t = time.time()
    if not url:
        return t
    try:
        with DIRECT.open(url, timeout=10) as resp:  # the server the run launched: never through a proxy
            line: dict[str, Any] = {"t": t, "samples": parse_exposition(resp.read().decode("utf-8", "replace"))}
    except (OSError, ValueError) as exc:
        line = {"t": t, "error": str(exc)}
    with out.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line) + "\n")
    return t


META_ENV_FILE = "meta_env.json"


def meta_env(job: Job, concs: list[int], completed: list[int]) -> dict[str, Any]:
    """InferenceX's `meta_env.json` of an eval (spec §1.6), so its own collector and score gate read the folder."""
    single = job.tp is not None
    doc: dict[str, Any] = {
        "is_multinode": bool(job.multinode), "framework": job.framework, "precision": job.precision,
        "spec_decoding": job.spec_decoding, "recipe_fingerprint": job.recipe_fingerprint,
        "tp": job.tp if single else None, "pp": job.pp if single else None,
        "dcp_size": job.dcp_size if single else None, "pcp_size": job.pcp_size if single else None,
        "conc": concs[0], "ep": job.ep if single else None, "dp_attention": bool(job.dp_attn),
        "model": job.model, "infmax_model_prefix": job.model_prefix, "hw": job.runner_label,
        "isl": str(job.isl) if job.isl is not None else "", "osl": str(job.osl) if job.osl is not None else "",
    }
    if len(concs) > 1:
        doc.update({"eval_concs": concs, "completed_eval_concs": completed,
                    "failed_eval_concs": [c for c in concs if c not in completed]})
    for role, worker in (("prefill", job.prefill), ("decode", job.decode)):
        if worker is not None:
            doc.update({f"{role}_tp": worker.tp, f"{role}_pp": worker.pp, f"{role}_dcp_size": worker.dcp_size,
                        f"{role}_pcp_size": worker.pcp_size, f"{role}_ep": worker.ep,
                        f"{role}_dp_attention": worker.dp_attn, f"{role}_num_workers": worker.num_worker})
    return doc


def run_eval(job: Job, base_url: str, *, model: str, metrics_url: str | None, job_dir: Path,
             settings: EvalSettings, server_command: str | None = None,
             on_progress: Progress | None = None) -> EvalBlock:
    """Run the job's eval against `base_url` and write `eval/eval.json`; returns the judged block. `server_command`:
    the launch of a server relaunched for the eval alone (a run-eval row whose throughput point pinned acceptance);
    `on_progress`: hears lm-eval's answers as it runs (`harness.run_once`)."""
    # lm-eval runs in its output folder (its cwd): every path it is given (the task file, --output_path, its report)
    # must be absolute, or a relative `--out` (the README's own `runs/...`) sends it looking inside that folder.
    job_dir = job_dir.resolve()
    edir = job_dir / EVAL_DIR
    edir.mkdir(parents=True, exist_ok=True)
    (edir / EVAL_METRICS_FILE).unlink(missing_ok=True)
    context = eval_context_length(job)
    max_tokens = settings.max_tokens or eval_max_tokens(context)
    task = task_file(settings.task, settings.dataset, edir / "task")
    block = EvalBlock(mode=mode_of(job), task=task.task, dataset=task.dataset, limit=settings.limit,
                      num_fewshot=task.num_fewshot, model_prefix=job.model_prefix, context_length=context,
                      max_tokens=max_tokens, verdict="invalid", relaunched=server_command is not None,
                      server_command=server_command)
    refusal = check_harness(settings)
    python = settings.interpreter()
    scrapes = edir / EVAL_METRICS_FILE
    start = _scrape(metrics_url, scrapes)
    for conc in eval_concurrencies(job):
        if refusal is not None or python is None:
            block.runs.append(EvalRun(conc=conc, status="failed", error=refusal))
            continue
        out = edir / f"conc{conc}"
        argv = build_command(python, task, base_url=base_url, model=model, conc=conc, context=context,
                             max_tokens=max_tokens, out=out, limit=settings.limit)
        asked = Asked(task=task.task, dataset=task.dataset, local=settings.dataset is not None, context=context,
                      max_tokens=max_tokens)
        run, version = run_once(argv, out, conc=conc, job_dir=job_dir, offline=settings.dataset is not None,
                                asked=asked, on_progress=on_progress)
        block.runs.append(run)
        block.harness_version = version or block.harness_version
    end = _scrape(metrics_url, scrapes)
    concs = [r.conc for r in block.runs]
    completed = [r.conc for r in block.runs if r.status == "completed"]
    (edir / META_ENV_FILE).write_text(json.dumps(meta_env(job, concs, completed), indent=2), encoding="utf-8")
    record = {"block": block.model_dump(mode="json"), "window": {"start": start, "end": end}}
    (edir / EVAL_FILE).write_text(json.dumps(record, indent=2), encoding="utf-8")
    return judge(_with_acceptance(block, job_dir, start, end))


def _with_acceptance(block: EvalBlock, job_dir: Path, start: float | None, end: float | None) -> EvalBlock:
    block.acceptance_length = realised_acceptance(eval_server_metrics(job_dir, start, end))
    return block


def eval_server_metrics(job_dir: Path, start: float | None, end: float | None) -> ServerMetrics:
    """The server's /metrics over the eval (two scrapes around it), read through the engine's metrics adapter."""
    from llmsweep.metrics.server import summarise_server

    path = job_dir / EVAL_DIR / EVAL_METRICS_FILE
    return ServerMetrics.model_validate(summarise_server(path if path.is_file() else None, start=start, end=end))


def realised_acceptance(metrics: ServerMetrics) -> float | None:
    return metrics.spec_decode.acceptance_length if metrics.spec_decode is not None else None


def load_eval(job_dir: Path) -> tuple[EvalBlock, float | None, float | None] | None:
    """The eval a job folder recorded (None when it has none)."""
    path = job_dir / EVAL_DIR / EVAL_FILE
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        block = EvalBlock.model_validate(doc["block"])
        window = doc.get("window") or {}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ResultError(f"cannot read {path}: {exc}", fix="re-run the eval job") from exc
    return block, window.get("start"), window.get("end")


def eval_only_summary(run_info: dict[str, Any]) -> Summary:
    """The summary of an eval-only job before its eval is attached: what ran and where — a disaggregated
    deployment's roles as a throughput point's summary reads them from its topology (`metrics.roles`; the store
    refused the result as an aggregated server's without them) — and no throughput figures."""
    from llmsweep.metrics.roles import deployment_blocks

    provenance = run_info.get("provenance") or {}
    return Summary.model_validate({"source": run_info.get("source", MEASURED), "provenance": provenance,
                                   **deployment_blocks(provenance, None, None, None)})


def attach(summary: Summary, job: Job, job_dir: Path) -> Summary:
    """Put the job's eval in its summary (re-judged from the recorded runs). A job that owed an eval and has none
    recorded is invalid: its row promised one."""
    if not wants_eval(job):
        return summary
    found = load_eval(job_dir)
    if found is None:
        summary.validity.verdict = "invalid"
        summary.validity.reasons.append(f"the job owes an eval ({mode_of(job)}) and none was recorded in "
                                        f"{EVAL_DIR}/{EVAL_FILE}")
        return summary
    block, start, end = found
    window = eval_server_metrics(job_dir, start, end)
    block.acceptance_length = realised_acceptance(window)
    summary.eval = judge(block)
    if job.eval_only:
        summary.server_metrics = window
        summary.validity.verdict = summary.eval.verdict
        summary.validity.reasons = list(summary.eval.reasons)
    elif summary.eval.verdict != "valid":
        # The throughput point keeps its own verdict; its eval's failure travels with it to every table and plot.
        summary.validity.warnings.extend(summary.eval.reasons)
    return summary
