"""The Point: one job at one concurrency, the unit `run`, `bench` (of a job) and `predict` each execute.

A job names its concurrencies; each point drives one of them. What a point sends, how long, on which route, with
which gates and on how many GPUs is decided once here, from the job's scenario — `llmsweep run` (through
`execute.lifecycle.bench_job`) sends it to a server, `llmsweep predict` to the simulated engine in virtual time, and
both read the same answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from llmsweep.errors import DatasetError, LlmsweepError
from llmsweep.plan.job import Job
from llmsweep.spec.workload import ScenarioId, TraceSource
from llmsweep.words import count_of
from llmsweep.workload.base import Api
from llmsweep.workload.scenario import Load, Scenario, scenario_of

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from llmsweep.metrics.gates import GateConfig
    from llmsweep.workload.base import Workload


@dataclass(frozen=True)
class Point:
    """One concurrency point of a job, with its scenario's stopping rule resolved."""

    job: Job
    concurrency: int

    @classmethod
    def of(cls, job: Job, concurrency: int | None = None) -> Point:
        """The point of `job` at `concurrency` (default: its first; a job run by `llmsweep run` has one)."""
        return cls(job, job.concs[0] if concurrency is None else concurrency)

    @property
    def scenario(self) -> Scenario:
        """What the job sends (`job.workload.scenario`), which may differ from the recipe block it came from."""
        return scenario_of(self.job.workload)

    @property
    def load(self) -> Load:
        """How the point drives the server: its concurrency and when it stops (prompt count, window, the trace)."""
        return self.scenario.load(self.job.workload, concurrency=self.concurrency, job_duration=self.job.duration)

    @property
    def api(self) -> Api:
        return self.scenario.api(self.job.workload)

    @property
    def gpus(self) -> int:
        """GPUs behind the endpoint, for per-GPU throughput (at least 1)."""
        return max(1, self.job.gpus)

    @property
    def max_error_ratio(self) -> float:
        """The failure ratio that stops the run early and fails the gate."""
        return self.scenario.gate.max_error_ratio

    def workload(self, *, simulated: bool = False, **overrides: Any) -> Workload:
        """The point's workload. `simulated`: prompts counted with the built-in tokenizer (the simulator's rule; the
        recipe's HF tokenizer is for real engines). `overrides` go to the workload's config."""
        if simulated:
            overrides.setdefault("tokenizer", None)
        return self.scenario.build(self.job.workload, concurrency=self.concurrency, point=self.job.id,
                                   copy=self.job.server_copy, **overrides)

    def gates(self, *, planned_duration_s: float | None = None,
              require_metrics_prefix: str | None = None) -> GateConfig:
        """The point's gate thresholds; `planned_duration_s` is the profiling window the run was given (if any). A
        point bounded by its prompt count alone (fixed-length) is a result only once it finished them all."""
        load = self.load
        planned = load.num_requests if load.duration_s is None else None
        return self.scenario.gate.config(planned_duration_s=planned_duration_s,
                                         require_metrics_prefix=require_metrics_prefix, planned_requests=planned)


def points_of(job: Job) -> list[Point]:
    """Every concurrency point of a job, in the job's order."""
    return [Point(job, conc) for conc in job.concs]


CONC_MARK = "-conc"


def one_point_per_job(jobs: list[Job]) -> list[Job]:
    """A job that plans several concurrencies (a multinode matrix entry's `conc` list) becomes one job per
    concurrency, `<job-id>-conc<N>`, each with its own folder and result; they keep the curve identity, so the
    simulator runs them one after another on one deployment as InferenceX does. A multinode row's accuracy eval runs
    at its `eval-conc` only (InferenceX): that point keeps `run-eval`, the others are throughput points. Other jobs
    pass unchanged."""
    out: list[Job] = []
    for job in jobs:
        if len(job.concs) < 2:
            out.append(job)
            continue
        for c in job.concs:
            update: dict[str, Any] = {"id": f"{job.id}{CONC_MARK}{c}", "conc": [c]}
            if job.run_eval and job.eval_conc is not None and not job.eval_all_concs and c != job.eval_conc:
                update.update(run_eval=False, eval_conc=None)
            out.append(job.model_copy(update=update))
    return out


def trace_source(text: str, model_prefix: str) -> TraceSource:
    """`--traces` as a recipe's trace source: `synthetic` (the built-in AgentX-shaped corpus, capped as the corpus
    InferenceX would pick for the model: 256k-token prompts unless it is a 1M-context family), a local path, or a
    Hugging Face dataset id / AgentX loader id."""
    from llmsweep.spec.workload import DEFAULT_CORPUS_256K, SyntheticTraces, default_corpus

    if text == "synthetic":
        cap = 256_000 if default_corpus(model_prefix) == DEFAULT_CORPUS_256K else None
        return TraceSource(synthetic=SyntheticTraces.model_validate({"max-isl": cap}))
    if Path(text).exists():
        return TraceSource(path=text)
    return TraceSource(hf=text)


def with_traces(jobs: list[Job], traces: str | None, say: Callable[[str], None] | None = None) -> list[Job]:
    """The jobs with every agentic job replaying `traces` (`run --traces`, `predict --traces`); others unchanged.
    `say` is told (as a `warning:` line) when no job is an agentic replay; default the log."""
    if traces is None:
        return jobs
    out = []
    for job in jobs:
        if job.workload.scenario is ScenarioId.AGENTIC_CODING:
            workload = job.workload.model_copy(update={"traces": trace_source(traces, job.model_prefix)})
            job = job.model_copy(update={"workload": workload})
        out.append(job)
    if jobs and not any(job.workload.scenario is ScenarioId.AGENTIC_CODING for job in jobs):
        said = (f"--traces {traces} changes nothing: no job of this run is an agentic replay (fixed-length and "
                "Mooncake jobs send their own prompts)")
        if say is not None:
            say(f"warning: {said}")
        else:
            log.warning("%s", said)
    return out


@dataclass(frozen=True, slots=True)
class CorpusRef:
    """The external trace corpus a job replays, as its recipe names it: an agentic job's `workload.traces` (a hub
    dataset id or an AgentX loader id, at `traces.revision`; or a local file or folder), or a Mooncake replay's
    `workload.replay.mooncake` file. :func:`corpus_ref` is the one rule of which jobs replay one."""

    mooncake: bool
    """A Mooncake trace file (`workload.replay.mooncake`), else an agentic job's trace source."""
    source: str
    """The source as the recipe (or `--traces`) writes it: what messages name and checks read."""
    revision: str | None = None
    """The hub dataset's revision the job replays (`traces.revision`: the recipe's, or the commit its run pinned,
    `pin_trace_sources`); None for a local source or the dataset's latest."""
    dataset: str | None = None
    """The Hugging Face dataset an agentic source is read from (`loader.hub_dataset`: a loader id mapped to its
    dataset); None for a local file or folder."""

    @property
    def key(self) -> str:
        """What names the corpus across jobs and invocations: a hub source by its dataset (a loader id and its
        dataset's id are one) and revision, a local file or folder by its absolute path (the same relative path typed
        in another folder names another corpus); a Mooncake file apart from an agentic one (another reader, another
        digest)."""
        where = self.dataset if self.dataset is not None else str(Path(self.source).expanduser().resolve())
        return ("mooncake:" if self.mooncake else "traces:") + where + (f"@{self.revision}" if self.revision else "")


def corpus_ref(job: Job) -> CorpusRef | None:
    """The external trace corpus `job` replays (:class:`CorpusRef`), or None: synthetic traces, a scenario that
    sends prompts of its own (fixed-length), an eval-only job (lm-eval sends its samples: it replays no trace)."""
    from llmsweep.workload.traces.loader import hub_dataset

    w = job.workload
    if job.eval_only:
        return None
    if w.scenario is ScenarioId.AGENTIC_CODING and w.traces is not None and w.traces.synthetic is None:
        if w.traces.hf is not None:
            return CorpusRef(False, w.traces.hf, w.traces.revision, hub_dataset(w.traces.hf))
        return CorpusRef(False, str(w.traces.path)) if w.traces.path is not None else None
    if w.scenario is ScenarioId.MOONCAKE_REPLAY and w.replay is not None:
        return CorpusRef(True, w.replay.mooncake)
    return None


class TracePin(BaseModel):
    """One hub trace source asked at one revision, and the commit a run's jobs replayed it at: an entry of run.json's
    `trace_revisions` (`execute.pipeline.TRACE_REVISIONS`), which `pin_trace_sources` returns and a `--resume` replays
    again. Two recipe keys of one run that name one dataset at two revisions (its latest and `v1`) are two entries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    source: str = Field(description="The hub dataset its jobs replayed (`traces.hf`, an AgentX loader id as its "
                        "dataset's id: `CorpusRef.dataset`); an entry an earlier release wrote may name a loader id.")
    revision: str | None = Field(default=None, description="The revision its recipes asked (`traces.revision`: a "
                                 "commit, branch or tag); None: the dataset's latest.")
    commit: str = Field(description="The commit that revision was at when the run pinned it, which its jobs replayed.")
    jobs: list[str] | None = Field(default=None, description="The run's job ids that replayed it (`run.json`'s "
                                   "`expected_job_ids`); None in an entry read from a run.json of an earlier release, "
                                   "which recorded one commit per dataset (`{dataset: commit}`) and neither the "
                                   "revision its jobs asked nor the jobs.")

    @property
    def dataset(self) -> str:
        """The dataset :attr:`source` names (a loader id an earlier release recorded, as its dataset's id)."""
        from llmsweep.workload.traces.loader import hub_dataset

        return hub_dataset(self.source) or self.source

    @property
    def earlier(self) -> bool:
        """An entry of an earlier release's `{dataset: commit}` record (`jobs` None): what it asked is not known."""
        return self.jobs is None


def recorded_commit(recorded: Sequence[TracePin], source: str, revision: str | None) -> str | None:
    """The commit a run recorded for hub dataset `source` asked at `revision` (None: its latest), which a
    `--resume` (or a `--force` of part of the run) replays again, whatever the branch or tag names now: its own entry,
    else — asked at its latest — an earlier release's entry for the dataset (`TracePin.earlier`), which was applied so.
    None when the run recorded none."""
    for pin in recorded:
        if not pin.earlier and pin.dataset == source and pin.revision == revision:
            return pin.commit
    if revision is None:
        return next((pin.commit for pin in recorded if pin.earlier and pin.dataset == source), None)
    return None


def pin_trace_sources(jobs: list[Job], revisions: Mapping[str, str] | None = None,
                      recorded: Sequence[TracePin] = ()
                      ) -> tuple[list[Job], list[TracePin], dict[tuple[str, str | None], LlmsweepError]]:
    """Every agentic job's hub trace source (a dataset id or an AgentX loader id, `traces.hf`) resolved once per
    dataset (`CorpusRef.dataset`: a loader id and its dataset's id are one) and revision asked to the commit it
    replays, its snapshot fetched into the hub cache (`loader.pin_dataset`): at the commit `recorded` holds for the
    dataset at the revision the job asks (`recorded_commit`: the commit a run being resumed replayed, whatever its
    branch or tag names now), else at the recipe's `traces.revision`, else at `revisions[dataset]` (the commit
    `discover` pinned for its stages), else at the dataset's latest. Each point then reads that commit: a dataset that
    got a commit mid-sweep had points of one sweep replay two corpora under one trace source, and so had two recipes
    naming one dataset by its loader id and its id. Returns the jobs with `traces.revision` set to the commit, one
    `TracePin` per dataset and revision asked (its `jobs`: the ids of `jobs` replaying it), and the (dataset,
    revision asked) that could not be resolved (their jobs left as they were: `check_trace_sources` refuses them with
    the reason)."""
    from llmsweep.workload.traces.loader import pin_dataset

    asked: dict[tuple[str, str | None], str | LlmsweepError] = {}
    pinned: dict[tuple[str, str | None], TracePin] = {}
    failed: dict[tuple[str, str | None], LlmsweepError] = {}
    out: list[Job] = []
    for job in jobs:
        ref = corpus_ref(job)
        traces = job.workload.traces
        if ref is None or ref.mooncake or ref.dataset is None or traces is None:  # a local corpus has no revision
            out.append(job)
            continue
        request = (ref.dataset, ref.revision)  # a loader id and its dataset's id: one dataset, resolved once
        if request not in asked:
            at = recorded_commit(recorded, *request) or ref.revision or (revisions or {}).get(ref.dataset)
            try:
                asked[request] = pin_dataset(ref.dataset, at)
            except LlmsweepError as exc:
                asked[request] = exc
        commit = asked[request]
        if isinstance(commit, LlmsweepError):
            failed.setdefault(request, commit)
            out.append(job)
            continue
        pin = pinned.get(request) or TracePin(source=ref.dataset, revision=ref.revision, commit=commit, jobs=[])
        pinned[request] = pin.model_copy(update={"jobs": [*(pin.jobs or ()), job.id]})
        workload = job.workload.model_copy(update={"traces": traces.model_copy(update={"revision": commit})})
        out.append(job.model_copy(update={"workload": workload}))
    return out, list(pinned.values()), failed


def check_trace_sources(jobs: list[Job]) -> dict[str, LlmsweepError]:
    """Resolve every distinct external trace source of `jobs` once (a local file or directory must hold a trace a
    replay can play; a dataset id is fetched into, or found in, the Hugging Face cache; a Mooncake trace's rows must
    load; a hub dataset is read at the revision its jobs replay, `pin_trace_sources`); returns the ones that cannot be
    read, with why and the fix. The whole corpus is read, as each job's replay
    reads it: a bad line after the first trace refuses the jobs here, before any server starts, instead of failing
    each job once its server is up."""
    from llmsweep.workload.mooncake import load_mooncake

    failed: dict[str, LlmsweepError] = {}
    refs = [(job, ref) for job in jobs if (ref := corpus_ref(job)) is not None]
    for source in sorted({ref.source for _, ref in refs}):
        replays = [j.workload.replay for j, ref in refs if ref.mooncake and ref.source == source]
        if replays:
            if not Path(source).is_file():
                failed[source] = DatasetError(f"Mooncake trace {source} does not exist",
                                              fix="check `workload.replay.mooncake`")
                continue
            # its rows, as far as the job reading most of them reads (`max-rows`): a damaged row was found only when
            # the job's workload was built, after its server had started
            limits = [r.max_rows if r is not None else None for r in replays]
            try:
                load_mooncake(source, limit=None if None in limits else max(x for x in limits if x is not None))
            except LlmsweepError as exc:
                named = str(Path(source))  # the loader's message starts with the path (and the line): said once
                why = f"{source}{exc.message[len(named):]}" if exc.message.startswith(named) else exc.message
                failed[source] = DatasetError(f"Mooncake trace {why}",
                                              fix=exc.fix or "check `workload.replay.mooncake`")
            continue
        for revision in sorted({ref.revision for _, ref in refs if ref.source == source}, key=str):
            problem = _unplayable(source, revision)  # a hub source at the revision its jobs replay (one, once pinned)
            if problem is not None:
                failed[source] = problem
                break
    return failed


def _unplayable(source: str, revision: str | None) -> LlmsweepError | None:
    """Why an agentic replay of `source` (a hub dataset's at `revision`) cannot play it, or None when it can."""
    from llmsweep.workload.traces.loader import iter_traces

    traces = playable = 0
    named = f"trace source {source}" + (f" at revision {revision}" if revision else "")
    try:
        for trace in iter_traces(source, revision=revision):
            traces += 1
            playable += bool(trace.main_requests)
    except LlmsweepError as exc:
        fix = exc.fix or "check the trace source"
        why, said = exc.message, f"trace source {source} "
        why = "it " + why.removeprefix(said) if why.startswith(said) else why  # say the source once
        return DatasetError(f"{named} cannot be read: {why}",
                            fix=f"{fix}; or replay the built-in corpus offline with --traces synthetic")
    if not traces:
        return DatasetError(f"{named} holds no trace", fix="point at a traces.jsonl or a directory of trace files")
    if not playable:  # a replay plays root streams: subagent entries alone give it nothing to send
        return DatasetError(
            f"{named} holds no trace with a top-level request ({count_of(traces, 'trace')} of subagents only)",
            fix="point at a corpus whose traces have top-level requests (type n or s)")
    return None


def check_tokenizers(jobs: list[Job]) -> dict[str, LlmsweepError]:
    """Load every distinct tokenizer `jobs`' workloads count their prompts in (`workload.tokenizer`, default the
    model id) once, as each job's workload loads it; returns the ones that cannot be loaded (no such folder, no
    tokenizer.json in it, a hub id out of reach), with why and the fix. Run before any server starts: a job's
    workload loads its tokenizer only once its server is ready, a whole model load of GPU time later. `jobs`: those
    a real engine serves (the simulator counts in the built-in tokenizer) that send a load (not eval-only)."""
    from llmsweep.errors import ConfigError
    from llmsweep.workload.tokenizer import get_tokenizer

    failed: dict[str, LlmsweepError] = {}
    for source in sorted({job.workload.tokenizer for job in jobs}):
        try:
            get_tokenizer(source)
        except LlmsweepError as exc:
            failed[source] = exc
        except Exception as exc:  # a damaged tokenizer.json: the tokenizers library's own error
            failed[source] = ConfigError(f"tokenizer {source!r} cannot be loaded: {type(exc).__name__}: {exc}",
                                         fix="point `workload.tokenizer` at a folder with a readable tokenizer.json")
    return failed
