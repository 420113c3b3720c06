"""`llmsweep run`: recipes to a stored, reported, resumable sweep.

plan → policy (errors stop their jobs before launch, with the rule printed) → trace sources resolved once (a missing
one refuses its jobs, said once) → render every job's LaunchSpec → group jobs with identical specs onto one server →
run each group through the executor (a simulated group: on the simulator core in virtual time, `execute.virtual`,
unless `--live`) → store → report → completeness report. Eval jobs are planned but refused ("not yet supported"),
never silently skipped; so are jobs that cannot run (no `serve`, unmapped framework) unless the simulator is asked
for.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from llmsweep import __version__
from llmsweep.errors import ConfigError
from llmsweep.execute import artifacts as art
from llmsweep.execute.executor import Executor, terminate_as_interrupt
from llmsweep.execute.lifecycle import (
    DONE_VERDICTS,
    JobOutcome,
    LifecycleSettings,
    ServerGroup,
    run_group,
    stop_stale_servers,
    summarize_outcomes,
)
from llmsweep.findings import Finding
from llmsweep.plan import Job

log = logging.getLogger(__name__)


class RunRequest(BaseModel):
    """Everything `llmsweep run` was asked to do."""

    model_config = ConfigDict(extra="forbid")

    files: list[Path]
    config_keys: list[str] | None = None
    runner_config: Path | None = None
    executor: str = Field(default="local", description="Registered executor kind (`llmsweep.execute.registry`).")
    executor_options: dict[str, Any] = Field(default_factory=dict)
    simulate: bool = False
    live: bool = Field(default=False, description="Simulated jobs: serve the simulator over HTTP in wall-clock time "
                       "instead of running its core in virtual time.")
    traces: str | None = Field(default=None, description="Agentic jobs replay this trace source ('synthetic', a "
                               "path or a Hugging Face dataset id) instead of the recipe's.")
    out: Path
    store: Path | None = None
    report: bool = True
    settings: LifecycleSettings = Field(default_factory=LifecycleSettings)

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

    @property
    def expected(self) -> int:
        return len(self.outcomes)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)

    def completeness(self) -> str:
        counts = summarize_outcomes(self.outcomes)
        done = counts.get("valid", 0) + counts.get("smoke", 0) + counts.get("skipped", 0)
        parts = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
        lines = [f"expected {self.expected} job(s), {done} with a valid or smoke summary ({parts})"]
        for o in self.outcomes:
            if not o.ok:
                lines.append(f"  {o.status}: {o.job_id}: {o.reasons[0] if o.reasons else 'no reason recorded'}")
        return "\n".join(lines)


Event = Callable[[str], None]


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)  # noqa: T201 - the CLI's progress channel, injected by default


def _plan_and_check(req: RunRequest) -> tuple[list[Job], list[Finding]]:
    """Load, plan and check the recipes once, with the run's fleet (`--runner-config`) and key selection.

    Recipes that do not load or cannot be expanded stop the run (exit 2), as `matrix` would; policy errors only
    refuse the jobs they name.
    """
    from llmsweep.policy import validate_files

    validation = validate_files(req.files, config_keys=req.config_keys, runner_config=req.runner_config,
                                simulate=req.simulate)
    validation.loaded.raise_on_error()
    unplannable = [f for f in validation.findings if f.rule == "plan.failed"]
    if unplannable:
        raise ConfigError(
            "recipes that cannot be expanded into jobs:\n" + "\n".join(f.render() for f in unplannable),
            fix="fix the named fields; `llmsweep validate` lists every finding", findings=unplannable,
        )
    from llmsweep.plan.point import with_traces

    return with_traces(validation.jobs, req.traces), validation.findings


def _recipe_of(path: str, keys: set[str]) -> str | None:
    """The recipe key a finding's field path starts with. Keys contain dots (`qwen3.5-…`), so the longest key that
    prefixes the path wins: a finding on `qwen3.5-x` must not land on a recipe called `qwen3`."""
    owners = [k for k in keys if path == k or path.startswith(k + ".")]
    return max(owners, key=len) if owners else None


def _errors_for(job: Job, findings: list[Finding], keys: set[str]) -> list[Finding]:
    """Error findings that concern `job`: naming it, or its recipe without naming any job."""
    out = []
    for f in findings:
        if not f.is_error:
            continue
        if f.job:
            if job.id in f.job.replace(",", " ").split() or f.job == job.id:
                out.append(f)
        elif f.path and _recipe_of(f.path, keys) == job.recipe_key:
            out.append(f)
    return out


def _refusal(job: Job, simulate: bool, errors: list[Finding]) -> str | None:
    if job.is_eval or job.run_eval:
        # A run-eval row promises throughput *and* an accuracy eval; running half of it would store a row whose
        # eval silently never happened.
        return "eval jobs (eval-only / run-eval) are planned but not yet supported by `llmsweep run`"
    if errors:
        first = errors[0]
        return f"policy error [{first.rule}] {first.message}" + (f" (fix: {first.fix})" if first.fix else "")
    if job.engine is None and not simulate:
        return ("not runnable: the recipe has no `serve` section or its framework maps to no engine adapter; "
                "add `serve`, or run it on the simulator with --simulate")
    return None


def _check_traces(jobs: list[Job], event: Event) -> tuple[list[Job], list[JobOutcome]]:
    """Resolve every trace source once, before any server starts: the jobs of one that cannot be read are refused
    with its reason and fix, said once, and the rest run."""
    from llmsweep.plan.point import check_trace_sources, trace_source_label

    failed = check_trace_sources(jobs)
    if not failed:
        return jobs, []
    keep: list[Job] = []
    refused: list[JobOutcome] = []
    for job in jobs:
        error = failed.get(trace_source_label(job) or "")
        if error is None:
            keep.append(job)
            continue
        reason = f"{error.message} (fix: {error.fix})"
        refused.append(JobOutcome(job_id=job.id, exp_name=job.exp_name, status="refused", reasons=[reason]))
    for source, error in failed.items():
        n = sum(1 for j in jobs if trace_source_label(j) == source)
        event(f"{error.message}; {n} job(s) refused (fix: {error.fix})")
    return keep, refused


def _groups(jobs: list[Job], simulate: bool, executor: str) -> list[ServerGroup]:
    from llmsweep import engines

    by_fp: dict[str, ServerGroup] = {}
    for job in jobs:
        sim = simulate or job.engine == "sim"
        spec = engines.render(job, simulate=sim, port=0)
        fp = spec.fingerprint()
        group = by_fp.get(fp)
        if group is None:
            group = ServerGroup(id=f"{spec.engine}-{fp[:12]}", spec=spec, jobs=[],
                                source="simulated" if spec.engine == "sim" else "measured", executor=executor)
            by_fp[fp] = group
        group.jobs.append(job)
    return list(by_fp.values())


def _write_run_meta(run_dir: Path, req: RunRequest, run_id: str, jobs: list[Job],
                    outcomes: list[JobOutcome] | None, findings: list[Finding]) -> None:
    meta = {
        "run_id": run_id,
        "llmsweep_version": __version__,
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "recipe_files": [str(p) for p in req.files],
        "config_keys": req.config_keys,
        "executor": req.executor,
        "simulate": req.simulate,
        # how simulated jobs run: on the simulator core in virtual time, or on its HTTP server in wall-clock time
        # (each job's provenance says `clock` too; jobs on real engines always run in wall-clock time)
        "simulated_clock": "wall" if req.live else "virtual",
        **({"traces": req.traces} if req.traces else {}),
        "expected_job_ids": [j.id for j in jobs],
        "findings": [f.to_json() for f in findings],
    }
    previous = art.read_json(run_dir / art.RUN_FILE)
    if isinstance(previous, dict):
        meta["run_id"] = previous.get("run_id", run_id)
        meta["started"] = previous.get("started", meta["started"])
    if outcomes is not None:
        meta["outcomes"] = [o.model_dump(mode="json") for o in outcomes]
        meta["finished"] = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    art.write_json(run_dir / art.RUN_FILE, meta)


def run_sweep(req: RunRequest, *, event: Event = _stderr) -> RunOutcome:
    """Plan, check, run, store and report; the returned outcome says what happened to every expected job."""
    executor = req.make_executor()  # an unknown kind or a bad option stops the run before anything is planned
    jobs, findings = _plan_and_check(req)
    if not jobs:
        raise ConfigError("the recipes expand to no job", fix="check --config-keys and the recipes' search spaces")
    for f in findings:
        if f.is_error:
            event(f.render())
    run_dir = req.out
    run_dir.mkdir(parents=True, exist_ok=True)
    with _exclusive(run_dir):
        return _run_locked(req, executor, jobs, findings, run_dir, event)


LOCK_FILE = ".llmsweep-run.lock"


@contextmanager
def _exclusive(run_dir: Path) -> Iterator[None]:
    """One `llmsweep run` per --out at a time: a second would mix its artifacts into the first's job folders, and
    the stale-server clean-up below would stop the first one's live servers. The lock dies with its process."""
    import fcntl

    with open(run_dir / LOCK_FILE, "a+") as fh:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"another `llmsweep run` is using {run_dir}",
                              fix="wait for it to finish, or give this run its own --out") from None
        try:
            yield
        finally:
            fcntl.flock(fh.fileno(), fcntl.LOCK_UN)


def _run_locked(req: RunRequest, executor: Executor, jobs: list[Job], findings: list[Finding], run_dir: Path,
                event: Event) -> RunOutcome:
    run_id = f"run-{dt.datetime.now(dt.UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    _write_run_meta(run_dir, req, run_id, jobs, None, findings)
    run_id = (art.read_json(run_dir / art.RUN_FILE) or {}).get("run_id", run_id)
    # Resumed or not: a server an earlier, killed run into this --out left behind still holds its port and GPUs.
    stop_stale_servers(run_dir, event)

    refused: list[JobOutcome] = []
    runnable: list[Job] = []
    keys = {job.recipe_key for job in jobs}
    for job in jobs:
        reason = _refusal(job, req.simulate, _errors_for(job, findings, keys))
        if reason is None:
            runnable.append(job)
        else:
            refused.append(JobOutcome(job_id=job.id, exp_name=job.exp_name, status="refused", reasons=[reason]))
            event(f"job {job.id}: refused — {reason}")

    skipped: list[JobOutcome] = []
    if req.settings.resume:
        # Decided here, before any launch: a group whose jobs are all done costs no server start and no Slurm job.
        todo = []
        for job in runnable:
            verdict = art.finished_verdict(art.job_dir(run_dir, job.id))
            if verdict in DONE_VERDICTS:
                skipped.append(JobOutcome(job_id=job.id, exp_name=job.exp_name, status="skipped",
                                          reasons=[f"resumed: summary already {verdict}"]))
            else:
                todo.append(job)
        runnable = todo
    runnable, unreadable = _check_traces(runnable, event)
    refused += unreadable
    groups = _groups(runnable, req.simulate, executor.kind)
    # Simulated groups run on the simulator core in virtual time unless --live asks for its HTTP server.
    virtual = [g for g in groups if g.spec.engine == "sim" and not req.live]
    served = [g for g in groups if g not in virtual]
    where = (f"{len(served)} server(s)" if served else "") + (" and " if served and virtual else "") + (
        f"the simulator in virtual time ({len(virtual)} engine config(s))" if virtual else "")
    event(f"{len(jobs)} job(s) planned, {len(runnable)} to run" + (f" on {where}" if where else "")
          + f", {len(refused)} refused"
          + (f", {len(skipped)} already done" if skipped else ""))
    ran: list[JobOutcome] = []
    if virtual:
        from llmsweep.execute import virtual as virtual_time

        ran += virtual_time.run_groups(virtual, run_dir, req.settings, event=event)
    if served and not (req.settings.fail_fast and not all(o.ok for o in ran)):
        ran += executor.run_groups(served, run_dir, req.settings, event=event)
    by_id = {o.job_id: o for o in [*refused, *skipped, *ran]}
    outcomes = [by_id.get(j.id) or JobOutcome(job_id=j.id, exp_name=j.exp_name, status="failed",
                                               reasons=["not run: the sweep stopped before this job (fail-fast)"])
                for j in jobs]
    _write_run_meta(run_dir, req, run_id, jobs, outcomes, findings)

    outcome = RunOutcome(run_dir=run_dir, run_id=run_id, outcomes=outcomes, findings=findings)
    outcome.store_path = _store(run_dir, req, event)
    if req.report:
        outcome.report_path = _report(run_dir, event)
    return outcome


def _store(run_dir: Path, req: RunRequest, event: Event) -> Path | None:
    from llmsweep.results.store import Store, default_store_path

    path = default_store_path(req.store)
    try:
        with Store(path) as store:
            report = store.ingest_run(run_dir)
        gaps = len(report.missing_expected)
        missing = f", {gaps} expected job(s) without a result" if gaps else ""
        event(f"stored {report.results} result(s) of {report.run_id} in {path}{missing}")
    except Exception as exc:  # a store failure must not lose the run: its files are already on disk
        event(f"warning: could not store the run in {path}: {exc}")
        return None
    return path


def _report(run_dir: Path, event: Event) -> Path | None:
    from llmsweep.report import write_report

    try:
        files = write_report(run_dir, run_dir / "report")
    except Exception as exc:  # the run's artifacts stay valid without a dashboard
        event(f"warning: could not write the report: {exc}")
        return None
    return files.html


def run_worker(group_file: Path, event: Event = _stderr) -> int:
    """The Slurm node side: run one server group with the node's launcher; exit status 0 only if every job is ok."""
    from llmsweep.execute.pyxis import node_launcher_from_env

    doc = art.read_json(group_file)
    if not isinstance(doc, dict):
        raise ConfigError(f"cannot read server group file {group_file}", fix="rerun `llmsweep run --executor slurm`")
    group, run_dir, settings = ServerGroup.from_json(doc)
    with terminate_as_interrupt():  # scancel sends SIGTERM: stop the server step and mark the job interrupted
        outcomes = run_group(group, node_launcher_from_env(), run_dir, settings, event=event)
    return 0 if all(o.ok for o in outcomes) else 1
