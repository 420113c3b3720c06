"""`llmsweep run`: recipes to a stored, reported, resumable sweep.

plan → policy (errors stop their jobs before launch, with the rule printed) → trace sources resolved once (a missing
one refuses its jobs, said once) → render every job's LaunchSpec → group jobs with identical specs onto one server →
run each group through the executor (a simulated group: on the simulator core in virtual time, `execute.virtual`,
unless `--live`) → store → report → completeness report. Eval jobs run their eval with lm-eval on the job's server
(`llmsweep.evals`; refused with the reason when lm-eval is not at hand). Multinode (disaggregated prefill/decode)
jobs run role by role on the simulator (in virtual time, and live through the local or Slurm executor: each role a
process of this host or a step on its node, `launches_roles`, `execute.roles`); elsewhere they are refused, and so
are jobs that cannot run (no `serve`, unmapped framework) unless the simulator is asked for.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import logging
import os
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from llmsweep import __version__
from llmsweep.engine_ids import SIM
from llmsweep.engines import runs_on_simulator
from llmsweep.errors import ConfigError, LlmsweepError
from llmsweep.evals.harness import EvalSettings
from llmsweep.execute import artifacts as art
from llmsweep.execute.executor import Executor, terminate_as_interrupt
from llmsweep.execute.failure_text import FAIL_FAST_NOT_RUN
from llmsweep.execute.lifecycle import (
    JobOutcome,
    LifecycleSettings,
    ServerGroup,
    on_job_finished,
    power_gate,
    refuse_here,
    resumed,
    run_group,
    stop_stale_servers,
    summarize_outcomes,
)
from llmsweep.execute.progress import ReportingProgress, current_progress, use_progress
from llmsweep.findings import Finding, Severity
from llmsweep.job_files import unjudged
from llmsweep.metrics.model import DONE_VERDICTS, DONE_WORDS, run_clock, run_source
from llmsweep.option_spellings import flag as _flag
from llmsweep.plan import Job
from llmsweep.plan.matrix import EvalOptions
from llmsweep.plan.point import TracePin, corpus_ref, one_point_per_job, pin_trace_sources
from llmsweep.sim_warnings import engine_refuses, ran_on_the_simulator, simulator_warnings
from llmsweep.spec.workload import ScenarioId
from llmsweep.words import count_of, noun
from llmsweep.workload.scenario import REPEAT_MARK, repeat_of
from llmsweep.writable import refuse_non_utf8

if TYPE_CHECKING:
    from llmsweep.engines.launch import LaunchSpec, Topology
    from llmsweep.results.rundir import KeptAttempt
    from llmsweep.results.store import Reusable, Store
    from llmsweep.spec.scope import MovedEval

_ALL_EVALS = _flag("all_evals")
_CHANGED = _flag("changed")
_CONFIG_FILES = _flag("config_files")
_CONFIG_KEYS = _flag("config_keys")
_EVAL_DATASET = _flag("eval_dataset")
_EVAL_LIMIT = _flag("eval_limit")
_EVAL_MAX_TOKENS = _flag("eval_max_tokens")
_EVAL_TASK = _flag("eval_task")
_EVALS_ONLY = _flag("evals_only")
_EXECUTOR = _flag("executor")
_FORCE = _flag("force")
_FORMAT = _flag("format")
_JOB = _flag("job")
_JSON = _flag("json")
_NO_EVALS = _flag("no_evals")
_OUT = _flag("out")
_REPEATS = _flag("repeats")
_RUNNER_LABELS = _flag("runner_labels")
_SIMULATE = _flag("simulate")
_TRACES = _flag("traces")
_LIVE = _flag("live")
_RESUME = _flag("resume")
_REUSE = _flag("reuse")
_REQUIRE_POWER = _flag("require_power")
_POWER_BACKEND = _flag("power_backend")


log = logging.getLogger(__name__)


class RunRequest(BaseModel):
    """Everything `llmsweep run` was asked to do."""

    model_config = ConfigDict(extra="forbid")

    files: list[Path]
    config_keys: list[str] | None = None
    runner_config: Path | None = None
    eval_flags: list[str] = Field(default_factory=list, description="The eval options the user gave (as typed: "
                                  f"`{_EVAL_LIMIT}`), said ignored when no job of the plan runs an eval.")
    runner_labels: list[str] = Field(default_factory=list, description="Labels the runner file omits that this "
                                     f"machine's runners carry (`{_RUNNER_LABELS}`): their jobs are not refused as "
                                     "unknown labels.")
    executor: str = Field(default="local", description="Registered executor kind (`llmsweep.execute.registry`).")
    executor_options: dict[str, Any] = Field(default_factory=dict)
    simulate: bool = False
    live: bool = Field(default=False, description="Simulated jobs: serve the simulator over HTTP in wall-clock time "
                       "instead of running its core in virtual time.")
    traces: str | None = Field(default=None, description="Agentic jobs replay this trace source ('synthetic', a "
                               "path or a Hugging Face dataset id) instead of the recipe's.")
    trace_revisions: dict[str, str] = Field(default_factory=dict, description="Hub trace datasets (`traces.hf`, "
                                            "a loader id by its dataset's id) that jobs ask at their latest (no "
                                            "`traces.revision`), replayed at these commits rather than their latest: "
                                            "`discover` pins them once for all its stages.")
    out: Path
    store: Path | None = None
    report: bool = True
    say_warnings: bool = Field(default=True, description="Say the recipes' warning findings before running (they are "
                               "in run.json either way); `discover` says them once, for the recipe it was given, "
                               "not for each stage recipe it writes.")
    resume_hint: bool = Field(default=True, description=f"On an interrupt, say the `{_RESUME}` command that runs the "
                              "rest; `discover` does not: its stages are not the user's to resume.")
    force: bool = Field(default=False,
                        description=f"Run into an {_OUT} that holds a run's results (kept in attempts/).")
    repeats: int = Field(default=1, ge=1, description="Runs of every job; repeats after the first are jobs of their "
                         "own (`<job-id>-repeat<k>`), so `compare` has a between-run band.")
    settings: LifecycleSettings = Field(default_factory=LifecycleSettings)
    evals: EvalOptions = Field(default_factory=EvalOptions, description=f"Which rows run evals (`{_NO_EVALS}`, "
                               f"`{_EVALS_ONLY}`, `{_ALL_EVALS}`: the matrix's meanings).")
    only_jobs: list[str] | None = Field(default=None, description=f"Run only these planned job ids (`run {_CHANGED}`: "
                                        "the jobs a recipe change added or changed).")
    only_jobs_typed: bool = Field(default=False, description=f"`only_jobs` are what a person typed (`run {_JOB}`): "
                                  "an id that names no planned job may be a unique id prefix or exp-name, as "
                                  f"`render {_JOB}` takes (`{_CHANGED}`'s ids are exact).")
    reuse: bool = Field(default=False, description="A job whose full identity matches a stored valid result is not "
                        f"run; its outcome points at that result (`run {_REUSE}`).")

    def make_executor(self) -> Executor:
        """The requested executor with its options validated (a ConfigError names a bad option)."""
        from llmsweep.execute.registry import get_executor

        return get_executor(self.executor, self.executor_options)


@dataclass
class RunOutcome:
    run_dir: Path
    run_id: str
    outcomes: list[JobOutcome]
    findings: list[Finding] = field(default_factory=list)
    report_path: Path | None = None
    store_path: Path | None = None
    concurrency: dict[str, int] = field(default_factory=dict)
    """Each job's concurrency, by job id (for the end-of-run table)."""
    store_error: str | None = None
    """Why the run could not be stored at its end (the run is on disk; the run is not ok: exit 1)."""
    unplanned: list[Finding] = field(default_factory=list)
    """Errors about recipes that planned no job (so they refused none): the run is not ok (exit 2 where no job ran,
    else 1: the run partly ran)."""
    reused: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Jobs `--reuse` stood on stored results in this invocation (job id -> the result's run, job and result ids and
    verdict): what run.json records as `reused`, the one home of that answer."""
    power_unrecorded: dict[str, list[str]] = field(default_factory=dict)
    """Jobs that ran without their GPU power recorded, by why and how to get it (their summaries' `power.error`:
    no backend could sample where they ran; `run --power-backend off` is not among them)."""
    rest: list[JobOutcome] = field(default_factory=list)
    """A narrower `--resume`/`--force` (`--job`, `--config-keys`, `--changed`): the recorded outcomes of the
    run's other expected jobs, which this invocation did not plan (`_unplanned_outcomes`)."""
    rest_never_run: list[str] = field(default_factory=list)
    """…and those of them with no outcome recorded anywhere: never run (the dashboard counts them missing)."""

    @property
    def expected(self) -> int:
        return len(self.outcomes)

    @property
    def narrower(self) -> bool:
        """True when the run expects more jobs than this invocation planned (`rest`, `rest_never_run`)."""
        return bool(self.rest or self.rest_never_run)

    @property
    def ok(self) -> bool:
        return self.store_error is None and not self.unplanned and all(o.ok for o in self.outcomes)

    def counts(self) -> dict[str, Any]:
        """The end-of-run counts, `run --json`'s `counts`: this invocation's jobs (`expected`, `done`: with a valid or
        smoke summary, `by_status`) and, under `run`, the whole run's as run.json records it — the same as this
        invocation's unless a narrower `--resume`/`--force` planned part of the run; `never_run` counts its jobs
        with no outcome recorded."""
        def block(outcomes: Sequence[JobOutcome]) -> dict[str, Any]:
            return {"expected": len(outcomes), "done": sum(1 for o in outcomes if o.ok),
                    "by_status": dict(sorted(summarize_outcomes(outcomes).items()))}

        run = block([*self.outcomes, *self.rest])
        run["expected"] += len(self.rest_never_run)
        return {**block(self.outcomes), "run": {**run, "never_run": len(self.rest_never_run)}}

    def completeness(self) -> str:
        def said(counts: dict[str, Any]) -> str:
            parts = [f"{n} {s}" for s, n in counts["by_status"].items()]
            if counts.get("never_run"):
                parts.append(f"{counts['never_run']} never run")
            return f"{counts['done']} with a {DONE_WORDS} summary ({', '.join(parts)})"

        counts = self.counts()
        if not self.narrower:
            lines = [f"expected {count_of(self.expected, 'job')}, {said(counts)}"]
        else:  # said both ways: this invocation's count alone read as if the run were that small
            lines = [f"expected {count_of(self.expected, 'job')} in this invocation (part of the run), {said(counts)}",
                     f"the whole run: {count_of(counts['run']['expected'], 'job')}, {said(counts['run'])}"
                     + (f"; a plain `{_RESUME}` runs the rest" if counts["run"]["done"] < counts["run"]["expected"]
                        else "")]
        # One line per reason: nine jobs refused for one unreadable trace source say it once, then name the jobs.
        by_reason: dict[tuple[str, str], list[str]] = {}
        for o in self.outcomes:
            if not o.ok:
                reason = o.reasons[0] if o.reasons else "no reason recorded"
                by_reason.setdefault((o.status, reason), []).append(o.job_id)
        for (status, reason), ids in by_reason.items():
            if len(ids) == 1:
                lines.append(f"  {status}: {ids[0]}: {reason}")
            else:
                lines.append(f"  {status}, {len(ids)} jobs: {reason}")
                lines += [f"    {job_id}" for job_id in ids]
        softened: dict[str, list[str]] = {}
        for o in self.outcomes:
            for w in o.warnings:
                softened.setdefault(w, []).append(o.job_id)
        for warning, ids in softened.items():
            lines.append(f"  {ran_on_the_simulator(len(ids), warning)}")
        failed_evals: dict[str, list[str]] = {}
        for o in self.outcomes:
            if o.ok and o.eval_failure:
                failed_evals.setdefault(o.eval_failure, []).append(o.job_id)
        for failure, ids in failed_evals.items():  # the throughput verdict stands; its eval did not pass
            lines.append(f"  {count_of(len(ids), 'job')} {noun(len(ids), 'keeps its', 'keep their')} throughput "
                         f"verdict, but {noun(len(ids), 'its', 'their')} {failure}")
        for why, ids in self.power_unrecorded.items():
            lines.append(f"  power not recorded for {count_of(len(ids), 'job')}: {why}")
        for f in self.unplanned:
            lines.append(f"  not planned: {f.render().splitlines()[0]}")
        if self.store_error:
            lines.append(f"  not stored: {self.store_error}")
        return "\n".join(lines)


Event = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)  # the CLI's progress channel, injected by default


def _plan_and_check(req: RunRequest, event: Event = _stderr
                    ) -> tuple[list[Job], list[Finding], list[str], list[MovedEval]]:
    """Load, plan and check the recipes once, with the run's fleet (`--runner-config`) and key selection: the jobs,
    the findings, every loaded recipe key (whose a finding is), and the configurations whose eval the matrix the
    files belong to moved out of them (`spec.scope.Matrix.moved`).

    Recipes that do not load or cannot be expanded stop the run (exit 2), as `matrix` would; policy errors only
    refuse the jobs they name.
    """
    from llmsweep.policy import validate_files

    validation = validate_files(req.files, config_keys=req.config_keys, runner_config=req.runner_config,
                                simulate=req.simulate, evals=req.evals,
                                runner_labels=req.runner_labels).raise_unrunnable()
    from llmsweep.plan.point import with_traces

    findings = validation.findings
    keys = list(validation.loaded.recipes)
    if req.config_keys:  # what was found about recipes --config-keys did not select is not this run's to say
        from llmsweep.plan.expand import expand_config_keys
        from llmsweep.policy.planning import recipe_of

        selected = set(expand_config_keys(tuple(req.config_keys), keys))
        findings = [f for f in findings if (owner := recipe_of(f.path, keys) if f.path else None) is None
                    or owner in selected]
    moved = validation.matrix.moved if validation.matrix is not None else []
    return with_traces(validation.jobs, req.traces, event), findings, keys, moved


def job_warnings(job: Job, findings: list[Finding], keys: Sequence[str], *, simulated: bool = False) -> list[str]:
    """The warnings of `job`'s outcome (`JobOutcome.warnings`; their one home, in the words and kinds of
    `llmsweep.sim_warnings`): the engine rules it breaks that were softened to warnings because the simulator serves
    it (`Rule.softens_in_sim`): its result is the simulator's, and a real engine would refuse the job. One line per
    rule; and, for a simulated job (in virtual time or served live), what it sets that the simulator does not model
    (`engines.sim.unmodelled`) and the catalog estimates the simulator models it with (`engines.sim.
    estimated_figures`): what its result's provenance records as `unmodelled` and `estimated`
    (`sim_warnings.simulator_warnings`, as `predict` says them)."""
    from llmsweep.policy.context import SOFTENED_NOTE
    from llmsweep.policy.planning import findings_about
    from llmsweep.policy.registry import all_rules

    rules = {r.id: r for r in all_rules()}
    out: list[str] = []
    for f in findings_about(job, findings, keys):
        rule = rules.get(f.rule)
        if not f.is_error and rule is not None and rule.softens_in_sim and rule.severity is Severity.ERROR:
            out.append(engine_refuses(f.rule, f.message.removesuffix(SOFTENED_NOTE)))
    if simulated:
        from llmsweep.engines.sim import estimated_figures, unmodelled

        out += simulator_warnings(unmodelled(job), estimated_figures(job))
    return list(dict.fromkeys(out))


def launches_roles(job: Job, *, simulate: bool, live: bool, executor: str) -> bool:
    """True for a multinode (disaggregated) job llmsweep launches role by role, each role a server of its own: one
    `engines.launch_refusal` lets through under `executor` (the simulator's roles; vLLM's under the local executor),
    served live (the simulator's under `--live`; a real engine's always) by an executor that places roles
    (`execute.placement.places_roles`: processes of this host, or steps on the nodes of a Slurm allocation;
    `execute.roles`). Every other multinode job keeps `engines.launch_refusal`'s reason."""
    from llmsweep import engines
    from llmsweep.execute.placement import places_roles

    # `multinode` is what `render_topology` renders role by role on (never the refusal's wording or its absence).
    served = live or not runs_on_simulator(job.engine, simulate=simulate)
    return (job.multinode and served and places_roles(executor)
            and engines.launch_refusal(job, simulate=simulate, executor=executor) is None)


def policy_refusal(errors: Sequence[Finding]) -> str | None:
    """The reason a job with these policy errors about it is refused (its first error, with its fix), or None: what
    `run` and `predict` say for it."""
    if not errors:
        return None
    first = errors[0]
    return f"policy error [{first.rule}] {first.message}" + (f" (fix: {first.fix})" if first.fix else "")


def job_refusal(job: Job, simulate: bool, errors: list[Finding], evals: EvalSettings | None = None, *,
                live: bool = False, executor: str = "local", harness_provided: bool = False) -> str | None:
    """Why `run` refuses `job` before launching anything (None when it runs it), under the run's options: a policy
    error, an eval it cannot run, a placement or launch llmsweep cannot make. `harness_provided`: lm-eval is
    installed where the job will run (the generated CI workflow's runner job installs it for an eval entry), so its
    absence on this machine is no reason; `ci matrix` asks this with the options the workflow's `run` uses."""
    # A policy error is about the recipe itself and is fixed there first: it is the reason, before what the run's
    # set-up lacks (lm-eval) or what llmsweep cannot launch yet.
    if (policy := policy_refusal(errors)) is not None:
        return policy
    from llmsweep import engines

    if job.is_eval or job.run_eval:
        # A run-eval row promises throughput *and* an accuracy eval: one that cannot run its eval is refused whole,
        # never run as half of itself.
        from llmsweep.engines.base import relaunches_for_eval
        from llmsweep.evals.harness import refusal

        why = refusal(job.spec_decoding, run_eval=bool(job.run_eval), eval_only=bool(job.eval_only),
                      simulated=runs_on_simulator(job.engine, simulate=simulate),
                      settings=evals or EvalSettings(), pinned=relaunches_for_eval(job),
                      harness_provided=harness_provided)
        if why is None and evals is not None:
            from llmsweep.evals.context import max_tokens_refusal

            why = max_tokens_refusal(job, evals.max_tokens)
        if why is not None:
            return why

        if job.multinode and relaunches_for_eval(job):
            return ("a multinode run-eval row whose throughput point pins acceptance would run its eval on a "
                    "deployment relaunched without the pin, and roles are not relaunched yet; run the throughput "
                    f"points with {_NO_EVALS} and the eval with {_EVALS_ONLY}")
        if (job.multinode and engines.launch_refusal(job, simulate=simulate, executor=executor) is None
                and not launches_roles(job, simulate=simulate, live=live, executor=executor)):
            # lm-eval talks to a server; a deployment simulated in virtual time serves none. One refused outright (a
            # real engine's roles) gets that reason below: --no-evals, this one's fix, would not make it run.
            return ("the accuracy eval of a multinode job needs its deployment served live, role by role; only the "
                    f"live simulator ({_SIMULATE} {_LIVE}, with {_EXECUTOR} local or slurm) serves one yet; run the "
                    f"throughput points with {_NO_EVALS}")
    from llmsweep.execute.placement import simulator_placement_refusal

    where = simulator_placement_refusal(engine=job.engine, simulate=simulate, executor=executor, live=live)
    if where is not None:
        return where.line()
    launch = engines.launch_refusal(job, simulate=simulate, executor=executor)
    if launch is not None:
        # One aggregated server would be stored under the disagg identity: only the simulator runs the roles (in
        # virtual time, or live role by role).
        return launch
    if job.engine is None and not simulate:
        from llmsweep.engine_ids import UNSERVED_FRAMEWORKS

        unserved = UNSERVED_FRAMEWORKS.get(job.framework.lower())
        return ("not runnable: the recipe has no `serve` section or its framework maps to no engine adapter"
                + (f" ({job.framework}: {unserved})" if unserved else "")
                + f"; add `serve`, or run it on the simulator with {_SIMULATE}")
    return None


def unloadable_tokenizers(jobs: list[Job], event: Event, simulate: bool = False, lifecycle_here: bool = True
                          ) -> dict[str, tuple[LlmsweepError, list[Job]]]:
    """The tokenizers `jobs` count their prompts in that do not load on this host, each with why and the jobs that
    count in it: `run` refuses those jobs before any server starts (`_check_inputs`), `discover` the recipe before any
    stage. An eval-only job counts no prompt (lm-eval sends its samples), and a job the simulator serves counts in the
    built-in tokenizer: their recipes' are not loaded. Where the jobs' lifecycle runs on another host
    (`Executor.lifecycle_here`: Slurm's nodes, whose node-local paths and caches this host may not see), a tokenizer
    that does not load here is said, not returned: the node loads it."""
    from llmsweep.plan.point import check_tokenizers

    counted = [job for job in jobs if not job.eval_only and not runs_on_simulator(job.engine, simulate=simulate)]
    unloadable = check_tokenizers(counted)
    if unloadable and not lifecycle_here:
        for source, problem in unloadable.items():
            event(f"warning: tokenizer {source!r} does not load on this host ({problem.one_line()}); its jobs' "
                  "nodes load it, and a job whose node cannot fails there")
        return {}
    return {source: (error, [j for j in counted if j.workload.tokenizer == source])
            for source, error in unloadable.items()}


def tokenizer_fields(jobs: Sequence[Job]) -> str:
    """Where `jobs`' tokenizer is written, each place once: its recipe file and key's `workload.tokenizer` (the
    model id when the recipe writes none)."""
    return ", ".join(dict.fromkeys(_tokenizer_field(job) for job in jobs))


def _check_inputs(jobs: list[Job], event: Event, simulate: bool = False,
                  lifecycle_here: bool = True) -> tuple[list[Job], list[JobOutcome]]:
    """Resolve every trace source and load every tokenizer once, before any server starts: the jobs of one that
    cannot be read are refused with its reason and fix, said once, and the rest run. An eval-only job replays no
    trace (lm-eval sends its samples): its row's trace source is not its to read, offline or not; which tokenizers
    are loaded, and where, is :func:`unloadable_tokenizers`'."""
    from llmsweep.plan.point import check_trace_sources

    failed = check_trace_sources([job for job in jobs if not job.eval_only])
    unloadable = unloadable_tokenizers(jobs, event, simulate, lifecycle_here)
    if not failed and not unloadable:
        return jobs, []
    counting = {job.id: error for error, of in unloadable.values() for job in of}
    keep: list[Job] = []
    refused: list[JobOutcome] = []
    for job in jobs:
        error = failed.get(ref.source) if (ref := corpus_ref(job)) is not None else None  # (none of an eval-only job)
        reason = error.one_line() if error is not None else None
        if reason is None and (bad := counting.get(job.id)) is not None:
            reason = f"{_tokenizer_field(job)}: {bad.one_line()}"
        if reason is None:
            keep.append(job)
            continue
        refused.append(JobOutcome(job_id=job.id, exp_name=job.exp_name, status="refused", reasons=[reason]))
    for source, error in failed.items():
        n = sum(1 for j in jobs if (ref := corpus_ref(j)) is not None and ref.source == source)
        event(f"{error.message}; {count_of(n, 'job')} refused (fix: {error.fix})")
    for error, of in unloadable.values():
        event(f"{tokenizer_fields(of)}: {error.message}; {count_of(len(of), 'job')} refused before any server starts "
              f"(fix: {error.fix})")
    return keep, refused


def _tokenizer_field(job: Job) -> str:
    """Where a job's tokenizer is written: its recipe file and key's `workload.tokenizer` (the model id when the
    recipe writes none)."""
    where = f"{job.recipe_file}: " if job.recipe_file else ""
    return f"{where}{job.recipe_key}.workload.tokenizer"


def _keep_corpora(groups: list[ServerGroup], run_dir: Path, event: Event) -> None:
    """The synthetic corpora a real engine's agentic jobs replay, kept with the run (`workload.traces.kept`): their
    summaries record only the corpus digest, and once the generator changes only this file can replay them."""
    from llmsweep.workload.build import synthetic_profile
    from llmsweep.workload.traces.kept import keep_synthetic

    profiles = {profile for g in groups for job in g.jobs
                if job.workload.scenario is ScenarioId.AGENTIC_CODING and not job.eval_only
                and job.workload.traces is not None and (profile := synthetic_profile(job.workload.traces))}
    for profile in profiles:
        path, wrote = keep_synthetic(run_dir, profile)
        if wrote:
            event(f"kept the synthetic trace corpus its agentic jobs replay in {path} (what `sim calibrate` replays "
                  "their points from)")


def _docker_cli(executor: Executor) -> tuple[str, ...]:
    """The docker CLI the docker executor runs (its `docker` option: podman, a path), which `stop_stale_servers` asks
    for the containers an earlier run into the `--out` left; none for another executor (`docker` is asked anyway)."""
    from llmsweep.execute.docker import DockerExecutor

    return (executor.launcher.options.docker,) if isinstance(executor, DockerExecutor) else ()


def _power_gate(groups: list[ServerGroup], settings: LifecycleSettings, executor: Executor,
                event: Event) -> tuple[list[ServerGroup], list[JobOutcome]]:
    """`run --require-power` judged before any server starts (`lifecycle.power_gate`), on the host that samples the
    groups' power: this one when their lifecycle runs in this process (local, docker). A Slurm group's runs on the
    node its batch job lands on, which this host cannot probe: `run_worker` judges it there, before its server
    starts, and this run says so."""
    from llmsweep.execute.slurm import SlurmExecutor

    if executor.kind != SlurmExecutor.kind:
        return power_gate(groups, settings, event)
    need = sum(1 for g in groups for j in g.jobs if settings.power.required([j]))
    if need:
        event(f"power is required by {count_of(need, 'job')}: each Slurm job probes its node's power backend before "
              f"its server starts and refuses {noun(need, 'it', 'them')} there if none can sample")
    return groups, []


def _server_of(job: Job, simulate: bool, executor: str, live: bool = False) -> tuple[str, LaunchSpec,
                                                                                    Topology | None]:
    """The server `run` serves `job` on: (its fingerprint — one per server group —, the launch the client talks to,
    and the deployment role by role where it launches roles). Raises what rendering the job raises."""
    from llmsweep import engines

    sim = runs_on_simulator(job.engine, simulate=simulate)
    if launches_roles(job, simulate=simulate, live=live, executor=executor):
        # Role by role: the group is the whole deployment (its jobs differ only in concurrency); `spec` is the
        # router's launch, the one the client talks to.
        topology = engines.render_topology(job, simulate=sim)
        router = topology.role("router")
        blob = topology.model_dump_json(exclude={"job"})
        return hashlib.sha256(blob.encode()).hexdigest(), (router or topology.roles[0]).workers[0].spec, topology
    spec = engines.render(job, simulate=sim, port=engines.launch_port(job))
    return spec.fingerprint(), spec, None


class Servers:
    """The server `run` serves each job on (`_server_of`), rendered once per job as its server sees it: `run` asks
    it of the whole plan (`server_copies`) and again of the jobs it runs (`_groups`), each repeat of a job among them —
    a job sent twice, and every repeat, had been rendered each time it was asked (330 points sent twice: 660 renders
    for 330 launches). Keyed by the job less its id and copy (`Job.server_copy`), which no launch reads; a topology
    names the job that asks (`Topology.job`). A job that does not render is not kept: asked again, it raises again."""

    def __init__(self, *, simulate: bool, executor: str, live: bool = False) -> None:
        self.simulate, self.executor, self.live = simulate, executor, live
        self._rendered: dict[str, tuple[str, LaunchSpec, Topology | None]] = {}

    def __call__(self, job: Job) -> tuple[str, LaunchSpec, Topology | None]:
        key = job.model_dump_json(exclude={"id", "server_copy"})
        if (rendered := self._rendered.get(key)) is None:
            rendered = self._rendered[key] = _server_of(job, self.simulate, self.executor, self.live)
        fp, spec, topology = rendered
        if topology is not None and topology.job != job.id:
            topology = topology.model_copy(update={"job": job.id})
        return fp, spec, topology


def _groups(jobs: list[Job], servers: Servers, warnings: dict[str, list[str]] | None = None) -> list[ServerGroup]:
    simulate, executor = servers.simulate, servers.executor
    by_fp: dict[str, ServerGroup] = {}
    for job in jobs:
        fp, spec, topology = servers(job)
        group = by_fp.get(fp)
        if group is None:
            group = ServerGroup(id=f"{spec.engine}-{'roles-' if topology else ''}{fp[:12]}", spec=spec, jobs=[],
                                source=run_source(runs_on_simulator(job.engine, simulate=simulate)),
                                executor=executor, topology=topology)
            by_fp[fp] = group
        group.jobs.append(job)
        if said := (warnings or {}).get(job.id):
            group.warnings[job.id] = said
    return list(by_fp.values())


def server_copies(jobs: Sequence[Job], servers: Servers) -> dict[str, int]:
    """The planned points (`plan.point.one_point_per_job`, by id) that are a later copy of a point on its server —
    2, 3, … (`Job.server_copy`) —: where two or more jobs send one point (`workload.scenario.workload_point`) to one
    server (`_server_of`), ordered by job id, every one but the first. A job planned twice (`grid.duplicate`,
    `grid.duplicate-arm`, two recipes alike) is such a pair, and so are arms the launch does not tell apart (an image
    alone, where the simulator or the host's engine serves them). Their first runs draw two samples already (each its
    job id); repeat k of every copy drew one (`workload.scenario.sample_name`), so the later copy's was no sample of
    its own and found the earlier's fixed-length prompts in the server's prefix cache. Asked of the whole plan,
    before `--job`/`--changed` narrow it: a job's copy does not change with what one invocation runs. An eval-only job
    sends lm-eval's samples, and a job that does not render is refused: neither is counted. `servers` renders each
    job once for this and for `_groups`."""
    from llmsweep.workload.scenario import workload_point

    by_point: dict[str, list[Job]] = {}
    for job in one_point_per_job(list(jobs)):
        if not job.eval_only and (job.engine is not None or servers.simulate):
            by_point.setdefault(workload_point(job.workload, job.concs[0]), []).append(job)
    sending: dict[tuple[str, str], list[str]] = {}
    for point, senders in by_point.items():
        for job in senders if len(senders) > 1 else ():  # a point sent once has no copy: nothing to render
            try:
                fp = servers(job)[0]
            except LlmsweepError:  # refused before it runs (`job_refusal`): it sends nothing
                continue
            sending.setdefault((fp, point), []).append(job.id)
    return {job_id: n for ids in sending.values() for n, job_id in enumerate(sorted(ids), 1) if n > 1}


def _write_run_meta(run_dir: Path, req: RunRequest, run_id: str, jobs: list[Job],
                    outcomes: list[JobOutcome] | None, findings: list[Finding],
                    reuse: dict[str, Any] | None = None, superseded: frozenset[str] = frozenset(),
                    elsewhere: frozenset[str] = frozenset(), trace_pins: Sequence[TracePin] = ()) -> None:
    from llmsweep.changes.reuse import RECORDED_PARTS, record_parts
    from llmsweep.results.identity import hardware_of
    from llmsweep.results.rundir import KEPT_ATTEMPTS, RETIRED

    meta = {
        "run_id": run_id,
        "llmsweep_version": __version__,
        # to the millisecond: `compare` takes as history only runs that started before the later compared run, and two
        # runs started within one second (back-to-back runs in virtual time take less) could not be ordered
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds"),
        "recipe_files": [str(p) for p in req.files],
        "config_keys": req.config_keys,
        # the runner labels the run vouched for beyond its fleet file (`--runner-label`): its jobs on them were not
        # refused as unknown labels because the user said so, which the record keeps
        **({"runner_labels": list(req.runner_labels)} if req.runner_labels else {}),
        "executor": req.executor,
        "simulate": req.simulate,
        "repeats": req.repeats,
        # how simulated jobs run: on the simulator core in virtual time, or on its HTTP server in wall-clock time
        # (each job's provenance says `clock` too; jobs on real engines always run in wall-clock time)
        "simulated_clock": run_clock(simulated=True, live=req.live),
        "expected_job_ids": [j.id for j in jobs],
        # each job's hardware as planned, so a job that leaves no result is still counted under its hardware
        "job_hardware": {j.id: hardware_of(j.to_json()) for j in jobs},
        "findings": [f.to_json() for f in findings],
        **(reuse or {}),
    }
    # The corpus and the eval settings are recorded as the jobs used them: only when some job replays traces or has
    # an eval (a value no job used would later be taken for what the run measured with).
    exercised = _measured_by(req, jobs)
    meta.update({name: exercised[name] for name in ("traces", "eval_settings", "power_backend") if name in exercised})
    # the commit each hub trace source replayed at each revision its recipes asked, and the jobs that replayed it
    # (`_pin_traces`), which a `--resume` replays again; a source that could not be pinned is not recorded
    previous = art.read_json(run_dir / art.RUN_FILE)
    ids = {j.id for j in jobs}
    pins = [pin.model_copy(update={"jobs": [i for i in pin.jobs or () if i in ids]}) for pin in trace_pins]
    pins = [pin for pin in pins if pin.jobs]
    if isinstance(previous, dict) and _partial(req):  # a narrower invocation keeps its other jobs'
        pins = _merged_pins(read_trace_pins(previous.get(TRACE_REVISIONS)), pins)
    if pins:
        meta[TRACE_REVISIONS] = [pin.model_dump(mode="json") for pin in pins]
    if isinstance(previous, dict):
        meta["run_id"] = previous.get("run_id", run_id)
        meta["started"] = previous.get("started", meta["started"])
        for record in (RETIRED, KEPT_ATTEMPTS):  # the jobs the run retired (`_record_retired`), the attempts it
            if record in previous:  # kept for the runs that stood on them (`_JobStore.superseded`): wherever recorded
                meta[record] = previous[record]
        if _partial(req):  # what a narrower resume or --force does not exercise stays as the jobs it keeps were
            for name in MEASURED_BY:  # measured (a `--force --config-keys` of fixed-length keys dropped `traces`)
                if name not in exercised:
                    meta.pop(name, None)
                    if name in previous:
                        meta[name] = previous[name]
    kept = _kept_outcomes(meta, previous, req, superseded, elsewhere) if isinstance(previous, dict) else []
    if isinstance(parts := meta.get(RECORDED_PARTS), dict) and isinstance(keys := meta.get("reuse_keys"), dict):
        # the parts of a key an earlier invocation recorded, for a result this one keeps, as that one recorded them
        before = previous.get(RECORDED_PARTS) if isinstance(previous, dict) else None
        meta[RECORDED_PARTS] = {**record_parts(keys.values(), before), **parts}
    if outcomes is not None or kept:
        meta["outcomes"] = [o.model_dump(mode="json") for o in outcomes or ()] + kept
    if outcomes is not None:
        meta["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    art.write_json(run_dir / art.RUN_FILE, meta)


def _partial(req: RunRequest) -> bool:
    """Whether this invocation runs part of an earlier run in its --out and keeps the rest as it was measured: any
    `--resume` (the jobs it finds done stay), or a `--force` narrowed by `--job` or `--config-keys`."""
    return req.settings.resume or (req.force and (req.only_jobs is not None or bool(req.config_keys)))


def _kept_outcomes(meta: dict[str, Any], previous: dict[str, Any], req: RunRequest,
                   superseded: frozenset[str], elsewhere: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """A narrower `--resume` or `--force` (`--job`, `--config-keys`) runs part of its run, and run.json still
    describes the whole run: the jobs the run expected before that this plan does not hold stay expected (one not run
    yet stays missing), with their hardware and reuse keys, and their recorded outcomes are returned to keep — but
    for the folders this run superseded (`_supersede_renamed`). It used to shrink the run to the jobs of the narrower
    plan: `expected 1 job(s)`, the others' outcomes gone, and a run with jobs never run counted as complete (under
    `--force --job A`, rerunning one job, until 2026-12-05). A whole run planned under other eval flags than the jobs
    it expected keeps those of them its recipes plan under other eval flags (`elsewhere`, `_planned_elsewhere`) the
    same way: `--resume --evals-only` over a `--no-evals` run adds the evals to its throughput jobs."""
    if not (req.settings.resume or req.force):
        return []
    whole = req.only_jobs is None and not req.config_keys
    if whole and not elsewhere:
        return []
    now = set(meta["expected_job_ids"])
    before = previous.get("expected_job_ids")
    rest = [j for j in before if isinstance(j, str) and j not in now and j not in superseded
            and (not whole or repeat_of(j)[0] in elsewhere)] if isinstance(before, list) else []
    if not rest:
        return []
    keep = set(rest)
    meta["expected_job_ids"] = [*meta["expected_job_ids"], *rest]
    # `reused`: the kept jobs an earlier `--reuse` stood on stored results (their outcome says `reused`; the store and
    # the dashboard read which result from here, and had counted them missing after a narrower run without --reuse)
    for name in ("job_hardware", "reuse_keys", "reused"):
        old, new = previous.get(name), meta.get(name)
        if isinstance(old, dict) and isinstance(new, dict | None) \
                and (merged := {**{j: v for j, v in old.items() if j in keep}, **(new or {})}):
            meta[name] = merged
    recorded = previous.get("outcomes")
    return [o for o in recorded if isinstance(o, dict) and o.get("job_id") in keep] \
        if isinstance(recorded, list) else []


def _unplanned_outcomes(run_dir: Path, planned: set[str]) -> tuple[list[JobOutcome], list[str]]:
    """The run's expected jobs beyond `planned` (this invocation's: a narrower `--resume`/`--force` keeps the others
    expected, `_kept_outcomes`), as the dashboard reads them: (their outcomes — run.json's, else the job
    folder's own `outcome.json`, which an interrupted invocation wrote without run.json recording it —, the ids of
    those with none: never run)."""
    meta = art.read_json(run_dir / art.RUN_FILE)
    if not isinstance(meta, dict) or not isinstance(ids := meta.get("expected_job_ids"), list):
        return [], []
    rest = [j for j in ids if isinstance(j, str) and j not in planned]
    recorded = {o.get("job_id"): o for o in meta.get("outcomes") or () if isinstance(o, dict)}
    found: list[JobOutcome] = []
    never: list[str] = []
    for job_id in rest:
        for doc in (recorded.get(job_id), art.read_json(art.job_dir(run_dir, job_id) / art.OUTCOME_FILE)):
            if isinstance(doc, dict):
                try:
                    found.append(JobOutcome.model_validate(doc))
                    break
                except ValueError:  # an outcome of another llmsweep, or damaged: the next source, else never run
                    continue
        else:
            never.append(job_id)
    return found, never


def run_sweep(req: RunRequest, *, event: Event = _stderr) -> RunOutcome:
    """Plan, check, run, store and report; the returned outcome says what happened to every expected job."""
    from llmsweep.plan.evals import EVAL_ROW
    from llmsweep.policy.planning import errors_about

    executor = req.make_executor()  # an unknown kind or a bad option stops the run before anything is planned
    refuse_non_utf8(req.out)  # and an --out the store cannot record: found only once every job had run
    jobs, findings, keys, moved = _plan_and_check(req, event)
    # Errors about recipes that planned no job (a recipe dropped before planning, an input with none) refuse no job:
    # the run says them and fails (exit 2, or 1 beside jobs that ran) rather than leave those recipes out in silence.
    matched = {id(f) for j in jobs for f in errors_about(j, findings, keys)}
    unplanned = [f for f in findings if f.is_error and id(f) not in matched] if req.only_jobs is None else []
    picks: dict[str, set[int]] = {}
    whole = jobs  # the plan before --job/--changed narrow it: where each copy of a point stands (`server_copies`)
    if req.only_jobs is not None:
        only, picks = _repeat_picks(jobs, req)
        jobs, findings = _only(jobs, findings, only, selectors=req.only_jobs_typed)
    from llmsweep.evals.results import wants_eval
    from llmsweep.policy.inputs import check_side_inputs
    from llmsweep.spec.scope import alone_note, matrix_folders

    folders = matrix_folders(req.files)
    changed = req.only_jobs is not None and not req.only_jobs_typed  # `run --changed`: its change set said it
    if not folders and not req.config_keys and not changed and any(wants_eval(j) for j in jobs):
        event(f"note: {alone_note(req.files)}")
    if not changed:  # an eval the files alone ran on a row of theirs, which the matrix plans in another file
        for m in moved:
            event(m.note())
    if not jobs:
        for f in findings:  # what the files said (an empty file, a recipe dropped) is the reason: said first
            event(f.render())
        files = ", ".join(str(f) for f in req.files)
        keys_said = f" with {_CONFIG_KEYS} {' '.join(req.config_keys)}" if req.config_keys else ""
        if req.evals.evals_only or req.evals.all_evals:
            flag = _EVALS_ONLY if req.evals.evals_only else _ALL_EVALS
            among = "" if req.config_keys or not folders else (
                f" (eval rows are chosen among every recipe of {', '.join(map(str, folders))}, the matrix they belong "
                "to: a configuration's eval may be another file's row)")
            raise ConfigError(f"{files}{keys_said}: {flag} keeps only eval jobs, and the recipes have no row that "
                              f"runs an eval{among}",
                              fix=f"{EVAL_ROW}, or any 8k1k and agentic row under {_ALL_EVALS}; drop the flag to "
                                  "run the throughput jobs")
        raise ConfigError(f"{files}{keys_said}: the recipes expand to no job",
                          fix=f"check the files hold recipes (the findings above), {_CONFIG_KEYS} and the recipes' "
                              "search spaces")
    for f in findings:  # errors refuse their jobs (below); warnings run, and are said once nothing refuses the run
        if f.is_error:
            event(f.render())
    # Options that leave no job a place to run are bad input, said once: after what the recipes said (their errors
    # are not hidden behind it), before the store and --out.
    _refuse_clash(jobs, req, executor.kind)
    # what the jobs read besides their recipes (catalog files, an eval's floors and samples): bad input before any
    # server starts
    check_side_inputs(jobs, req.settings.eval, simulate=req.simulate)
    if req.eval_flags and not any(wants_eval(j) for j in jobs):
        why = (f"{_NO_EVALS} runs no eval" if req.evals.no_evals else
               f"no job of this plan runs an eval ({EVAL_ROW})")
        event(f"warning: {why}: {', '.join(req.eval_flags)} ignored")
    _check_store(req)  # before --out is touched and any server starts: a store that cannot take the run is exit 2
    run_dir = req.out
    _refuse_other_folder(run_dir, req)
    writable_out(run_dir)
    with _exclusive(run_dir):
        # Under the lock no live run owns this --out's servers: one an earlier, killed run left behind still holds
        # its port and GPUs, and is stopped whatever follows (a refusal below leaves nothing running either).
        stop_stale_servers(run_dir, event, docker=_docker_cli(executor))
        # Checked under the lock: a run still going into this --out is "another run", not a finished one.
        _refuse_finished(run_dir, req)
        jobs, pins = _pin_traces(run_dir, req, jobs, event)
        _refuse_other_measurement(run_dir, req, jobs, picks)
        _refuse_fewer_repeats(run_dir, req)
        _refuse_other_corpus(run_dir, req, jobs, picks)
        # The recipes' warnings, before anything starts: not before a refusal of the options or the --out, which
        # runs nothing they warn of (four lines of a golden-AL warning stood before "already holds a finished run").
        for f in findings:
            if not f.is_error and req.say_warnings:
                event(f.render())
        outcome = _run_locked(req, executor, jobs, findings, keys, run_dir, event, _planned_elsewhere(req, jobs),
                              picks, pins, whole)
    outcome.unplanned = unplanned
    return outcome



def _repeat_picks(jobs: list[Job], req: RunRequest) -> tuple[list[str], dict[str, set[int]]]:
    """`--job` ids that name a repeat (`<id>-repeat<k>`, as `run`'s table and the job folders name it; `-repeat1` is
    the first run) as the planned job they repeat, and, for each of its points, the repeats named — a job also named
    whole runs every repeat. A repeat beyond `--repeats` is an error naming both (it had been "no job matches")."""
    planned = {j.id for j in jobs}
    only: list[str] = []
    plain: list[str] = []
    picks: dict[str, set[int]] = {}
    from llmsweep.plan.point import one_point_per_job
    from llmsweep.plan.slices import resolve_job_ids

    for wanted in req.only_jobs or ():
        base, k = repeat_of(wanted)
        if wanted in planned or base == wanted:
            only.append(wanted)
            plain.append(wanted)
            continue
        if not 1 <= k <= req.repeats:
            raise ConfigError(f"{_JOB} {wanted} names repeat {k}, but this run plans "
                              + (f"{req.repeats} repeats" if req.repeats > 1 else "no repeat (one run of each job)"),
                              fix=f"pass {_REPEATS} as the run was planned (at least {max(k, 2)}), or name the job "
                                  f"without `{REPEAT_MARK}{k}`")
        for job in resolve_job_ids(jobs, [base], selectors=req.only_jobs_typed,
                                   fix="name a repeat as `<job id>-repeat<k>`, the job id as `llmsweep matrix "
                                       f"full-sweep {_CONFIG_FILES} FILE {_FORMAT} ids` prints it"):
            only.append(job.id)
            for point in one_point_per_job([job]):
                picks.setdefault(point.id, set()).add(k)
    if not picks or not plain:
        return list(dict.fromkeys(only)), picks
    try:  # the jobs also named whole (by id, prefix or exp-name) run every repeat
        named = resolve_job_ids(jobs, plain, selectors=req.only_jobs_typed, fix="")
    except ConfigError:  # an id that names nothing: `_only` says so, with its fix
        named = []
    whole = {p.id for p in one_point_per_job(named)}
    return list(dict.fromkeys(only)), {p: ks for p, ks in picks.items() if p not in whole}


def _picked(job_id: str, picks: dict[str, set[int]]) -> bool:
    """Whether a planned point's repeat (`job_id`, as `with_repeats` names it) is one `--job` named (`_repeat_picks`:
    a point not there runs every repeat)."""
    base, k = repeat_of(job_id)
    return base not in picks or k in picks[base]


def _planned_elsewhere(req: RunRequest, jobs: Sequence[Job]) -> frozenset[str]:
    """The jobs (as `run` runs them: a multi-node job's points, without a repeat's mark) that the recipes plan under
    other eval flags than this run's and not under its own: `--no-evals` and the default plan no eval-only job,
    `--evals-only` and `--all-evals` no throughput job, and `--all-evals` more evals than `--evals-only`. Only a
    whole `--resume` or `--force` asks (a narrower one keeps every job of the run it does not plan): a folder of such
    a job is no job "taken out of the recipe" — it was planned, and perhaps measured, under the run's earlier eval
    flags — and a `--resume --evals-only` over a `--no-evals` run had retired every throughput result of it."""
    if not (req.settings.resume or req.force) or req.only_jobs is not None or req.config_keys:
        return frozenset()
    from llmsweep.catalog.fleet import default_fleet, load_fleet
    from llmsweep.plan import matrix_of
    from llmsweep.plan.point import one_point_per_job
    from llmsweep.policy.planning import plan_recipes
    from llmsweep.spec.loader import load_recipes

    recipes = load_recipes(req.files).recipes
    fleet = (load_fleet(req.runner_config) if req.runner_config is not None else default_fleet()) \
        .vouching(req.runner_labels)
    here = {p.id for p in one_point_per_job(list(jobs))}
    other: set[str] = set()
    for flags in (EvalOptions(), EvalOptions(evals_only=True), EvalOptions(all_evals=True)):
        if flags != req.evals:
            planned, _ = plan_recipes(recipes, fleet, None, flags, matrix_of(req.files, flags))
            other |= {p.id for p in one_point_per_job(planned)}
    return frozenset(other - here)


def _refuse_clash(jobs: Sequence[Job], req: RunRequest, executor: str) -> None:
    """Raise a ConfigError (exit 2) when the run's options place none of its jobs: every job is a simulated one that
    `--executor` (with or without `--live`) cannot run (`execute.placement`). Refusing each job for it said the same
    reason once per job, exited 1 and left an empty run in the store; a clash that spares some jobs still refuses
    only those, and the rest run."""
    from llmsweep.execute.placement import simulator_placement_refusal

    clashes = [simulator_placement_refusal(engine=job.engine, simulate=req.simulate, executor=executor, live=req.live)
               for job in jobs]
    if not clashes or any(c is None for c in clashes):
        return
    said = list(dict.fromkeys(c for c in clashes if c is not None))
    fixes = list(dict.fromkeys(c.fix for c in said))
    raise ConfigError(("the one job cannot run: " if len(jobs) == 1 else f"none of the {len(jobs)} jobs can run: ")
                      + "; ".join(dict.fromkeys(c.reason for c in said)),
                      fix=fixes[0] if len(fixes) == 1 else "; or ".join(fixes))


def _only(jobs: list[Job], findings: list[Finding], ids: list[str], *,
          selectors: bool = False) -> tuple[list[Job], list[Finding]]:
    """The planned jobs named by id (`--changed`, `--job`), a concurrency slice of a planned multi-node job
    included (the concurrencies a change added); an id the plan lacks is an error, not a no-op. A finding about the
    job a slice was cut from concerns the slice too (an error refuses it as it refuses the whole job)."""
    from llmsweep.plan.slices import resolve_job_ids
    from llmsweep.policy.planning import follow_slices

    parents: dict[str, str] = {}
    chosen = resolve_job_ids(jobs, ids, parents=parents, selectors=selectors,
                             fix=f"{_CHANGED}: give the recipe files of HEAD (BASE.. plans the working tree); "
                                 f"{_JOB}: an id from `llmsweep matrix full-sweep {_CONFIG_FILES} FILE {_FORMAT} ids` "
                                 f"or from `llmsweep changes BASE..HEAD {_JSON}`")
    # what was found about jobs this run does not run is not said (a warning named every job of the recipe under
    # `--job`); a finding about the recipe itself (no jobs) stays
    ids_run = {p.id for p in one_point_per_job(chosen)} | {j.id for j in chosen}
    narrowed = []
    for f in follow_slices(findings, [(j, parents[j.id]) for j in chosen if j.id in parents]):
        if not f.jobs:
            narrowed.append(f)
        elif kept := tuple(j for j in f.jobs if j in ids_run):
            narrowed.append(f.model_copy(update={"jobs": kept}) if len(kept) < len(f.jobs) else f)
    return chosen, narrowed


def _reuse(req: RunRequest, run_dir: Path, runnable: list[Job], keys: dict[str, str],
           event: Event, other_power: dict[str, str] | None = None, *, run_id: str = "",
           stored: _JobStore | None = None,
           unpowered: dict[str, list[str]] | None = None) -> tuple[list[Job], list[JobOutcome], dict[str, Any]]:
    """Before any launch: jobs whose reuse key matches a stored valid or smoke result (the same job earns the same
    kind of verdict: a short window's point is smoke again) become outcomes pointing at it. A job may also stand on a
    result judged under the other power gate (`other_power`: its keys there; `changes.reuse.POWER_GATE`): of the
    results found under either key, the newest (`Reusable.stored`) — a run without power sampled, then one that
    required and recorded it, stood the next plain `--reuse` on the older result without power.

    A job stood on a stored result that recorded no power, in a run that records power, gets none either: said as a
    run that cannot record power says it (`power will not be recorded for N jobs: …`), and its reason added to
    `unpowered` (why -> job ids: `RunOutcome.power_unrecorded`, the run's end lines).

    A result of this run itself (`run_id`: a `--force` finds the results it is to measure again stored under the
    run's id) is no result to stand on: the lookup passes over it to an older run's under the key, else the job runs.
    A job stood on a result is one whose folder holds no result of
    its own: what an earlier attempt left there (the summary a `--force` runs again, an invalid or interrupted one a
    `--resume` would) moves to its `attempts/N/`, and the store drops it (`stored`), as before a job runs again. Left
    there, the run held the job twice — its own earlier result and the one it stands on —, and its frontier point was
    the "mean of 2 repeats" of a run planned without `--repeats`."""
    from llmsweep.results.store import Store, default_store_path

    own_found: set[str] = set()  # the jobs whose own earlier result (`--force`) the lookup passed over
    under: dict[str, str] = {}  # a job's key -> the key of the other power gate its stored result was recorded under

    def not_own(_key: str, src: Reusable) -> str | None:
        if src.run_id != run_id:
            return None
        own_found.add(src.job_id)  # this run's job: the job's own id
        return f"is this run's own, which {_FORCE} measures again"

    try:
        with Store(default_store_path(req.store)) as store:
            # a finished job's verdicts (`DONE_VERDICTS`, as --resume keeps); invalid and failed ones run again
            found = store.reusable((keys[j.id] for j in runnable if j.id in keys), DONE_VERDICTS, say=event,
                                   refuse=not_own)
            if other_power:
                job_of = {keys[j.id]: j.id for j in runnable if j.id in keys}
                for key, judged in _reusable_by_power(store, req, runnable, keys, other_power, event, not_own,
                                                      found=found).items():
                    if key not in found or judged.stored > found[key].stored:  # the newest of the two
                        found[key], under[key] = judged, other_power[job_of[key]]
            no_power = _without_power(store, found.values()) if req.settings.power.backend != "off" else {}
    except Exception as exc:  # no store to reuse from is not a reason to stop the run: everything runs
        event(f"warning: cannot look up reusable results ({exc}); running every job")
        return runnable, [], {}
    todo, reused, sources = [], [], {}
    evals: list[str] = []
    moving: dict[str, list[str]] = {}
    own: list[str] = []
    for job in runnable:
        # An eval job always runs: its task, samples and limit are run settings its reuse key does not hold.
        src = None if job.eval_only or job.run_eval else found.get(keys.get(job.id, ""))
        if src is None and job.id in own_found and not (job.eval_only or job.run_eval):
            own.append(job.id)  # its own earlier result only (`--force`): measured again
        if src is not None and (image := _moving_image(job, keys[job.id])) is not None:
            moving.setdefault(image, []).append(job.id)  # the stored result may be another build's
            src = None
        if src is None:
            todo.append(job)
            if job.eval_only or job.run_eval:
                evals.append(job.id)
            continue
        # the key the stored result was measured under (its run's record), as the store finds the result by: under
        # the other power gate's key the job's own named none of the runs' results, and the run drew no point of it
        source = {"run_id": src.run_id, "job_id": src.job_id, "result_id": src.result_id, "verdict": src.verdict,
                  "reuse_key": under.get(keys[job.id], keys[job.id]),
                  # which measurement of that job it is: its run may measure it again under the same result id
                  **({"measured_at": src.measured_at} if src.measured_at is not None else {})}
        jdir = art.job_dir(run_dir, job.id)
        (jdir / art.REUSED_FILE).unlink(missing_ok=True)  # an earlier invocation's pointer: replaced below
        if (kept := art.keep_earlier_attempt(job.id, jdir, event)) is not None and stored is not None:
            stored.superseded(jdir, kept)  # the folder holds no result of its own now: the store drops the one it held
        art.write_json(jdir / art.REUSED_FILE, source)
        sources[job.id] = source
        reused.append(JobOutcome(job_id=job.id, exp_name=job.exp_name, status="skipped", reused=True,
                                 reasons=[f"reused: {src.verdict} result of run {src.run_id} (job {src.job_id})"]))
        if (why := no_power.get(src.result_id)) is not None and unpowered is not None:
            unpowered.setdefault(why, []).append(job.id)
    for why, ids in (unpowered or {}).items():  # as a run that cannot sample says it at its start
        event(f"power will not be recorded for {count_of(len(ids), 'job')}: {why}: " + ", ".join(ids))
    if own:
        event(f"not reused: {count_of(len(own), 'job')} whose stored result is this run's own, which {_FORCE} "
              "measures again: "
              + ", ".join(own))
    for image, ids in moving.items():
        event(f"not reused: {count_of(len(ids), 'job')} {noun(len(ids), 'serves', 'serve')} {image}, whose tag names "
              "neither a version nor a build date, so "
              "a stored result may be another build's (pin the image by version, date or @sha256 digest to reuse): "
              + ", ".join(ids))
    if evals:  # said, as every job --reuse runs again is
        event(f"not reused: {count_of(len(evals), 'job')} with an eval run again (an eval's task, samples and limit "
              "are this run's settings, which no stored result records): " + ", ".join(evals))
    return todo, reused, sources


def _reusable_by_power(store: Store, req: RunRequest, jobs: list[Job], keys: dict[str, str],
                       other_power: dict[str, str], event: Event,
                       refuse: Callable[[str, Reusable], str | None],
                       found: Mapping[str, Reusable] | None = None) -> dict[str, Reusable]:
    """Stored results `jobs` may stand on that were judged under the other power gate, by the job's own key: for a
    job that requires power, the newest judged without that requirement whose power block is valid (where none is,
    the newest without valid power is said, and the job runs, unless it stands on a result under its own key:
    `found`); for one that does not, one judged with it (its verdict passed the stricter gate). `refuse`: the
    caller's own refusal (`Store.reusable`), asked first."""
    wanted = {other_power[j.id]: j for j in jobs if j.id in other_power and j.id in keys}
    if not wanted:
        return {}
    unpowered: dict[str, str] = {}  # job id -> why its newest result judged without power required is not stood on

    def powerless(other: str, src: Reusable) -> str | None:
        if (why := refuse(other, src)) is not None:
            return why
        job = wanted[other]
        if not req.settings.power.required([job]):
            return None
        points = store.results(src.run_id, job_id=src.job_id)
        summary = points[0].summary if points else None
        power = summary.power if summary is not None else None
        if power is not None and power.power_valid:
            return None
        unpowered.setdefault(job.id, f"not reused: job {job.id}: the {src.verdict} result of run {src.run_id} (job "
                             f"{src.job_id}) was judged without power required and has no valid power"
                             + (f" ({', '.join(power.reasons)})" if power is not None and power.reasons else "")
                             + "; it runs again")
        return "was judged without power required and has no valid power"

    by_power = store.reusable(wanted, DONE_VERDICTS, say=lambda _: None, refuse=powerless)
    for other, job in wanted.items():
        if other not in by_power and job.id in unpowered and keys[job.id] not in (found or {}):
            event(unpowered[job.id])
    return {keys[wanted[other].id]: src for other, src in by_power.items()}


def _without_power(store: Store, results: Iterable[Reusable]) -> dict[str, str]:
    """Of the stored results a run stands jobs on, those that recorded no GPU power, by result id, each with why and
    how to record it (`power.integrate.reused_without_power`), as the run's power lines say it."""
    from llmsweep.power.integrate import reused_without_power

    out: dict[str, str] = {}
    for src in results:
        points = store.results(src.run_id, job_id=src.job_id)
        summary = points[0].summary if points else None
        if summary is not None and (why := reused_without_power(summary.power, src.run_id)) is not None:
            out[src.result_id] = why
    return out


def _moving_image(job: Job, key: str) -> str | None:
    """The image a job's real engine would run in (its reuse key's context says `served: image`) when that image's
    reference can name another build tomorrow (`catalog.images.ImageRef.moving`); else None."""
    from llmsweep.catalog.images import parse_image
    from llmsweep.changes.reuse import split_key

    _, context = split_key(key)
    if job.image is None or context is None or context.served != "image":
        return None
    return job.image if parse_image(job.image).moving else None


def with_repeats(jobs: list[Job], repeats: int) -> list[Job]:
    """Every job `repeats` times: the first keeps its id, repeat k (2, 3, …) is `<job-id>-repeat<k>`.

    Every job runs once before any runs twice, so a drift of the server over the sweep falls on every point alike.
    A repeat draws its own sample (`workload.scenario.sample_name`): the same prompts would find the first run's in the
    server's prefix cache. Repeat k draws it for what the point sends and k, not for its job id, so repeat k of every
    arm of a point (jobs that differ only on the server side) replays one sample, as their first runs do where the
    scenario does not salt points. Results of one run that share a point's identity are repeats to `compare`, which
    takes its between-run noise band from them.
    """
    out = list(jobs)
    for k in range(2, repeats + 1):
        out += [job.model_copy(update={"id": f"{job.id}{REPEAT_MARK}{k}"}) for job in jobs]  # `workload.scenario`
    return out


def _marked_copies(points: list[Job], whole: Sequence[Job], servers: Servers) -> list[Job]:
    """`points` (as `run` runs them) with each later copy of a point on its server marked (`Job.server_copy`,
    `server_copies`), as the whole plan places it (`whole`: its points before `--job`/`--changed` narrowed it, so a
    copy draws the same samples whichever invocation runs it); a concurrency slice the whole plan does not hold
    (`--changed`) among this invocation's other slices."""
    copies = server_copies(whole, servers)
    known = {p.id for p in whole}
    if sliced := [p for p in points if p.id not in known]:
        copies.update(server_copies(sliced, servers))
    return [p.model_copy(update={"server_copy": copies[p.id]}) if p.id in copies else p for p in points]


def _refuse_other_folder(run_dir: Path, req: RunRequest) -> None:
    """Refuse (exit 2, nothing written) an --out that is another command's folder — a job folder of a run, a `bench`
    measurement, a `predict --out` point —, one inside such a folder or a run's (its jobs/, its report/, a path
    below them), or one that is no run and holds one of them below it (a folder of runs), whatever --resume or
    --force say: the run would write its run.json over the client's record there (what `summarize` judges the
    measurement by) and make a run of it, or write its run.json, jobs/ and report/ among another run's files, where
    neither run reads as itself. The fix names a folder of its own beside the one refused (or inside the folder of
    runs)."""
    from llmsweep.results.rundir import FOLDER_KINDS, out_kind, out_within, refuse_inside_other_folder, said_path

    kind = out_kind(run_dir)
    if kind in ("job", "bench", "predicted"):
        raise ConfigError(f"{_OUT} {run_dir} is {FOLDER_KINDS[kind]}: a run there would replace its run.json with "
                          "the sweep's", fix=f"pass a new folder (or a run's own folder, with {_RESUME}) to {_OUT}")
    refuse_inside_other_folder(run_dir, "a run's run.json, jobs/ and report/",
                               example=lambda parent: _free_name(parent, req), resume=_RESUME)
    if kind == "run":  # a run's own folder (its job folders below it are its own): --resume/--force say what to do
        return
    if (inner := out_within(run_dir)) is not None:
        folder, inner_kind = inner
        raise ConfigError(f"{_OUT} {run_dir} is no run and holds {FOLDER_KINDS[inner_kind]}, {said_path(folder)}: a "
                          "run there would write its run.json, jobs/ and report/ beside it, and make one run of both",
                          fix=f"pass a folder of its own to {_OUT}, e.g. {_free_name(run_dir, req)}"
                              + (f", or {said_path(folder)} with {_RESUME} to go on with that run"
                                 if inner_kind == "run" else ""))


def _free_name(parent: str | Path, req: RunRequest) -> str:
    """A folder in `parent` that does not exist yet, named after the run's first recipe (`runs/quickstart`, else
    `runs/quickstart-2`, …), for a refused --out's fix."""
    first = req.files[0] if req.files else None
    stem = (first.stem if first is not None and first.suffix else first.name if first is not None else "") or "run"
    base = Path(parent) / stem
    candidate, n = base, 1
    while candidate.exists():
        n += 1
        candidate = base.with_name(f"{stem}-{n}")
    return str(candidate)


def _refuse_finished(run_dir: Path, req: RunRequest) -> None:
    """Refuse (exit 2, nothing moved) an --out that holds a run's results, unless --resume or --force says what to
    do with them: rerunning over them would move every result into `attempts/` and run the whole sweep again."""
    if req.settings.resume or req.force:
        return
    results = _results_held(run_dir)
    if not results:  # every job refused, or failed before it had a summary: nothing to lose (a job's files would go
        return       # to its attempts/ folder), and the README's fix for such a run is to run it again
    meta = art.read_json(run_dir / art.RUN_FILE)
    finished = isinstance(meta, dict) and bool(meta.get("finished"))
    what = "a finished run" if finished else "an unfinished run"
    # a job `--reuse` stood on a stored result has no summary of its own: --resume alone would measure it again
    resume = f"{_RESUME} {_REUSE}" if any(art.jobs_dir(run_dir).glob(f"*/{art.REUSED_FILE}")) else _RESUME
    raise ConfigError(
        f"{run_dir} already holds {what} ({count_of(len(results), 'job result')}); not running over it",
        fix=f"pass {resume} to run only the jobs without a {DONE_WORDS} result, {_FORCE} to run every job again "
            f"(earlier results are kept in jobs/<id>/{art.ATTEMPTS_DIR}/), or give this run another {_OUT}",
    )


def _results_held(run_dir: Path) -> list[str]:
    """The jobs of the run in `run_dir` that have a result: a summary, or a stored one `--reuse` stood it on."""
    return sorted({p.parent.name for name in (art.SUMMARY_FILE, art.REUSED_FILE)
                   for p in art.jobs_dir(run_dir).glob(f"*/{name}")})


def _traces_named(traces: str | None) -> str | None:
    """`--traces` as run.json records it: a file or folder by its absolute path (the same relative path typed in
    another folder names another corpus), `synthetic` and a dataset id as given."""
    if traces is None or traces == "synthetic" or not Path(traces).expanduser().exists():
        return traces
    return str(Path(traces).expanduser().resolve())


def _eval_measured(req: RunRequest) -> dict[str, Any]:
    """The eval settings that change what an eval measures (task, samples, their number, the answer budget). Local
    samples (`--eval-dataset`) are named by their path and the sha256 of their bytes: a file edited in place keeps its
    path (`policy.inputs.check_side_inputs` read it before this; one that cannot be read now has no digest)."""
    ev = req.settings.eval
    digest = None
    if ev.dataset is not None:
        try:
            digest = hashlib.sha256(ev.dataset.expanduser().read_bytes()).hexdigest()[:16]
        except OSError:
            digest = None
    return {"task": ev.task, "dataset": None if ev.dataset is None else str(ev.dataset.expanduser().resolve()),
            "dataset_sha256": digest, "limit": ev.limit, "max_tokens": ev.max_tokens}


MEASURED_BY = {"simulate": "on the simulator or an engine", "simulated_clock": "clock",
                "traces": "trace corpus", "eval_settings": "eval settings", "power_backend": "power backend"}
"""The run.json fields `run` records of the options that change what a job measures, and how a refusal names each."""


def _measured_by(req: RunRequest, jobs: list[Job]) -> dict[str, object]:
    """Each of those fields the plan's jobs exercise, with the value the options give it now: `simulate` for jobs of
    a real engine (a recipe already on the simulator is not moved by it), the clock for simulated jobs, the trace
    corpus for jobs that replay traces, the eval settings for jobs with an eval, the power backend for jobs that
    measure throughput (a resume under `run --power-backend off` after `auto` left some points of one series without
    power, or read by another backend)."""
    now: dict[str, object] = {}
    if any(j.engine != SIM.id for j in jobs):
        now["simulate"] = req.simulate
    if any((req.simulate or j.engine == SIM.id) and not j.eval_only for j in jobs):  # an eval is served live anyway
        now["simulated_clock"] = run_clock(simulated=True, live=req.live)
    if any(j.workload.scenario in (ScenarioId.AGENTIC_CODING, ScenarioId.MOONCAKE_REPLAY) and not j.eval_only
           for j in jobs):
        now["traces"] = _traces_named(req.traces)
    if any(j.eval_only or j.run_eval for j in jobs):
        now["eval_settings"] = _eval_measured(req)
    if any(not j.eval_only for j in jobs):  # a point's power block: which backend read it, or none (`off`)
        now["power_backend"] = req.settings.power.backend
    return now


def _power_not_required_of_evals(jobs: int) -> str:
    """What the run says of `jobs` eval-only jobs that power was asked of: none is required of them."""
    return (f"power is not required of {count_of(jobs, 'eval-only job')}, though asked ({_REQUIRE_POWER} or the "
            "recipe's `require-power`): an eval measures accuracy, not throughput, and records no power")


def _options_said(name: str, value: object) -> str:
    """A recorded value of a `MEASURED_BY` field as the options that give it."""
    if name == "simulate":
        return _SIMULATE if value else f"no {_SIMULATE}"
    if name == "simulated_clock":
        return f"{_LIVE} (wall-clock time)" if value == "wall" else f"no {_LIVE} (virtual time)"
    if name == "traces":
        return f"{_TRACES} {value}" if value else f"no {_TRACES} (the recipes' sources)"
    if name == "power_backend":
        return f"{_POWER_BACKEND} {value}"
    ev = value if isinstance(value, dict) else {}
    held = f" (sha256 {ev['dataset_sha256']})" if ev.get("dataset_sha256") else ""
    return (f"{_EVAL_TASK} {ev.get('task')}, " + (f"{_EVAL_DATASET} {ev['dataset']}{held}" if ev.get("dataset") else
                                                  "the task's own samples")
            + (f", {_EVAL_LIMIT} {ev['limit']}" if ev.get("limit") else ", every sample")
            + (f", {_EVAL_MAX_TOKENS} {ev['max_tokens']}" if ev.get("max_tokens") else ""))


def _refuse_other_measurement(run_dir: Path, req: RunRequest, jobs: list[Job],
                              picks: dict[str, set[int]] | None = None) -> None:
    """Refuse (exit 2, nothing moved) a `--resume` whose options change what its jobs measure (`_measured_by`): the
    finished jobs it keeps were measured the other way, and one run, one series, would mix both under one run id.
    A `--force` of part of the run (`--job`, `--config-keys`) is refused alike when the jobs it does not run hold
    results: it kept them, measured under the first options, beside the jobs it measured under the new ones, and
    run.json said the new ones for all. A field the earlier run.json does not record (an older release, or no job
    of it used the option) is not compared; a corpus is compared as the path it names (an older release recorded
    `--traces` as typed); local eval samples as their path and bytes' digest (an older release recorded the path
    only)."""
    held = _results_held(run_dir)
    if not req.settings.resume:
        from llmsweep.plan.point import one_point_per_job

        planned = {j.id for j in with_repeats(one_point_per_job(jobs), req.repeats) if _picked(j.id, picks or {})}
        held = [folder for folder in held if folder not in planned]
    if not _partial(req) or not held:  # nothing measured yet, or nothing kept: nothing to mix with
        return
    meta = art.read_json(run_dir / art.RUN_FILE)
    if not isinstance(meta, dict):
        return
    recorded = {name: _traces_named(value) if name == "traces" else value for name, value in meta.items()
                if name in MEASURED_BY}
    now = _measured_by(req, jobs)
    then_ev, now_ev = recorded.get("eval_settings"), now.get("eval_settings")
    if isinstance(then_ev, dict) and isinstance(now_ev, dict) and "dataset_sha256" not in then_ev:
        # an older release recorded no samples' digest: compared without it (the path only, as then)
        now["eval_settings"] = {k: v for k, v in now_ev.items() if k != "dataset_sha256"}
    differ = [(name, recorded[name], value) for name, value in now.items()
              if name in recorded and recorded[name] != value]
    if not differ:
        return
    said = "; ".join(f"its {MEASURED_BY[name]}: it ran with {_options_said(name, recorded)}, now "
                     f"{_options_said(name, value)}" for name, recorded, value in differ)
    if not req.settings.resume:
        raise ConfigError(
            f"{_FORCE} of part of the run in {run_dir} with other options than the run — {said}. Its other jobs keep "
            f"results measured under the first ones ({held[0]}{', …' if len(held) > 1 else ''}), and the jobs run "
            "again would be measured otherwise in the same run and series",
            fix="run them again with the options the run ran with, or "
                + _run_all_again("under the new ones", resume=False))
    raise ConfigError(
        f"{_RESUME} with other options than the run in {run_dir} — {said}. Its finished jobs were measured under the "
        "first ones, and the rest would be measured otherwise in the same run and series",
        fix="resume with the options it ran with, or " + _run_all_again("under the new ones", resume=True))


def _run_all_again(how: str, *, resume: bool) -> str:
    """The fix of an invocation refused because it runs part of a run (`_partial`) otherwise than the results it
    keeps were measured (`how`: under which options, corpus or commit the jobs would run now): measure the whole run
    again, or give it another --out. One wording for every such refusal."""
    narrowed, whom = ("", "this run") if resume else (f" without {_JOB}/{_CONFIG_KEYS}", "them")
    return (f"pass {_FORCE}{narrowed} to run every job again {how} (earlier results are kept in "
            f"jobs/<id>/attempts/), or give {whom} another {_OUT}")


def _refuse_fewer_repeats(run_dir: Path, req: RunRequest) -> None:
    """Refuse (exit 2, nothing moved) a `--resume` that plans fewer repeats than the run it resumes: the repeats
    beyond them would never run, yet the resume said every expected job was done (exit 0), and the run's points were
    the means of however many repeats each happened to finish. More repeats extend the run.

    A `--force` with fewer repeats is refused as well: it ran the planned repeats again and left the results of the
    others in their folders, stored as the run's, so each point was the mean of repeats two invocations measured
    ("mean of 2 repeats" in a run planned without `--repeats`)."""
    if not (req.settings.resume or req.force) or not _results_held(run_dir):
        return
    meta = art.read_json(run_dir / art.RUN_FILE)
    planned = meta.get("repeats") if isinstance(meta, dict) else None
    if not isinstance(planned, int) or planned <= req.repeats:
        return
    if not req.settings.resume:
        raise ConfigError(
            f"{_FORCE} with {_REPEATS} {req.repeats}, but the run in {run_dir} was planned with {_REPEATS} {planned}: "
            + (f"repeat {planned}" if planned == req.repeats + 1 else f"repeats {req.repeats + 1}–{planned}")
            + " of its jobs would keep their earlier results in the run, beside the jobs run again",
            fix=f"pass {_REPEATS} {planned} to run every repeat again, or give a run of fewer repeats another {_OUT}")
    raise ConfigError(
        f"{_RESUME} with {_REPEATS} {req.repeats}, but the run in {run_dir} was planned with {_REPEATS} {planned}: "
        + (f"repeat {planned}" if planned == req.repeats + 1 else f"repeats {req.repeats + 1}–{planned}")
        + " of its jobs would never run",
        fix=f"resume with {_REPEATS} {planned}, or give a run of fewer repeats another {_OUT}")


TRACE_REVISIONS = "trace_revisions"
"""run.json: what each hub trace source (`traces.hf`) of the run was pinned to (`_pin_traces`), a list of
`plan.point.TracePin`: per source and revision its recipes asked, the commit and the jobs that replayed it. An earlier
release wrote `{dataset: commit}`, which `read_trace_pins` still reads."""


def read_trace_pins(value: object) -> list[TracePin]:
    """run.json's `trace_revisions` as typed entries: a list of `TracePin`, or an earlier release's `{dataset:
    commit}` (one commit per dataset, naming neither the revision its jobs asked nor the jobs: `TracePin.earlier`);
    [] when absent. An entry that does not read is left out (its source is pinned as a new one)."""
    if isinstance(value, dict):
        return [TracePin(source=str(k), commit=v) for k, v in value.items() if isinstance(v, str)]
    pins: list[TracePin] = []
    for entry in value if isinstance(value, list) else ():
        try:
            pins.append(TracePin.model_validate(entry))
        except ValueError:
            continue
    return pins


def _merged_pins(before: Sequence[TracePin], now: Sequence[TracePin]) -> list[TracePin]:
    """run.json's record after an invocation that ran part of the run (`_partial`): what it pinned, and what the run
    recorded before for the jobs it did not run; an earlier release's entry (`TracePin.earlier`), which names no
    jobs, is kept as it was."""
    ran = {i for pin in now for i in pin.jobs or ()}
    out = [pin if pin.earlier else pin.model_copy(update={"jobs": [i for i in pin.jobs or () if i not in ran]})
           for pin in before]
    out = [pin for pin in out if pin.earlier or pin.jobs]
    for pin in now:
        at = next((k for k, p in enumerate(out) if not p.earlier
                   and (p.dataset, p.revision, p.commit) == (pin.source, pin.revision, pin.commit)), None)
        if at is None:
            out.append(pin)
        else:
            out[at] = out[at].model_copy(update={"jobs": [*(out[at].jobs or ()), *(pin.jobs or ())]})
    return out


def _pin_traces(run_dir: Path, req: RunRequest, jobs: list[Job], event: Event) -> tuple[list[Job], list[TracePin]]:
    """The jobs with every hub trace source pinned once per revision asked, before any server starts, to the commit
    all their points replay (`plan.point.pin_trace_sources`), and what run.json records of it (`TRACE_REVISIONS`: the
    pins, each naming the run's job ids that replay it; each job records its commit as `traces.revision`). An
    invocation that runs part of the run and keeps the rest (`_partial`: a `--resume`, a `--force` narrowed by `--job`
    or `--config-keys`) replays the commit run.json recorded for each source at the revision its recipes ask — the
    dataset's latest, a branch or a tag alike —, whatever the dataset got since: a narrowed `--force` had pinned the
    latest, replayed it beside the kept jobs' commit, and recorded it as the whole run's. A recorded commit it cannot
    fetch, or a job the run recorded at another commit than its recipe's `traces.revision` gives now (a revision the
    recipe changed), is refused (exit 2), naming both commits. A source that cannot be fetched otherwise stays as it
    is: `_check_inputs` refuses its jobs with the reason."""
    from llmsweep.plan.point import recorded_commit

    meta = art.read_json(run_dir / art.RUN_FILE) if _partial(req) else None
    recorded = read_trace_pins(meta.get(TRACE_REVISIONS)) if isinstance(meta, dict) else []
    pinned_jobs, pins, failed = pin_trace_sources(jobs, req.trace_revisions, recorded)
    if req.settings.resume:
        how, kept = _RESUME, "the finished jobs replayed the first, and the rest would replay the other"
    else:
        how, kept = f"{_FORCE} of part of the run", ("its other jobs keep results that replayed the first, and the "
                                                   "jobs run again would replay the other")
    fix = _run_all_again("at the dataset's commit now", resume=req.settings.resume)
    # each planned job's ids as the run expects them (its points, their repeats): what a pin's `jobs` name
    expected = {job.id: [p.id for p in with_repeats(one_point_per_job([job]), req.repeats)] for job in jobs}
    pins = [pin.model_copy(update={"jobs": [i for j in pin.jobs or () for i in expected[j]]}) for pin in pins]
    for pin in pins:
        ids = set(pin.jobs or ())
        then = next((p for p in recorded if p.dataset == pin.source and p.commit != pin.commit
                     and (pin.revision is not None if p.earlier else bool(ids & set(p.jobs or ())))), None)
        if then is not None:
            asks = f"traces.revision {pin.revision}" if pin.revision else "dataset's latest (no traces.revision)"
            raise ConfigError(f"{how}: the run in {run_dir} replayed trace source {pin.source} at commit "
                              f"{then.commit}, and its recipe's {asks} is commit {pin.commit} now: {kept}", fix=fix)
    for (source, revision), error in failed.items():
        if (then_commit := recorded_commit(recorded, source, revision)) is not None:
            from llmsweep.workload.traces.loader import pin_dataset

            try:
                now = f"its latest is commit {pin_dataset(source)}"
            except LlmsweepError:
                now = "its latest cannot be fetched either"
            raise ConfigError(f"{how}: the run in {run_dir} replayed trace source {source} at commit "
                              f"{then_commit}, which cannot be fetched now ({error.one_line()}); {now}: the "
                              "rest of the run would replay another corpus than its finished jobs",
                              fix=f"make commit {then_commit} fetchable (network, HF_TOKEN, the Hugging Face "
                                  f"cache it was fetched into), or {fix}")
    for pin in pins:
        again = recorded_commit(recorded, pin.source, pin.revision) is not None
        event(f"trace source {pin.source}" + (f" at revision {pin.revision}" if pin.revision not in (None, pin.commit)
                                              else "")
              + f": every point replays commit {pin.commit}"
              + (" (as the run it resumes did)" if again and req.settings.resume else
                 " (as the rest of the run did)" if again else ""))
    return pinned_jobs, pins


def _recorded_job(run_dir: Path, folder: str) -> Job | None:
    """The job a job folder of the run recorded (its `job.json`); None when it does not read."""
    doc = art.read_json(art.job_dir(run_dir, folder) / art.JOB_FILE)
    try:
        return Job.model_validate(doc) if isinstance(doc, dict) else None
    except (ValueError, TypeError):
        return None


def _refuse_other_corpus(run_dir: Path, req: RunRequest, jobs: list[Job],
                         picks: dict[str, set[int]] | None = None) -> None:
    """Refuse (exit 2, nothing moved) an invocation that runs part of a run and keeps the rest (`_partial`: a
    `--resume`, a `--force` narrowed by `--job` or `--config-keys`) when a trace source of its jobs now holds another
    corpus than the one the results it keeps replayed: a file or folder edited or regenerated in place names the same
    path (what `_refuse_other_measurement` compares), and the run kept the finished points on the old corpus and
    measured the rest on the new one in one run and series. Each finished result kept is compared as its summary's
    corpus digest (its `identity.corpus`; a Mooncake replay's is its file's digest, and an earlier release's Mooncake
    summary, which records none, is compared as the file digest of the reuse key run.json recorded for it,
    `changes.reuse.FILE_DIGEST`) against the digest its source gives now, read once per
    source: a planned job's (a resume's finished jobs) against the job as planned now; one of the run's jobs this
    invocation does not run (a narrowed `--resume` or `--force`) against the planned jobs that replay its corpus
    (`plan.point.CorpusRef.key`: a hub source at its commit, a file or folder by its absolute path). A narrowed
    `--force` after a local trace file (an agentic corpus, a Mooncake trace) was edited had run its jobs on the new
    corpus beside the others' results on the old one, nothing said."""
    if not _partial(req):
        return
    held = _results_held(run_dir)
    if not held:
        return
    from llmsweep.changes.reuse import UNREADABLE, corpus_now, split_key
    from llmsweep.results.identity import short_digest

    resume = req.settings.resume
    narrowed = req.only_jobs is not None or bool(req.config_keys)
    own: dict[str, Job] = {}  # a planned job's folders (its points, their repeats), compared with it as it is now
    by_key: dict[str, Job] = {}  # a kept job of the run, with the planned job replaying its corpus
    for job in jobs:
        if (ref := corpus_ref(job)) is None:
            continue
        by_key.setdefault(ref.key, job)
        own.update({point.id: job for point in with_repeats(one_point_per_job([job]), req.repeats)})
    rerun = set() if resume else {p.id for p in with_repeats(one_point_per_job(jobs), req.repeats)
                                  if _picked(p.id, picks or {})}  # a --force's: their results are not kept
    meta = art.read_json(run_dir / art.RUN_FILE)
    before = meta.get("expected_job_ids") if isinstance(meta, dict) else None
    expected = set(before) if narrowed and isinstance(before, list) else set()
    keys = meta.get("reuse_keys") if isinstance(meta, dict) else None  # what each result was measured under
    corpora: dict[str, str] = {}
    changed: dict[str, tuple[str, str, list[str]]] = {}
    for folder in held:
        if folder in rerun:
            continue
        planned = own.get(folder)
        if planned is None and folder in expected and (kept := _recorded_job(run_dir, folder)) is not None \
                and (kept_ref := corpus_ref(kept)) is not None:
            planned = by_key.get(kept_ref.key)
        if planned is None:
            continue
        path = art.job_dir(run_dir, folder)
        summary = art.finished_summary(path)
        if summary is None or summary.validity.verdict not in DONE_VERDICTS \
                or unjudged(summary.validity.verdict, art.read_json(path / art.OUTCOME_FILE)) is not None:
            continue  # a job without a finished summary (or one no outcome closed) runs again, on the corpus now
        then = short_digest(summary.provenance.corpus_digest or "")
        if not then and isinstance(keys, dict) and isinstance(key := keys.get(folder), str) \
                and (context := split_key(key)[1]) is not None:
            then = context.corpus  # a Mooncake trace: the file digest its key was recorded with
        now = corpus_now(planned, corpora)
        if then and now not in ("", UNREADABLE, then):  # an unreadable source is refused with its reason later
            _, _, ids = changed.setdefault(ref.source if (ref := corpus_ref(planned)) else "?", (then, now, []))
            ids.append(folder)
    if not changed:
        return
    which = "finished" if resume else "kept"
    said = "; ".join(f"{source} held corpus {then} when {len(ids)} {which} {noun(len(ids), 'job')} replayed it "
                     f"({ids[0]}"
                     f"{', …' if len(ids) > 1 else ''}), and holds {now} now" for source, (then, now, ids)
                     in changed.items())
    if not resume:
        raise ConfigError(
            f"{_FORCE} of part of the run in {run_dir} with a trace corpus that changed since its other jobs ran: "
            f"{said}. Its other jobs keep results that replayed the first corpus, and the jobs run again would "
            "replay the other in the same run and series",
            fix="put the traces back as they were, or " + _run_all_again("on the corpus as it is now", resume=False))
    raise ConfigError(
        f"{_RESUME} with a trace corpus that changed since the run in {run_dir}: {said}. The finished jobs replayed "
        "the first corpus, and the rest would replay the other in the same run and series",
        fix="put the traces back as they were to resume, or "
            + _run_all_again("on the corpus as it is now", resume=True))


def writable_out(run_dir: Path) -> None:
    """--out made and write-tested before anything is written there or any server starts: a read-only disk, a
    folder this user cannot write, a path through a file is one error line (exit 2); it was a traceback from the
    folder's creation or its lock file. The checks are every output's (`writable.refuse_unwritable`), and a path that
    is not UTF-8 (`writable.refuse_non_utf8`: the store records it)."""
    from llmsweep.writable import refuse_unwritable

    refuse_non_utf8(run_dir)
    refuse_unwritable(run_dir, folder=True)
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # (a race with another process, a disk that filled since)
        raise ConfigError(f"{_OUT} {run_dir} cannot be made: {exc.strerror or exc}",
                          fix=f"give {_OUT} a folder this user can write, on a disk with space") from None


@contextmanager
def _exclusive(run_dir: Path) -> Iterator[None]:
    """One `llmsweep run` per --out at a time: a second would mix its artifacts into the first's job folders, and
    the stale-server clean-up below would stop the first one's live servers. The lock dies with its process."""
    from llmsweep.folderlock import claim

    with claim(run_dir, "llmsweep run", fix=f"wait for it to finish, or give this run its own {_OUT}"):
        yield


def _run_locked(req: RunRequest, executor: Executor, jobs: list[Job], findings: list[Finding], keys: list[str],
                run_dir: Path, event: Event, elsewhere: frozenset[str] = frozenset(),
                picks: dict[str, set[int]] | None = None, trace_pins: Sequence[TracePin] = (),
                whole: Sequence[Job] | None = None) -> RunOutcome:
    from llmsweep.policy.planning import as_points

    run_id = f"run-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    planned, findings = as_points(jobs, findings)  # a multi-node job's findings are its points'
    whole_points = one_point_per_job(list(jobs if whole is None else whole))  # before --job/--changed narrowed it
    rendered = Servers(simulate=req.simulate, executor=executor.kind, live=req.live)  # each job rendered once
    planned = _marked_copies(planned, whole_points, rendered)
    jobs = [j for j in with_repeats(planned, req.repeats) if _picked(j.id, picks or {})]  # `--job <id>-repeat<k>`
    from llmsweep.changes.reuse import (
        RECORDED_MEASUREMENT,
        RECORDED_PARTS,
        record_parts,
        recorded_measurement,
        reuse_keys,
    )
    from llmsweep.execute.local import LocalExecutor
    from llmsweep.metrics.version import measurement_identity
    from llmsweep.policy.planning import errors_about

    other_power: dict[str, str] = {}  # each job's key under the other power gate, for --reuse
    identities = reuse_keys(jobs, simulate=req.simulate, live=req.live, settings=req.settings,
                            on_host=req.executor == LocalExecutor.kind, image_mounts=executor.image_mounts(),
                            other_power=other_power if req.reuse else None)
    previous = art.read_json(run_dir / art.RUN_FILE)  # the keys the finished jobs were measured under, before rewritten
    recorded = previous.get("reuse_keys") if isinstance(previous, dict) else None
    measured = _MeasuredKeys(run_dir, identities, recorded)
    reuse_meta: dict[str, Any] = {RECORDED_MEASUREMENT: measurement_identity(), "reuse_keys": measured.keys,
                                  RECORDED_PARTS: record_parts(identities.values())}  # + the kept keys': at writing
    if req.settings.resume and not isinstance(previous, dict) and (run_dir / art.RUN_FILE).exists():
        _continue_stored_run(run_dir, req, run_id, event)
    def record_start() -> str:  # run.json as this invocation plans the run; the run's id (a resumed run keeps its)
        _write_run_meta(run_dir, req, run_id, jobs, None, findings, reuse_meta, elsewhere=elsewhere,
                        trace_pins=trace_pins)
        return str((art.read_json(run_dir / art.RUN_FILE) or {}).get("run_id", run_id))

    if not req.settings.resume:
        run_id = record_start()

    # Each job's warnings, known before it runs: its group carries them to whatever writes its outcome.json (here, or
    # on a Slurm node), and the outcomes made here (resumed, reused) get them below.
    said = {job.id: job_warnings(job, findings, keys, simulated=runs_on_simulator(job.engine, simulate=req.simulate))
            for job in planned}
    warnings = {job.id: w for job in jobs if (w := said[repeat_of(job.id)[0]])}
    refused: list[JobOutcome] = []
    runnable: list[Job] = []
    refusals = {job.id: job_refusal(job, req.simulate, errors_about(job, findings, keys), req.settings.eval,
                                    live=req.live, executor=executor.kind) for job in planned}
    for job in planned:
        if refusals[job.id] is not None:
            event(f"job {job.id}: refused — {refusals[job.id]}")
    for job in jobs:  # `jobs` is `planned` once per repeat; a repeat shares its job's refusal
        reason = refusals[repeat_of(job.id)[0]]
        if reason is None:
            runnable.append(job)
        else:
            refused.append(JobOutcome(job_id=job.id, exp_name=job.exp_name, status="refused", reasons=[reason]))

    skipped: list[JobOutcome] = []
    stored = _JobStore(run_dir, req, event, measured)
    superseded: frozenset[str] = frozenset()
    if req.settings.resume or req.force:
        superseded = _supersede_renamed(run_dir, jobs, event, stored,
                                        whole=req.only_jobs is None and not req.config_keys, elsewhere=elsewhere,
                                        recorded=recorded,
                                        also=frozenset(j.id for j in with_repeats(whole_points, req.repeats)))
    if req.settings.resume:
        # Decided here, before any launch: a group whose jobs are all done costs no server start and no Slurm job.
        todo = []
        for job in runnable:
            done = resumed(job, run_dir)
            if done is not None and (why := _measured_otherwise(
                    job, run_dir, identities.get(job.id), recorded, simulate=req.simulate,
                    measurement=recorded_measurement(previous),
                    record=previous)):
                # Its result stands for another configuration than the job now: kept aside, never mixed into this
                # run's series (its job id does not change with engine args, env or the workload).
                event(f"job {job.id}: not resumed — {why}; it runs again")
                jdir = art.job_dir(run_dir, job.id)
                if (kept := art.keep_earlier_attempt(job.id, jdir, event)) is not None:
                    stored.superseded(jdir, kept)  # nor does the store hold it as this run's (nor its key)
                done = None
            if done is not None:
                skipped.append(done)
            else:
                todo.append(job)
        runnable = todo
        # Only now, each finished job measured otherwise moved aside: run.json's reuse keys are what `recorded`
        # compares, and a resume stopped before this point (a signal while it stopped stale servers) rewrote them
        # first, so the next resume took the finished jobs measured under the old keys for done.
        run_id = record_start()
    reused_unpowered: dict[str, list[str]] = {}  # why -> jobs --reuse stood on results without power
    if req.reuse:
        runnable, reused, reuse_meta["reused"] = _reuse(req, run_dir, runnable, identities, event, other_power,
                                                        run_id=run_id, stored=stored, unpowered=reused_unpowered)
        skipped += reused
    runnable, unreadable = _check_inputs(runnable, event, req.simulate, executor.lifecycle_here)
    refused += unreadable
    if exempt := [j for j in runnable if j.eval_only and req.settings.power.asks(j)]:
        event(_power_not_required_of_evals(len(exempt)))
    groups = _groups(runnable, rendered, warnings)
    # Simulated groups run on the simulator core in virtual time unless --live asks for its HTTP server.
    virtual = [g for g in groups if g.spec.engine == SIM.id and not req.live]
    served = [g for g in groups if g not in virtual]
    # Power is judged before any job runs, where it is sampled: a served group's before its server starts; virtual
    # time models it here unless sampling is off, and then refuses the jobs that require it as the live path does
    # (they ran, and were stored invalid for the power they could not have).
    virtual, unmodelled = power_gate(virtual, req.settings, event)
    served, unpowered = _power_gate(served, req.settings, executor, event)
    refused += unmodelled + unpowered
    runnable = [j for g in [*virtual, *served] for j in g.jobs]
    live_sim = [g for g in served if g.spec.engine == SIM.id]
    engines_ = [g for g in served if g.spec.engine != SIM.id]
    _keep_corpora(engines_, run_dir, event)

    def servers(gs: list[ServerGroup], what: str) -> str:
        # a deployment role by role is one server group of several processes: say it as a deployment
        roles = [g for g in gs if g.topology is not None]
        plain = len(gs) - len(roles)
        return " and ".join(b for b in ((count_of(plain, f"{what}server") if plain else ""),
                                        (count_of(len(roles), f"{what}prefill/decode deployment") if roles else ""))
                            if b)

    evals = sum(1 for g in virtual for j in g.jobs if j.eval_only or j.run_eval)  # lm-eval needs a server
    throughput = sum(1 for g in virtual for j in g.jobs if not j.eval_only)
    configs = count_of(len(virtual), "engine config")
    simulator = (f"the simulator in virtual time ({configs}"
                 + (f"; {count_of(evals, 'eval')} against it served live" if evals else "") + ")" if throughput
                 else f"the simulator served live for {count_of(evals, 'eval')} ({configs})")
    where = " and ".join(b for b in (
        servers(engines_, ""), servers(live_sim, "live simulator "), simulator if virtual else "") if b)
    times = f" ({len(planned)} × {req.repeats} repeats)" if req.repeats > 1 and len(jobs) == len(planned) * \
        req.repeats else ""
    event(f"{count_of(len(jobs), 'job')} planned{times}, {len(runnable)} to run" + (f" on {where}" if where else "")
          + f", {len(refused)} refused"
          + (f", {len(skipped)} already done" if skipped else "")
          + (f" ({len(reuse_meta['reused'])} reused from the store)" if reuse_meta.get("reused") else ""))
    current_progress().sweep(len(runnable))
    ran: list[JobOutcome] = []
    try:
        with on_job_finished(stored, superseded=stored.superseded):
            if virtual:
                from llmsweep.execute import virtual as virtual_time

                ran += virtual_time.run_groups(virtual, run_dir, req.settings, event=event)
            if served and not (req.settings.fail_fast and not all(o.ok for o in ran)):
                ran += executor.run_groups(served, run_dir, req.settings, event=event)
    except KeyboardInterrupt:
        # no dashboard is written on the way out (a second Ctrl-C should not wait on one): how to get one is said
        event(f"interrupted: {count_of(stored.finished, 'job')} finished and stored in {stored.path}"
              + (f"; `llmsweep report {run_dir}` writes their dashboard" if stored.finished and req.report else "")
              + (f"; `llmsweep run ... {_OUT} {run_dir} {_RESUME}` (the same recipes and options) runs the rest"
                 if req.resume_hint else ""))
        raise
    by_id = {o.job_id: o for o in [*refused, *skipped, *ran]}
    outcomes = [by_id.get(j.id) or JobOutcome(job_id=j.id, exp_name=j.exp_name, status="failed",
                                               reasons=[FAIL_FAST_NOT_RUN])
                for j in jobs]
    outcomes = [o.with_warnings(warnings.get(o.job_id, ())) for o in outcomes]
    _write_run_meta(run_dir, req, run_id, jobs, outcomes, findings, reuse_meta, superseded, elsewhere, trace_pins)
    rest, never_run = _unplanned_outcomes(run_dir, {j.id for j in jobs})

    outcome = RunOutcome(run_dir=run_dir, run_id=run_id, outcomes=outcomes, findings=findings,
                         concurrency={j.id: j.concs[0] for j in jobs if j.concs},
                         reused=dict(reuse_meta.get("reused") or {}),
                         power_unrecorded={**_power_unrecorded(outcomes), **reused_unpowered}, rest=rest,
                         rest_never_run=never_run)
    # the jobs the whole run stands on stored results (a narrower invocation keeps those of an earlier `--reuse`)
    meta = art.read_json(run_dir / art.RUN_FILE)
    stood = meta.get("reused") if isinstance(meta, dict) else None
    outcome.store_path, outcome.store_error = _store(
        run_dir, req, event, reused=set(outcome.reused) | set(stood if isinstance(stood, dict) else ()))
    if req.report:
        event(f"writing the dashboard to {run_dir / 'report'} (PNG plots: `llmsweep report {run_dir}`)")
        outcome.report_path = _report(run_dir, event, req.store)
    return outcome


def _measured_otherwise(job: Job, run_dir: Path, key: str | None, recorded: object, *,
                        simulate: bool = False, measurement: object = None, record: object = None) -> str | None:
    """Why the finished result in `job`'s folder does not stand for `job` as planned now, or None when it does.

    A job id holds the recipe's InferenceX fingerprint only: engine args, env, the workload (its window, its prompts)
    and llmsweep itself (the simulator, the measurement definitions, the gates) can change under the same id. The
    recorded reuse key (run.json's `reuse_keys`: what the result was measured under) covers them all, and decides, as
    it decides for `--reuse`: one identity of "the same job" (a value requoted, `0.75` → `"0.75"`, renders the same
    launch: reused, so resumed too). `job.json` names the fields that changed; it decides alone where no key was
    recorded (a run of an earlier llmsweep), and where the keys agree but `job.json` renders another launch than
    the plan's (a run.json an earlier llmsweep rewrote over results it had not measured) the job runs again. A
    `job.json` that does not read makes a job without a result (the store refuses it): it runs again. Where the keys
    differ, what differs is said as `run --reuse` says it (`changes.reuse.key_differences`: the context's parts, the
    identity's as `KEY_PARTS` names them: as `record`, the run.json that recorded `recorded`, holds their digests
    (`changes.reuse.RECORDED_PARTS`), else read back — `measurement`: the measurement identity the run recorded; the
    simulator's build its summary records, `provenance.simulator.digest`).
    """
    from llmsweep.changes.reuse import key_differences, recorded_parts_of, split_key, stored_parts

    doc = art.read_json(art.job_dir(run_dir, job.id) / art.JOB_FILE)
    if not isinstance(doc, dict):
        return f"its {art.JOB_FILE} does not read"
    old = recorded.get(job.id) if isinstance(recorded, dict) else None
    keyed = isinstance(old, str) and key is not None
    fields = _changed_fields(doc, job)
    if not fields and (not keyed or old == key):
        return None
    if keyed and old == key and _launched_alike(doc, job, simulate=simulate):
        return None  # the same launch under the same key: only the spelling of a value changed
    if fields:
        return f"its result was measured under another configuration ({fields} changed since)"
    if key is None or not isinstance(old, str):  # (decided above: a job.json that names no change returned)
        return "its result was measured under another configuration"
    (base_old, ctx_old), (base_now, ctx_now) = split_key(old), split_key(key)
    if base_old == base_now and ctx_old is not None and ctx_now is not None and ctx_old.corpus != ctx_now.corpus:
        return "the trace corpus it replays has changed since its result was measured"
    summary = art.finished_summary(art.job_dir(run_dir, job.id))
    build = summary.provenance.simulator if summary is not None else None
    stored = stored_parts(doc, job.id, measurement, build.digest if build is not None else None)
    if measurement is None:  # not recorded (an earlier release's run.json): not compared
        stored.pop("measurement", None)
    what = key_differences(key, old, stored, then="then", recorded_parts=recorded_parts_of(record, old))
    return "its result was recorded under another reuse key — what differs: " + ("; ".join(what) or "its identity")


def _continue_stored_run(run_dir: Path, req: RunRequest, run_id: str, event: Event) -> None:
    """`--resume` over a `run.json` that does not read (cut short, a bad copy): the run goes on under the id the
    store holds for this folder, as a run.json that read would give it. Under a new id, the store held every finished
    job twice, as two runs (`compare` took the copy for an earlier run of the same configuration)."""
    from llmsweep.results.store import Store

    path = art.RUN_FILE
    try:
        with Store(req.store, readonly=True) as store:
            here = str(run_dir.resolve())
            runs = [r for r in store.runs() if r.origin == "llmsweep" and r.path == here]
    except Exception:  # no store to read: the new id stands, said below
        runs = []
    if runs:
        found = runs[-1]  # the latest ingested, should a store hold several
        art.write_json(run_dir / path, {"run_id": found.run_id, "started": found.started})
        event(f"warning: {run_dir / path} does not read: this resume goes on with run {found.run_id}, the store's "
              "run of this folder (what the run was measured with, which run.json recorded, cannot be compared)")
    else:
        event(f"warning: {run_dir / path} does not read and the store holds no run of this folder: the resumed run "
              f"gets a new id, {run_id}")


def _launched_alike(recorded: dict[str, Any], job: Job, *, simulate: bool) -> bool:
    """Whether the job its `job.json` recorded renders the same launch (`LaunchSpec.fingerprint`, the reuse key's) as
    `job` planned now; True where either does not render (the recorded reuse key stands then)."""
    from llmsweep.engines import same_launch

    try:
        then = Job.model_validate(recorded)
    except (ValueError, TypeError):
        return True
    alike = same_launch(then, job, simulate=runs_on_simulator(job.engine, simulate=simulate))
    return alike is None or alike[0]


def _changed_fields(recorded: dict[str, Any], job: Job) -> str:
    """The fields (`serve.env.X`, `image`, …) in which a job as its `job.json` recorded it differs from `job` as
    planned now, said in a few words; "" when none does, or the file is of another release's schema."""
    from llmsweep.changes.diff import job_field_diff
    from llmsweep.engines import launched_job

    try:
        fields = job_field_diff(Job.model_validate(recorded), launched_job(job))
    except (ValueError, TypeError):
        return ""
    return ", ".join(fields[:4]) + (f" and {len(fields) - 4} more" if len(fields) > 4 else "")


def _same_job(job_id: str, recipe_key: object) -> tuple[object, str, str]:
    """What names a job across two plans of a recipe (`changes.diff.match_id`), the repeat it is kept apart."""
    from llmsweep.changes.diff import match_id

    base, repeat = repeat_of(job_id)
    return (*match_id(str(recipe_key), base), str(repeat))


def _same_point(recorded: dict[str, Any], jobs: Sequence[Job]) -> Job | None:
    """The planned point of a multi-node deployment that a job folder's recorded point is, under the deployment's
    concurrency list as it is now (`changes.diff.same_point`); None when none is, or the record does not read."""
    from llmsweep.changes.diff import same_point
    from llmsweep.engines import launched_job

    try:
        old = Job.model_validate(recorded)
    except (ValueError, TypeError):
        return None
    if not old.multinode:
        return None
    found = [job for job in jobs if job.multinode and same_point(old, launched_job(job))]
    return found[0] if len(found) == 1 else None


def _supersede_renamed(run_dir: Path, jobs: Sequence[Job], event: Event, stored: _JobStore, *,
                       whole: bool = False, elsewhere: frozenset[str] = frozenset(),
                       recorded: object = None, also: frozenset[str] = frozenset()) -> frozenset[str]:
    """`--resume`/`--force`: a job folder (its `job.json`) whose job this plan still has under another id (an edit
    of its recipe's matrix fields — the image, the model, an env var InferenceX fingerprints — changes the id's hash)
    is that job's earlier attempt: moved into the planned job's `attempts/N/`, and its stored result dropped. Kept
    where it was, it stayed in the run beside the job measured again: one series drew each concurrency twice, under
    two images, and the store held both. A folder no planned job matches stays under a narrower `--job` or
    `--config-keys` (the rest of the run); under a `whole` run's plan it is a job taken out of the recipe since (a
    concurrency or arm dropped): moved to `retired/`, said, as it is no longer the run's (its point had stayed on the
    dashboard); run.json records where, with the reuse key its result was measured under (`recorded`: the keys the
    run recorded before this invocation; `rundir.RETIRED`), and the store keeps the result, as none of the run's, for
    the runs that stood on it (`run --reuse`: dropped, their dashboards had lost the point), naming them. A folder
    whose job the recipes plan under other eval flags
    (`elsewhere`: an eval-only job under `--no-evals`, a throughput job under `--evals-only`) is not taken out of
    them: it stays, the rest of the run, as under a narrower run (`_kept_outcomes`). A folder of a job the plan
    holds beyond what this invocation runs (`also`: the plan's job ids before `--job`/`--changed` narrowed it) is that
    job's, never another's earlier attempt: a job planned twice (`grid.duplicate`) is two jobs of one `_same_job`,
    and `--force --job` of one copy had moved the other copy's folder into its `attempts/` and dropped its result
    from the run."""
    gone: set[str] = set()
    planned: dict[tuple[object, str, str], list[Job]] = {}
    for job in jobs:
        planned.setdefault(_same_job(job.id, job.recipe_key), []).append(job)
    ids = {job.id for job in jobs} | also
    for old_id in sorted(p.parent.name for p in art.jobs_dir(run_dir).glob(f"*/{art.JOB_FILE}")):
        if old_id in ids:
            continue
        old_dir = art.job_dir(run_dir, old_id)
        doc = art.read_json(old_dir / art.JOB_FILE)
        if not isinstance(doc, dict):
            continue
        match = planned.get(_same_job(old_id, doc.get("recipe-key")), [])
        point = None if match else _same_point(doc, jobs)
        renamed_point = point is not None
        if point is not None:
            match = [point]
        if not match and whole and repeat_of(old_id)[0] not in elsewhere:
            retired = run_dir / art.RETIRED_DIR
            retired.mkdir(parents=True, exist_ok=True)
            # a job retired before, planned again since and now retired again: its earlier retirement is kept
            kept = retired / old_id
            n = 1
            while kept.exists():
                n += 1
                kept = retired / f"{old_id}.{n}"
            os.replace(old_dir, kept)
            _moved_attempts(run_dir, old_dir, kept)
            _record_retired(run_dir, old_id, kept, recorded)
            reusing = stored.retired(old_id)
            event(f"job {old_id}: no job of the recipe as it is now (its concurrency or arm was taken out since); its "
                  f"files are kept in {kept} and its result is no longer this run's"
                  + (f" ({_stood_on_by(reusing)})" if reusing else ""))
            gone.add(old_id)
            continue
        if len(match) != 1:  # none (a narrower run), or several the old one could be: left as it is
            continue
        job = match[0]
        target = art.job_dir(run_dir, job.id) / art.ATTEMPTS_DIR
        n = 1
        while (target / str(n)).exists():
            n += 1
        target.mkdir(parents=True, exist_ok=True)
        os.replace(old_dir, target / str(n))
        _moved_attempts(run_dir, old_dir, target / str(n))
        if renamed_point:  # (nothing of the point changed: measured again under the id of its deployment now)
            event(f"job {old_id}: superseded by job {job.id}, the same point of its multi-node deployment, whose "
                  f"concurrency list changed since (a job's id holds that list); measured again, its files are kept "
                  f"in {target / str(n)} (`llmsweep run {_CHANGED}` measures only the concurrencies an edit adds)")
        else:
            changed = _changed_fields(doc, job)
            event(f"job {old_id}: superseded by job {job.id}, the same job under its recipe as it is now"
                  + (f" ({changed} changed since)" if changed else "") + f"; its files are kept in {target / str(n)}")
        stored.superseded(old_dir, target / str(n))
        gone.add(old_id)
    return frozenset(gone)


def _stood_on_by(runs: Sequence[str]) -> str:
    """What `run` says of a result it no longer holds as its own while other runs stand a job on it (`run --reuse`):
    the store keeps it for them."""
    if len(runs) == 1:
        return f"run {runs[0]} stands on it, `run {_REUSE}`: the store keeps it for that run"
    return f"runs {', '.join(runs)} stand on it, `run {_REUSE}`: the store keeps it for them"


def _record_kept(run_dir: Path, kept: KeptAttempt) -> None:
    """run.json records at once an earlier attempt of a job that other runs stood on (`rundir.KEPT_ATTEMPTS`), before
    the store drops the job's result: the store keeps it for them from this record, now and at every later ingest of
    the run. One kept for runs not known yet (`KeptAttempt.pending`) is recorded as such; once settled (`Store.
    ingest_run`), with the runs that stand on it, or — none does — not at all."""
    from llmsweep.results.rundir import KEPT_ATTEMPTS

    meta = art.read_json(run_dir / art.RUN_FILE)
    if not isinstance(meta, dict):
        return
    entries = meta.get(KEPT_ATTEMPTS)
    entries = {**(entries if isinstance(entries, dict) else {}), kept.dir: kept.to_json()}
    if kept.runs == ():
        del entries[kept.dir]
    meta[KEPT_ATTEMPTS] = entries
    art.write_json(run_dir / art.RUN_FILE, meta)


def _moved_attempts(run_dir: Path, old: Path, new: Path) -> None:
    """A job folder moved (retired, or the earlier attempt of a job an edit renamed): the attempts inside it that the
    run kept for the runs that stood on them (`rundir.KEPT_ATTEMPTS`) are recorded where they are now, so a later
    ingest of the run still finds them."""
    from llmsweep.results.rundir import KEPT_ATTEMPTS

    meta = art.read_json(run_dir / art.RUN_FILE)
    entries = meta.get(KEPT_ATTEMPTS) if isinstance(meta, dict) else None
    if not isinstance(meta, dict) or not isinstance(entries, dict):
        return
    before, after = old.relative_to(run_dir).as_posix() + "/", new.relative_to(run_dir).as_posix() + "/"
    moved = {after + folder.removeprefix(before) if folder.startswith(before) else folder: doc
             for folder, doc in entries.items()}
    if moved != entries:
        meta[KEPT_ATTEMPTS] = moved
        art.write_json(run_dir / art.RUN_FILE, meta)


def _record_retired(run_dir: Path, job_id: str, kept: Path, recorded: object) -> None:
    """run.json records a retired job at once (`rundir.RETIRED`): the folder its files were moved to, and the reuse key
    its result was measured under (`recorded`: run.json's `reuse_keys` before this invocation rewrote them), which the
    runs that stood on it (`run --reuse`) are read back under (`Store.reused_points`). A job retired again replaces
    its earlier entry: one job id holds one result in the store."""
    from llmsweep.results.rundir import RETIRED, RetiredJob

    key = recorded.get(job_id) if isinstance(recorded, dict) else None
    meta = art.read_json(run_dir / art.RUN_FILE)
    if not isinstance(meta, dict):
        return
    entries = meta.get(RETIRED)
    entry = RetiredJob(kept.relative_to(run_dir).as_posix(), key if isinstance(key, str) else None)
    meta[RETIRED] = {**(entries if isinstance(entries, dict) else {}), job_id: entry.to_json()}
    art.write_json(run_dir / art.RUN_FILE, meta)


def _power_unrecorded(outcomes: Sequence[JobOutcome]) -> dict[str, list[str]]:
    """The jobs that ran without their power recorded, by the reason their summary's power block gives (`error`:
    read back from what ran, wherever it ran); a job that required power is not among them (it was refused, or its
    verdict says so)."""
    from llmsweep.errors import ResultError
    from llmsweep.metrics.model import Summary

    out: dict[str, list[str]] = {}
    for o in outcomes:
        if o.summary_path is None or o.status == "skipped":
            continue
        try:
            power = Summary.load(o.summary_path).power
        except ResultError:
            continue
        if power is not None and power.unrecorded:
            out.setdefault(power.unrecorded, []).append(o.job_id)
    return out


def _check_store(req: RunRequest) -> None:
    """Open, migrate and write-test the results store; a StoreError (exit 2) stops the run before any GPU time."""
    from llmsweep.results.store import Store

    with Store(req.store) as store:
        store.check_writable()


class _MeasuredKeys:
    """The reuse key each job's folder holds a result of, as run.json records it (`reuse_keys`) at every moment of the
    run, so that a run stopped at any point, and the store that `results ingest` or the per-job ingest fill from it,
    file a result only under the key it was measured with.

    A job's key is the plan's (`planned`), but for a job whose folder still holds a result an earlier invocation
    recorded under another key (`recorded`): that one stays until this run moves the result aside (`measuring`). A
    `--force` stopped halfway, or one whose jobs were refused or never reached (fail-fast), recorded the plan's keys
    over results the earlier configuration measured: the next `--resume` kept those as done, and the store filed them,
    under keys they were not measured with."""

    def __init__(self, run_dir: Path, planned: dict[str, str], recorded: object) -> None:
        self.run_dir, self.planned = run_dir, planned
        before = recorded if isinstance(recorded, dict) else {}
        self.keys: dict[str, str] = {
            job_id: (old if isinstance(old := before.get(job_id), str)
                     and (art.job_dir(run_dir, job_id) / art.SUMMARY_FILE).is_file() else key)
            for job_id, key in planned.items()}
        """run.json's `reuse_keys` of the planned jobs (the dict run.json is written from)."""

    def measuring(self, job_id: str) -> None:
        """The job's folder holds no earlier result now (moved aside), or this run's: its key is the plan's, in
        run.json at once."""
        key = self.planned.get(job_id)
        if key is None or self.keys.get(job_id) == key:
            return
        self.keys[job_id] = key
        meta = art.read_json(self.run_dir / art.RUN_FILE)
        if isinstance(meta, dict):
            recorded = meta.get("reuse_keys")
            meta["reuse_keys"] = {**(recorded if isinstance(recorded, dict) else {}), job_id: key}
            art.write_json(self.run_dir / art.RUN_FILE, meta)


class _JobStore:
    """Stores each job's result as it finishes (`lifecycle.on_job_finished`), so a sweep stopped halfway keeps the
    jobs it completed in the store, not only on disk. A failure here is said once and left to the end-of-run ingest,
    which decides the run's fate: the job's files are on disk either way. After a busy store no later job tries (a
    store another process holds locked cost each job SQLite's 30-s wait); after any other failure the next job
    does. Run.json's reuse key of the job becomes the plan's first (`_MeasuredKeys`): the store files the job's
    result under it."""

    def __init__(self, run_dir: Path, req: RunRequest, event: Event, keys: _MeasuredKeys) -> None:
        from llmsweep.results.store import default_store_path

        self.run_dir, self.path, self.event, self.keys = run_dir, default_store_path(req.store), event, keys
        self.failed = False
        self.finished = 0
        """Jobs that ended with a result stored so far (what an interrupted run keeps)."""

    def __call__(self, job_dir: Path, outcome: JobOutcome) -> None:
        from llmsweep.results.store import Store, store_busy

        self.keys.measuring(job_dir.name)
        if self.failed:  # said once; each later try would wait out the same lock (30 s a job) while GPUs idle
            return
        try:
            with Store(self.path) as store:
                if store.ingest_job(self.run_dir, job_dir):
                    self.finished += 1
        except Exception as exc:  # the sweep goes on; the end-of-run ingest tries again and fails the run if it must
            self.event(f"warning: could not store job {outcome.job_id} in {self.path}: {exc} "
                       "(the run goes on; its files are on disk)")
            # a busy store stops the later tries; a failure of this job's own (its folder) does not: the jobs after
            # it are stored as they end, so a run killed before its end keeps them stored
            self.failed = store_busy(exc)

    def retired(self, job_id: str) -> list[str]:
        """A whole run retired a job (`_supersede_renamed`, run.json recording it): the store keeps its result as none
        of the run's, for the runs that stood on it (`Store.retire_job`), whose ids are returned; [] when none do or
        the store failed (the end-of-run ingest stores the retirement all the same)."""
        from llmsweep.results.store import Store, store_busy

        try:
            if not self.failed:
                with Store(self.path) as store:
                    return store.retire_job(self.run_dir, job_id)
        except Exception as exc:  # as a store failure above: the end-of-run ingest decides
            self.event(f"warning: could not store the retirement of job {job_id} in {self.path}: {exc} "
                       "(the run goes on)")
            self.failed = store_busy(exc)
        return []

    def superseded(self, job_dir: Path, kept: Path) -> None:
        """A job runs again, its earlier attempt moved aside (into `kept`; `job_dir`: the folder it was in, named by
        the job's id then): the store drops the result that attempt left as the run's, as the folder no longer holds
        it (an interrupted `--force` rerun kept it stored while the report said the job was interrupted). Where other
        stored runs stood a job on that result (`run --reuse`), run.json records the attempt as kept for them
        (`rundir.KEPT_ATTEMPTS`) and the store keeps it, as none of this run's, read for them in place of the job's
        new result: said, naming them (their dashboards had lost the point, or drawn the new measurement as the one
        they stood on). Where the store cannot be asked (busy, or failed before), run.json records the attempt as kept
        for runs not known yet (`KeptAttempt.pending`), which the end-of-run ingest finds before it replaces the run
        (`Store.ingest_run`): nothing recorded, the reusing runs drew the job's new measurement. Then run.json's key of
        the job becomes the plan's: a run stopped between the two leaves neither the earlier result stored as the
        run's nor a key that is not its own."""
        from llmsweep.results.rundir import KeptAttempt, load_run_meta
        from llmsweep.results.store import Store, store_busy

        job_id = job_dir.name
        summary = art.finished_summary(kept)  # which measurement it is: what the runs stood on
        measured = summary.provenance.measured_at if summary is not None else None
        asked = False
        try:
            if not self.failed:  # as above: the end-of-run ingest replaces what the store holds of the run
                with Store(self.path) as store:
                    key, reusing = store.standing_on(load_run_meta(self.run_dir)[0], job_id)
                    asked = True
                    if reusing:
                        _record_kept(self.run_dir, KeptAttempt(kept.relative_to(self.run_dir).as_posix(), job_id,
                                                               key, tuple(reusing), measured))
                        self.event(f"job {job_id}: its earlier result is no longer this run's; "
                                   f"{_stood_on_by(reusing)}")
                    store.ingest_job(self.run_dir, job_dir)  # an emptied folder: its stored result goes
        except Exception as exc:  # as a store failure above: the end-of-run ingest decides
            self.event(f"warning: could not drop the earlier result of job {job_id} from {self.path}: "
                       f"{exc} (the run goes on)")
            self.failed = store_busy(exc)
        if not asked and summary is not None:  # which runs stood on it: the end-of-run ingest asks
            _record_kept(self.run_dir, KeptAttempt(kept.relative_to(self.run_dir).as_posix(), job_id,
                                                   self.keys.keys.get(job_id), None, measured))
        self.keys.measuring(job_id)


def _store(run_dir: Path, req: RunRequest, event: Event,
           reused: set[str] | frozenset[str] = frozenset()) -> tuple[Path | None, str | None]:
    """Store the whole run (replacing what was stored job by job): (store path, None), or (None, why not)."""
    from llmsweep.results.store import Store, default_store_path

    path = default_store_path(req.store)
    try:
        with Store(path) as store:
            report = store.ingest_run(run_dir, replace=True)  # this run's folder is the run: what it holds now
        for kept in report.settled:  # attempts kept while the store could not be asked: the runs that stood on them
            _record_kept(run_dir, kept)
            if kept.runs:
                event(f"job {kept.job_id}: its earlier result, kept in {run_dir / kept.dir}, is no longer this run's; "
                      f"{_stood_on_by(kept.runs)}")
        stood = [j for j in report.missing_expected if j in reused]
        gaps = len(report.missing_expected) - len(stood)
        missing = f", {count_of(gaps, 'expected job')} without a result" if gaps else ""
        also = f"; {count_of(len(stood), 'job')} reused stored results (they stay in the runs that measured them)" \
            if stood else ""
        event(f"stored {count_of(report.results, 'result')} of {report.run_id} in {path}{missing}{also}")
    except Exception as exc:  # the run's files are on disk; the run fails (exit 1) so nobody misses the gap
        why = f"could not store the run in {path}: {exc}"
        event(f"error: {why}; the run is kept in {run_dir} (`llmsweep results ingest {run_dir}` stores it later)")
        return None, why
    return path, None


def _report(run_dir: Path, event: Event, store: Path | None = None) -> Path | None:
    """The run's dashboard page, `summary.md` and `data.json`, the results `--reuse` stood jobs on drawn from the
    store they were found in. Not the PNG plots: drawing them took 2-3 CPU-s a run (matplotlib's import and seven
    figures, measured 2026-12-02), more than planning and running a small simulated sweep; they are for PRs and
    papers, and `llmsweep report RUN` writes them."""
    from llmsweep.report import write_report
    from llmsweep.results.store import default_store_path

    try:
        files = write_report(run_dir, run_dir / "report", png=False, store=default_store_path(store))
    except Exception as exc:  # the run's artifacts stay valid without a dashboard
        event(f"warning: could not write the report: {exc}")
        return None
    if files.stale_pngs:  # an earlier report's plots drew an earlier attempt's numbers under this run id
        event(f"removed {count_of(len(files.stale_pngs), 'outdated PNG plot')} from {files.out_dir} (an earlier "
              f"report's; `llmsweep report {run_dir}` draws this run's)")
    return files.html


def run_worker(group_file: Path, event: Event = _stderr) -> int:
    """The Slurm node side: run one server group with the node's launcher; exit status 0 only if every job is ok."""
    from llmsweep.execute.pyxis import node_launcher_from_env
    from llmsweep.execute.signals import named_for
    from llmsweep.execute.slurm import driver_signal

    doc = art.read_json(group_file)
    if not isinstance(doc, dict):
        raise ConfigError(f"cannot read server group file {group_file}", fix=f"rerun `llmsweep run {_EXECUTOR} slurm`")
    group, run_dir, settings = ServerGroup.from_json(doc)
    # Power is judged here, on the node that samples it, before the server starts (`lifecycle.power_gate`).
    groups, refused = power_gate([group], settings, event)
    for outcome in refused:
        refuse_here(run_dir, outcome)
    outcomes: list[JobOutcome] = list(refused)
    # The driver shows the job in flight as a local run does, from what this worker reports (progress.json).
    reporting = ReportingProgress(art.server_dir(run_dir, group.id) / art.PROGRESS_FILE)
    # scancel sends SIGTERM: stop the server step and mark the job interrupted, by the driver's signal where it says
    stands_for = driver_signal(art.server_dir(run_dir, group.id), os.environ.get("SLURM_JOB_ID"))
    with terminate_as_interrupt(), use_progress(reporting), named_for(stands_for):
        for kept in groups:
            outcomes += run_group(kept, node_launcher_from_env(), run_dir, settings, event=event)
    return 0 if all(o.ok for o in outcomes) else 1
