"""Read a run directory (`RUN/run.json`, `RUN/jobs/<job-id>/…`) into plain typed objects.

Only reading happens here; nothing is computed. A job without `summary.json` (crashed, still running, never started)
is kept with `summary=None` so callers can show it as missing instead of dropping it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from llmsweep.client.files import RECORDS_FILE, RUN_FILE, SERVER_METRICS_FILE, SUMMARY_FILE
from llmsweep.errors import ConfigError, ResultInputError
from llmsweep.job_files import COMMAND_FILE, JOB_FILE, OUTCOME_FILE, unjudged
from llmsweep.jsonline import load_json_file, loads_line
from llmsweep.metrics.model import PREDICTED, Summary
from llmsweep.option_spellings import flag as _flag
from llmsweep.sim_warnings import normalised
from llmsweep.words import count_of

_OUT = _flag("out")
_SIMULATE = _flag("simulate")
_RESUME = _flag("resume")


log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class JobArtifacts:
    """One job folder: its typed Job document, summary and where the raw artifacts lie."""

    job_id: str
    dir: Path
    job: dict[str, Any]
    summary: Summary | None
    outcome: dict[str, Any] | None = None
    """`outcome.json` written by the executor (status and reasons), when present."""
    unread: str | None = None
    """Why the folder's summary is not read although it is there (no `job.json` beside it: its labels would be made
    up; or, read with `set_aside`, it does not read), with the fix; None when nothing was set aside. Such a job has
    `summary=None`: it has no result."""
    unjudged: str | None = None
    """Why the folder's `valid` or `smoke` summary is not the job's result (`job_files.unjudged`, the definition
    `--resume` reads: no outcome.json closed the job so — the run was killed after the client wrote its summary and
    before the job's verdict), with the fix; None otherwise. Such a job has `summary=None`: it has no result, and
    its summary's verdict is not drawn or stored as one it did not earn."""

    def why_no_result(self) -> str:
        """Why this job has no summary, in the executor's words when it left any."""
        if self.unread:
            return self.unread
        if self.unjudged:
            return self.unjudged
        if self.outcome:
            reasons = "; ".join(str(r) for r in self.outcome.get("reasons") or ())
            return f"{self.outcome.get('status', 'unknown')}" + (f": {reasons}" if reasons else "")
        return f"no {SUMMARY_FILE}"

    @property
    def records_path(self) -> Path:
        return self.dir / RECORDS_FILE

    @property
    def server_metrics_path(self) -> Path:
        return self.dir / SERVER_METRICS_FILE

    def server_command(self) -> str | None:
        path = self.dir / COMMAND_FILE
        return path.read_text(encoding="utf-8", errors="replace") if path.is_file() else None


@dataclass(frozen=True, slots=True)
class RunDir:
    """A whole run: its metadata (run.json, possibly absent) and every job folder."""

    path: Path
    run_id: str
    meta: dict[str, Any]
    jobs: tuple[JobArtifacts, ...] = field(default=())

    @property
    def expected_job_ids(self) -> tuple[str, ...]:
        ids = self.meta.get("expected_job_ids") or self.meta.get("expected_jobs") or ()
        return tuple(str(i) for i in ids) if isinstance(ids, (list, tuple)) else ()

    @property
    def reused(self) -> dict[str, dict[str, Any]]:
        """Jobs `run --reuse` stood on stored results instead of running (job id -> the result's run, job and result
        ids and verdict), as run.json records them."""
        return reused_of(self.meta)

    @property
    def missing_job_ids(self) -> tuple[str, ...]:
        """Expected jobs with no folder or no summary: the completeness check InferenceX lacked."""
        have = {j.job_id for j in self.jobs if j.summary is not None}
        return tuple(i for i in self.expected_job_ids if i not in have)


def _read_json(path: Path) -> Any:
    """A run's JSON file (run.json, a job's job.json or outcome.json); one that does not read is bad input (exit 2)
    whose fix fits the file."""
    try:
        return load_json_file(path)
    except (OSError, ValueError) as exc:
        raise ResultInputError(f"cannot read {path}: {exc}", fix=_fix_of(path)) from exc


def _fix_of(path: Path) -> str:
    """How to mend a run's file that is missing or does not read, by what it is. `llmsweep run` writes run.json and
    each job's job.json and outcome.json; `summarize` rebuilds only a summary.json (`Summary.load` says so)."""
    if path.name == JOB_FILE:
        run = path.parent.parent.parent
        return (f"restore {path.name} from a copy of the run (`llmsweep run` writes it; nothing rebuilds it from the "
                f"folder), or run the run's recipes again with `llmsweep run RECIPE {_OUT} {run} {_RESUME}`: that job "
                "runs anew, its files kept in its attempts/ folder")
    if path.name == OUTCOME_FILE:
        return (f"restore {path.name} from a copy of the run, or remove it: it only says how the job ended, and "
                "its result (if any) reads without it")
    return (f"restore {path.name} from a copy of the run, or run its recipes again with `llmsweep run RECIPE {_OUT} "
            f"{path.parent} {_RESUME}`: that writes a new {path.name} (under the run id the results store holds for "
            "the folder, else a new one) and runs only the jobs without a valid or smoke summary")


FolderKind = Literal["run", "job", "bench", "predicted", "other"]


def folder_kind(path: Path) -> FolderKind:
    """What kind of folder `path` is, for the commands that take a run folder (`report`, `results ingest`, `compare`,
    `results frontier`): `run` (what `llmsweep run` writes: jobs/, or only run.json before its first job), `job`
    (RUN/jobs/<id>/ or one of its attempts/N/), `bench` (what `llmsweep bench` writes: one measurement, summary.json
    or records.jsonl beside the client's run.json and no jobs/), `predicted` (a point of `llmsweep predict --out`:
    the same files, its run.json saying `source: predicted`), or `other` (not a folder, or none of these: records
    without a run.json say nothing of what wrote them)."""
    if not path.is_dir():
        return "other"
    if is_job_dir(path) or (path.parent.name == "attempts" and is_job_dir(path.parent.parent)):
        return "job"
    if (path / "jobs").is_dir():
        return "run"
    if (path / SUMMARY_FILE).is_file() or (path / RECORDS_FILE).is_file():  # a run keeps these in jobs/<id>/
        return _point_kind(path / RUN_FILE)
    return "run" if (path / RUN_FILE).is_file() else "other"


FOLDER_KINDS: dict[FolderKind, str] = {
    "run": "a run of `llmsweep run`", "job": "a job folder of `llmsweep run`",
    "bench": "a measurement of `llmsweep bench`", "predicted": f"a point of `llmsweep predict {_OUT}`",
    "other": "a folder of none of llmsweep's kinds",
}
"""Each folder kind in words, for a message."""


def out_kind(path: Path) -> FolderKind:
    """:func:`folder_kind` for a command about to write into `path` (`run --out`, `bench … --out`): a folder holding
    only the client's run.json (a bench killed before its first record) is a bench's too, not a run's."""
    kind = folder_kind(path)
    if kind == "run" and not (path / "jobs").is_dir():
        try:
            doc = load_json_file(path / RUN_FILE)
        except (OSError, ValueError):
            return kind
        if isinstance(doc, dict) and "client" in doc:
            return "bench"
    return kind


def enclosing_out(path: Path) -> tuple[Path, FolderKind] | None:
    """The outermost folder above `path` (not `path` itself) that is one of llmsweep's own — a run, a job folder, a
    bench measurement, a predict point —, with its kind, for a command about to write into `path`; None when no
    folder above it is. Only a folder holding a run.json counts (every one of those writes it first): a `jobs/`
    folder of some other tool higher up makes no run of its parent."""
    found: tuple[Path, FolderKind] | None = None
    for parent in path.resolve().parents:
        if (parent / RUN_FILE).is_file() and (kind := out_kind(parent)) != "other":
            found = parent, kind
    return found


def said_path(path: Path) -> str:
    """A resolved folder as a message names it: relative to the working directory where it lies below it."""
    try:
        rel = path.relative_to(Path.cwd().resolve())
    except ValueError:
        return str(path)
    return str(rel) if rel.parts else str(path)


def refuse_inside_other_folder(path: Path, writes: str, *, example: Callable[[Path], str] | None = None,
                               resume: str = "") -> None:
    """Before any work: an output folder inside one of llmsweep's own — a run (its jobs/, its report/), a job folder,
    a bench measurement, a predict point (:func:`enclosing_out`) — is refused (exit 2, nothing written): `writes`
    there would sit among that folder's files, where neither reads as itself. The fix names a folder beside the one
    refused (`example` of its parent; else the folder's name and the refused one's joined), and, given `resume`
    (`run --resume`'s spelling), the run itself to go on with. The output folders of `run`, `bench fixed|agentic|replay`
    and `predict` are refused so alike."""
    if (outer := enclosing_out(path)) is None:
        return
    folder, kind = outer
    said, option_name = said_path(folder), _flag("out")
    parent = Path(said).parent
    beside = example(parent) if example is not None else str(parent / f"{folder.name}-{path.name}")
    again = f", or {said} itself with {resume} to go on with that run" if resume and kind == "run" else ""
    raise ConfigError(f"{option_name} {path} is inside {said}, {FOLDER_KINDS[kind]}: {writes} there would sit among "
                      "that folder's files", fix=f"pass a folder of its own beside it to {option_name}, e.g. "
                                                 f"{beside}{again}")


OUT_WITHIN_DEPTH = 3
"""How many folder levels below an --out :func:`out_within` looks for a run (`runs/<team>/<date>/<run>` at most): a
folder of runs is that shallow, and an --out such as a home folder must not cost a walk of its whole tree."""


def out_within(path: Path) -> tuple[Path, FolderKind] | None:
    """The first folder below `path` (not `path` itself; at most :data:`OUT_WITHIN_DEPTH` levels down, in name order,
    hidden folders left out) that is one of llmsweep's own, with its kind; None when none is (or `path` is no
    folder). The walk stops at the first one and never enters one."""
    import os

    if not path.is_dir():
        return None
    for root, dirs, files in os.walk(path):
        here = Path(root)
        depth = len(here.relative_to(path).parts)
        if depth and RUN_FILE in files and (kind := out_kind(here)) != "other":
            return here, kind
        dirs[:] = sorted(d for d in dirs if not d.startswith(".")) if depth < OUT_WITHIN_DEPTH else []
    return None


def _point_kind(run_file: Path) -> FolderKind:
    """A folder of one point's files, by what its run.json says: predicted (`predict --out`), else measured or
    simulated by the client (`bench`); `other` when it has no readable run.json."""
    try:
        doc = load_json_file(run_file)
    except (OSError, ValueError):
        return "other"
    if not isinstance(doc, dict):
        return "other"
    return "predicted" if doc.get("source") == PREDICTED else "bench"


def is_job_dir(path: Path) -> bool:
    """`RUN/jobs/<id>/`: a job's folder (it holds a run.json of its own, the client's)."""
    return path.parent.name == "jobs" and (path / JOB_FILE).is_file()


def is_run_dir(path: Path) -> bool:
    return folder_kind(path) == "run"


def load_run(path: Path | str, *, set_aside: bool = False) -> RunDir:
    """Load `RUN/`; raises ResultInputError, naming what the folder is and what to pass, when it is not a run.
    `set_aside`: a job's summary.json that does not read is the job's `unread` reason (with its fix), the job kept
    without a result, rather than bad input that stops the whole read (`load_job`) — for `report`, which draws the
    rest and lists the job."""
    root = Path(path)
    kind = folder_kind(root)
    if kind == "job":
        run = root.parent.parent if is_job_dir(root) else root.parent.parent.parent.parent
        raise ResultInputError(f"{root} is a job folder of the run {run}", fix=f"pass the run folder, {run}")
    if kind == "bench":
        raise ResultInputError(
            f"{root} is a `bench` output folder, not a run: it holds one measurement (summary.json, records.jsonl) "
            "and no jobs/ folder",
            fix=f"`llmsweep summarize {root}` recomputes and prints its summary; to report, store or compare "
                f"results, pass a run folder (`llmsweep run FILE {_OUT} DIR` writes one)")
    if kind == "predicted":
        raise ResultInputError(
            f"{root} is a point folder of `llmsweep predict {_OUT}`, not a run: it holds one predicted point "
            f"({SUMMARY_FILE}, {RECORDS_FILE}) and no jobs/ folder",
            fix=f"`llmsweep summarize {root}` recomputes and prints its summary; to report, store or compare "
                f"simulated results, pass a run folder (`llmsweep run FILE {_SIMULATE} {_OUT} DIR` writes one)")
    if kind != "run":
        raise ResultInputError(
            f"{root} is not a run directory (no jobs/ folder or run.json)",
            fix="pass the folder `llmsweep run` wrote, e.g. runs/<run-id>",
        )
    run_id, meta = load_run_meta(root)
    return RunDir(path=root, run_id=run_id, meta=meta, jobs=tuple(_iter_jobs(root / "jobs", set_aside=set_aside)))


def load_run_meta(root: Path) -> tuple[str, dict[str, Any]]:
    """(run id, run.json) of a run directory; the folder's name is the run id when run.json names none."""
    meta_path = root / RUN_FILE
    meta = _read_json(meta_path) if meta_path.is_file() else {}
    if not isinstance(meta, Mapping):
        raise ResultInputError(f"{meta_path} is not a JSON object", fix=_fix_of(meta_path))
    return str(meta.get("run_id") or meta.get("id") or root.resolve().name), dict(meta)


def load_job(job_dir: Path, *, set_aside: bool = False) -> JobArtifacts | None:
    """One job folder, or None when it holds neither job.json nor summary.json.

    A summary without `job.json` beside it is not read: the job's identity (model, hardware, parallelism,
    concurrency, scenario) lives in `job.json`, and a point without it would carry labels nobody measured. The job is
    kept without a result, `unread` saying why and how to mend it. So is one whose `summary.json` does not read
    (`Summary.load`'s error and fix) with `set_aside`; without it, that is bad input (ResultInputError)."""
    job_path, summary_path, outcome_path = job_dir / JOB_FILE, job_dir / SUMMARY_FILE, job_dir / OUTCOME_FILE
    job = _read_json(job_path) if job_path.is_file() else {}
    if not isinstance(job, Mapping):
        raise ResultInputError(f"{job_path} is not a JSON object", fix=_fix_of(job_path))
    outcome = _read_json(outcome_path) if outcome_path.is_file() else None
    outcome = outcome if isinstance(outcome, dict) else None
    if not job_path.is_file() and summary_path.is_file():
        return JobArtifacts(job_id=job_dir.name, dir=job_dir, job={}, summary=None, outcome=outcome,
                            unread=f"{JOB_FILE} missing in {job_dir}: its {SUMMARY_FILE} is not read without the job's "
                                   f"labels (fix: {_fix_of(job_path)})")
    try:
        summary = Summary.load(summary_path) if summary_path.is_file() else None
    except ResultInputError as exc:
        if not set_aside:
            raise
        return JobArtifacts(job_id=str(job.get("id") or job_dir.name), dir=job_dir, job=dict(job), summary=None,
                            outcome=outcome, unread=" ".join(exc.one_line().split()))
    if not job and summary is None:
        log.debug("skipping %s: neither job.json nor summary.json", job_dir)
        return None
    job_id = str(job.get("id") or job_dir.name)
    why = None if summary is None else unjudged(summary.validity.verdict, outcome)
    if why is not None:  # not judged (or closed failed): no result, its summary's verdict not taken as earned
        run = job_dir.parent.parent
        why += (f" (fix: `llmsweep run RECIPE {_OUT} {run} {_RESUME}` runs the job again, its files kept in its "
                "attempts/ folder)")
        return JobArtifacts(job_id=job_id, dir=job_dir, job=dict(job), summary=None, outcome=outcome, unjudged=why)
    return JobArtifacts(job_id=job_id, dir=job_dir, job=dict(job), summary=summary, outcome=outcome)


def _iter_jobs(jobs_dir: Path, *, set_aside: bool = False) -> Iterator[JobArtifacts]:
    if not jobs_dir.is_dir():
        return
    for job_dir in sorted(p for p in jobs_dir.iterdir() if p.is_dir()):
        art = load_job(job_dir, set_aside=set_aside)
        if art is not None:
            yield art


class JsonLines:
    """The object lines of a JSONL file (records.jsonl, server_metrics.jsonl), read as they are iterated. Blank
    lines are passed over; a line that is not JSON (a file cut short mid-line) is skipped and counted in `skipped`,
    and once the file is read a warning names it and the count: what is drawn from it is incomplete."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.skipped = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        self.skipped = 0
        if not self.path.is_file():
            return
        with self.path.open(encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    doc = loads_line(line)
                except ValueError:
                    log.debug("%s:%d: not JSON, skipped", self.path, lineno)
                    self.skipped += 1
                    continue
                if isinstance(doc, dict):
                    yield doc
        if self.skipped:
            log.warning("%s: %s not JSON (cut short?) skipped: what is drawn from it is incomplete",
                        self.path, count_of(self.skipped, "line"))


def iter_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Lines of a JSONL file as dicts (`JsonLines`: a line that is not JSON is skipped, and said once on the log)."""
    return iter(JsonLines(path))


class RecordedOutcome(BaseModel):
    """One entry of `run.json: outcomes` as `llmsweep run` records it: how a job ended and why.

    Read back for the jobs that left no job folder (a refused job never gets one), so the page can say why they have
    no result. Only the fields the page shows are read; the rest of the executor's record is ignored.
    """

    model_config = ConfigDict(extra="ignore")

    job_id: str
    status: str
    reasons: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    """What qualifies the job's result under the simulator (`execute.lifecycle.JobOutcome.warnings`): the engine
    rules it ran despite, what the simulator does not model; read in today's words (`sim_warnings.normalised`)."""

    @field_validator("warnings")
    @classmethod
    def _today(cls, warnings: list[str]) -> list[str]:
        return [normalised(w) for w in warnings]


def read_outcome(doc: Any, where: str) -> RecordedOutcome | None:
    try:
        return RecordedOutcome.model_validate(doc)
    except ValidationError:
        log.debug("%s: an outcome that is not readable, skipped: %r", where, doc)
        return None


def outcomes_of(meta: Mapping[str, Any]) -> dict[str, RecordedOutcome]:
    """job id → its outcome as a run's `run.json` (or the store's copy of it, `runs.meta`) recorded it; empty for a
    run still going, one from before outcomes, or one imported from elsewhere."""
    raw = meta.get("outcomes")
    read = (read_outcome(doc, RUN_FILE) for doc in (raw if isinstance(raw, list) else ()))
    return {o.job_id: o for o in read if o is not None}


JOB_OUTCOMES = "job_outcomes"
"""The store's copy of a run (`runs.meta`) keeps here each job's own `outcome.json` as the job is stored, job id →
document: `run` writes run.json's `outcomes` only when the sweep ends, so for a run interrupted (or still going) the
jobs' own outcomes are the only record of how each ended and what qualifies its result."""


def known_outcomes(meta: Mapping[str, Any], own: Mapping[str, RecordedOutcome]) -> dict[str, RecordedOutcome]:
    """job id → its outcome: as run.json (`meta`) recorded it, else as the job's own `outcome.json` said it (`own`:
    read from the job folders, or the store's `JOB_OUTCOMES`). The one rule for the dashboard and the store."""
    return {**own, **outcomes_of(meta)}


def recorded_outcomes(run: RunDir) -> dict[str, RecordedOutcome]:
    """job id → its outcome as `run.json` recorded it, else as its job folder's `outcome.json` says it. `run` writes
    run.json's outcomes only when the sweep ends: a run interrupted (Ctrl-C) or still going has none, and its jobs'
    own outcome.json are then the only record of how each ended and what qualifies its result (`warnings`)."""
    own = {art.job_id: o for art in run.jobs if art.outcome
           and (o := read_outcome(art.outcome, f"{art.dir}/outcome.json")) is not None}
    return known_outcomes(run.meta, own)


def stored_job_outcomes(meta: Mapping[str, Any]) -> dict[str, RecordedOutcome]:
    """The jobs' own outcomes the store kept in a run's meta (`JOB_OUTCOMES`), readable ones only."""
    raw = meta.get(JOB_OUTCOMES)
    read = (read_outcome(doc, f"runs.meta {JOB_OUTCOMES}") for doc in (raw.values() if isinstance(raw, dict) else ()))
    return {o.job_id: o for o in read if o is not None}


RETIRED = "retired"
"""run.json's record of the jobs a whole `--resume`/`--force` took out of the run (`execute.pipeline`: the recipe no
longer plans them): job id -> `{"dir": <where its files are kept, relative to the run folder>, "reuse_key": <the key
its result was measured under>}`. The store keeps such a job's result for the runs that stood on it (`run --reuse`),
drawn as none of its own run's (`results.store.Store`: `results.retired`)."""


@dataclass(frozen=True, slots=True)
class RetiredJob:
    """One entry of run.json's :data:`RETIRED`: the folder its files were moved to, relative to the run folder, and
    the reuse key its result was measured under (None where the run recorded none)."""

    dir: str
    reuse_key: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"dir": self.dir, **({"reuse_key": self.reuse_key} if self.reuse_key is not None else {})}


def retired_of(meta: Mapping[str, Any]) -> dict[str, RetiredJob]:
    """A run record's retired jobs (:data:`RETIRED`), job id -> :class:`RetiredJob`; an entry that does not read as
    one is left out."""
    raw = meta.get(RETIRED)
    if not isinstance(raw, dict):
        return {}
    return {str(job): RetiredJob(doc["dir"], key if isinstance(key := doc.get("reuse_key"), str) else None)
            for job, doc in raw.items() if isinstance(doc, dict) and isinstance(doc.get("dir"), str)}


def retired_jobs(run: RunDir) -> list[tuple[RetiredJob, JobArtifacts]]:
    """The retired jobs of a run (:data:`RETIRED`) with their kept folder, where it holds a result and the run has no
    job of that id of its own (`jobs/`: planned again since, it is the run's job again); a folder outside the run, or
    whose summary does not read, is left out."""
    live = {j.job_id for j in run.jobs}
    root = run.path.resolve()
    out = []
    for job_id, retired in retired_of(run.meta).items():
        folder = (run.path / retired.dir).resolve()
        if job_id in live or not folder.is_relative_to(root) or not folder.is_dir():
            continue
        art = load_job(folder, set_aside=True)
        if art is not None and art.summary is not None and art.job_id == job_id:
            out.append((retired, art))
    return out


KEPT_ATTEMPTS = "kept_attempts"
"""run.json's record of the earlier attempts of its jobs that the run measured again (`--force`, `--resume` after an
edit, a job whose id an edit changed) while other runs stood a job on them (`run --reuse`): the folder it was kept in,
relative to the run folder -> `{"job_id": <the job it was a result of>, "reuse_key": <the key it was measured under>,
"runs": <the runs that stood on it>, "measured_at": <which measurement it is>}`. The store keeps such a result for
those runs, drawn as none of its own run's (`results.store.Store`: `results.retired`, under its own result id,
:meth:`KeptAttempt.result_id`), and reads it for them in place of the job's newer result (`Store.reused_points`): for a
run whose record of the result it stood on (`reused`) names the same measurement (`measured_at`,
`metrics.model.measurement_stamp`), else — either recorded before measurements were named — for the runs listed.
`"runs": null` is an entry the run could not ask the store about (busy, unreachable) when it measured the job again:
the next ingest of the run finds the runs that stand on it (`Store.ingest_run`, before it replaces the run's
results), and `run` records them here at its end."""


@dataclass(frozen=True, slots=True)
class KeptAttempt:
    """One entry of run.json's :data:`KEPT_ATTEMPTS`: the folder the earlier attempt was kept in (relative to the run
    folder), the job whose result it was, the reuse key it was measured under (None where the run recorded none) and
    the runs that stood on it when the run measured the job again (None: not known yet, :attr:`pending`), and which
    measurement it is (`metrics.model.measurement_stamp`; None in an entry written before they were named, or where
    its summary records none)."""

    dir: str
    job_id: str
    reuse_key: str | None
    runs: tuple[str, ...] | None
    measured_at: str | None = None

    @property
    def pending(self) -> bool:
        """The run could not ask the store which runs stood on the attempt when it measured the job again (busy,
        unreachable): the next ingest of the run asks (`Store.ingest_run`)."""
        return self.runs is None

    @property
    def stored_job_id(self) -> str:
        """The job id the store files the kept result under: its folder, which no job of a run is named (the job's
        own id holds its newer result)."""
        return self.dir

    def to_json(self) -> dict[str, Any]:
        return {"job_id": self.job_id, **({"reuse_key": self.reuse_key} if self.reuse_key is not None else {}),
                "runs": list(self.runs) if self.runs is not None else None,
                **({"measured_at": self.measured_at} if self.measured_at is not None else {})}

    def stood_on_by(self, by: str, stood: Mapping[str, Any]) -> bool:
        """Whether run `by` stood a job on this attempt, `stood` being its record of the result (its `reused` entry,
        naming this attempt's job's result id): the same measurement where both name theirs, else `by` among the
        runs that stood on it when the job was measured again (a run that stood anew on the job's newer result since,
        `run --reuse --force`, is listed there all the same)."""
        said = stood.get("measured_at")
        if isinstance(said, str) and self.measured_at is not None:
            return said == self.measured_at
        return by in (self.runs or ())


def kept_attempts_of(meta: Mapping[str, Any]) -> list[KeptAttempt]:
    """A run record's kept attempts (:data:`KEPT_ATTEMPTS`), oldest first; an entry that does not read as one is
    left out."""
    raw = meta.get(KEPT_ATTEMPTS)
    if not isinstance(raw, dict):
        return []
    return [KeptAttempt(str(folder), doc["job_id"], key if isinstance(key := doc.get("reuse_key"), str) else None,
                        tuple(str(r) for r in runs) if isinstance(runs := doc.get("runs"), list) else None,
                        measured if isinstance(measured := doc.get("measured_at"), str) else None)
            for folder, doc in raw.items() if isinstance(doc, dict) and isinstance(doc.get("job_id"), str)
            and (doc.get("runs") is None or isinstance(doc.get("runs"), list))]


def kept_attempts(root: Path, meta: Mapping[str, Any],
                  only: Collection[KeptAttempt] | None = None) -> list[tuple[KeptAttempt, JobArtifacts]]:
    """The kept attempts of the run in folder `root` (:data:`KEPT_ATTEMPTS` of its record `meta`; `only`: those of
    them, the rest not read) with their folder, where it holds a judged result of that job; a folder outside the run,
    or whose summary does not read, is left out."""
    out = []
    resolved = root.resolve()
    for kept in kept_attempts_of(meta) if only is None else only:
        folder = (root / kept.dir).resolve()
        if not folder.is_relative_to(resolved) or not folder.is_dir():
            continue
        art = load_job(folder, set_aside=True)
        if art is not None and art.summary is not None and art.job_id == kept.job_id:
            out.append((kept, art))
    return out


def reused_result_ids(meta: Mapping[str, Any]) -> frozenset[str]:
    """The stored results a run record's `run --reuse` jobs stood on (their result ids)."""
    return frozenset(str(src["result_id"]) for src in reused_of(meta).values() if src.get("result_id"))


def reused_of(meta: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A run record's jobs that `run --reuse` stood on stored results (`run.json: reused`; the store keeps it in
    `runs.meta`): job id -> the result's run, job and result ids and verdict."""
    reused = meta.get("reused")
    return {str(k): v for k, v in reused.items() if isinstance(v, dict)} if isinstance(reused, dict) else {}
