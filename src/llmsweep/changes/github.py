"""`llmsweep ci github`: a GitHub Actions workflow that sweeps a labelled pull request.

The workflow's shape follows InferenceX's `run-sweep.yml` (core spec §7.1/§7.2), reduced to its parts llmsweep owns:

- `setup` decides from the labels whether to run at all (`full-sweep-enabled`, `full-sweep-fail-fast`; a push to
  the default branch always runs) and whether a failure cancels the rest (`full-sweep-fail-fast`), and computes the
  matrix at run time with `llmsweep ci matrix`: every job of the recipes, or (`source="changes"`) only the jobs the
  pull request added or changed (`llmsweep changes BASE..HEAD`), or a push to main changed since the commit before
  it (every job after a branch's first push or a force-push, the log saying so), ordered by the priority score
  (`changes.priority`);
  each entry names its runner label, checked against the fleet file when the workflow is written;
- `sweep` runs one job per matrix entry on `[self-hosted, <runner label>]` with `llmsweep run --job` and
  uploads the job's run folder as the artifact `bmk_<job id>`; an entry that carries an accuracy eval (a `run-eval`
  row: its throughput point and its eval on the same server; or an eval-only row) first installs the harness,
  `lm-eval[api]` at the version llmsweep pins, into a virtual environment of its own and names it in
  `LLMSWEEP_LM_EVAL` (InferenceX's CI runs these points and their evals; a throughput entry installs nothing); each
  runner job's `run` step times out after the longest its `run` can take while the run's own limits hold (its
  server's start-up deadline, its points' windows or request counts at the request timeout, its eval's limit:
  `execute.bound`) plus `--allowance-minutes` for what those limits do not bound (an image's pull), so a hung
  benchmark frees its GPU runner then, not after GitHub's six hours (:func:`timeout_minutes`); a step past its
  timeout fails, so the timed-out job is collected as failed, where a job past its own `timeout-minutes` ends
  cancelled and may not be (the job's own is later, a backstop: :func:`job_timeout_minutes`);
- InferenceX's modifier labels (core spec §3.3, §7.2) change what a labelled pull request sweeps: `evals-only` runs
  only the eval jobs (`run --evals-only`'s plan), `all-evals` adds an eval-only job for every 8k1k fixed-seq-len and
  agentic row and keeps the throughput jobs (planned as `run --no-evals`, their evals being those eval-only jobs);
  both together run the evals of `all-evals` alone. `ci matrix` computes the matrix with the same flags and names in
  each entry the `llmsweep run` flag that plans its job id (`plan`), which the entry's runner job passes on. A push
  carries no labels: the plain sweep;
- a pull request's sweep restarts (one concurrency group per pull request, the running sweep cancelled) on a push
  and when one of those labels is added or removed (a modifier label only while a sweep label is on the pull
  request); any other label event runs nothing, in a group of its own;
- `collect` merges the artifacts into one run (`llmsweep ci collect`), stores it, writes the dashboard (an
  artifact), compares it with the baseline run in the store using between-run bands (`llmsweep compare --baseline
  --format markdown`) and posts that verdict with the sweep's success rate as the job summary; a cancelled workflow
  run (superseded by a newer push's, or stopped by hand) is not collected: its collect job is skipped, so it is never
  stored or compared as a sweep that finished with its cancelled jobs failed. A job that timed out is no cancel of
  the run: its `run` step failed (above), and it is collected as the failure it is. Nor is fail-fast's cancel of the
  matrix's other jobs after a failure: that sweep is collected, its unfinished jobs failed with the reason, also when
  the run is cancelled after the failure (:data:`COLLECT_WHEN` says why it does not rest on `!cancelled()` alone).
  The reason names the cause: each sweep job records in its artifact how its runner job ended and whether fail-fast
  was on (:data:`RUNNER_JOB_FILE`), and collect says of a job cancelled after the first failure, or left without an
  artifact, `cancelled by fail-fast after JOB failed`.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import yaml

from llmsweep.catalog.fleet import FleetCatalog
from llmsweep.changes.priority import by_priority
from llmsweep.client.files import RUN_FILE
from llmsweep.errors import ConfigError
from llmsweep.execute.bound import DEFAULT_ALLOWANCE_MINUTES
from llmsweep.option_spellings import flag as _flag
from llmsweep.plan import Job
from llmsweep.plan.matrix import EvalOptions
from llmsweep.plan.point import CONC_MARK
from llmsweep.words import count_of, noun

Source = Literal["matrix", "changes"]
RUN_LABELS = ("full-sweep-enabled", "full-sweep-fail-fast")
FAIL_FAST_LABEL = "full-sweep-fail-fast"
SWEEP_LABELS = RUN_LABELS
"""Labels whose adding or removal changes what the sweep runs (whether it runs, and fail-fast). The priority labels
(`changes.priority`) only order a queue the workflow does not pass them to, so they restart nothing."""
EVALS_ONLY_LABEL = "evals-only"
ALL_EVALS_LABEL = "all-evals"
EVAL_LABELS = (EVALS_ONLY_LABEL, ALL_EVALS_LABEL)
"""InferenceX's modifier labels (core spec §7.2): they change what a sweep runs (:func:`label_plans`), so adding or
removing one restarts the sweep, but only while one of `SWEEP_LABELS` is on the pull request: alone they run
nothing."""
ARTIFACT_PREFIX = "bmk_"
RUNNER_JOB_FILE = "runner_job.json"
"""What a sweep job records in its artifact of how its runner job ended, in a step that runs whatever happened
before it (`always()`): `status` (GitHub's `job.status` then: `success`, `failure` or `cancelled`), `fail_fast`
(`"true"` when the sweep ran under `full-sweep-fail-fast`), `ended` (UTC to the microsecond,
`2026-01-01T00:00:00.000000Z`), and `elapsed_s` and `timeout_minutes` (how long the runner job had run, from its first
step, and its own `timeout-minutes`: GitHub says `cancelled` of a job its timeout ended as of one fail-fast ended).
`ci collect` reads it to say that a job without a result was cancelled by fail-fast after the job that failed first,
rather than that it had no artifact (:func:`collect`)."""
TIMEOUT_SLACK_S = 60
"""A cancelled runner job that had run within this much of its `timeout-minutes` is taken to have been ended by its
timeout (its steps' set-up and the record's own step run after the clock GitHub reads), not by fail-fast."""
NOT_CANCELLED = "!cancelled()"
"""The collect job's status check apart from fail-fast (:data:`COLLECT_WHEN`): GitHub's `always()` is true in a
cancelled workflow run too."""
CUT_BY_FAIL_FAST = "(needs.sweep.result == 'failure' && needs.setup.outputs.fail-fast == 'true')"
"""A `full-sweep-fail-fast` sweep that a failed job stopped: GitHub cancelled the matrix's other jobs
(`strategy.fail-fast`), and the sweep's result is what it measured up to then."""
COLLECT_WHEN = f"({NOT_CANCELLED} || {CUT_BY_FAIL_FAST})"
"""The collect job's status check: the workflow run was not cancelled, or fail-fast had already stopped the sweep.

GitHub documents `cancelled()` as "the workflow was canceled", and its docs recommend `!cancelled()` to run a job
"regardless of its success or failure"; what they do not say is whether it stays false in a job whose needed matrix
lost jobs to fail-fast's cancels (a GitHub-compatible server, ChristopherHX/runner.server, once evaluated it as "any
job of the run cancelled"). The second operand does not depend on it: a fail-fast sweep in which a job failed is
collected either way. It also holds when the run is cancelled after that failure (superseded by a push made after
seeing it): the sweep had already ended at its first failure, and its collect job is not cut off half-way (it may
be storing the run). A sweep cancelled before any job failed is not collected, fail-fast or not.

Every step of the collect job carries it too (:func:`collect_steps`), not the job alone: a step without an `if` gets
GitHub's default `success()`, which reads the job's own status, cancelled once the run is (actions/runner
`StepsRunner.RunAsync` marks the job cancelled when its cancel comes, before or during a step, and re-tests a running
step's condition then). So in a run cancelled after fail-fast's failure, the job this condition starts would skip
every step — nothing merged, stored or compared, and no failed step to say so; and under the second reading of
`cancelled()`, a step's `!cancelled()` would skip as the job's would have."""
COLLECTED = "${{ " + COLLECT_WHEN + " && hashFiles('sweep/run.json') != '' }}"
"""The collect job's steps after `ci collect`: they run when it wrote the merged run, though it exits 1 for a job
without a result, under the collect job's own condition (:data:`COLLECT_WHEN`): not after a cancel of a sweep that
fail-fast had not stopped, and in one it had."""


def label_plans(*, evals_only: bool = False, all_evals: bool = False) -> list[tuple[str, EvalOptions]]:
    """The plans a sweep under InferenceX's modifier labels runs, each with the `llmsweep run` flag that plans its
    job ids (`""`: none), as InferenceX's `process_changelog.py` selects them (core spec §3.3, §7.2):

    - no modifier: the plain plan (a `run-eval` row runs its point, then its eval on the same server);
    - `evals-only`: the eval rows alone, as eval-only jobs (`run --evals-only`);
    - `all-evals`: the throughput jobs (`run --no-evals`) and an eval-only job for every 8k1k fixed-seq-len and
      agentic row (`run --all-evals`): evals expanded, throughput kept;
    - both: throughput dropped, evals expanded: `run --all-evals` alone (whose plan `--evals-only` does not change).
    """
    if not (evals_only or all_evals):
        return [("", EvalOptions())]
    evals = (_flag("all_evals") if all_evals else _flag("evals_only"),
             EvalOptions(evals_only=True, all_evals=all_evals))
    return [evals] if evals_only else [(_flag("no_evals"), EvalOptions(no_evals=True)), evals]


def sweep_jobs(files: Sequence[Path], *, runner_config: Path | None = None, changed: str | None = None,
               evals_only: bool = False, all_evals: bool = False,
               parents: dict[str, str] | None = None,
               notes: list[str] | None = None) -> tuple[list[Job], dict[str, str]]:
    """The jobs `ci matrix` gives entries (every job of the plans of :func:`label_plans`; with `changed`, the jobs
    `llmsweep changes CHANGED` finds, both sides planned the same way) and, for each job id, the `run` flag that
    plans it. `parents`, when given, gets each concurrency slice's id -> the id of the planned job it was cut from;
    `notes`, the change sets' notes (`ChangeSet.notes`: a base recipe that does not load), each once.

    Every changed job must be in the plan the runners read (`run FILES --job ID`): one silently dropped is never
    measured. A multi-node job whose list alone grew runs its added concurrencies, a slice of it."""
    from llmsweep.plan import jobs_from_files

    jobs: list[Job] = []
    plans: dict[str, str] = {}
    for flag, evals in label_plans(evals_only=evals_only, all_evals=all_evals):
        planned = jobs_from_files(list(files), runner_config=runner_config, evals=evals)
        if changed:
            from llmsweep.changes import changes_between
            from llmsweep.plan.slices import resolve_job_ids

            change_set = changes_between(changed, files, runner_config=runner_config, evals=evals)
            if notes is not None:
                notes += [n for n in change_set.notes if n not in notes]
            wanted = change_set.to_run()
            planned = resolve_job_ids(planned, wanted, parents=parents,
                                      fix="compare against the tree these files are read from "
                                          f"(`{_flag('changed')} BASE..`), with the same recipe files")
        jobs += planned
        plans.update({job.id: flag for job in planned})
    return jobs, plans


def matrix_entries(jobs: Sequence[Job], fleet: FleetCatalog | None = None, *, event: str | None = None,
                   labels: Sequence[str] = (), runner_labels: Sequence[str] = (),
                   plans: Mapping[str, str] | None = None,
                   allowance_minutes: int | None = None) -> list[dict[str, Any]]:
    """The `strategy.matrix.include` list: one entry per job, highest priority first; runner labels from the fleet.
    `plans` maps a job id to the `llmsweep run` flag that plans it (:func:`label_plans`), the entry's `plan` (`""`
    when it has none: the plain plan). `run_timeout`: the timeout-minutes of the runner job's `run` step
    (:func:`timeout_minutes`, with `allowance_minutes`, default `--allowance-minutes`'s); `timeout`: the runner job's
    own, later (:func:`job_timeout_minutes`).

    A label neither the fleet file lists nor `runner_labels` names is refused: its jobs would wait for a runner that
    may not exist (a typo). GitHub's runners can carry labels the fleet file omits — InferenceX's own master names
    `cluster:mi325x-tw`, which its runners.yaml does not list — so `runner_labels` vouches for those."""
    if fleet is not None:
        known = fleet.vouching(runner_labels)
        unknown = sorted({j.runner_label for j in jobs if not known.has_label(j.runner_label)})
        if unknown:
            flags = " ".join(f"{_flag('runner_labels')} {label}" for label in unknown)
            raise ConfigError(f"runner {noun(len(unknown), 'label')} {', '.join(unknown)} "
                              f"{noun(len(unknown), 'is', 'are')} not in the fleet file {fleet.file}: a job "
                              "on a label no runner carries waits forever",
                              fix=f"fix the recipe's runner; or add the label to the runner file "
                                  f"({_flag('runner_config')}); or, if GitHub's self-hosted runners carry it, pass "
                                  f"{flags}")
    plans = plans or {}
    allowance = DEFAULT_ALLOWANCE_MINUTES if allowance_minutes is None else allowance_minutes
    entries = []
    for job, score in by_priority(jobs, event=event, labels=labels):
        run = timeout_minutes(job, allowance)[0]
        entries.append({"job": job.id, "runner": job.runner, "recipe": job.recipe_key, "priority": f"{score:.3f}",
                        "eval": carries_eval(job), "plan": plans.get(job.id, ""), "run_timeout": run,
                        "timeout": job_timeout_minutes(run, allowance)})
    return entries


GITHUB_DEFAULT_TIMEOUT_MINUTES = 360
"""GitHub's own timeout-minutes of a job that sets none (six hours): what a job whose plan bounds nothing gets."""


def timeout_minutes(job: Job, allowance_minutes: int) -> tuple[int, bool]:
    """The timeout-minutes of the runner job's `run` step for `job` and whether its plan gave it: the longest its
    `llmsweep run` can take while every limit of its own holds (`execute.bound.run_bound_s`), in whole minutes up,
    plus `allowance_minutes` for what no limit of the run bounds (an engine image's pull). A job whose plan bounds
    nothing (a replay of a whole trace without a `duration`) runs until GitHub's own six hours
    (:data:`GITHUB_DEFAULT_TIMEOUT_MINUTES`) less the allowance, and False says so.

    The step's timeout, not the job's, is what ends a hung run: the runner fails a step past its `timeout-minutes`
    ("The action has timed out": actions/runner `StepsRunner.RunStepAsync`), so the job fails, its upload runs and
    the collect job takes it as the failure it is; a job past its own `timeout-minutes` ends *cancelled* (GitHub
    gives it the result `cancelled`, and whether a dependent job's `!cancelled()` then holds is not documented), and
    the sweep's collect job could be skipped as if a person had stopped the run. The job's own timeout is later
    (:func:`job_timeout_minutes`)."""
    import math

    from llmsweep.execute.bound import run_bound_s

    bound = run_bound_s(job)
    if bound is None:
        return max(GITHUB_DEFAULT_TIMEOUT_MINUTES - allowance_minutes, 1), False
    return math.ceil(bound / 60) + allowance_minutes, True


def job_timeout_minutes(run_minutes: int, allowance_minutes: int) -> int:
    """The runner job's own timeout-minutes, past its `run` step's (`run_minutes`, :func:`timeout_minutes`) by the
    allowance for the steps around it (the checkout, the installs, the upload): the step's timeout comes first and
    fails the job; the job's, a cancel, is the backstop for a hang outside the run (with `--allowance-minutes 0`
    the two coincide, and the job's, which started earlier, may come first)."""
    return run_minutes + allowance_minutes


def unbounded_note(jobs: Sequence[Job]) -> str | None:
    """What `ci matrix` and `ci github` say of the jobs whose plan bounds nothing (:func:`timeout_minutes`), once;
    None when every job's plan bounds it."""
    unbounded = [j for j in jobs if not timeout_minutes(j, 0)[1]]
    if not unbounded:
        return None
    n = len(unbounded)
    return (f"{count_of(n, 'job')} ({'e.g. ' if n > 1 else ''}{unbounded[0].id}) {noun(n, 'replays', 'replay')} a "
            "whole trace, whose length nothing in the plan bounds: "
            f"{noun(n, 'its runner job times', 'their runner jobs time')} "
            f"out at GitHub's default, {GITHUB_DEFAULT_TIMEOUT_MINUTES} minutes ({noun(n, 'its', 'their')} "
            "runs the allowance before); give "
            "the replay a `duration` (or, replayed in closed loop rather than on its timestamps, `max-rows`) for a "
            "timeout of the run's own")


def carries_eval(job: Job) -> bool:
    """The job runs an accuracy eval (an eval-only job, or a `run-eval` row: its point, then the eval on its server):
    its runner job needs lm-eval."""
    return bool(job.eval_only or job.run_eval)


def runner_refusals(jobs: Sequence[Job], files: Sequence[Path], runner_config: Path | None = None, *,
                    parents: Mapping[str, str] | None = None, evals: Mapping[str, EvalOptions] | None = None,
                    runner_labels: Sequence[str] = ()) -> dict[str, list[Job]]:
    """The jobs the workflow's `llmsweep run FILES --job ID` will refuse on the runner whatever it has installed
    (reason -> jobs; a multi-node job's points apart, `<id>-conc<N>`, as `run` runs them): asked of the run's own
    refusal with the options that step uses (a real engine, no `--live`, the local executor) and the policy errors
    `validate` finds in `files` about each job, lm-eval counted as present (an eval entry installs it). A concurrency
    slice (`parents`: its id -> the planned job it was cut from) hears what was found about that job, or about its
    point at the slice's concurrency (`policy.planning.follow_slices`). `evals`: the eval flags each job id is planned
    under (:func:`label_plans`; default the plain plan), which `validate` plans its findings' job ids under too.
    `runner_labels`: the labels vouched for, which the workflow's `run` is given too (`--runner-label`). Such
    a job keeps its matrix entry — its refusal, with the reason and fix, is its outcome in the collected run — and `ci
    matrix` says it up front."""
    from llmsweep.execute.pipeline import job_refusal
    from llmsweep.policy.planning import as_points, errors_about, follow_slices, validate_files

    parents, evals = parents or {}, evals or {}
    plain = EvalOptions()
    out: dict[str, list[Job]] = {}
    for flags in {evals.get(j.id, plain) for j in jobs}:  # one validation per plan the jobs come from
        mine = [j for j in jobs if evals.get(j.id, plain) == flags]
        checked = validate_files(list(files), runner_config=runner_config, evals=flags, runner_labels=runner_labels)
        keys = list(checked.loaded.recipes)
        points, findings = as_points(mine, follow_slices(checked.findings,
                                                         [(j, parents[j.id]) for j in mine if j.id in parents]))
        for point in points:
            why = job_refusal(point, False, errors_about(point, findings, keys), harness_provided=True)
            if why is not None:
                out.setdefault(why, []).append(point)
    return out


def lm_eval_step() -> dict[str, Any]:
    """The sweep job's step that gives an eval entry's `llmsweep run` its harness: a virtual environment with
    `lm-eval[api]` at the pinned version, named in `LLMSWEEP_LM_EVAL` for the steps after it (as `.ci/run` makes
    `.venv-lmeval` for the tests). Only for entries that carry an eval: lm-eval brings torch, gigabytes a throughput
    job does not need."""
    from llmsweep.evals.harness import ENV_VAR, PINNED_VERSION

    venv = "$RUNNER_TEMP/llmsweep-lm-eval"
    return {"name": f"Install lm-eval {PINNED_VERSION} (the job runs an accuracy eval)", "if": "matrix.eval",
            "run": "\n".join([f'python -m venv "{venv}"',
                              f'"{venv}/bin/python" -m pip install --quiet \'lm-eval[api]=={PINNED_VERSION}\'',
                              f'echo "{ENV_VAR}={venv}/bin/python" >> "$GITHUB_ENV"'])}


class _Env(str):
    """A word written as is: a double-quoted reference to the step's environment (`"$JOB"`, `"runs/$JOB"`, `"$@"`,
    or `${PLAN:+"$PLAN"}`: one word when set, none when empty)."""

    __slots__ = ()


def _sh(*words: str) -> str:
    """A shell command line: every word quoted except :class:`_Env` references. Expressions (`${{ … }}`) never
    appear in a `run:` script; they reach it through `env:`, so no value is parsed as shell."""
    import shlex

    return " ".join(w if isinstance(w, _Env) else shlex.quote(w) for w in words)


def workflow_root(out: Path) -> Path:
    """The folder a workflow written to `out` runs in, where GitHub checks the repository out: the one holding the
    `.github/workflows/` folder `out` is in (GitHub reads workflows only there); with `out` elsewhere, the git work tree
    of the current directory, else the current directory (the default `--out` is written from there)."""
    from llmsweep.changes.diff import git_toplevel

    where = Path(os.path.abspath(out))
    if where.parent.name == "workflows" and where.parent.parent.name == ".github":
        root = where.parent.parent.parent
        # GitHub reads workflows only at the root of the repository: one a folder below it holds never runs (the
        # default --out, written from a subfolder)
        probe = root
        while not probe.is_dir():  # a folder --out creates: the repository of the nearest one that exists
            probe = probe.parent
        top = git_toplevel(probe)
        if top is not None and Path(os.path.abspath(top)) != root and Path(top).resolve() != root.resolve():
            raise ConfigError(f"{out} is in a .github/workflows/ folder below the root of its repository ({top}): "
                              "GitHub reads workflows only at the repository's root, and would never run it",
                              fix=f"{_flag('out')} {Path(top) / '.github' / 'workflows' / where.name}, or run "
                                  f"`llmsweep ci github` from {top}")
        return root
    return git_toplevel(Path.cwd()) or Path.cwd()


def install_command(root: Path) -> str:
    """How the workflow's jobs install llmsweep in the checkout of the repository `root`: `pip install .` where that
    repository is llmsweep's own (its pyproject.toml names the project `llmsweep`), else the llmsweep that writes the
    workflow, pinned — a repository of recipes is not installable, or installs something else."""
    import shlex
    import tomllib

    from llmsweep import __version__

    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8")).get("project") or {}
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        project = {}
    if isinstance(project, dict) and project.get("name") == "llmsweep":
        return "pip install ."
    return f"pip install {shlex.quote(f'llmsweep=={__version__}')}"


def repo_path(path: Path, root: Path, what: str) -> Path:
    """`path` (as typed: relative to the current directory, or absolute) relative to the repository `root` the
    workflow runs in (:func:`workflow_root`), as its steps must name it. A path outside `root` is refused: the
    runners check out the repository, and nothing else of this machine."""
    for mine, top in ((Path(os.path.abspath(path)), Path(os.path.abspath(root))), (path.resolve(), root.resolve())):
        if mine == top or top in mine.parents:
            return mine.relative_to(top)
    raise ConfigError(f"{what} {path} is outside the repository the workflow runs in ({root}): its runners check "
                      "out that repository, and would not find the file",
                      fix=f"move or copy it into {root} and pass that path; or write the workflow into the "
                          f"repository that holds it ({_flag('out')} <that repository>/.github/workflows/<name>.yml)")


def workflow(files: Sequence[Path], *, source: Source = "matrix", baseline: str | None = None,
             runner_config: Path | None = None, store: str | None = None, collect_runner: str = "ubuntu-latest",
             python: str = "3.11", install: str = "pip install .", name: str = "llmsweep sweep",
             runner_labels: Sequence[str] = (), allowance_minutes: int | None = None) -> dict[str, Any]:
    """The workflow document (a dict, dumped as YAML by :func:`write_workflow`); `runner_labels` are passed on to
    `ci matrix` and to each runner job's `run` (labels GitHub's runners carry that the fleet file does not list);
    `allowance_minutes` to `ci matrix`, which adds it to each job's timeout (:func:`timeout_minutes`)."""
    recipe_args = [str(f) for f in files]
    fleet_args = [_flag("runner_config"), str(runner_config)] if runner_config is not None else []
    # the labels vouched for go to every command that plans and checks the jobs: `ci matrix`, and the runner job's
    # `run`, whose policy check would otherwise refuse every job on them as an unknown label
    label_args = [arg for label in runner_labels for arg in (_flag("runner_labels"), label)]
    labels = "github.event.pull_request.labels.*.name"
    run_if = " || ".join([f"contains({labels}, '{label}')" for label in RUN_LABELS])

    def event_label_in(names: Sequence[str]) -> str:
        return f"contains(fromJSON('{json.dumps(list(names), separators=(',', ':'))}'), github.event.label.name)"

    # A label added or removed starts a sweep only when it is one that changes what runs: a sweep label, or a modifier
    # label while a sweep label is on the pull request (alone it runs nothing); any other (e.g. `documentation`)
    # neither starts one nor, in a concurrency group of its own, cancels the one running.
    sweep_label = f"({event_label_in(SWEEP_LABELS)} || ({event_label_in(EVAL_LABELS)} && ({run_if})))"
    other_label = f"(github.event.action == 'labeled' || github.event.action == 'unlabeled') && !{sweep_label}"
    starts_sweep = f"(github.event.action != 'labeled' && github.event.action != 'unlabeled') || {sweep_label}"
    changed = source == "changes"
    setup_py: list[dict[str, Any]] = [{"uses": "actions/checkout@v4", "with": {"fetch-depth": 0}},
                                      {"uses": "actions/setup-python@v5", "with": {"python-version": python}},
                                      {"name": "Install llmsweep", "run": install}]
    # The store is the collect runner's: a sweep job's `run` would open (or fail to open) it too and store its one job
    # there as a run of its own, so only the collect job is told it.
    env = {"LLMSWEEP_STORE": store} if store else {}
    allowance = DEFAULT_ALLOWANCE_MINUTES if allowance_minutes is None else allowance_minutes
    matrix_cmd = _sh("llmsweep", "ci", "matrix", *recipe_args, *fleet_args, *label_args, "--event", _Env('"$EVENT"'),
                     _flag("allowance_minutes"), str(allowance), "--github-output", _Env('"$GITHUB_OUTPUT"'),
                     _Env('"$@"'))
    # The modifier labels become `ci matrix`'s flags of the same names (a push carries no labels: the plain sweep);
    # each entry then names the `run` flag that plans its job, which its runner job passes on.
    eval_flags = {"EVALS_ONLY": (EVALS_ONLY_LABEL, _flag("evals_only")),
                  "ALL_EVALS": (ALL_EVALS_LABEL, _flag("all_evals"))}
    matrix_env = {"EVENT": "${{ github.event_name }}",
                  **{var: f"${{{{ contains({labels}, '{label}') }}}}" for var, (label, _) in eval_flags.items()}}
    changes_args: list[str] = []
    if changed:
        # A pull request runs the jobs it changed, against the tree actions/checkout gives it, its merge with the
        # base: the jobs it plans are the ones the sweep runs (`BASE..HEAD` of the branch would see main's later
        # changes reversed, and drop the pull request's own jobs whose id differs once merged).
        matrix_env["BASE"] = "${{ github.event.pull_request.base.sha }}"
        # A push runs the jobs it changed since the commit before it (`github.event.before`). Where that commit says
        # nothing of what the push changed, the push sweeps every job of the plan and its log says why: a branch's
        # first push (`before` is all zeros) and a force-push (`before` is not an ancestor of the commit pushed, or
        # not in the clone: the trees compared would show what the push dropped as a change). A manual run
        # (`workflow_dispatch`) sweeps every job.
        matrix_env["BEFORE"] = "${{ github.event.before }}"
        changed_flag = _flag("changed")
        every = "every job of the plan is swept"
        changes_args = [
            'if [ "$EVENT" = pull_request ]; then',
            f'  set -- "$@" {changed_flag} "$BASE.."',
            'elif [ "$EVENT" = push ]; then',
            '  case "$BEFORE" in',
            "    *[!0]*)",
            '      if git merge-base --is-ancestor "$BEFORE" HEAD 2>/dev/null; then',
            f'        set -- "$@" {changed_flag} "$BEFORE.."',
            "      else",
            f'        echo "::notice::the commit before this push, $BEFORE, is not an ancestor of HEAD (a force-push) '
            f'or not in the clone: {every}"',
            "      fi ;;",
            f'    *) echo "::notice::the first push of this branch (no commit before it): {every}" ;;',
            "  esac",
            "fi",
        ]
    matrix_cmd = "\n".join(["set --", *(f'if [ "${var}" = true ]; then set -- "$@" {flag}; fi'
                                         for var, (_, flag) in eval_flags.items()), *changes_args, matrix_cmd])
    setup = {
        "if": starts_sweep,
        "runs-on": "ubuntu-latest",
        "outputs": {"run": "${{ steps.gate.outputs.run }}", "fail-fast": "${{ steps.gate.outputs.fail-fast }}",
                    "matrix": "${{ steps.matrix.outputs.matrix }}", "jobs": "${{ steps.matrix.outputs.jobs }}",
                    "count": "${{ steps.matrix.outputs.count }}"},
        "steps": [
            *setup_py,
            {"name": "Labels decide whether and how to sweep", "id": "gate",
             "env": {"RUN": f"${{{{ github.event_name != 'pull_request' || {run_if} }}}}",
                     "FAIL_FAST": f"${{{{ contains({labels}, '{FAIL_FAST_LABEL}') }}}}",
                     "BOTH": "${{ " + " && ".join(f"contains({labels}, '{label}')" for label in RUN_LABELS) + " }}"},
             "run": 'if [ "$BOTH" = true ]; then\n'
                    f'  echo "::error::label the pull request with one of {" or ".join(RUN_LABELS)}, not both"\n'
                    '  exit 1\nfi\n'
                    'echo "run=$RUN" >> "$GITHUB_OUTPUT"\necho "fail-fast=$FAIL_FAST" >> "$GITHUB_OUTPUT"'},
            {"name": "Jobs to run, highest priority first", "id": "matrix", "if": "steps.gate.outputs.run == 'true'",
             "env": matrix_env, "run": matrix_cmd},
        ],
    }
    sweep = {
        "name": "${{ matrix.job }} (priority ${{ matrix.priority }})",
        "needs": "setup",
        "if": "needs.setup.outputs.run == 'true' && needs.setup.outputs.count != '0'",
        "runs-on": ["self-hosted", "${{ matrix.runner }}"],
        # later than the `run` step's (`job_timeout_minutes`): a backstop for a hang outside the run, which GitHub
        # ends as a cancel
        "timeout-minutes": "${{ matrix.timeout }}",
        "strategy": {"fail-fast": "${{ needs.setup.outputs.fail-fast == 'true' }}",
                     "matrix": "${{ fromJSON(needs.setup.outputs.matrix) }}"},
        "steps": [
            # when the runner job began, for the record below (a job its own timeout ended is told from fail-fast's)
            {"name": "Note when the runner job started", "run": 'echo "LLMSWEEP_JOB_STARTED=$(date -u +%s)" >> '
                                                                '"$GITHUB_ENV"'},
            *setup_py,
            lm_eval_step(),
            # planned as `ci matrix` planned it (`plan`: the eval labels' `run` flag): an eval-only job's id exists
            # only in the plan of --evals-only/--all-evals, and an all-evals throughput job is run with --no-evals
            # times out after the longest the entry's `run` can take while its own limits hold, plus the allowance
            # (`timeout_minutes`): a hung benchmark frees its GPU runner then, not after GitHub's six hours; a step
            # past its timeout fails (a job past its own is cancelled), so the timed-out job is collected as failed
            {"name": "Run the job", "timeout-minutes": "${{ matrix.run_timeout }}",
             "env": {"JOB": "${{ matrix.job }}", "PLAN": "${{ matrix.plan }}"},
             "run": _sh("llmsweep", "run", *recipe_args, *fleet_args, *label_args, _flag("job"), _Env('"$JOB"'),
                        _Env('${PLAN:+"$PLAN"}'), _flag("out"), _Env('"runs/$JOB"'), "--no-report")},
            # how the runner job ended (`job.status`: failure, or cancelled — fail-fast's cancel of an unfinished job
            # among others), whether the sweep ran under fail-fast, and when: `ci collect` tells a job fail-fast
            # cancelled from one that failed, and names the job that failed first (:data:`RUNNER_JOB_FILE`)
            {"name": "Record how the runner job ended", "if": "always()",
             "env": {"JOB": "${{ matrix.job }}", "STATUS": "${{ job.status }}",
                     "FAIL_FAST": "${{ needs.setup.outputs.fail-fast }}", "TIMEOUT": "${{ matrix.timeout }}"},
             "run": 'mkdir -p "runs/$JOB"\n'
                    'ELAPSED=""\nif [ -n "${LLMSWEEP_JOB_STARTED:-}" ]; then '
                    'ELAPSED=$(( $(date -u +%s) - LLMSWEEP_JOB_STARTED )); fi\n'
                    'printf \'{"status": "%s", "fail_fast": "%s", "ended": "%s", "elapsed_s": "%s", '
                    '"timeout_minutes": "%s"}\\n\' "$STATUS" "$FAIL_FAST" '
                    f'"$(date -u +%Y-%m-%dT%H:%M:%S.%6NZ)" "$ELAPSED" "$TIMEOUT" > "runs/$JOB/{RUNNER_JOB_FILE}"'},
            # `overwrite`: a run keeps its artifacts across attempts, and upload-artifact@v4 refuses a name already
            # uploaded; a re-run job's results replace its earlier attempt's rather than fail to upload
            {"name": "Upload the job's results", "if": "always()", "uses": "actions/upload-artifact@v4",
             "with": {"name": ARTIFACT_PREFIX + "${{ matrix.job }}", "path": "runs/${{ matrix.job }}",
                      "if-no-files-found": "warn", "overwrite": True}},
        ],
    }
    compare = ([{"name": "Compare with the baseline and post the verdict",
                 "run": _sh("llmsweep", "compare", _flag("baseline"), baseline, "sweep", _flag("format"), "markdown",
                            "--no-history") + ' >> "$GITHUB_STEP_SUMMARY"'}] if baseline else [])
    after_collect: list[dict[str, Any]] = [
        {"name": "Store the results", "run": "llmsweep results ingest sweep"},
        {"name": "Dashboard", "run": "llmsweep report sweep"},
        {"name": "Upload the dashboard", "uses": "actions/upload-artifact@v4",
         "with": {"name": "dashboard", "path": "sweep/report", "overwrite": True}},
        {"name": "Link the unofficial run",
         "env": {"RUN_URL": "${{ github.server_url }}/${{ github.repository }}/actions/runs/${{ github.run_id }}"},
         "run": 'echo "Unofficial run: $RUN_URL (artifacts: dashboard, bmk_<job>)" >> "$GITHUB_STEP_SUMMARY"'},
        *compare,
    ]
    collect = {
        "needs": ["setup", "sweep"],
        # after the sweep whatever its jobs' results, but only when setup planned it: a setup whose `ci matrix` failed
        # leaves `run` set and `count` unset, and collecting against no job ids would only fail again. Not after a
        # cancelled workflow run (a newer push's sweep superseded it, or a person stopped it): `always()` started the
        # collect job then too, which merged the cancelled jobs as failed and the sweep as one that had finished. A
        # job that ran past its bound is no cancel: its `run` step's timeout failed it (`timeout_minutes`). A sweep that
        # fail-fast stopped at a failure is collected whatever `cancelled()` says of its cancelled jobs (`COLLECT_WHEN`)
        "if": f"{COLLECT_WHEN} && needs.setup.result == 'success' && needs.setup.outputs.run == 'true' && "
              "needs.setup.outputs.count != '0'",
        "runs-on": collect_runner,
        **({"env": env} if env else {}),
        # each step under the job's own condition (`collect_steps`): a step's default `success()` is false once the
        # run is cancelled, and the sweep that fail-fast stopped is collected then too
        "steps": collect_steps([
            *zip(("checkout", "python", "install"), setup_py, strict=True),
            ("download", {"uses": "actions/download-artifact@v4",
                          "with": {"pattern": ARTIFACT_PREFIX + "*", "path": "artifacts"}}),
            # exits 1 when a job has no result (the collect job fails, as the sweep did), after writing the run:
            # the steps after it still store, report and compare whatever the sweep measured
            ("merge", {"name": "Merge the jobs into one run", "env": {"JOBS": "${{ needs.setup.outputs.jobs }}"},
                       "run": _sh("llmsweep", "ci", "collect", "artifacts", _flag("out"), "sweep", _flag("run_id"),
                                  _Env('"gh-$GITHUB_RUN_ID-$GITHUB_RUN_ATTEMPT"'), "--expected-env", "JOBS")}),
        ], after_collect),
    }
    return {
        "name": name,
        "on": {"pull_request": {"types": ["opened", "synchronize", "reopened", "labeled", "unlabeled"]},
               "push": {"branches": ["main"]}, "workflow_dispatch": {}},
        # a pull request's sweeps share a group (a new push cancels the running one); a push to main or a manual
        # run has a group of its own: with `source="changes"` each push to main sweeps the jobs *it* changed since
        # the commit before it, so one cancelled by the next push lost those jobs' measurement for good (the next
        # push sweeps its own changes only)
        "concurrency": {"group": "llmsweep-${{ github.event.pull_request.number || github.run_id }}"
                                 f"${{{{ {other_label} && format('-label-{{0}}', github.run_id) || '' }}}}",
                        "cancel-in-progress": True},
        "permissions": {"contents": "read"},
        "jobs": {"setup": setup, "sweep": sweep, "collect": collect},
    }


def collect_steps(chain: Sequence[tuple[str, dict[str, Any]]],
                  after: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The collect job's steps, each with an `if` of the job's own condition (:data:`COLLECT_WHEN`): `chain`, (id,
    step) pairs up to `ci collect`, each run when the one before it succeeded (`steps.<id>.outcome`, which reads no
    status of the job: the order a default `success()` kept, without its false in a cancelled run); `after`, the
    steps that take the merged run, when `ci collect` wrote it (:data:`COLLECTED`)."""
    out: list[dict[str, Any]] = []
    previous = None
    for step_id, step in chain:
        when = COLLECT_WHEN + (f" && steps.{previous}.outcome == 'success'" if previous else "")
        out.append({**({"name": step["name"]} if "name" in step else {}), "id": step_id,
                    "if": "${{ " + when + " }}", **step})
        previous = step_id
    return out + [{"name": step["name"], "if": COLLECTED, **step} for step in after]


class _NoAliases(yaml.SafeDumper):
    """Repeated steps are written out in full: a workflow reader should not need to follow YAML anchors."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    """Multi-line scripts as literal blocks (`run: |`), as a person writes them."""
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_NoAliases.add_representer(str, _str)


def dump_workflow(doc: dict[str, Any]) -> str:
    head = "# Written by `llmsweep ci github`; regenerate it rather than editing by hand.\n"
    return head + yaml.dump(doc, Dumper=_NoAliases, sort_keys=False, width=120, allow_unicode=True)


# ------------------------------------------------------------------------------------------------ collect


NO_ARTIFACT = "no artifact: the matrix job did not upload its results"


def collect(artifacts: Path, out: Path, *, run_id: str, expected: Sequence[str] = ()) -> dict[str, Any]:
    """Merge per-job run folders (one `llmsweep run --job` each) into one run folder; returns its run.json.

    Every run folder's outcomes are kept, a refused job's too (its folder holds run.json and no `jobs/`). A job is
    recorded as failed, with the reason, so the sweep's success rate counts it, when its artifact's run.json cannot
    be read (truncated, not JSON, not a run's record: which file and what is wrong), holds no outcome for it (the run
    stopped before it finished), or when its artifact holds no run.json or there is no artifact at all — also when no
    job uploaded one, so that the download left no `artifacts` folder: every expected job is then failed with
    NO_ARTIFACT (without `expected`, a missing folder is an error: there is nothing to collect).

    A sweep that fail-fast cut short (its artifacts' :data:`RUNNER_JOB_FILE` say it ran under fail-fast, and which
    runner job failed first) has each job it left unfinished said so: `cancelled by fail-fast after JOB failed`, where
    its runner job was cancelled after that failure or left no artifact (:func:`_fail_fast_cut`)."""
    if (artifacts.exists() and not artifacts.is_dir()) or (not artifacts.exists() and not expected):
        raise ConfigError(f"{artifacts} is not a directory", fix="download the bmk_* artifacts into it first")
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"{out} is not empty", fix="collect into a new directory")
    outcomes: dict[str, dict[str, Any]] = {}
    broken: dict[str, dict[str, Any]] = {}  # jobs whose artifact says nothing readable about them; outcomes win
    from llmsweep.changes.reuse import RECORDED_PARTS

    keys: dict[str, str] = {}
    parts: dict[str, Any] = {}
    hardware: dict[str, Any] = {}
    started: list[str] = []

    def failed(job: str, reason: str) -> None:
        broken.setdefault(job, {"job_id": job, "exp_name": "", "status": "failed", "reasons": [reason]})

    cut = _fail_fast_cut(_runner_jobs(artifacts, expected))

    # a run folder's run.json, not a job's own (`jobs/<id>/run.json`, the client's record)
    run_files = [p for p in sorted(artifacts.glob(f"**/{RUN_FILE}"))
                 if "jobs" not in p.relative_to(artifacts).parts[:-1]]
    read = {path: _read_run_meta(path) for path in run_files}
    alike = _measured_alike({path: meta for path, (meta, _) in read.items() if meta is not None})
    _one_artifact_per_job({path: meta or {} for path, (meta, _) in read.items()})
    (out / "jobs").mkdir(parents=True, exist_ok=True)
    for meta_path in run_files:
        run_dir = meta_path.parent
        job_dirs = sorted(p for p in (run_dir / "jobs").iterdir() if p.is_dir()) if (run_dir / "jobs").is_dir() else []
        meta, problem = read[meta_path]
        if meta is None:
            # a run.json at the folder's root is the one artifact download-artifact extracted flat (a pattern that
            # matches one artifact): the sweep's one job, when neither its name nor a job folder says which
            flat = (list(expected) if run_dir == artifacts else []) or [run_dir.relative_to(artifacts).as_posix()]
            for job in _artifact_jobs(run_dir, job_dirs) or flat:
                failed(job, f"{meta_path} {problem}")
            continue
        started += [meta["started"]] if isinstance(meta.get("started"), str) else []
        keys.update(meta.get("reuse_keys") or {})
        parts.update(meta.get(RECORDED_PARTS) or {})  # what each key's identity holds, part by part
        hardware.update(meta.get("job_hardware") or {})  # where a job that has no result would have run (success)
        for o in meta.get("outcomes") or []:
            outcomes[o["job_id"]] = o
        for job in meta.get("expected_job_ids") or []:
            failed(job, f"{meta_path} records no outcome for this job: its run stopped before it finished ("
                        + (cut(job) or "the runner job was cancelled, timed out or killed") + ")")
        for job_dir in job_dirs:
            shutil.copytree(job_dir, out / "jobs" / job_dir.name, dirs_exist_ok=True)
    with_run_file = {p.parent for p in run_files}
    folders = sorted(artifacts.iterdir()) if artifacts.is_dir() else []  # none: no job uploaded an artifact
    for folder in (p for p in folders if p.is_dir() and p.name.startswith(ARTIFACT_PREFIX)):
        if not any(folder == d or folder in d.parents for d in with_run_file):
            job = folder.name.removeprefix(ARTIFACT_PREFIX)
            why = cut(job)
            failed(job, f"artifact {folder} holds no {RUN_FILE}: the job's run did not start, or did not get to write "
                        f"it{f' ({why})' if why else ''}")
    outcomes = {**broken, **outcomes}
    for job in expected:
        # a multi-node job's points are its results (`<id>-conc<N>`: `run` records them apart): present, not missing
        if job in outcomes or any(o.startswith(f"{job}{CONC_MARK}") for o in outcomes):
            continue
        why = cut(job)
        outcomes[job] = {"job_id": job, "exp_name": "", "status": "failed",
                         "reasons": [f"{NO_ARTIFACT} ({why})" if why else NO_ARTIFACT]}
    meta = {
        # how every job was measured, as each artifact's run.json says alike (`_measured_alike`)
        "run_id": run_id, **dict.fromkeys(_RUN_FIELDS),
        **alike,
        "started": min(started) if started else None,
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "expected_job_ids": sorted(outcomes), "outcomes": [outcomes[j] for j in sorted(outcomes)],
        "reuse_keys": keys, **({RECORDED_PARTS: parts} if parts else {}), "job_hardware": hardware,
        "collected_from": str(artifacts),
    }
    (out / RUN_FILE).write_text(json.dumps(meta, indent=2))
    return meta


@dataclass(frozen=True, slots=True)
class RunnerJob:
    """How one sweep job's runner job ended, as its artifact's :data:`RUNNER_JOB_FILE` says."""

    job: str
    status: str
    """GitHub's `job.status` when the job's last steps ran: `success`, `failure` or `cancelled`."""
    fail_fast: bool
    """The sweep ran under fail-fast (`full-sweep-fail-fast`): GitHub cancels its unfinished jobs once one fails."""
    ended: str
    """When those steps ran, UTC (`2026-01-01T00:00:00.000000Z`; one of a run's records is ordered as text)."""
    elapsed_s: float | None = None
    """How long the runner job had run by then (None in a record that does not say)."""
    timeout_minutes: float | None = None
    """The runner job's own `timeout-minutes` (None in a record that does not say)."""

    @property
    def timed_out(self) -> bool:
        """A cancelled runner job that had run (within :data:`TIMEOUT_SLACK_S`) its whole `timeout-minutes`: its
        timeout ended it, which GitHub says as `cancelled` too."""
        return self.status == "cancelled" and self.elapsed_s is not None and self.timeout_minutes is not None and \
            self.elapsed_s >= self.timeout_minutes * 60 - TIMEOUT_SLACK_S


def _runner_jobs(artifacts: Path, expected: Sequence[str]) -> dict[str, RunnerJob]:
    """Each job's :class:`RunnerJob`, by job id, from the artifacts that hold a readable one (the job is the
    artifact's, `bmk_<job id>`; the sweep's one job where download-artifact extracted one artifact flat). A file that
    cannot be read says nothing: the job's reason is then said without it."""
    out: dict[str, RunnerJob] = {}
    for path in sorted(artifacts.glob(f"*/{RUNNER_JOB_FILE}")) + sorted(artifacts.glob(RUNNER_JOB_FILE)):
        folder = path.parent
        if folder.name.startswith(ARTIFACT_PREFIX):
            job = folder.name.removeprefix(ARTIFACT_PREFIX)
        elif folder == artifacts and len(expected) == 1:
            job = expected[0]
        else:
            continue
        try:
            said = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            continue
        if isinstance(said, dict) and all(isinstance(said.get(k), str) for k in ("status", "fail_fast", "ended")):
            out[job] = RunnerJob(job=job, status=said["status"], fail_fast=said["fail_fast"] == "true",
                                 ended=said["ended"], elapsed_s=_number(said.get("elapsed_s")),
                                 timeout_minutes=_number(said.get("timeout_minutes")))
    return out


def _number(said: object) -> float | None:
    """A number a record writes as text (`"3600"`), or None where it writes none or no number."""
    try:
        return float(said) if isinstance(said, str) and said.strip() else None
    except ValueError:
        return None


def _fail_fast_cut(runner_jobs: Mapping[str, RunnerJob]) -> Callable[[str], str | None]:
    """What to say of a job without a result that fail-fast cut short: `cancelled by fail-fast after JOB failed`,
    JOB being the runner job that failed first (the earliest `ended` of those whose status is `failure`), or None
    where that is not known: no artifact says the sweep ran under fail-fast, none records a failed runner job, the
    job's own runner job failed (it is the failure, not its casualty), was cancelled before that failure (by hand,
    or its own `timeout-minutes`), or was ended by its own `timeout-minutes` after it (:attr:`RunnerJob.timed_out`:
    GitHub says `cancelled` of both). A job with no word of its own (no artifact, or one from before the record was
    written) was unfinished when GitHub cancelled the sweep's unfinished jobs: said so."""
    failures = sorted((r.ended, r.job) for r in runner_jobs.values() if r.status == "failure")
    if not failures or not any(r.fail_fast for r in runner_jobs.values()):
        return lambda job: None
    first_ended, first = failures[0]

    def cut(job: str) -> str | None:
        own = runner_jobs.get(job)
        if own is not None and (own.status != "cancelled" or own.ended < first_ended or own.timed_out):
            return None
        return f"cancelled by fail-fast after {first} failed"

    return cut


_RUN_FIELDS = ("llmsweep_version", "measurement", "executor", "recipe_files")
"""The run.json fields every collected run records (null where its artifacts do not): what made its jobs."""


def _run_identity() -> tuple[str, ...]:
    """The run.json fields that say how a run's jobs were measured, which every job of one collected run shares: the
    llmsweep and its measurement definitions, the executor, the recipe files, the repeats, the runner labels vouched
    for, and what `run --resume` holds a run to (`execute.pipeline.MEASURED_BY`: simulator or engine, clock, trace
    corpus, eval settings, power backend)."""
    from llmsweep.execute.pipeline import MEASURED_BY

    return (*_RUN_FIELDS, "repeats", "runner_labels", *MEASURED_BY)


def _measured_alike(metas: Mapping[Path, Mapping[str, Any]]) -> dict[str, Any]:
    """The :func:`_run_identity` fields the artifacts' run.json files record, each with the value they all give it (a
    run records some only when a job of it exercised them: compared where two record it). Artifacts that disagree are
    not the jobs of one sweep — the downloads of two workflow runs, or a runner with another llmsweep — and merged they
    would be stored and compared as measured alike under the first one's label: refused, naming both files."""
    agreed: dict[str, tuple[Any, Path]] = {}
    for path, meta in metas.items():
        for field in _run_identity():
            if field not in meta:
                continue
            if field not in agreed:
                agreed[field] = (meta[field], path)
            elif meta[field] != agreed[field][0]:
                value, where = agreed[field]
                raise ConfigError(f"{path} and {where} disagree on {field} ({meta[field]!r} and {value!r}): their jobs "
                                  "were not measured alike, and one run cannot say how both were",
                                  fix="collect the artifacts of one workflow run (one commit, one llmsweep, the "
                                      "workflow's options) into one folder; re-run the jobs that differ, or collect "
                                      "each set into a run of its own")
    return {field: value for field, (value, _) in agreed.items()}


def _one_artifact_per_job(metas: Mapping[Path, Mapping[str, Any]]) -> None:
    """Refuse two run folders that hold the same job (an outcome, an expected id or a job folder of it): merged, the
    one read last would decide its outcome — a failure hidden by a pass — and their job folders would be copied into
    one. A sweep's matrix runs each job once, in an artifact of its own; two are the downloads of two workflow runs."""
    holder: dict[str, Path] = {}
    for path, meta in metas.items():
        jobs_dir = path.parent / "jobs"
        held = {*(o["job_id"] for o in meta.get("outcomes") or []), *(meta.get("expected_job_ids") or []),
                *(d.name for d in (jobs_dir.iterdir() if jobs_dir.is_dir() else ()) if d.is_dir())}
        for job in sorted(held):
            if job in holder:
                raise ConfigError(f"{path} and {holder[job]} both record {job}: one sweep runs each job once, and "
                                  "merged, one of the two would decide its outcome",
                                  fix="collect the artifacts of one workflow run (its bmk_* artifacts, each once) "
                                      "into one folder; collect another run's into a run of its own")
            holder[job] = path


def _read_run_meta(path: Path) -> tuple[dict[str, Any] | None, str]:
    """A run folder's run.json as a run's record, or None and what is wrong with it (said after its path)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return None, f"cannot be read ({exc})"
    if not text.strip():
        return None, "is empty: the file was cut short (the run was killed while writing it, or the upload was cut)"
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        return None, (f"is not valid JSON ({exc.msg}: line {exc.lineno}, column {exc.colno} of its {len(text)} "
                      "characters): the file is truncated or corrupt")
    if not isinstance(meta, dict):
        return None, f"is not a run's record: a JSON {type(meta).__name__}, not an object"
    outcomes = meta.get("outcomes")
    if outcomes is not None and not (isinstance(outcomes, list) and all(
            isinstance(o, dict) and isinstance(o.get("job_id"), str) and isinstance(o.get("status"), str)
            for o in outcomes)):
        return None, "is not a run's record: `outcomes` is not a list of outcomes, each with a `job_id` and a `status`"
    expected = meta.get("expected_job_ids")
    if expected is not None and not (isinstance(expected, list) and all(isinstance(j, str) for j in expected)):
        return None, "is not a run's record: `expected_job_ids` is not a list of job ids"
    return meta, ""


def _artifact_jobs(run_dir: Path, job_dirs: Sequence[Path]) -> list[str]:
    """The jobs an artifact holds, told by its name (`bmk_<job id>`) and its job folders, when its run.json cannot."""
    named = [run_dir.name.removeprefix(ARTIFACT_PREFIX)] if run_dir.name.startswith(ARTIFACT_PREFIX) else []
    return list(dict.fromkeys([*named, *(d.name for d in job_dirs)]))
