"""`llmsweep run`: the main job, recipe to dashboard. Parsing and printing only; the work is in execute.pipeline."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from click.core import ParameterSource

from llmsweep.cli.options import (
    FiniteRange,
    PathValue,
    config_keys_option,
    json_option,
    option,
    out_option,
    recipe_files_argument,
    runner_config_option,
    store_option,
)
from llmsweep.cli.options import executor_options as parse_executor_options
from llmsweep.errors import ConfigError
from llmsweep.evals.tasks import DEFAULT_TASK, known_tasks
from llmsweep.execute.lifecycle import LifecycleSettings
from llmsweep.execute.registry import executor_help, executor_kinds
from llmsweep.metrics.model import DONE_WORDS, source_words
from llmsweep.option_spellings import flag as _flag
from llmsweep.power.sampler import RUN_BACKEND_CHOICES
from llmsweep.power.samples import REQUIRE_POWER_HELP
from llmsweep.words import count_of, noun

_JSON, _RUN_ID = _flag("json"), _flag("run_id")

if TYPE_CHECKING:
    from rich.console import Console

    from llmsweep.execute.pipeline import RunOutcome
    from llmsweep.metrics.model import Summary


EVAL_OPTIONS = {"task": "eval_task", "dataset": "eval_dataset", "limit": "eval_limit", "python": "lm_eval",
                "max_tokens": "eval_max_tokens"}
"""The options of `run` that set how eval jobs are evaluated: `EvalSettings` field -> the parameter that feeds it."""


@click.command("run")
@recipe_files_argument(required=False)
@config_keys_option()
@option("executor", type=click.Choice(executor_kinds()), help=executor_help() + ".")
@option("executor_option", help="Executor settings, e.g. partition=gpu, time_limit=04:00:00, squash_dir=/shared/sqsh.")
@option("simulate")
@option("live", help="Simulated jobs: serve the simulator over HTTP and drive it in wall-clock time (exercises the "
        "client) instead of running its core in virtual time (the default: a full window in seconds). A disaggregated "
        "job's prefill and decode workers and router each run as a server of their own: processes of this host on "
        "loopback ports (--executor local), or steps on their nodes (slurm).")
@option("traces", default=None,
        help="Agentic jobs: replay this trace source instead of the recipe's: 'synthetic' (the built-in AgentX-shaped "
             "corpus; needs no network), a trace file or directory, or a Hugging Face dataset id.")
@option("no_evals", help="Throughput jobs only: the rows InferenceX marks `run-eval` run their throughput point "
        "without an eval.")
@option("evals_only", help="Only the eval rows, as eval-only jobs: the server starts at the eval context length and "
        "runs only the eval.")
@option("all_evals", help="Every 8k1k fixed-seq-len row and every agentic row runs as an eval-only job.")
@option("eval_task", type=click.Choice(known_tasks()), default=DEFAULT_TASK, show_default=True,
              help="The lm-eval task of eval jobs.")
@option("eval_dataset", type=PathValue(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A local JSON-lines file in the task's format (GSM8K: `question`, `answer` ending `#### N`) instead "
                   "of the Hugging Face dataset: offline evals.")
@option("eval_limit", type=click.IntRange(min=1), default=None,
              help="Score only the first N samples of the task (lm-eval --limit; recorded with the result).")
@option("eval_max_tokens", type=click.IntRange(min=1), default=None,
              help="Answer budget per sample instead of the one the eval context implies (recorded).")
@click.option("--lm-eval", "lm_eval", type=PathValue(dir_okay=False, path_type=str), default=None, metavar="PYTHON",
              help="Python interpreter with lm-eval[api]==0.4.13 (default: $LLMSWEEP_LM_EVAL).")
@click.option("--fail-fast", is_flag=True, help="Stop at the first failed or invalid job.")
@option("resume", source=(LifecycleSettings, "resume"))
@option("changed", help="Run only the jobs a recipe change added or changed (see `llmsweep changes`); HEAD must be "
        "the files given (BASE.. compares with the working tree).")
@option("job", dest="only_job", listed=True,
        help="Run only this planned job: a job id, a unique id prefix or exp-name (as `render --job`); one matrix "
             "entry of a CI workflow (`llmsweep ci github`).")
@option("reuse", help="Do not run a job whose full identity (recipe fingerprint, image, launch, workload, "
        f"measurement definitions, gates) matches a stored {DONE_WORDS} result; its outcome points at it.")
@option("force", help="Run every job again although --out holds a run's results (they move to jobs/<id>/attempts/). "
        "Without --resume or --force, an --out holding results is refused.")
@option("repeats", help="Run every job N times (the first keeps the job id, repeat k >= 2 is job "
        "`<id>-repeat<k>`), so `compare` has a between-run noise band.")
@out_option("Run directory (one folder per job under jobs/).", default=Path("runs/latest"), show_default=True)
@store_option(dest="store")
@runner_config_option()
@option("runner_labels")
@click.option("--no-report", is_flag=True, help="Skip writing the HTML dashboard.")
@option("startup_timeout")
@option("request_timeout")
@option("client_workers")
@click.option("--al-tolerance", type=FiniteRange(min=0), default=None,
              help="Least allowed |realised − pinned| acceptance length in the read-back gate (default 0.10, "
              "execute.readback's); the gate widens it to 3 standard errors of the verify steps' sampling error.")
@option("require_power", default=None, help=REQUIRE_POWER_HELP)
@option("power_backend", type=click.Choice(RUN_BACKEND_CHOICES), default="auto",
        show_default=True, help="GPU power sampler: auto tries NVML, amd-smi, then nvidia-smi (DCGM first for "
        "a disaggregated prefill/decode role); the simulator reports its modelled power under any backend but off.")
@json_option("the end-of-run table (one row per job: concurrency, verdict, reason, headline metrics)")
@click.option("--_worker", "worker", type=PathValue(path_type=Path), default=None, hidden=True)
def run(files: tuple[Path, ...], config_keys: tuple[str, ...], executor: str, executor_options: tuple[str, ...],
        simulate: bool, live: bool, traces: str | None, no_evals: bool, evals_only: bool, all_evals: bool,
        eval_task: str, eval_dataset: Path | None, eval_limit: int | None, eval_max_tokens: int | None,
        lm_eval: str | None, fail_fast: bool, resume: bool, changed: str | None,
        only_job: tuple[str, ...], reuse: bool, force: bool, repeats: int, out: Path, store: Path | None,
        runner_config: Path | None, runner_labels: tuple[str, ...],
        no_report: bool, startup_timeout: float | None, request_timeout: float, client_workers: int,
        al_tolerance: float | None, require_power: bool | None, power_backend: str, as_json: bool,
        worker: Path | None) -> int:
    """Run recipes end to end: validate, launch, load, gate, store, report.

    Jobs with identical launch specs share one server. Simulated jobs (the `sim` engine, or --simulate) run on the
    simulator core in virtual time unless --live. Progress goes to stderr (a live display under a terminal,
    timestamped lines otherwise); at the end a table of every job, and the last line printed is the dashboard's path
    (with --json, stdout is the table as JSON only).
    """
    from llmsweep.execute.pipeline import RunRequest, run_sweep, run_worker
    from llmsweep.execute.progress import progress_for, use_progress

    if worker is not None:
        sys.exit(run_worker(worker))
    if not files:
        raise ConfigError("no recipe files given", fix="llmsweep run recipes/my-recipe.yaml --out runs/x")
    if resume and force:
        raise ConfigError("--resume and --force contradict each other",
                          fix="--resume keeps the finished jobs of --out; --force runs them all again: pick one")
    only_jobs: list[str] | None = list(only_job) or None
    if changed is not None and only_jobs:
        raise ConfigError("--changed and --job both choose the jobs", fix="pass one of them")
    from llmsweep.plan.matrix import EvalOptions

    evals = EvalOptions(no_evals=no_evals, evals_only=evals_only, all_evals=all_evals)
    evals.check()
    ctx = click.get_current_context()
    eval_settings = {field: ctx.params[param] for field, param in EVAL_OPTIONS.items()}
    # said ignored when no job of the plan runs an eval (`run_sweep`): harmless, but a flag that does nothing says so
    eval_flags = [p.opts[0] for p in ctx.command.params if p.name in EVAL_OPTIONS.values()
                  and ctx.get_parameter_source(p.name) not in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP)]
    if changed is not None:
        from llmsweep.changes import changes_between

        # Both sides planned under this run's eval selection: the ids are the jobs it plans (under --evals-only, the
        # eval jobs of what changed), never throughput ids its plan does not hold.
        from llmsweep.changes.diff import head_differs

        if stale := head_differs(changed, files):
            raise ConfigError(
                f"{changed}: the files given differ from its HEAD ({', '.join(stale)}): `run` plans the files as they "
                "are here, and a job the change left alone may have changed since, unseen",
                fix=f"commit (or stash) those edits, or give the working tree as HEAD: `--changed "
                    f"{changed.split('..', 1)[0]}..`")
        change_set = changes_between(changed, files, runner_config=runner_config, evals=evals)
        for note in change_set.notes:
            click.echo(f"note: {note}", err=True)
        to_run = change_set.jobs_to_run()
        if config_keys:  # the change narrowed to the keys asked for (the rest of the change is another run's)
            from llmsweep.plan.expand import expand_config_keys

            keys = set(expand_config_keys(tuple(config_keys), sorted({j.recipe_key for j in to_run}
                                                                     | {j.recipe_key for j in change_set.unchanged})))
            outside = [j for j in to_run if j.recipe_key not in keys]
            if outside:
                click.echo(f"note: {count_of(len(outside), 'changed job')} of other config keys than --config-keys "
                           "left out",
                           err=True)
            to_run = [j for j in to_run if j.recipe_key in keys]
        only_jobs = [j.id for j in to_run]
        grown = [c for c in change_set.concs if c.to_run is not None]
        kind = " eval" if evals.evals_only or evals.all_evals else ""
        click.echo(f"{changed}: {len(change_set.added)} added, {len(change_set.changed)} changed, "
                   f"{len(change_set.removed)} removed, {change_set.concs_text()}"
                   f"{len(change_set.unchanged)} unchanged{kind} {noun(len(change_set.unchanged), 'job')}"
                   + (f"; {count_of(len(grown), 'multi-node job')} "
                      f"{noun(len(grown), 'runs only its', 'run only their')} added concurrencies"
                      if grown else ""),
                   err=True)
        if not only_jobs:
            # nothing to launch, but the recipes are still checked: a change to the runner file or the catalog alters
            # no job and can still make a recipe invalid, and a run that says "nothing to run" must not pass it
            from llmsweep.policy import validate_files

            errors = [f for f in validate_files(list(files), config_keys=list(config_keys) or None,
                                                runner_config=runner_config, simulate=simulate,
                                                runner_labels=runner_labels).findings
                      if f.is_error]
            for f in errors:
                click.echo(f.render(), err=True)
            if errors:
                click.echo(f"no job changed, but the recipes have {count_of(len(errors), 'error')}: nothing run",
                           err=True)
                return 2
            click.echo(f"no{kind} job changed: nothing to run", err=True)
            if as_json:  # stdout is the end table as JSON, an empty one here: a `| jq` after it reads no run
                from llmsweep.execute.pipeline import RunOutcome

                click.echo(_end_document(RunOutcome(run_dir=out, run_id="", outcomes=[]), [], ran=False))
            return 0
    settings = LifecycleSettings.model_validate({
        "resume": resume, "fail_fast": fail_fast, "startup_timeout_s": startup_timeout,
        "request_timeout_s": request_timeout, "client_workers": client_workers,
        "readback": {} if al_tolerance is None else {"al_tolerance": al_tolerance},
        "power": {"require": require_power, "backend": power_backend},
        "eval": eval_settings,
    })
    request = RunRequest(
        files=list(files), config_keys=list(config_keys) or None, runner_config=runner_config,
        runner_labels=list(runner_labels), executor=executor,
        executor_options=parse_executor_options(executor_options), simulate=simulate, live=live, traces=traces, out=out,
        store=store, report=not no_report, force=force, repeats=repeats, settings=settings, only_jobs=only_jobs,
        only_jobs_typed=changed is None, reuse=reuse, evals=evals, eval_flags=eval_flags,
    )
    with use_progress(progress_for()) as progress:
        try:
            outcome = run_sweep(request, event=progress.line)
        except KeyboardInterrupt:
            # No end table on stdout for a run a signal stopped: a table of part of it would read as the whole run's
            # to a script that reads stdout without the exit status (130, 143); what finished is stored, and said so
            if as_json:
                click.echo(f"{_JSON}: no end table for an interrupted run; `llmsweep results list {_RUN_ID} {out} "
                           f"{_JSON}` lists the jobs that finished", err=True)
            raise
    rows = outcome_rows(outcome)
    # A policy error is bad input (2, as `validate`) where it left nothing to run: every job refused, none launched.
    # Beside jobs that ran (their results stored, the dashboard written) the run partly ran: 1, as for a job that
    # failed or could not run, so a script tells "nothing ran, fix the input" (2) from "partly ran" (1).
    nothing_ran = all(o.status == "refused" for o in outcome.outcomes)
    status = 0 if outcome.ok else 2 if nothing_ran and any(f.is_error for f in outcome.findings) else 1
    if as_json:
        click.echo(_end_document(outcome, rows))
        click.echo(outcome.completeness(), err=True)
        return status
    _print_rows(rows, {o.job_id: o.exp_name for o in outcome.outcomes})
    click.echo(outcome.completeness(), err=True)
    if outcome.report_path is not None:
        click.echo(str(outcome.report_path))
    else:
        click.echo(str(outcome.run_dir))
    return status


def _reused_summaries(outcome: RunOutcome) -> dict[str, Any]:
    """The stored summaries `run --reuse` stood this invocation's skipped jobs on (job id -> Summary), so their rows
    show the figures they reuse, as a `--resume` skip shows its own; read from the store in one batched query
    (`Store.reused_points`); none when nothing was reused or the store cannot be read."""
    refs = {o.job_id: outcome.reused[o.job_id] for o in outcome.outcomes
            if o.reused and o.job_id in outcome.reused}
    if not refs or outcome.store_path is None:
        return {}
    from llmsweep.errors import LlmsweepError
    from llmsweep.results.store import Store

    try:
        with Store(outcome.store_path, readonly=True) as store:
            points = store.reused_points(refs, by=outcome.run_id)
    except LlmsweepError:
        return {}
    return {job: p.summary for job, p in points.items() if p.summary is not None}


def outcome_rows(outcome: RunOutcome) -> list[dict[str, Any]]:
    """One row per expected job, a point's row as `predict --json` gives its points too (`results.extract.point_row`:
    its concurrency, verdict and the reason for it, the warnings its outcome carries, where its figures come from,
    every metric of the metric table, its power's source and its eval), beside what only a run has: whether
    `--resume` or `--reuse` kept it, its eval's failure, its time and its summary file. A job `--resume` did not run
    again shows its summary's verdict and reasons, `resumed: true`; one `--reuse` did not run shows the stored
    result's verdict and figures, `reused: true`, its reason the result it stands on."""
    from llmsweep.errors import ResultError
    from llmsweep.execute.lifecycle import verdict_reasons
    from llmsweep.metrics.model import Summary
    from llmsweep.results.extract import point_row

    rows = []
    reused = _reused_summaries(outcome)
    for o in outcome.outcomes:
        summary: Summary | None = reused.get(o.job_id)
        if o.summary_path:
            try:
                summary = Summary.load(o.summary_path)
            except ResultError:
                summary = None
        verdict, reasons = o.status, o.reasons
        if o.resumed and summary is not None:  # its verdict is the summary's it was skipped for, read back from it
            verdict, reasons = summary.validity.verdict, verdict_reasons(summary)
        elif o.reused and summary is not None:  # the stored result's verdict; the reason names that result
            verdict = summary.validity.verdict
        rows.append({
            **point_row(o.job_id, outcome.concurrency.get(o.job_id), verdict, reasons[0] if reasons else None,
                        o.warnings, summary),
            # a run's alone: a prediction is never resumed nor reused, runs no eval and times no job; the summary's
            # file (`summary_file`: `summary`, in predict's rows and every other command's JSON, is the document)
            "resumed": o.resumed,
            "reused": o.reused,
            "eval_failure": o.eval_failure,  # a run-eval row's eval that did not pass, beside the verdict that stands
            "seconds": o.seconds,
            "summary_file": o.summary_path,
        })
    return rows


RUN_TABLE_COLUMNS = ("tput_per_gpu", "output_tput_per_gpu", "p50_ttft", "p50_tpot", "p50_intvty", "tokens_per_joule",
                     "avg_power_w")
"""The metric table's columns (`HOT_BY_NAME`) the end-of-run table shows; its rows (`run --json`) hold every one."""


def _eval_cell(row: dict[str, Any]) -> str:
    """`gsm8k 0.8123 valid`: the task, headline score and threshold verdict of the job's eval ('' when none)."""
    if row["eval_task"] is None:
        return ""
    score = "-" if row["eval_score"] is None else f"{row['eval_score']:.4f}"
    return f"{row['eval_task']} {score} {row['eval_verdict']}"



def _end_document(outcome: RunOutcome, rows: list[dict[str, Any]], *, ran: bool = True) -> str:
    """`run --json`'s stdout: the end table's rows with the run they belong to (`ran=False`: nothing was run, as
    `--changed` with no change says it: no run id, folder or report)."""
    return json.dumps({"run_id": outcome.run_id if ran else None, "run_dir": str(outcome.run_dir) if ran else None,
                       "report": str(outcome.report_path) if outcome.report_path else None,
                       "ok": outcome.ok, "counts": outcome.counts(), "jobs": rows}, indent=2)

def _print_rows(rows: list[dict[str, Any]], exp_names: dict[str, str] | None = None, *,
                console: Console | None = None) -> None:
    """The end-of-run table; its metric columns are headed as the metric table names them. Laid out for the terminal
    by `cli.tables.fit_tables`: numbers whole, job ids shortened to their experiment name and hash where whole ones do
    not fit, the columns that do not fit beside the job in a continuation table."""
    from llmsweep.cli.tables import Column, job_labels, plain, print_tables
    from llmsweep.metrics.registry import HOT_BY_NAME

    def cell(r: dict[str, Any], column: str) -> str:  # a row holds the column under its name, in its stored unit;
        # a power figure the simulator's power model gave is marked so, as `results show` and the dashboard mark it
        return HOT_BY_NAME[column].shown(r[column], r.get("power_source"))

    from llmsweep.cli.verdicts import Notes, verdict_cell

    columns = [
        Column("job", kind="key", justify="left"), Column("conc"), Column("verdict", justify="left"),
        Column("reason", kind="text", justify="left", min_width=24, drop_empty=True), Column("ok/failed"),
        *(Column(HOT_BY_NAME[c].header) for c in RUN_TABLE_COLUMNS),
        Column("eval", kind="text", justify="left", drop_empty=True),
    ]
    cells = []
    notes = Notes()  # each warning said once under the table, its number beside the verdicts it qualifies
    for r in rows:
        ok = f"{r['requests_ok']}/{r['requests_failed']}" if r["requests_ok"] is not None else "-"
        verdict = verdict_cell(r["verdict"], kept="resumed" if r["resumed"] else "reused" if r["reused"] else None,
                               notes=notes.number(r["warnings"]))
        cells.append([plain(r["job"]), str(r["conc"] or "-"), verdict,
                      plain(r["reason"] or ""), ok, *(cell(r, c) for c in RUN_TABLE_COLUMNS),
                      plain(_eval_cell(r))])
    short = [plain(label) for label in job_labels([r["job"] for r in rows], exp_names)]
    print_tables(run_title(rows), columns, cells, short_keys=short, caption=plain("\n".join(notes.lines())) or None,
                 console=console)


def run_title(rows: list[dict[str, Any]]) -> str:
    """`llmsweep run — simulated, virtual time`: what the rows' figures are, as their summaries say (`source`,
    `clock`), each kind once in the order met; plain `llmsweep run` when no row has a summary."""
    kinds = dict.fromkeys((r["source"], r["clock"]) for r in rows if r["source"] is not None)
    said = [source_words(source, clock) for source, clock in kinds]
    return "llmsweep run" + (f" — {'; '.join(said)}" if said else "")
