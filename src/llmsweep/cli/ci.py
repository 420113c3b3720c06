"""`llmsweep ci …`: the GitHub Actions workflow that sweeps a labelled pull request, and the steps it calls."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from llmsweep.cli.options import (
    PathValue,
    option,
    out_option,
    recipe_files_argument,
    runner_config_option,
)
from llmsweep.errors import ConfigError
from llmsweep.words import count_of, noun
from llmsweep.writable import refuse_unwritable

if TYPE_CHECKING:
    from llmsweep.catalog.fleet import FleetCatalog
    from llmsweep.plan import Job
    from llmsweep.plan.matrix import EvalOptions

GITHUB_MATRIX_LIMIT = 256
"""GitHub Actions runs at most this many jobs of one matrix per workflow run."""


@click.group("ci")
def ci() -> None:
    """Continuous integration: write the GitHub Actions workflow, and the steps it runs."""


@ci.command("github")
@recipe_files_argument()
@out_option("Workflow file to write (written anew each time: it is generated from the recipes).",
            type=PathValue(dir_okay=False, path_type=Path), default=Path(".github/workflows/llmsweep-sweep.yml"),
            show_default=True)
@click.option("--source", type=click.Choice(["matrix", "changes"]), default="matrix", show_default=True,
              help="`matrix`: every job of the recipes; `changes`: on a pull request, only the jobs it added or "
              "changed (`llmsweep changes BASE..HEAD`); on a push, those it changed since the commit before it "
              "(every job after a branch's first push or a force-push); on a manual run, every job.")
@option("baseline", help="Stored run the collect job compares the sweep with (between-run bands); no comparison "
        "without it.")
@click.option("--ci-store", "ci_store", type=PathValue(path_type=str), default=None, metavar="PATH",
              help="Results store path on the collect runner (LLMSWEEP_STORE in the workflow); it must hold the "
              "baseline and persist between runs, e.g. a shared disk of a self-hosted runner.")
@click.option("--collect-runner", default="ubuntu-latest", show_default=True, help="runs-on of the collect job.")
@click.option("--install", default=None, metavar="CMD",
              help="The shell command each job installs llmsweep with, at the root of the repository's checkout "
              "(e.g. `pip install 'git+https://…/llmsweep@<tag>'`). Default: `pip install .` in llmsweep's own "
              "repository, else `pip install 'llmsweep==<this version>'`.")
@option("runner_labels")
@option("allowance_minutes")
@runner_config_option()
def github(files: tuple[Path, ...], out: Path, source: str, baseline: str | None, ci_store: str | None,
           collect_runner: str, install: str | None, runner_labels: tuple[str, ...], allowance_minutes: int,
           runner_config: Path | None) -> None:
    """Write a GitHub Actions workflow that sweeps FILES on a pull request labelled `full-sweep-enabled` or
    `full-sweep-fail-fast` (the latter cancels the sweep at the first failure), and on every push to main. With it,
    InferenceX's modifier labels change what runs: `evals-only` runs only the eval jobs, `all-evals` an eval for
    every 8k1k fixed-seq-len and agentic row besides the throughput jobs (both: those evals only). Adding or removing
    one of those labels (a modifier only next to a sweep label) restarts a pull request's sweep; any other label
    leaves it running.

    Jobs run on `[self-hosted, <runner label>]` (labels checked against the fleet file), highest priority first;
    a job that runs an accuracy eval (a `run-eval` row) first installs lm-eval in a virtual environment of its own;
    each one's `llmsweep run` times out after the longest it can take while the run's own limits hold (its server's
    start-up deadline, its points' windows or request counts at the request timeout, its eval's limit) plus
    --allowance-minutes (a failed job, collected as such; the job itself that allowance later), and uploads
    `bmk_<job id>`; a final job merges them, stores, writes the dashboard and posts the verdict against --baseline
    with the success rate (not for a cancelled workflow run: a newer push's sweep superseded it, or it was stopped by
    hand).
    """
    from llmsweep.catalog.fleet import default_fleet, load_fleet
    from llmsweep.changes.github import (
        dump_workflow,
        install_command,
        repo_path,
        timeout_minutes,
        unbounded_note,
        workflow,
        workflow_root,
    )
    from llmsweep.plan import jobs_from_files

    refuse_unwritable(out, folder=False)
    if baseline is not None and ci_store is None and not Path(baseline).is_dir():
        # a stored run id: the collect job's store must hold it, and the default one is an empty, ephemeral runner's
        raise click.UsageError(f"--baseline {baseline} is a stored run, and the workflow's collect job would read it "
                               "from an empty store (its runner keeps nothing between runs): give --ci-store PATH, "
                               "a store on the collect runner that holds the baseline and persists")
    # The workflow's steps run at the root of the repository's checkout: they name the files relative to it, never as
    # typed here (`../x.yaml`, an absolute path of this machine); a file outside the repository is refused.
    root = workflow_root(out)
    in_repo = [repo_path(f, root, "recipe path") for f in files]
    fleet_in_repo = repo_path(runner_config, root, "runner file") if runner_config is not None else None

    fleet = load_fleet(runner_config) if runner_config is not None else default_fleet()
    jobs = jobs_from_files(list(files), runner_config=runner_config)
    if not jobs:  # a workflow that sweeps nothing on every labelled pull request: refused, as `run` refuses it
        _no_jobs(files)
    # every runner label known before a workflow names it; and a plan GitHub cannot run as one matrix is refused here,
    # not on every push to main or on the pull request labelled so, when the workflow's setup job would fail on it:
    # every plan the labels can select (`all-evals` adds an eval-only job for rows beside the throughput jobs)
    _check_label_plans(files, fleet, runner_config, runner_labels)
    _say_refusals(jobs, files, runner_config, runner_labels=runner_labels)
    if (note := unbounded_note(jobs)) is not None:
        click.echo(f"note: {note}", err=True)
    if install is not None and not install.strip():
        raise click.UsageError("--install is empty: the workflow's jobs would run without llmsweep installed; give the "
                               "command that installs it, or leave --install out")
    # the jobs run in the checkout of the repository the workflow is in: llmsweep only in llmsweep's own
    install = install if install is not None else install_command(root)
    doc = workflow(in_repo, source="changes" if source == "changes" else "matrix", baseline=baseline,
                   runner_config=fleet_in_repo, store=ci_store, collect_runner=collect_runner,
                   runner_labels=runner_labels, install=install, allowance_minutes=allowance_minutes)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump_workflow(doc), encoding="utf-8")
    minutes = sorted(timeout_minutes(j, allowance_minutes)[0] for j in jobs)
    click.echo(f"wrote {out}: {count_of(len(jobs), 'job')} at most, runner "
               f"{noun(len({j.runner for j in jobs}), 'label')} {', '.join(sorted({j.runner for j in jobs}))}; recipe "
               f"paths relative to {root}; each job installs "
               f"llmsweep with `{install}` (--install CMD to change it), and its run times out (a failed job) after "
               f"{minutes[0]}{'' if minutes[0] == minutes[-1] else f'–{minutes[-1]}'} minutes (the longest it can "
               f"take, plus --allowance-minutes {allowance_minutes}; the job itself that allowance later)", err=True)
    click.echo(str(out))


def _no_jobs(files: Sequence[Path]) -> NoReturn:
    raise ConfigError(f"{', '.join(map(str, files))}: the recipes expand to no job",
                      fix="pass recipe YAML files (recipe keys mapping to image, model, scenarios, …) or directories "
                          "of them; `llmsweep validate FILES` says what each holds")


def _check_matrix_size(n: int, labels: Sequence[str] = ()) -> None:
    """Refuse a matrix of `n` jobs GitHub would not run; `labels`: the pull-request modifier labels that plan it."""
    if n > GITHUB_MATRIX_LIMIT:
        under = f" under the pull-request label{'s' if len(labels) > 1 else ''} {' and '.join(labels)}" \
            if labels else ""
        raise ConfigError(f"{n} jobs in one matrix{under}: GitHub runs at most {GITHUB_MATRIX_LIMIT} jobs of a "
                          "matrix, and the workflow would fail",
                          fix="split the sweep (a workflow per recipe file or fleet label) until each has at most "
                              f"{GITHUB_MATRIX_LIMIT} jobs")


def _check_label_plans(files: Sequence[Path], fleet: FleetCatalog, runner_config: Path | None,
                       runner_labels: Sequence[str]) -> None:
    """Check the matrix of every plan the workflow's labels can select (`changes.github.label_plans`): the plain one
    (a push, a pull request with a sweep label alone), `evals-only`, `all-evals` and both; each as `ci matrix` plans
    it on the runner. The matrix of a pull request's changed jobs (`--source changes`) is part of a push's."""
    from llmsweep.changes.github import EVAL_LABELS, matrix_entries, sweep_jobs

    for evals_only, all_evals in ((False, False), (True, False), (False, True), (True, True)):
        jobs, plans = sweep_jobs(files, runner_config=runner_config, evals_only=evals_only, all_evals=all_evals)
        labels = [label for label, on in zip(EVAL_LABELS, (evals_only, all_evals), strict=True) if on]
        _check_matrix_size(len(matrix_entries(jobs, fleet, runner_labels=runner_labels, plans=plans)), labels)


def _say_refusals(jobs: list[Job], files: Sequence[Path], runner_config: Path | None,
                  parents: Mapping[str, str] | None = None, evals: Mapping[str, EvalOptions] | None = None, *,
                  runner_labels: Sequence[str] = ()) -> None:
    """Say on stderr which jobs the runner's `llmsweep run` will refuse whatever it has installed, each reason once
    (it carries its fix) with how many jobs it stops (a multi-node job's points counted apart, as `run` runs them):
    they have entries, so they are not dropped in silence, and a sweep whose every job is refused is seen before any
    runner is held. `parents`: a concurrency slice's id -> the job it was cut from (`changes.github.sweep_jobs`);
    `evals`: the eval flags each job id is planned under (`changes.github.label_plans`); `runner_labels`: the
    labels vouched for (`--runner-label`), which the workflow passes on to `run`."""
    from llmsweep.changes.github import runner_refusals
    from llmsweep.plan.point import one_point_per_job

    total = len(one_point_per_job(jobs))
    counted = count_of(total, "job") + (" (a multi-node job's points counted apart)" if total != len(jobs) else "")
    for reason, refused in runner_refusals(jobs, files, runner_config, parents=parents, evals=evals,
                                             runner_labels=runner_labels).items():
        click.echo(f"note: {len(refused)} of the {counted} will be refused by `llmsweep run` on the runner "
                   f"(e.g. {refused[0].id}): {reason}", err=True)


@ci.command("matrix")
@recipe_files_argument()
@option("changed")
@option("evals_only", help="As the pull-request label `evals-only`: only the eval jobs, each planned as `run "
        "--evals-only` plans it (as `run --all-evals` with --all-evals).")
@option("all_evals", help="As the pull-request label `all-evals`: an eval-only job for every 8k1k fixed-seq-len and "
        "agentic row (planned as `run --all-evals`), the throughput jobs kept (planned as `run --no-evals`) unless "
        "--evals-only.")
@click.option("--event", default=None, help="The triggering event (`push` adds to every priority).")
@click.option("--label", "labels", multiple=True, help="A pull-request label that moves priorities (repeatable).")
@click.option("--github-output", type=PathValue(dir_okay=False, path_type=Path), default=None,
              help="Append matrix=, jobs= and count= for a workflow step's outputs to this file ($GITHUB_OUTPUT).")
@option("runner_labels")
@option("allowance_minutes")
@runner_config_option()
def matrix(files: tuple[Path, ...], changed: str | None, evals_only: bool, all_evals: bool, event: str | None,
           labels: tuple[str, ...], github_output: Path | None, runner_labels: tuple[str, ...],
           allowance_minutes: int, runner_config: Path | None) -> None:
    """The sweep's matrix as JSON (`{"include": [{job, runner, recipe, priority, eval, plan, run_timeout, timeout}]}`),
    highest priority first: every job of the plan, a job that runs an accuracy eval too (`eval: true`: the workflow
    installs lm-eval for it); `plan` is the `llmsweep run` flag that plans the job's id (--evals-only, --all-evals,
    --no-evals, or empty), which the workflow's runner job passes on; `run_timeout` the timeout-minutes of its runner
    job's `run` step (the longest its run can take while the run's own limits hold, plus --allowance-minutes: past
    it the step fails), `timeout` the runner job's own (that allowance later). Jobs the runner's `llmsweep run` will
    refuse whatever it has (e.g. no `serve`, a real engine's disaggregated roles) keep their entry and are said on
    stderr with the reason."""
    from llmsweep.catalog.fleet import default_fleet, load_fleet
    from llmsweep.changes.github import EVAL_LABELS, label_plans, matrix_entries, sweep_jobs, unbounded_note

    if github_output is not None:  # appended to after the plan: checked before it
        refuse_unwritable(github_output, folder=False, option_name="--github-output", makes_parents=False)

    fleet = load_fleet(runner_config) if runner_config is not None else default_fleet()
    parents: dict[str, str] = {}
    notes: list[str] = []
    jobs, plans = sweep_jobs(files, runner_config=runner_config, changed=changed, evals_only=evals_only,
                             all_evals=all_evals, parents=parents, notes=notes)
    for note in notes:
        click.echo(f"note: {note}", err=True)
    if not jobs and changed is None and not (evals_only or all_evals):  # no change set narrowed it: no recipe at all
        _no_jobs(files)
    # Every job gets an entry, its eval included: a `run-eval` row runs its point and then its eval on the same server,
    # and an entry that carries an eval (`eval: true`) has the workflow install lm-eval before it runs. A job the
    # runner's `run` will refuse anyway keeps its entry (its refusal is its outcome in the collected run) and is said
    # here, with the reason and its fix.
    include = matrix_entries(jobs, fleet, event=event, labels=labels, runner_labels=runner_labels, plans=plans,
                             allowance_minutes=allowance_minutes)
    flags = dict(label_plans(evals_only=evals_only, all_evals=all_evals))
    _say_refusals(jobs, files, runner_config, parents, {job: flags[flag] for job, flag in plans.items()},
                  runner_labels=runner_labels)
    if (unbounded := unbounded_note(jobs)) is not None:
        click.echo(f"note: {unbounded}", err=True)
    _check_matrix_size(len(include), [label for label, on in zip(EVAL_LABELS, (evals_only, all_evals), strict=True)
                                      if on])
    if not include and (evals_only or all_evals):  # the workflow then skips the sweep: never silently green
        click.echo(f"warning: {'--evals-only' if evals_only else '--all-evals'} (the pull request's "
                   f"{'evals-only' if evals_only else 'all-evals'} label) selects no job: no row of these recipes "
                   "runs an eval (an 8k1k row at a concurrency of 16 or more; under all-evals, any 8k1k or agentic "
                   "row), so nothing is swept", err=True)
    doc = {"include": include}
    if github_output is not None:
        with github_output.open("a", encoding="utf-8") as fh:
            fh.write(f"matrix={json.dumps(doc, separators=(',', ':'))}\n")
            fh.write(f"jobs={json.dumps([e['job'] for e in include], separators=(',', ':'))}\n")
            fh.write(f"count={len(include)}\n")
    click.echo(json.dumps(doc, indent=2))


def _expected_jobs(name: str) -> list[str]:
    """The job ids the environment variable NAME holds (`--expected-env`): a JSON list of strings. Unset, empty or
    anything else is refused: a sweep collected against no expected job would pass with every job missing."""
    fix = (f"set ${name} to the JSON list of the sweep's job ids (the setup job's `jobs` output, "
           'e.g. ["job-a","job-b"])')
    raw = os.environ.get(name, "")
    if not raw.strip():
        raise ConfigError(f"--expected-env names ${name}, which is {'empty' if name in os.environ else 'not set'}: "
                          "the jobs the sweep expected are unknown", fix=fix)
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"${name} is not a JSON list of job ids: {exc}", fix=fix) from None
    if not isinstance(value, list) or not all(isinstance(j, str) and j for j in value):
        raise ConfigError(f"${name} must hold a JSON list of job ids (non-empty strings), not {raw[:80]!r}", fix=fix)
    return value


@ci.command("collect")
@click.argument("artifacts", type=PathValue(file_okay=False, path_type=Path))
@out_option("Run folder to write (new or empty).", type=PathValue(file_okay=False, path_type=Path), required=True)
@option("run_id", required=True, help="Id of the merged run (e.g. gh-<run id>-<attempt>).")
@click.option("--expected-env", default=None, metavar="NAME",
              help="Environment variable holding the JSON list of every job id the sweep expected.")
def collect_cmd(artifacts: Path, out: Path, run_id: str, expected_env: str | None) -> int:
    """Merge the per-job run folders of a CI sweep into one run folder. A job without a result is recorded with its
    reason (refused, failed, invalid; no artifact, or an artifact whose run.json cannot be read; in a fail-fast sweep,
    a job cut short: `cancelled by fail-fast after JOB failed`) and said on stderr;
    the exit status is then 1, as `run`'s for a job without a result (the run folder is written either way)."""
    from llmsweep.changes.github import collect
    from llmsweep.errors import ConfigError

    refuse_unwritable(out, folder=True)
    expected = _expected_jobs(expected_env) if expected_env is not None else []
    if not expected and not (artifacts.is_dir() and any(artifacts.iterdir())):
        # nothing to collect and nothing expected: an empty run folder would read as a sweep that passed
        raise ConfigError(f"{artifacts} {'holds no' if artifacts.is_dir() else 'does not exist, so holds no'} job's "
                          "artifact, and no job was expected",
                          fix="point at the folder the sweep jobs' artifacts were downloaded into "
                              "(actions/download-artifact), and pass --expected-env with the setup job's job ids")
    meta = collect(artifacts, out, run_id=run_id, expected=expected)
    from llmsweep.metrics.model import SUCCESS_STATUSES

    missed = [o for o in meta["outcomes"] if o["status"] not in SUCCESS_STATUSES]
    click.echo(f"collected {count_of(len(meta['outcomes']), 'job')} into {out} "
               f"({len(meta['outcomes']) - len(missed)} with a result)", err=True)
    for o in missed:
        reasons = o.get("reasons") or ["no reason recorded"]
        click.echo(f"  {o['status']}: {o['job_id']}: {reasons[0]}", err=True)
    return 1 if missed else 0
