"""The discovery loop: a repeated coarse ladder per arm, a few refinement rounds around the knee, the proposal.

Every stage is an ordinary `llmsweep run` (`execute.pipeline.run_sweep`) of a stage recipe: on the simulator in
virtual time with `simulate`, on the recipe's real engine otherwise, through the same executors, gates and store.
What a stage measured is read back from its run directory (summaries, with their server-metric blocks); a job that
was refused or failed adds no run, and an arm left without runs says why instead of proposing a grid.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from llmsweep.discover import analysis
from llmsweep.discover.model import ArmProposal, ArmWarning, Discovery, KeyPolicy, MetricNoise, Run, Stage
from llmsweep.discover.recipe import (
    Arm,
    StageKey,
    load_arms,
    propose,
    refused_note,
    simulated_note,
    stage_document,
    unified_diff,
    write_stage,
)
from llmsweep.discover.servers import size_for_top
from llmsweep.discover_files import DISCOVERY_FILE, PATCH_FILE, PROPOSED_FILE, STAGES_DIR
from llmsweep.errors import ConfigError, LlmsweepError
from llmsweep.execute import signals
from llmsweep.execute.executor import Executor
from llmsweep.execute.lifecycle import LifecycleSettings
from llmsweep.execute.signals import INTERRUPTED_REASONS
from llmsweep.metrics.registry import HOT_BY_NAME
from llmsweep.plan import Job
from llmsweep.plan.point import one_point_per_job
from llmsweep.results.extract import INVALID_VERDICTS
from llmsweep.spec.recipe import Recipe
from llmsweep.spec.source import render_path
from llmsweep.words import count_of

Event = Callable[[str], None]

STORE_FILE = "store.sqlite"
"""The stages' results store in --out, unless --store."""
LADDER_FLOOR = 64
"""The ladder's default top: at least this, else four times the recipe's highest concurrency."""


class DiscoverRequest(BaseModel):
    """Everything `llmsweep discover` was asked to do."""

    model_config = ConfigDict(extra="forbid")

    recipe: Path
    out: Path
    simulate: bool = False
    repeats: int = Field(default=3, ge=2, description="Runs of every ladder point (different prompts each): the "
                         "run-to-run noise comes from them, so at least 2.")
    ladder_top: int | None = Field(default=None, ge=1, description="Top of the coarse ladder (default: the larger of "
                                 f"{LADDER_FLOOR} and four times the recipe's highest concurrency).")
    refine: int = Field(default=2, ge=0, description="Bisection rounds around each arm's knee (and KV cliff).")
    time_limit: float | None = Field(default=None, gt=0, description="Wall-clock seconds the discovery may take: "
                                     "a refinement stage whose estimate (the ladder's measured server start and "
                                     "slowest run) does not fit in what is left is skipped, and says so.")
    duration: int | None = Field(default=None, ge=1, description="Profiling window of every discovery run, in "
                                 "seconds (default: the recipe's); the proposed recipe keeps the recipe's own.")
    traces: str | None = None
    trace_revisions: dict[str, str] = Field(default_factory=dict, description="The commit each hub trace source "
                                            "asked at its latest (no `traces.revision`) is replayed at by every stage "
                                            "(`discover` pins them before the first).")
    recipe_revisions: dict[str, str] = Field(default_factory=dict, description="The commit each recipe key's own hub "
                                             "trace source (`workload.traces.hf`, at its `traces.revision`) is "
                                             "replayed at by every stage, written into its stage recipes' "
                                             "`traces.revision` (`discover` pins them before the first).")
    store: Path | None = None
    runner_config: Path | None = Field(default=None, description="Runner (fleet) file the stage runs plan with.")
    runner_labels: list[str] = Field(default_factory=list, description="Labels the runner file omits that the "
                                     "runners carry (`run --runner-label`): not refused as unknown.")
    executor: str = "local"
    executor_options: dict[str, Any] = Field(default_factory=dict)
    settings: LifecycleSettings = Field(default_factory=LifecycleSettings)

    def check_executor(self) -> Executor:
        """The executor kind and its options checked (a ConfigError names a bad one), as `llmsweep run` does."""
        from llmsweep.execute.registry import get_executor

        return get_executor(self.executor, self.executor_options)


def _noise(runs: list[Run]) -> list[MetricNoise]:
    return [analysis.noise(runs, m) for m in analysis.NOISE_METRICS]


class Stages:
    """Runs stages (each an ordinary `run_sweep` of a stage recipe) and keeps the runs they measured."""

    def __init__(self, req: DiscoverRequest, arms: list[Arm], event: Event) -> None:
        self.req, self.arms, self.event = req, arms, event
        self.runs: list[Run] = []
        self.failed: dict[str, dict[int, str]] = {}
        """Each arm's concurrencies a stage ran whose run failed or was invalid (a server that ran out of memory, too
        many failed requests), with the first such run's reason: `analysis.find_knee` reads them."""
        self.problems: dict[str, str] = {}
        self.records: list[Stage] = []
        self.current = "ladder"
        """The stage under way (or last run)."""

    def run(self, name: str, concs: dict[str, list[int]], repeats: int) -> None:
        """Run one stage; an interrupt still reads back what the stage measured (and records it) before it unwinds."""
        from llmsweep.execute.pipeline import RunRequest, run_sweep
        from llmsweep.plan.matrix import EvalOptions

        self.current = name  # what an error before the stage's record names

        doc, keys = stage_document(self.req.recipe, self.arms, concs, repeats, self.req.duration,
                                   revisions=self.req.recipe_revisions)
        if not doc:
            return
        out = self.req.out / STAGES_DIR / name
        path = self.req.out / STAGES_DIR / f"{name}.yaml"
        write_stage(path, doc)
        sized = size_for_top(path, doc, keys, simulate=self.req.simulate, runner_config=self.req.runner_config)
        recipe = write_stage(path, doc)
        n = sum(len(c) for c in concs.values()) * repeats
        self.event(f"discover: stage {name}: {count_of(n, 'run')} — " + "; ".join(
            f"{arm.label} conc {concs[arm.id]}" for arm in {k.arm.id: k.arm for k in keys.values()}.values())
            + (f", × {repeats} repeats (one workload seed each)" if repeats > 1 else ""))
        for arm_id, flags in sized.items():
            self.event(f"discover: stage {name}: {arm_id} served by one server sized for conc "
                       f"{max(concs[arm_id])} ({', '.join(f'{k} {v}' for k, v in flags.items())}; `llmsweep run` of "
                       "the recipe sizes each concurrency's server)")
        record = Stage(name=name, recipe=str(recipe), run_dir=str(out), runs_planned=n, runs_measured=0,
                       server_launches=0, sized_for=sized)
        self.records.append(record)
        started = time.monotonic()
        try:
            outcome = run_sweep(RunRequest(
                files=[recipe], simulate=self.req.simulate, traces=self.req.traces,
                trace_revisions=self.req.trace_revisions, out=out,
                store=self.req.store or self.req.out / STORE_FILE, report=False,
                runner_config=self.req.runner_config, runner_labels=self.req.runner_labels,
                settings=self.req.settings, executor=self.req.executor,
                executor_options=self.req.executor_options,
                # discovery measures throughput: an 8k1k row's `run-eval` point would run an accuracy eval (or be
                # refused whole where lm-eval is missing) at a ladder point
                evals=EvalOptions(no_evals=True), say_warnings=False,
                resume_hint=False,  # a stage is not the user's to resume: the discovery is run again
            ), event=self.event)
        except KeyboardInterrupt:
            record.interrupted = True
            raise
        finally:
            record.seconds = round(time.monotonic() - started, 3)
            self._read_back(record, keys)
        record.run_seconds = [o.seconds for o in outcome.outcomes if o.seconds is not None]
        for o in outcome.outcomes:
            if not o.ok and o.reasons:
                self.problems.setdefault(name, f"{o.status}: {o.reasons[0]}")

    def _read_back(self, record: Stage, keys: dict[str, StageKey]) -> None:
        from llmsweep.execute import artifacts as art
        from llmsweep.metrics.model import SUCCESS_STATUSES
        from llmsweep.results.point import points_from_run
        from llmsweep.results.rundir import load_run, recorded_outcomes

        out = Path(record.run_dir)
        record.server_launches = server_launches(out)
        if not (out / art.RUN_FILE).exists():
            return
        before = len(self.runs)
        run = load_run(out)
        record.paused = paused_jobs(out, [a.job_id for a in run.jobs])
        # what each run's outcome warned of its result (a real engine would refuse its job, ...): the proposal says it
        warned = {job_id: o.warnings for job_id, o in recorded_outcomes(run).items()}
        # a job its run did not finish (interrupted: its outcome says failed) is no measurement, whatever summary it
        # left (`--resume` runs it again): the stage's analysis never counts it, as the store does not hold it
        unfinished = {a.job_id for a in run.jobs
                      if a.outcome is not None and a.outcome.get("status") not in SUCCESS_STATUSES}
        for done in run.jobs:  # a run that failed or was invalid is measured too: that concurrency does not serve
            outcome = done.outcome or {}
            reasons = [str(r) for r in outcome.get("reasons") or ()]
            if outcome.get("status") not in INVALID_VERDICTS or (reasons and reasons[0] in INTERRUPTED_REASONS):
                continue  # (a job a signal stopped is no measurement: `--resume` runs it again)
            if done.job_id in record.paused:
                continue  # measured across a pause of llmsweep's: left out, not a concurrency that did not serve
            failed = Job.model_validate(done.job)
            if (key := keys.get(failed.recipe_key)) is not None:
                for conc in failed.concs:
                    self.failed.setdefault(key.arm.id, {}).setdefault(
                        conc, f"{outcome['status']}: {'; '.join(reasons) or 'no reason recorded'}")
        for point in points_from_run(run):
            if not point.valid or point.summary is None or point.job_id in unfinished:
                continue
            job = Job.model_validate(point.job)
            key = keys.get(job.recipe_key)
            if key is None:
                continue
            self.runs.append(Run(
                arm=key.arm.id, conc=point.identity.conc, stage=record.name, seed=key.seed, job_id=point.job_id,
                verdict=point.verdict, source=point.source, clock=point.clock,
                metrics={m: point.metric(m) for m in analysis.NOISE_METRICS},
                kv_usage_max=point.metric("gpu_kv_usage_max"),
                preemptions=point.summary.server_metrics.preemptions,
                warnings=warned.get(point.job_id, []),
            ))
        record.runs_measured = len(self.runs) - before

    def of(self, arm: Arm) -> list[Run]:
        return [r for r in self.runs if r.arm == arm.id]

    def failed_of(self, arm: Arm) -> dict[int, str]:
        """The arm's concurrencies that failed (`failed`) and were never measured valid."""
        valid = {r.conc for r in self.of(arm)}
        return {c: why for c, why in self.failed.get(arm.id, {}).items() if c not in valid}

    def estimate(self, runs: int, servers: int) -> float | None:
        """Seconds a stage of `runs` runs on `servers` fresh servers should take, from the stages measured so far:
        their largest overhead (planning, stopping servers, storing), plus per server the slowest run that started one
        (a stage's first run on each server includes its start: the stage's `server_launches` longest runs), plus
        the slowest other run for each remaining run; None before any stage finished."""
        done = [r for r in self.records if r.seconds is not None and r.run_seconds and not r.interrupted]
        if not done:
            return None
        overhead = max(r.overhead_s or 0.0 for r in done)
        starting: list[float] = []
        plain: list[float] = []
        for record in done:
            ranked = sorted(record.run_seconds, reverse=True)
            starting += ranked[:record.server_launches]
            plain += ranked[record.server_launches:]
        with_start = max(starting, default=max(plain, default=0.0))
        per_run = max(plain, default=with_start)
        return overhead + min(servers, runs) * with_start + max(runs - servers, 0) * per_run

    def skip(self, name: str, runs: int, why: str) -> None:
        self.records.append(Stage(name=name, recipe="", run_dir="", runs_planned=runs, runs_measured=0,
                                  server_launches=0, skipped=why))
        self.event(f"discover: stage {name} skipped — {why}")


def paused_jobs(run_dir: Path, job_ids: list[str]) -> dict[str, str]:
    """The jobs of a stage's run measured while llmsweep was stopped (Ctrl-Z, `kill -STOP`) and continued, and why:
    the note the lifecycle wrote in their run.json (`readback.judge_paused`), which made them invalid. A discovery
    does not resume, so the note's way to measure again is replaced by the discovery's."""
    from llmsweep.execute import artifacts as art
    from llmsweep.execute.readback import PAUSED

    found: dict[str, str] = {}
    for job_id in job_ids:
        info = art.read_json(art.job_dir(run_dir, job_id) / art.RUN_FILE)
        if isinstance(info, dict) and isinstance(note := info.get(PAUSED), str):
            found[job_id] = note.partition("; ")[0] + f"; left out of the discovery ({RESUME})"
    return found


def server_launches(run_dir: Path) -> int:
    """Engine servers a run started, read back from its server folders (each launch writes a log of its own)."""
    from llmsweep.execute import artifacts as art

    servers = art.server_dir(run_dir, "_").parent
    return sum(1 for _ in servers.glob(f"*/{Path(art.SERVER_LOG).stem}*.log"))


def _refuse_used(out: Path) -> None:
    if (out / DISCOVERY_FILE).exists() or (out / STAGES_DIR).exists():
        raise ConfigError(f"discover: {out} already holds a discovery", fix="give this discovery another --out")


def ladder_top(req: DiscoverRequest, arms: list[Arm]) -> int:
    """The ladder's highest concurrency: `--ladder-top`, else the larger of LADDER_FLOOR and four times the recipe's
    highest."""
    return req.ladder_top or max(LADDER_FLOOR, 4 * max(c for a in arms for c in a.concs))


def jobs_run(jobs: Sequence[Job]) -> int:
    """How many jobs `llmsweep run` runs of `jobs`: a multi-node entry's concurrency list is one planned job but one
    run job per concurrency (`plan.point.one_point_per_job`), so a disaggregated arm's grid that grows is counted.
    The one count the proposal's cost is said in, on both sides (`recipe_jobs`, `proposed_jobs`)."""
    return len(one_point_per_job(list(jobs)))


def _planned(req: DiscoverRequest) -> list[Job]:
    """The recipe's jobs as `llmsweep run` plans them (its inputs are checked on them before any stage); none when
    it does not plan: the validation that follows refuses it at its lines."""
    from llmsweep.plan import jobs_from_files

    try:
        return jobs_from_files([req.recipe], runner_config=req.runner_config)
    except LlmsweepError:
        return []


def _refuse_unloadable_tokenizers(req: DiscoverRequest, jobs: list[Job], executor: Executor, event: Event) -> None:
    """A tokenizer the recipe's jobs count their prompts in that does not load here stops the discovery before any
    stage, naming the recipe's own `workload.tokenizer` (`run`'s check, `execute.pipeline.unloadable_tokenizers`):
    every stage's jobs had been refused for it, each naming the stage recipe, and the --out used up."""
    from llmsweep.execute.pipeline import tokenizer_fields, unloadable_tokenizers

    unloadable = unloadable_tokenizers(jobs, event, req.simulate, executor.lifecycle_here)
    if unloadable:
        raise ConfigError("discover: " + "; ".join(f"{tokenizer_fields(of)}: {error.message}"
                                                   for error, of in unloadable.values()),
                          fix="; ".join(dict.fromkeys(error.fix for error, _ in unloadable.values() if error.fix)))


def _refuse_unworkable(req: DiscoverRequest, arms: list[Arm], recipes: Mapping[str, Recipe], planned: list[Job]
                       ) -> tuple[dict[str, str], dict[str, str]]:
    """What cannot run as asked stops before any stage starts, with the reason; returns the commit each hub trace
    source is pinned to, which every stage replays (`plan.point.pin_trace_sources`), and that commit for each recipe
    key that names its own hub source (`DiscoverRequest.recipe_revisions`): at a `traces.revision` that is a branch or
    tag, each stage resolved it again, and the stages of one discovery could replay different commits."""
    from llmsweep.execute.placement import simulator_placement_refusal
    from llmsweep.spec.engines import resolve_engine
    from llmsweep.spec.workload import ScenarioId

    pinned: dict[str, str] = {}
    by_recipe: dict[str, str] = {}
    # `run` asks the same per job (`execute.pipeline`): every stage's jobs would be refused for this reason
    for key in dict.fromkeys(a.recipe_key for a in arms):
        engine = resolve_engine(recipes[key]) if recipes[key].serve is not None else None
        why = simulator_placement_refusal(engine=engine, simulate=req.simulate, executor=req.executor, live=False,
                                          live_option=False)  # discovery runs no live simulator
        if why is not None:
            what = "--simulate" if req.simulate else f"{key} serves the simulator"
            raise ConfigError(f"discover: {what}: {why.reason}", fix=why.fix)
    if any(a.path[1] == ScenarioId.AGENTIC_CODING.value for a in arms):
        # resolved once, before any stage, `--traces` or the recipe's own: a missing one had been refused job by job
        # inside the ladder (exit 1, the --out used), and the corrected command refused as that --out "already holds
        # a discovery"
        from llmsweep.plan.point import check_trace_sources, corpus_ref, pin_trace_sources, with_traces
        from llmsweep.workload.traces.loader import is_commit

        # (a recipe that does not plan has no jobs: it is refused at its lines by the validation that follows)
        jobs, pins, _ = pin_trace_sources(with_traces(planned, req.traces, lambda _: None))
        # the commit a stage's job replays a source at when its recipe asks the latest (`RunRequest.trace_revisions`)
        pinned = {pin.source: pin.commit for pin in pins if pin.revision is None}
        if req.traces is None:  # `--traces` replaces the recipes' sources in every stage
            by_recipe = {job.recipe_key: commit for job in jobs if (ref := corpus_ref(job)) is not None
                         and (commit := ref.revision) is not None
                         and (own := recipes[job.recipe_key].workload) is not None and own.traces is not None
                         and own.traces.hf is not None and is_commit(commit)}
        for unread in check_trace_sources(jobs).values():
            what = f"--traces {req.traces}" if req.traces is not None else "the recipe's trace source"
            raise ConfigError(f"discover: {what}: {unread.message}", fix=unread.fix)
        _refuse_unladderable_replays(jobs, arms, ladder_top(req, arms))
    fixed = [a for a in arms if a.path[1] == ScenarioId.FIXED_SEQ_LEN.value]
    top = ladder_top(req, arms)
    for arm in fixed:  # a fixed total of prompts never drives more users than it has prompts
        workload = recipes[arm.recipe_key].workload
        total = workload.num_prompts if workload is not None else None
        if total is not None and total < top:
            raise ConfigError(
                f"discover: {arm.id} sends workload.num-prompts {total} at every concurrency: ladder points above "
                f"conc {total} (up to {top}) would never have that many requests in flight, and would be analysed "
                "as if they had",
                fix="use workload.num-prompts-per-conc (a run sends that many per user, as InferenceX's 10 x conc), "
                    f"or pass --ladder-top {total} or less")
    if req.duration is not None and fixed:
        raise ConfigError(f"discover: --duration is the profiling window of agentic runs; {fixed[0].id} is a "
                          "fixed-seq-len arm, whose runs send a number of prompts, not a window",
                          fix="drop --duration; a fixed-seq-len run's length is the recipe's "
                              "workload.num-prompts-per-conc (or num-prompts)")
    return pinned, by_recipe


def _refuse_unladderable_replays(jobs: list[Job], arms: list[Arm], top: int) -> None:
    """A Mooncake replay arm (an agentic-coding entry of a recipe whose workload names `replay`) whose ladder could not
    measure what its concurrencies say: on the trace's timestamps (open loop) the concurrency sets nothing, so every
    rung replays the same arrivals; in closed loop every row is sent once, so a rung above the trace's row count never
    holds that many requests in flight (as a fixed `num-prompts` below the ladder's top)."""
    from llmsweep.spec.workload import ScenarioId
    from llmsweep.workload.mooncake import load_mooncake

    seen: set[str] = set()
    for job in jobs:
        replay = job.workload.replay
        if job.workload.scenario is not ScenarioId.MOONCAKE_REPLAY or replay is None or job.recipe_key in seen:
            continue
        seen.add(job.recipe_key)
        arm = next((a for a in arms if a.recipe_key == job.recipe_key), None)
        if arm is None:
            continue
        if replay.timestamps:
            raise ConfigError(
                f"discover: {arm.id} replays {replay.mooncake} on its timestamps (workload.replay.timestamps: true, "
                "open loop): a job's concurrency is not used, so every ladder point would replay the same arrivals "
                "and the grid would be read from differences that are noise alone",
                fix="set workload.replay.timestamps to false (closed loop, `conc` rows in flight) to discover a grid; "
                    "an open-loop replay has no concurrency to choose")
        try:
            rows = len(load_mooncake(replay.mooncake, limit=replay.max_rows))
        except LlmsweepError as exc:
            raise ConfigError(f"discover: {arm.id}: {exc.message}", fix=exc.fix) from None
        if rows < top:
            limit = f" (workload.replay.max-rows {replay.max_rows})" if replay.max_rows is not None else ""
            raise ConfigError(
                f"discover: {arm.id} replays {count_of(rows, 'row')} of {replay.mooncake}{limit}, each once: ladder "
                "points above "
                f"conc {rows} (up to {top}) would never have that many requests in flight, and would be analysed as "
                "if they had",
                fix=f"pass --ladder-top {rows} or less, or replay a trace of at least {top} rows")


def _say_warnings(req: DiscoverRequest, event: Event) -> None:
    """The given recipe's warning findings, once (its stages' runs keep theirs in their run.json); its errors stop
    the discovery before any stage, at the recipe's own lines (a stage's run would refuse its every job naming the
    stage recipe), except the grid rules: the stages run grids of their own, without the recipe's policy."""
    from llmsweep.policy import validate_files

    findings = validate_files([req.recipe], runner_config=req.runner_config, simulate=req.simulate,
                              runner_labels=req.runner_labels).findings
    errors = [f for f in findings if f.is_error and not f.rule.startswith(GRID_RULES)]
    if errors:
        raise ConfigError("discover: the recipe fails validation:\n" + "\n".join(f.render() for f in errors),
                          fix="fix the named lines (`llmsweep validate` lists every finding); discover replaces only "
                              "the grid", findings=errors)
    for f in findings:
        if not f.is_error:
            event(f.render())


RESUME = "a discovery does not resume: run it again with another --out"
"""What an interrupted discovery says of going on (its --out is refused to a second discovery)."""

GRID_RULES = "grid."
"""The rules about a recipe's concurrency grid and its policy, which a discovery's stages replace with their own."""


def discover(req: DiscoverRequest, *, event: Event) -> Discovery:
    """Measure, refine and propose; writes discovery.json, proposed.yaml and proposed.diff into `req.out`.

    An interrupt (Ctrl-C, SIGTERM, the timeout of a device call) stops the stage under way (its servers are stopped
    as `llmsweep run` stops them) and no further stage starts; discovery.json is still written, from every run
    measured so far, with `interrupted` naming the stage, and no recipe is proposed."""
    recipes, arms = load_arms(req.recipe)
    _refuse_used(req.out)
    recipe_jobs = _planned(req)
    pinned, by_recipe = _refuse_unworkable(req, arms, recipes, recipe_jobs)
    req = req.model_copy(update={"trace_revisions": pinned, "recipe_revisions": by_recipe})
    executor = req.check_executor()  # an unknown kind or a bad option stops the discovery before anything runs
    _say_warnings(req, event)
    _refuse_unloadable_tokenizers(req, recipe_jobs, executor, event)
    top = ladder_top(req, arms)
    if any(a.start > top for a in arms):
        raise ConfigError(f"discover: --ladder-top {top} is below an arm's first concurrency",
                          fix=f"pass --ladder-top of at least {max(a.start for a in arms)}")
    # --out made and write-tested as `llmsweep run` does its own, once every refusal above had its say: a path
    # through a file or a folder this user cannot write is one error line (exit 2), not a traceback from the stage
    from llmsweep.execute.pipeline import writable_out
    from llmsweep.plan import jobs_from_files
    from llmsweep.results.store import Store

    # and the store write-tested before the first stage writes stages/: a stage's own check refused it (exit 2) after,
    # and the fixed command was then refused as this --out "already holds a discovery". A --store of its own is
    # tested before --out is made, as `llmsweep run` tests it: its refusal leaves no empty --out behind; the default
    # store lives in --out, tested once that is made.
    store_path = req.store or req.out / STORE_FILE
    if req.store is not None:
        with Store(store_path) as store:
            store.check_writable()
    writable_out(req.out)
    if req.store is None:
        with Store(store_path) as store:
            store.check_writable()
    stages = Stages(req, arms, event)
    started = time.monotonic()
    interrupted: str | None = None
    failed: str | None = None
    unexpected: Exception | None = None
    try:
        stages.run("ladder", {a.id: analysis.ladder(a.start, top) for a in arms}, req.repeats)
        for round_ in range(1, req.refine + 1):
            targets: dict[str, list[int]] = {}
            settled: list[str] = []
            for arm in arms:
                runs = stages.of(arm)
                points = analysis.curve(runs)
                tput, intvty = analysis.noise(runs, analysis.THROUGHPUT), analysis.noise(runs, analysis.INTERACTIVITY)
                knee = analysis.find_knee(points, tput, intvty, failed=stages.failed_of(arm))
                flat = analysis.identical_repeats({n.metric: n for n in (tput, intvty)})
                todo = analysis.refine_targets(points, knee, resolution=1) if knee is not None and not flat else []
                if todo:
                    targets[arm.id] = todo
                elif flat is not None:
                    settled.append(f"{arm.id}: {flat}")
                elif knee is None:
                    settled.append(f"{arm.id}: no valid run of it was measured (see its proposal's error)")
                elif knee.next_conc is None:
                    settled.append(f"{arm.id}: {knee.reason}")
                else:
                    settled.append(f"{arm.id}: its knee lies between conc {knee.conc} and {knee.next_conc}, "
                                   "already measured at the finest step")
            if not targets:  # said, so a --refine that ran no round is not a mystery
                stages.skip(f"refine-{round_}", 0, "nothing to refine: " + "; ".join(settled))
                break
            name, planned = f"refine-{round_}", sum(len(t) for t in targets.values())
            estimate = stages.estimate(planned, servers=0 if req.simulate else len(targets))
            if req.time_limit is not None and estimate is not None:
                left = req.time_limit - (time.monotonic() - started)
                if estimate > left:
                    stages.skip(name, planned, f"--time-limit: {count_of(planned, 'run')} should take about "
                                               f"{estimate:.0f} s "
                                "(the measured server starts, slowest runs and stage overhead so far), "
                                f"{max(left, 0):.0f} s are left")
                    break
            stages.run(name, targets, 1)
    except KeyboardInterrupt as exc:
        signals.consumed(exc)  # analysing what was measured: a second signal hurries that, never interrupts it
        interrupted = next((r.name for r in stages.records if r.interrupted), "between stages")
        event(f"discover: interrupted during stage {interrupted}; analysing the {count_of(len(stages.runs), 'run')} "
              f"measured so far, proposing no recipe or policy ({RESUME})")
    except Exception as exc:  # a stage that failed loses none of the runs measured before it
        said = exc.one_line() if isinstance(exc, LlmsweepError) else \
            str(exc) if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
        failed = f"stage {stages.current} failed: {said}"
        event(f"discover: {failed}; analysing the {count_of(len(stages.runs), 'run')} measured so far, proposing no "
              "recipe or policy")
        if not isinstance(exc, (LlmsweepError, OSError)):
            unexpected = exc  # a defect of ours: raised again, with its traceback, once what was measured is written
    # how the discovery stopped short, if it did: what was measured ends there, not at the ladder's top
    cut = (f"was interrupted during stage {interrupted}" if interrupted is not None else
           f"stopped as stage {stages.current} failed" if failed is not None else None)

    proposals = [_proposal(arm, stages, cut) for arm in arms]
    grids = {p.arm: p.concs for p in proposals if p.error is None}
    own_caps = {key: r.policy.max_conc if r.policy is not None else None for key, r in recipes.items()}
    # an interrupted discovery proposes no recipe, nor its policy: a knee the signal cut the ladder above is unearned
    policy = grid_policy(proposals, own_caps) if interrupted is None and failed is None else {}
    for key, (_, cap) in policy.items():
        if cap is not None and (own := own_caps.get(key)) is not None and cap > own:
            measured = max((p.conc for a in proposals if a.recipe_key == key for p in a.curve), default=0)
            event(f"discover: {key}: policy.max-conc {own} raised to {cap}, the top of the proposed grid " + (
                "(measured above the recipe's cap)" if cap <= measured else
                f"(the recipe's own concurrencies above conc {measured}, the top of what was measured, kept as they "
                "are: the knee was not reached)"))
    min_steps = [s for s, _ in policy.values() if s is not None]
    caps = [c for _, c in policy.values() if c is not None]
    result = Discovery(
        recipe_file=str(req.recipe), simulate=req.simulate, repeats=req.repeats, ladder_top=top, runs=stages.runs,
        arms=proposals, points_measured=len({(r.arm, r.conc) for r in stages.runs}), runs_measured=len(stages.runs),
        min_conc_step=min(min_steps) if min_steps else None, max_conc=max(caps) if caps else None,
        stages=stages.records, executor=req.executor, interrupted=interrupted, failed=failed,
        policy={key: KeyPolicy(min_conc_step=step, max_conc=cap) for key, (step, cap) in policy.items()},
        recipe_jobs=jobs_run(recipe_jobs) or None,
    )
    req.out.mkdir(parents=True, exist_ok=True)
    if grids and interrupted is None and failed is None:
        try:
            # the file a user commits says what its grid stands on, the engine refusals its arms' runs carried,
            # and what it costs against the recipe (each proposed concurrency a job of the official sweep)
            proposed = propose(req.recipe, req.out / PROPOSED_FILE, grids, arms, policy,
                               note=simulated_note([r.source for r in stages.runs]),
                               warned=[refused_note(p.arm, p.label, w) for p in proposals if p.error is None
                                       for w in p.warnings if w.engine_refuses],
                               plans=lambda file: jobs_run(jobs_from_files([file], runner_config=req.runner_config)),
                               recipe_jobs=result.recipe_jobs)
        except LlmsweepError as exc:  # what was measured is kept (discovery.json below) whatever the rewrite did
            result.proposal_error = exc.one_line()
            event(f"discover: no proposed recipe: {result.proposal_error}")
        else:
            result.proposed_recipe = str(req.out / PROPOSED_FILE)
            result.proposed_jobs = proposed.jobs
            result.patch = unified_diff(req.recipe, proposed.text, str(req.out / PROPOSED_FILE))
            (req.out / PATCH_FILE).write_text(result.patch, encoding="utf-8")
    (req.out / DISCOVERY_FILE).write_text(result.model_dump_json(indent=2), encoding="utf-8")
    if unexpected is not None:
        raise unexpected
    return result


def grid_policy(proposals: list[ArmProposal],
                caps: Mapping[str, int | None] | None = None) -> dict[str, tuple[int | None, int | None]]:
    """Each recipe key's proposed `policy: (min-conc-step, max-conc)`: the smallest proposed step of its arms, and
    their highest knee — a cap only where every arm of the recipe measured its knee (a ladder that still rose at its
    top earned none); a key none of whose arms got a grid gets nothing. `caps`: each key's own `max-conc`; one below
    the proposed grid (a knee above it not reached) is raised to the grid's top, or the proposed recipe would fail
    its own validation (`grid.max-conc`: every job above it refused)."""
    policy: dict[str, tuple[int | None, int | None]] = {}
    for key in dict.fromkeys(p.recipe_key for p in proposals):
        arms = [p for p in proposals if p.recipe_key == key]
        mine = [p for p in arms if p.error is None]
        if not mine:
            continue
        steps = [s for p in mine if (s := p.min_step) is not None]
        found = len(mine) == len(arms) and all(p.knee is not None and p.knee.found for p in mine)
        cap = max(max(p.concs) for p in mine) if found else None
        own = (caps or {}).get(key)
        top = max(max(p.concs if p.error is None else p.original) for p in arms)
        if cap is None and own is not None and own < top:
            cap = top
        if steps or cap is not None:
            policy[key] = (min(steps) if steps else None, cap)
    return policy


def _proposal(arm: Arm, stages: Stages, cut: str | None = None) -> ArmProposal:
    """The arm's knee and grid from its runs; `cut`: how the discovery stopped short (`was interrupted during stage
    X`, `stopped as stage X failed`), when it did."""
    runs = stages.of(arm)
    noise = _noise(runs)
    points = analysis.curve(runs)
    by_metric = {n.metric: n for n in noise}
    tput = by_metric[analysis.THROUGHPUT]
    knee = analysis.find_knee(points, tput, by_metric[analysis.INTERACTIVITY], cut=cut,
                              failed=stages.failed_of(arm))
    said = Counter(w for r in runs for w in dict.fromkeys(r.warnings))
    proposal = ArmProposal(arm=arm.id, recipe_key=arm.recipe_key, path=render_path(arm.path), label=arm.label,
                           original=list(arm.concs), proposed=[], min_step=None, knee=knee, noise=noise, curve=points,
                           warnings=[ArmWarning(warning=w, runs=n) for w, n in said.items()])
    if knee is None:
        why = "; ".join(f"{stage}: {p}" for stage, p in stages.problems.items()) or (
            f"the discovery {cut} before one finished" if cut else "none finished valid")
        proposal.error = f"no valid run of this arm ({why})"
    elif tput.cv is None:
        why = f"the discovery {cut} before a point was repeated" if cut else "every repeat but one failed?"
        proposal.error = (f"no repeated point with a {HOT_BY_NAME[analysis.THROUGHPUT].label}: the noise is unknown "
                          f"({why})")
    elif (flat := analysis.identical_repeats(by_metric)) is not None:
        proposal.error = f"no grid: {flat}"
    else:
        proposal.proposed = analysis.propose_grid(points, arm.start, knee, by_metric, recipe=arm.concs,
                                                  cut=cut)
        proposal.min_step = analysis.min_step(proposal.concs)
    return proposal
