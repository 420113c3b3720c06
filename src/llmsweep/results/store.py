"""The results store: one SQLite file holding runs, jobs, results (hot columns + full summary) and provenance.

Location, first match wins: an explicit path (`--store`), the `LLMSWEEP_STORE` environment variable, then
`~/.llmsweep/results.sqlite`. One store per user means `compare` finds earlier runs of the same point (the repeats
that turn a within-run noise band into a between-run one) wherever the run directories were written.

Ingest is idempotent: a run is replaced as a whole in one transaction, so ingesting twice (or after re-summarising)
leaves exactly one copy; `ingest_job` replaces one job of a run the same way (`run` stores each job as it finishes).
A re-ingest that would drop results the store holds for the run (a partial copy of its folder) is refused unless
asked to replace (`results ingest --force`; `run`'s own end-of-run ingest does). Imported rows live in runs whose
`origin` says where they came from.

Commands that only read open the store with `readonly=True`: SQLite's read-only mode, so they never create, migrate or
write it. A store of an older schema is read as it is (a hot column it lacks is computed from the stored summary); a
missing store reads as empty. A path that is not a store (a directory, a corrupt or foreign file), or a stored row
whose JSON does not read (`_StoredRow`: it names the row and column), is a `StoreError`.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shlex
import sqlite3
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import ValidationError

from llmsweep.catalog.version import same_version
from llmsweep.errors import ResultError, ResultInputError
from llmsweep.metrics.model import EvalBlock, Summary, measurement_stamp
from llmsweep.metrics.registry import HOT_COLUMNS, HOT_NAMES
from llmsweep.option_spellings import flag as _flag
from llmsweep.results.evals import StoredEval, eval_run_columns, planned_eval_conc
from llmsweep.results.extract import hot_values
from llmsweep.results.identity import get_field, gpus_of, identity_from_dict, identity_from_job
from llmsweep.results.point import ResultPoint, point_from_job, points_from_run, result_id_for
from llmsweep.results.rundir import (
    JOB_OUTCOMES,
    KeptAttempt,
    RecordedOutcome,
    RunDir,
    known_outcomes,
    load_job,
    load_run,
    load_run_meta,
    stored_job_outcomes,
)
from llmsweep.words import count_of, noun
from llmsweep.writable import blocked_at

_FORCE = _flag("force")
_RUN_ID = _flag("run_id")
_STORE = _flag("store")
_REUSE = _flag("reuse")


log = logging.getLogger(__name__)

SCHEMA_VERSION = 7
"""1: the first release (hot columns of that day, no record of migrations); 2: a `schema_version` table records
every migration applied; hot columns follow the metric table (`metrics.registry`), added and backfilled on open;
3: an `evals` table (the summary's eval block, one row per result that ran one); 4: point identities carry the
corpus a point replayed (`identity.corpus`), every stored job re-keyed from its job and summary; 5: `evals` holds one
row per (result, concurrency the eval ran at), each with that run's score, split from the blocks schema 3 stored;
6: `error_ratio` is NULL for a result no profiling request of which finished (stored as 0.0 before: "no errors");
7: `results.retired`, the folder a result's run retired its job to (`rundir.RETIRED`), or kept an earlier attempt of
a job it measured again in (`rundir.KEPT_ATTEMPTS`), NULL for a result of the run: such a result is kept for the runs
that stood on it (`run --reuse`), and is none of its own run's."""
ENV_VAR = "LLMSWEEP_STORE"
BATCH = 500
"""Result ids per query of `Store.points` (below SQLite's least limit of bound parameters, 999)."""

_V1_HOT = ("tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu", "p50_ttft", "p90_ttft", "p99_ttft", "p50_tpot",
           "p90_tpot", "p50_e2el", "p90_e2el", "p50_intvty", "p90_intvty", "p90_e2e_norm_intvty",
           "p75_e2e_norm_intvty", "request_qps", "error_ratio", "gpu_cache_hit_rate", "gpu_kv_usage_max")
"""The hot columns schema 1 created (frozen: later columns are added by `_sync_hot_columns`, never here)."""

_V1_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, origin TEXT NOT NULL, path TEXT, started TEXT, llmsweep_version TEXT, executor TEXT,
  expected_jobs TEXT, meta TEXT NOT NULL, ingested_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS jobs (
  run_id TEXT NOT NULL REFERENCES runs(run_id) ON DELETE CASCADE, job_id TEXT NOT NULL,
  point_key TEXT NOT NULL, series_key TEXT NOT NULL, identity TEXT NOT NULL, recipe_key TEXT,
  recipe_fingerprint TEXT, gpus INTEGER, artifact_dir TEXT, has_result INTEGER NOT NULL, job TEXT NOT NULL,
  PRIMARY KEY (run_id, job_id)
);
CREATE TABLE IF NOT EXISTS results (
  result_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, job_id TEXT NOT NULL, source TEXT NOT NULL, origin TEXT NOT NULL,
  verdict TEXT NOT NULL, reasons TEXT NOT NULL, num_requests INTEGER, num_successful INTEGER,
  """ + ",\n  ".join(f'"{c}" REAL' for c in _V1_HOT) + """,
  summary TEXT NOT NULL,
  FOREIGN KEY (run_id, job_id) REFERENCES jobs(run_id, job_id) ON DELETE CASCADE
);
CREATE TABLE IF NOT EXISTS provenance (
  result_id TEXT PRIMARY KEY REFERENCES results(result_id) ON DELETE CASCADE,
  recipe_fingerprint TEXT, image TEXT, engine_version TEXT, llmsweep_version TEXT, seed TEXT, hardware TEXT,
  doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_point ON jobs(point_key);
CREATE INDEX IF NOT EXISTS results_job ON results(job_id);
"""

_V2_SCHEMA = """
CREATE TABLE IF NOT EXISTS schema_version (
  version INTEGER PRIMARY KEY, description TEXT NOT NULL, applied_at TEXT NOT NULL
);
"""

_V3_SCHEMA = """
CREATE TABLE IF NOT EXISTS evals (
  result_id TEXT PRIMARY KEY REFERENCES results(result_id) ON DELETE CASCADE,
  run_id TEXT NOT NULL, job_id TEXT NOT NULL, mode TEXT NOT NULL, task TEXT NOT NULL, score REAL, score_name TEXT,
  score_stderr REAL, em_strict REAL, em_strict_se REAL, em_flexible REAL, em_flexible_se REAL, n_samples INTEGER,
  verdict TEXT NOT NULL, reasons TEXT NOT NULL, harness_version TEXT, command TEXT NOT NULL, doc TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS evals_run ON evals(run_id);
"""

_V5_SCHEMA = """
DROP INDEX IF EXISTS evals_run;
ALTER TABLE evals RENAME TO evals_v3;
CREATE TABLE evals (
  result_id TEXT NOT NULL REFERENCES results(result_id) ON DELETE CASCADE,
  run_id TEXT NOT NULL, job_id TEXT NOT NULL, conc INTEGER NOT NULL, status TEXT NOT NULL, error TEXT,
  mode TEXT NOT NULL, task TEXT NOT NULL, score REAL, score_name TEXT, score_stderr REAL, em_strict REAL,
  em_strict_se REAL, em_flexible REAL, em_flexible_se REAL, n_samples INTEGER, verdict TEXT NOT NULL,
  reasons TEXT NOT NULL, harness_version TEXT, command TEXT NOT NULL, results_file TEXT, doc TEXT NOT NULL,
  PRIMARY KEY (result_id, conc)
);
CREATE INDEX IF NOT EXISTS evals_run ON evals(run_id);
"""
"""Schema 5's `evals`: one row per (result, concurrency); `doc` is that run as the eval block holds it. The
schema-3 table is renamed, split into the new one (`_split_evals`) and dropped in the same transaction."""
_EVAL_COLUMNS = ("result_id", "run_id", "job_id", "conc", "status", "error", "mode", "task", "score", "score_name",
                 "score_stderr", "em_strict", "em_strict_se", "em_flexible", "em_flexible_se", "n_samples", "verdict",
                 "reasons", "harness_version", "command", "results_file", "doc")

_V6_SCHEMA = "UPDATE results SET error_ratio = NULL WHERE num_requests = 0"
"""An error ratio over no finished request is undefined (`metrics.model.Requests`): earlier releases stored 0.0.
`num_requests` is successful + failed (an imported row's total: 0 imported as NULL already)."""

_V7_SCHEMA = "ALTER TABLE results ADD COLUMN retired TEXT"
"""A whole `--resume`/`--force` retires a job its recipe no longer plans (`retired/<id>`): its result is no longer
its run's, but a run that stood a job on it (`run --reuse`) still does. The store keeps it under its run and job,
`retired` saying where the run keeps its files; every read of a run's results passes it over (`Store._own`), a read
by result id (`Store.points`, what `reused_points` reads) does not."""

MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "runs, jobs, results (hot columns), provenance", _V1_SCHEMA),
    (2, "schema_version records the migrations applied", _V2_SCHEMA),
    (3, "evals: one row per result that ran an accuracy eval (task, scores with stderr, verdict, command)",
     _V3_SCHEMA),
    (4, "point identities carry the replayed corpus: every job re-keyed from its job and summary", ""),
    (5, "evals: one row per (result, concurrency the eval ran at) with that run's score, split from each stored "
        "eval block", _V5_SCHEMA),
    (6, "error_ratio is NULL for a result no profiling request of which finished (an undefined ratio, stored as 0.0 "
        "before)", _V6_SCHEMA),
    (7, f"results.retired: a result whose run retired its job, kept for the runs that stood on it (run {_REUSE}) and "
        "none of its own run's", _V7_SCHEMA),
)
"""(version, what it does, SQL), applied in order to a store below that version. Append; never edit one."""


class StoreError(ResultError):
    """The results store cannot be opened, migrated, read or written: `--store` names a directory, a file that is not
    a store of ours, a corrupt or read-only file. Bad input (exit 2) when it stops a command before it does anything;
    `run` turns a failure at its end into exit 1, the run kept on disk."""

    exit_code = 2


class ImportConflictError(ResultError):
    """An import or ingest would clash with what the store holds (a run of ours under the same id, two rows of one
    job, a re-ingest that would drop stored results): refused before anything of the run is written; bad input
    (exit 2)."""

    exit_code = 2


_STORE_FIX = (f"point {_STORE} (or ${ENV_VAR}) at a writable SQLite file llmsweep created, or at a new path; "
              "`llmsweep results ingest RUN_DIR` stores a run again later")


_LOCKED_FIX = ("another process is writing this store (a long `results ingest` or `results import`, another run "
               f"storing its jobs): let it finish, or point {_STORE} (or $" + ENV_VAR + ") at another file; "
               "`llmsweep results ingest RUN_DIR` stores a run again later")


def store_busy(exc: BaseException) -> bool:
    """Whether a store failure is another process holding the store (SQLite's `database is locked` or `busy`, after
    its 30-s wait): every later write would wait as long, where any other failure is that write's own. Read from
    SQLite's own error (a StoreError's cause), never from our message, which names the store's path (a store under
    `h100-locked-clocks/` is no busy one)."""
    cause = exc if isinstance(exc, sqlite3.Error) else exc.__cause__ if isinstance(exc, StoreError) else None
    if not isinstance(cause, sqlite3.Error):
        return False
    text = str(cause).lower()
    return "locked" in text or "busy" in text


def _fix_for(exc: sqlite3.Error) -> str:
    """The fix for a store that could not be opened or written: a busy one is no unwritable file."""
    return _LOCKED_FIX if store_busy(exc) else _STORE_FIX


def default_store_path(explicit: Path | str | None = None) -> Path:
    """`explicit`, else $LLMSWEEP_STORE, else ~/.llmsweep/results.sqlite."""
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".llmsweep" / "results.sqlite"


@dataclass(frozen=True, slots=True)
class IngestReport:
    run_id: str
    results: int
    jobs_without_result: tuple[str, ...]
    missing_expected: tuple[str, ...]
    replaced: bool
    unread: tuple[str, ...] = ()
    """Why a job folder's summary was not stored although it is there (`JobArtifacts.unread`, `.unjudged`), one per
    job."""
    settled: tuple[KeptAttempt, ...] = ()
    """The attempts the run kept without knowing which runs stood on them (`KeptAttempt.pending`: the store was busy
    when it measured the job again), with the runs the store found standing on them (none: nothing to keep)."""


@dataclass(frozen=True, slots=True)
class Reusable:
    """A stored valid result a job may stand on instead of running: where it came from, and which measurement of the
    job it is (`metrics.model.measurement_stamp`; None where its provenance records none): its run may measure the job
    again under the same result id."""

    run_id: str
    job_id: str
    result_id: str
    verdict: str
    measured_at: str | None = None
    stored: tuple[str, int] = ("", 0)
    """Where its run stands in the store's order (when it was ingested, then its row): the greater, the newer, as
    `Store.reusable` walks them; how `run --reuse` picks the newest of a job's results found under two keys."""


@dataclass(frozen=True, slots=True)
class RunInfo:
    run_id: str
    origin: str
    path: str | None
    started: str | None
    ingested_at: str
    results: int
    sources: tuple[str, ...]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _dumps(doc: Any) -> str:
    return json.dumps(doc, sort_keys=True, default=str)


class Store:
    """A handle on one SQLite results store. Use as a context manager or call :meth:`close`."""

    def __init__(self, path: Path | str | None = None, *, readonly: bool = False) -> None:
        self.path = default_store_path(path)
        self.readonly = readonly
        self._columns: frozenset[str] = frozenset()
        self._version = SCHEMA_VERSION
        if self.path.is_dir():
            raise StoreError(f"results store {self.path} is a directory, not a SQLite file", fix=_STORE_FIX)
        blocked = blocked_at(self.path.parent)
        if blocked is not None:  # (`--out`'s check and wording: making the folder said only "File exists"; a
            # command that only reads had read a store that can never exist there as an empty one)
            raise StoreError(f"results store {self.path} cannot be {'read' if readonly else 'written'}: "
                             f"{blocked.at} {blocked.what}",
                             fix=f"make the link's target, remove the link, or {_STORE_FIX}" if blocked.link
                             else _STORE_FIX)
        try:
            if readonly:
                self._db = self._connect_readonly()
            else:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(self.path, timeout=30)  # the run pipeline and a user may write at once
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"cannot open results store {self.path}: {exc}", fix=_STORE_FIX) from exc
        self._db.row_factory = sqlite3.Row
        try:
            self._db.execute("PRAGMA foreign_keys = ON")
            if readonly:
                self._check_readable()
            else:
                self._migrate()
            self._columns = frozenset(r["name"] for r in self._db.execute("PRAGMA table_info(results)"))
            self._version = self.schema_version
        except sqlite3.Error as exc:
            self._db.close()
            what = "read" if readonly else "open and migrate"
            raise StoreError(f"cannot {what} results store {self.path}: {exc}", fix=_fix_for(exc)) from exc
        except ResultError:
            self._db.close()
            raise

    @property
    def on_disk(self) -> bool:
        """Whether the store's file is there (a read-only open of a path with none reads an empty store)."""
        return self.path.exists()

    def _connect_readonly(self) -> sqlite3.Connection:
        """SQLite's read-only mode on the file; a store that does not exist yet reads as an empty one (in memory:
        nothing is created on disk)."""
        if not self.path.exists():
            return _empty_store()
        return sqlite3.connect(f"{self.path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)

    def _check_readable(self) -> None:
        """A read-only open reads any schema this llmsweep knows as it is; it refuses a newer one and a file without
        our tables (a foreign SQLite file, or an empty one: nothing stored there yet)."""
        version = self.schema_version
        if version > SCHEMA_VERSION:
            raise self._too_new(version)
        tables = self._tables()
        missing = {"runs", "jobs", "results", "provenance"} - tables
        if missing and tables:
            raise StoreError(f"{self.path} is a SQLite file but not an llmsweep results store (no table "
                             f"{', '.join(sorted(missing))})", fix=_STORE_FIX)
        if missing:  # an empty file: read it as an empty store, without writing a schema into it
            self._db.close()
            self._db = _empty_store()
            self._db.row_factory = sqlite3.Row

    def _tables(self) -> set[str]:
        return {r[0] for r in self._db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def _refuse_foreign(self) -> None:
        """A SQLite file with tables but none of ours is someone else's database: never write our schema into it."""
        tables = self._tables()
        if tables and "runs" not in tables:
            raise StoreError(f"{self.path} is a SQLite file but not an llmsweep results store (it holds "
                             f"{', '.join(sorted(tables)[:5])})", fix=_STORE_FIX)

    def _too_new(self, version: int) -> StoreError:
        return StoreError(f"results store {self.path} has schema version {version}, this llmsweep reads up to "
                          f"{SCHEMA_VERSION}",
                          fix=f"use a newer llmsweep, or point {_STORE} at a new file and re-ingest the runs")

    def check_writable(self) -> None:
        """Prove the store takes a write (a committed transaction that rewrites its schema version), so a run learns
        of a read-only file or folder before any server starts rather than after its GPU time."""
        if self.readonly:
            raise StoreError(f"results store {self.path} was opened read-only", fix="open it without readonly=True")
        try:
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")
                self._db.execute(f"PRAGMA user_version = {self.schema_version}")
        except sqlite3.Error as exc:
            raise StoreError(f"results store {self.path} cannot be written: {exc}", fix=_fix_for(exc)) from exc

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    @property
    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self) -> None:
        """Bring the store to SCHEMA_VERSION (each migration in one transaction), then add the hot columns the metric
        table has gained since the store was written.

        Two processes may open an old store at once (a run storing its jobs, a user's `results ingest`): each
        migration takes the write lock first (`BEGIN IMMEDIATE`) and reads the schema version again under it, so a
        migration another process applied since this one first read the version is skipped, never applied twice."""
        version = self.schema_version
        if version > SCHEMA_VERSION:
            raise self._too_new(version)
        if version == 0:
            self._refuse_foreign()
        for target, description, sql in MIGRATIONS:
            if target <= version:
                continue
            with self._db:
                self._db.execute("BEGIN IMMEDIATE")  # DDL included: a migration is applied whole or not at all
                version = self.schema_version  # under the write lock: what another process migrated meanwhile
                if version > SCHEMA_VERSION:
                    raise self._too_new(version)
                if target <= version:
                    continue
                if not self._already_applied(target):
                    for statement in _statements(sql):
                        self._db.execute(statement)
                    if target == 4:
                        self._rekey()
                    if target == 5:
                        _split_evals(self._db, self.path)
                self._db.execute(f"PRAGMA user_version = {target}")
            log.info("results store %s migrated to schema %d: %s", self.path, target, description)
            version = target
        if self._current():  # nothing to write: no write lock taken (another process's write is not waited for)
            return
        with self._db:
            self._db.execute("BEGIN IMMEDIATE")  # the hot columns are read, then added: by one process at a time
            for target, description, _ in MIGRATIONS:
                if target >= 2:
                    self._db.execute("INSERT OR IGNORE INTO schema_version VALUES (?,?,?)",
                                     (target, description, _now()))
            self._sync_hot_columns()

    def _current(self) -> bool:
        """Whether the store already records every migration and has every hot column (read without a lock: a
        writer that finds it so has nothing to add, and another finishing its own change meanwhile is harmless)."""
        recorded = {r[0] for r in self._db.execute("SELECT version FROM schema_version")} \
            if "schema_version" in self._tables() else set()
        have = {r["name"] for r in self._db.execute("PRAGMA table_info(results)")}
        return {t for t, _, _ in MIGRATIONS if t >= 2} <= recorded and all(c.name in have for c in HOT_COLUMNS)

    def _already_applied(self, target: int) -> bool:
        """A migration whose change the store already holds although its version says otherwise (a store whose
        `user_version` was set back): migration 5 when `evals` is schema 5's already (keyed by concurrency), whose
        rows would not parse as the eval blocks it splits; migration 7 when `results` has its column already. Every
        other migration is safe to apply again."""
        if target == 5:
            return "conc" in {r["name"] for r in self._db.execute("PRAGMA table_info(evals)")}
        if target == 7:
            return "retired" in {r["name"] for r in self._db.execute("PRAGMA table_info(results)")}
        return False

    def _rekey(self) -> None:
        """Recompute every stored job's identity and keys as ingestion computes them today (llmsweep's own jobs from
        their job and summary; an imported row's identity as stored, its corpus unknown)."""
        rows = self._db.execute("SELECT j.run_id, j.job_id, j.identity, j.job, x.summary, r.origin FROM jobs j "
                                "JOIN runs r ON r.run_id = j.run_id LEFT JOIN results x "
                                "ON x.run_id = j.run_id AND x.job_id = j.job_id").fetchall()
        for row in rows:
            stored = _StoredRow(self, row["run_id"], row["job_id"])
            summary = stored.json(row["summary"], "results.summary") if row["summary"] else None
            if row["origin"] == "llmsweep":
                ident = identity_from_job(stored.json(row["job"], "jobs.job"), summary)
            else:
                ident = identity_from_dict(stored.json(row["identity"], "jobs.identity"))
            self._db.execute("UPDATE jobs SET identity = ?, point_key = ?, series_key = ? WHERE run_id = ? AND "
                             "job_id = ?", (_dumps(ident.as_dict()), ident.key(), ident.series_key(), row["run_id"],
                                            row["job_id"]))

    def _sync_hot_columns(self) -> None:
        """Add a column for every hot column of the metric table the results table lacks, filled from the stored
        summaries (imported rows from elsewhere have no summary of ours: NULL)."""
        have = {r["name"] for r in self._db.execute("PRAGMA table_info(results)")}
        new = [c for c in HOT_COLUMNS if c.name not in have]
        if not new:
            return
        for col in new:
            self._db.execute(f'ALTER TABLE results ADD COLUMN "{col.name}" REAL')
        for row in self._db.execute("SELECT result_id, run_id, job_id, summary FROM results").fetchall():
            stored = _StoredRow(self, row["run_id"], row["job_id"], row["result_id"])
            summary = stored.summary(stored.json(row["summary"], "results.summary"))
            if summary is None:
                continue
            values = hot_values(summary)
            self._db.execute(
                "UPDATE results SET " + ", ".join(f'"{c.name}" = ?' for c in new) + " WHERE result_id = ?",
                (*(values[c.name] for c in new), row["result_id"]))
        log.info("results store %s gained hot %s %s", self.path, noun(len(new), "column"),
                 ", ".join(c.name for c in new))

    # ---------------------------------------------------------------- writing

    def ingest_run(self, run: RunDir | Path | str, *, replace: bool = False) -> IngestReport:
        """Store (or replace) every job and result of a run directory.

        Re-ingesting replaces the stored run as a whole. A job the run retired (run.json's `retired`: its recipe no
        longer plans it) is kept from the folder it was moved to, as none of the run's results (`_insert_retired`),
        and so is an earlier attempt of a job measured again that other runs stood on (run.json's `kept_attempts`,
        `_insert_kept`).
        An attempt kept without knowing which runs stood on it (`rundir.KeptAttempt.pending`: `run` could not ask a
        busy store when it measured the job again) is settled first, while the store still holds the run as it was
        (`_settle_kept`): replaced first, the runs that stood on it drew the job's new result.
        When the folder lacks a result the store holds for that run
        (a partial or damaged copy of it), that would drop the result: refused (`ImportConflictError`, nothing
        written) unless `replace` says to store the folder as it is. `run`'s end-of-run ingest replaces: it stores
        what its own folder holds, a `--force` run's new results over its old ones."""
        run = run if isinstance(run, RunDir) else load_run(run)
        points = points_from_run(run)
        with self._db:
            if not replace:
                self.refuse_dropping(run)
            meta, settled = self._settle_kept(run.run_id, run.meta)
            replaced = self._delete_run(run.run_id)
            self._insert_run(run.run_id, "llmsweep", str(run.path.resolve()), meta)
            with_result = {p.job_id for p in points}
            for art in run.jobs:
                if art.job_id not in with_result and not art.unread:  # no job.json: no labels to store it under
                    ident = identity_from_job(art.job)
                    self._insert_job(run.run_id, art.job_id, ident.key(), ident.series_key(), ident.as_dict(),
                                     art.job, gpus_of(art.job, ident), str(art.dir.resolve()), has_result=False)
            for point in points:
                self._insert_point(point)
            self._insert_retired(run)
            self._insert_kept(run.path, run.run_id, meta)
        missing = tuple(j.job_id for j in run.jobs if j.summary is None)
        log.info("ingested run %s: %d results", run.run_id, len(points))
        return IngestReport(run.run_id, len(points), missing, run.missing_job_ids, replaced,
                            tuple(j.why_no_result() for j in run.jobs if j.unread or j.unjudged), tuple(settled))

    def dropped_by(self, run: RunDir) -> list[str]:
        """The jobs whose stored result (of this run id) re-ingesting `run`'s folder would drop: the folder holds no
        summary for them."""
        keeping = {j.job_id for j in run.jobs if j.summary is not None}
        return [j for j in self.result_job_ids(run.run_id) if j not in keeping]

    def refuse_dropping(self, run: RunDir) -> None:
        """An `ImportConflictError` (exit 2) when re-ingesting `run` would drop results the store holds for it."""
        dropped = self.dropped_by(run)
        if not dropped:
            return
        held = self._db.execute(f"SELECT COUNT(*) FROM results x WHERE x.run_id = ? AND {self._own()}",
                                (run.run_id,)).fetchone()[0]
        named = ", ".join(dropped[:3]) + (f" and {len(dropped) - 3} more" if len(dropped) > 3 else "")
        raise ImportConflictError(
            f"re-ingesting {run.path} would drop {len(dropped)} of the {count_of(held, 'result')} {self.path} holds "
            f"for run {run.run_id}: the folder has no summary of {noun(len(dropped), 'job')} {named} (a partial or "
            "damaged copy of the run?); nothing was stored",
            fix=f"ingest the folder that holds the whole run, or pass {_FORCE} to store the run as {run.path} holds "
                f"it (`llmsweep results ingest {shlex.quote(str(run.path))} {_FORCE} {_STORE} "
                f"{shlex.quote(str(self.path))}`), dropping those results")

    def ingest_job(self, run_dir: Path | str, job_dir: Path | str) -> bool:
        """Store (or replace) one job of a run directory, creating the run's row if it is the first; True when the
        job had a result. `ingest_run` at the end of the run replaces the whole run, so both meet in one copy.

        The job's reuse key in the stored run's meta becomes the one run.json records for it now: the key its folder's
        result was measured under. Kept as the run's row had it, a run resumed after an edit and stopped before its
        end filed the new result under the old configuration's key, and `--reuse` of the old configuration stood on
        it (until 2026-12-06). The earlier attempts run.json now records as kept for the runs that stood on them
        (`kept_attempts`) are stored beside it (`_keep_attempts`)."""
        from llmsweep.changes.reuse import recorded_parts_of

        root = Path(run_dir)
        run_id, meta = load_run_meta(root)
        art = load_job(Path(job_dir))
        keys = meta.get("reuse_keys")
        key = keys.get(Path(job_dir).name) if isinstance(keys, dict) else None
        if art is None:  # the folder holds no result (an earlier attempt moved aside): neither does the store
            with self._db:
                self._db.execute("DELETE FROM jobs WHERE run_id = ? AND job_id = ?", (run_id, Path(job_dir).name))
                self._keep_job_meta(run_id, Path(job_dir).name, key, drop_outcome=True)
                self._keep_attempts(root, run_id, meta)
            return False
        point = point_from_job(run_id, art)
        with self._db:
            if not self.has_run(run_id):
                self._insert_run(run_id, "llmsweep", str(root.resolve()), meta)
            self._keep_job_meta(run_id, art.job_id, key, outcome=art.outcome,
                                parts=recorded_parts_of(meta, key) if isinstance(key, str) else None)
            self._keep_attempts(root, run_id, meta)
            self._db.execute("DELETE FROM jobs WHERE run_id = ? AND job_id = ?", (run_id, art.job_id))
            if point is None and not art.unread:
                ident = identity_from_job(art.job)
                self._insert_job(run_id, art.job_id, ident.key(), ident.series_key(), ident.as_dict(), art.job,
                                 gpus_of(art.job, ident), str(art.dir.resolve()), has_result=False)
            elif point is not None:
                self._insert_point(point)
        return point is not None

    def retire_job(self, run_dir: Path | str, job_id: str) -> list[str]:
        """A job of a stored run that the run retired (run.json's `retired` records where it keeps the job's files
        now): no longer the run's job — its reuse key and outcome leave the stored run's meta, which records the
        retirement —, its result kept, as none of the run's results, for the runs that stood on it (`run --reuse`);
        those runs' ids are returned (`run` names them): asked by the key and the measurement the retired result is
        (`_reusing_runs`, as `standing_on` asks it of a job measured again), so a run whose record names another
        measurement of the job is not among them, and one that stood anew on this one is. The end-of-run ingest
        stores the retirement the same way (`_insert_retired`)."""
        from llmsweep.results.rundir import RETIRED, load_run, retired_of

        run = load_run(run_dir, set_aside=True)
        if not self.has_run(run.run_id):
            return []
        with self._db:
            self._db.execute("DELETE FROM jobs WHERE run_id = ? AND job_id = ?", (run.run_id, job_id))
            self._keep_job_meta(run.run_id, job_id, None, drop_outcome=True)
            meta = self.run_meta(run.run_id)
            if RETIRED in run.meta:
                meta[RETIRED] = run.meta[RETIRED]
                self._db.execute("UPDATE runs SET meta = ? WHERE run_id = ?", (_dumps(meta), run.run_id))
            self._insert_retired(run, only=job_id)
        retired = retired_of(run.meta).get(job_id)
        held = self._held_measurement(run.run_id, job_id)
        if held is False:  # no result of it kept (its folder holds none the store reads): none is kept for anyone
            return []
        return self._reusing_runs(run.run_id, job_id, retired.reuse_key if retired else None, held)

    def _insert_retired(self, run: RunDir, only: str | None = None) -> None:
        """Store the results of the jobs `run` retired (`rundir.retired_jobs`; `only`: that job's), each marked with
        the folder the run keeps it in: the runs that stood on it (`run --reuse`) still read it by its result id, and
        no read of the run's own results finds it. Its eval is not stored (`run --reuse` never stands a job with an
        eval on a stored result)."""
        from llmsweep.results.rundir import retired_jobs

        for retired, art in retired_jobs(run):
            if only is not None and art.job_id != only:
                continue
            point = point_from_job(run.run_id, art)
            if point is not None:
                self._insert_point(point, retired=retired.dir)

    def _reusing_runs(self, run_id: str, job_id: str, key: str | None, measured_at: str | None = None) -> list[str]:
        """The stored runs that stand a job on run `run_id`'s result of job `job_id` (`run --reuse`: their record's
        `reused` names it) measured under `key` — the measurement `measured_at` (`metrics.model.measurement_stamp`)
        where both it and the record name one —, as `reused_points` reads them: one that stood on an earlier
        measurement of the job, under another key or, by a record naming no measurement, in an attempt the run kept
        for it (`rundir.KEPT_ATTEMPTS`), does not."""
        from llmsweep.changes.reuse import split_key
        from llmsweep.results.rundir import kept_attempts_of, reused_of

        result_id = result_id_for(run_id, job_id)
        earlier = {r for k in kept_attempts_of(self.run_meta(run_id)) if k.job_id == job_id for r in k.runs or ()}

        def stands(reusing: str, src: Mapping[str, Any]) -> bool:
            then, said = src.get("reuse_key"), src.get("measured_at")
            if str(src.get("result_id")) != result_id or (
                    isinstance(then, str) and key is not None and split_key(then)[0] != split_key(key)[0]):
                return False
            if isinstance(said, str) and measured_at is not None:
                return said == measured_at
            return reusing not in earlier

        rows = self._db.execute("SELECT run_id, meta FROM runs ORDER BY ingested_at, run_id").fetchall()
        return [r["run_id"] for r in rows if r["run_id"] != run_id
                and any(stands(r["run_id"], src)
                        for src in reused_of(_StoredRow(self, r["run_id"]).json(r["meta"], "runs.meta")).values())]

    def standing_on(self, run_id: str, job_id: str) -> tuple[str | None, list[str]]:
        """Of the result the store holds of run `run_id`'s job `job_id`: the reuse key its run recorded it under
        (None where it recorded none), and the other stored runs that stand a job on it (`run --reuse`), oldest
        first — [] when the store holds no such result. What `run` asks before it measures the job again: the attempt
        it keeps is kept in the store for those runs (`rundir.KEPT_ATTEMPTS`)."""
        recorded = self.run_meta(run_id).get("reuse_keys")
        key = recorded.get(job_id) if isinstance(recorded, dict) else None
        key = key if isinstance(key, str) else None
        held = self._held_measurement(run_id, job_id)
        if held is False:
            return key, []
        return key, self._reusing_runs(run_id, job_id, key, held)

    def _held_measurement(self, run_id: str, job_id: str) -> str | Literal[False] | None:
        """Which measurement (`metrics.model.measurement_stamp`) the result the store holds of run `run_id`'s job
        `job_id` is — the run's own or one it retired —: None where its provenance names none, False where the store
        holds no such result."""
        result_id = result_id_for(run_id, job_id)
        held = self._db.execute("SELECT p.doc FROM results x LEFT JOIN provenance p ON p.result_id = x.result_id "
                                "WHERE x.result_id = ? AND x.run_id = ? AND x.job_id = ?",
                                (result_id, run_id, job_id)).fetchone()
        if held is None:
            return False
        return _measured_at(_StoredRow(self, run_id, job_id, result_id).json(held["doc"], "provenance.doc")
                            if held["doc"] else {})

    def _settle_kept(self, run_id: str, meta: Mapping[str, Any]) -> tuple[dict[str, Any], list[KeptAttempt]]:
        """Run `run_id`'s record `meta` with each attempt it kept without knowing which runs stood on it
        (`rundir.KeptAttempt.pending`) settled: the stored runs that stand on it (`_reusing_runs`, by the measurement
        it is; a settlement the store made before is kept), asked before anything of the run is replaced; one no run
        stands on is left out (nothing to keep it for). Returns the record and the attempts settled."""
        from llmsweep.results.rundir import KEPT_ATTEMPTS, kept_attempts_of

        kept = kept_attempts_of(meta)
        if not any(k.pending for k in kept):
            return dict(meta), []
        known = {k.dir: k for k in kept_attempts_of(self.run_meta(run_id)) if not k.pending}
        settled = [k if not k.pending else dataclasses.replace(k, runs=known[k.dir].runs) if k.dir in known
                   else dataclasses.replace(k, runs=tuple(self._reusing_runs(run_id, k.job_id, k.reuse_key,
                                                                             k.measured_at)))
                   for k in kept if k.pending]
        entries = {folder: doc for folder, doc in meta[KEPT_ATTEMPTS].items()
                   if folder not in {k.dir for k in settled}}
        entries.update({k.dir: k.to_json() for k in settled if k.runs})
        return {**meta, KEPT_ATTEMPTS: entries}, settled

    def _keep_attempts(self, root: Path, run_id: str, meta: Mapping[str, Any]) -> None:
        """The stored run's record of its kept attempts (`rundir.KEPT_ATTEMPTS`) becomes run.json's (`meta`), its
        pending ones settled (`_settle_kept`) before the job's stored result is replaced, and each it does not hold
        yet is stored (`_insert_kept`)."""
        from llmsweep.results.rundir import KEPT_ATTEMPTS

        stored = self.run_meta(run_id)
        if KEPT_ATTEMPTS not in meta or not stored:
            return
        meta, _ = self._settle_kept(run_id, meta)
        if stored.get(KEPT_ATTEMPTS) != meta[KEPT_ATTEMPTS]:
            stored[KEPT_ATTEMPTS] = meta[KEPT_ATTEMPTS]
            self._db.execute("UPDATE runs SET meta = ? WHERE run_id = ?", (_dumps(stored), run_id))
        self._insert_kept(root, run_id, meta)

    def _insert_kept(self, root: Path, run_id: str, meta: Mapping[str, Any]) -> None:
        """Store each earlier attempt the run in folder `root` kept for the runs that stood on it (`rundir.
        kept_attempts`: run.json's `kept_attempts`) that the store does not hold yet, under its own job and result
        id (`KeptAttempt.stored_job_id`; the job's own id holds its newer result), marked with the folder it is kept
        in: the runs that stood on it read it (`reused_points`), and no read of the run's own results finds it. Its
        eval is not stored (`run --reuse` never stands a job with an eval on a stored result)."""
        from llmsweep.results.rundir import kept_attempts, kept_attempts_of

        listed = {result_id_for(run_id, k.stored_job_id): k for k in kept_attempts_of(meta)}
        if not listed:
            return
        held = {r[0] for r in self._db.execute("SELECT result_id FROM results WHERE run_id = ?", (run_id,))}
        # only the folders of those not stored yet are read: each job stored as it ends read every one before
        for kept, art in kept_attempts(root, meta, only=[k for rid, k in listed.items() if rid not in held]):
            result_id = result_id_for(run_id, kept.stored_job_id)
            point = point_from_job(run_id, art)
            if point is not None:
                self._insert_point(dataclasses.replace(point, job_id=kept.stored_job_id, result_id=result_id),
                                   retired=kept.dir)

    def _keep_job_meta(self, run_id: str, job_id: str, key: object, *, outcome: Mapping[str, Any] | None = None,
                       drop_outcome: bool = False, parts: Mapping[str, str] | None = None) -> None:
        """Keep what a job's folder says of it now in its run's `runs.meta`: its own outcome.json (`JOB_OUTCOMES`:
        `outcome` when given; `drop_outcome`: the folder no longer holds one) and its reuse key (`reuse_keys`, as
        run.json records it now; one that is not a string drops it), with the digests of its identity's parts
        where run.json records them (`parts`: `changes.reuse.RECORDED_PARTS`). The end-of-run ingest replaces the
        meta with run.json's, which records every outcome and key."""
        from llmsweep.changes.reuse import RECORDED_PARTS, split_key

        meta = self.run_meta(run_id)
        if not meta:
            return
        before = _dumps(meta)
        kept = meta.get(JOB_OUTCOMES)
        kept = dict(kept) if isinstance(kept, dict) else {}
        if outcome:
            meta[JOB_OUTCOMES] = {**kept, job_id: dict(outcome)}
        elif drop_outcome and kept.pop(job_id, None) is not None:
            meta[JOB_OUTCOMES] = kept
        keys = meta.get("reuse_keys")
        if isinstance(keys, dict) or isinstance(key, str):
            keys = dict(keys) if isinstance(keys, dict) else {}
            if isinstance(key, str):
                keys[job_id] = key
            else:
                keys.pop(job_id, None)
            meta["reuse_keys"] = keys
        if isinstance(key, str) and parts is not None:
            recorded = meta.get(RECORDED_PARTS)
            meta[RECORDED_PARTS] = {**(recorded if isinstance(recorded, dict) else {}), split_key(key)[0]: dict(parts)}
        if (after := _dumps(meta)) != before:
            self._db.execute("UPDATE runs SET meta = ? WHERE run_id = ?", (after, run_id))

    def ingest_points(self, run_id: str, origin: str, points: Iterable[ResultPoint], meta: Mapping[str, Any]) -> int:
        """Store imported points as one run (replacing an earlier import with the same run id). Two points of one
        job id, or a result id another run holds, are a ResultError naming them; nothing of the run is written."""
        points = list(points)
        try:
            with self._db:
                self._delete_run(run_id)
                self._insert_run(run_id, origin, None, meta)
                for point in points:
                    self._insert_point(point)
        except sqlite3.IntegrityError as exc:
            raise ImportConflictError(
                f"cannot store the imported run {run_id} in {self.path}: {exc} (two rows of one job, or a result "
                "another run of the store holds)",
                fix=f"import into a new store ({_STORE} NEW.sqlite), or export each run on its own "
                    f"(`llmsweep results export {_RUN_ID} RUN`) and import those") from exc
        return len(points)

    def result_job_ids(self, run_id: str) -> list[str]:
        """The job ids of the results the store holds for a run (none when it holds no such run)."""
        rows = self._db.execute(f"SELECT job_id FROM results x WHERE run_id = ? AND {self._own()} ORDER BY job_id",
                                (run_id,))
        return [str(r["job_id"]) for r in rows]

    def run_origin(self, run_id: str) -> str | None:
        """Who produced a stored run (`llmsweep`, `llmsweep-export`, `inferencex`), or None when it is not stored."""
        row = self._db.execute("SELECT origin FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else str(row["origin"])

    def _delete_run(self, run_id: str) -> bool:
        cur = self._db.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
        return cur.rowcount > 0

    def _insert_run(self, run_id: str, origin: str, path: str | None, meta: Mapping[str, Any]) -> None:
        expected = meta.get("expected_job_ids") or meta.get("expected_jobs")
        self._db.execute(
            "INSERT INTO runs VALUES (?,?,?,?,?,?,?,?,?)",
            (run_id, origin, path, _str(meta.get("started")), _str(meta.get("llmsweep_version")),
             _str(meta.get("executor")), _dumps(expected) if expected else None, _dumps(meta), _now()),
        )

    def _insert_job(self, run_id: str, job_id: str, point_key: str, series_key: str, identity: Mapping[str, Any],
                    job: Mapping[str, Any], gpus: int, artifact_dir: str | None, *, has_result: bool) -> None:
        self._db.execute(
            "INSERT INTO jobs VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            (run_id, job_id, point_key, series_key, _dumps(identity), _str(get_field(job, "recipe_key")),
             _str(get_field(job, "recipe_fingerprint")), gpus, artifact_dir, int(has_result), _dumps(job)),
        )

    def _insert_point(self, p: ResultPoint, *, retired: str | None = None) -> None:
        """Store a result; `retired`: the folder its run retired the job to (`_insert_retired`), None for one of
        the run's results."""
        ident = p.identity
        self._insert_job(p.run_id, p.job_id, ident.key(), ident.series_key(), ident.as_dict(), p.job, p.gpus,
                         str(p.artifact_dir.resolve()) if p.artifact_dir else None, has_result=True)
        columns = ("result_id", "run_id", "job_id", "source", "origin", "verdict", "reasons", "num_requests",
                   "num_successful", *HOT_NAMES, "summary", *(("retired",) if retired is not None else ()))
        doc = p.summary.dump() if p.summary is not None else p.imported
        names = ", ".join(f'"{c}"' for c in columns)
        self._db.execute(
            f"INSERT INTO results ({names}) VALUES ({','.join('?' * len(columns))})",
            (p.result_id, p.run_id, p.job_id, p.source, p.origin, p.verdict, _dumps(list(p.reasons)),
             p.num_requests, p.num_successful, *(p.metrics.get(c) for c in HOT_NAMES), _dumps(doc),
             *((retired,) if retired is not None else ())),
        )
        if p.eval is not None and retired is None:
            self._insert_eval(p, p.eval)
        prov = p.provenance
        self._db.execute(
            "INSERT INTO provenance VALUES (?,?,?,?,?,?,?,?)",
            (p.result_id, _str(prov.get("recipe_fingerprint")), _str(_ran_in(prov, ident.image)),
             _str(prov.get("engine_version")), _str(prov.get("llmsweep_version")), _str(prov.get("seed")),
             _str(prov.get("hardware") or ident.hardware), _dumps(prov)),
        )

    def _insert_eval(self, p: ResultPoint, block: EvalBlock) -> None:
        _insert_eval_runs(self._db, p.result_id, p.run_id, p.job_id, eval_run_columns(block, planned_eval_conc(p.job)))

    def evals(self, run: str | None = None) -> list[StoredEval]:
        """Every stored eval, one per (result, concurrency it ran at), optionally of one run; oldest run first, then
        by job and concurrency. A store below schema 5 read without migrating holds one row per result: its eval
        block is split here as the migration would split it."""
        if "evals" not in self._tables():  # a store below schema 3 read as it is: no result of it ran an eval
            return []
        split = "conc" not in {r["name"] for r in self._db.execute("PRAGMA table_info(evals)")}
        sql = ("SELECT e.*, x.source AS result_source, json_extract(x.summary, '$.eval.dataset') AS eval_dataset, "
               "json_extract(x.summary, '$.eval.limit') AS eval_limit" + (", j.job AS job_record" if split else "")
               + " FROM evals e JOIN runs r ON r.run_id = e.run_id LEFT JOIN results x ON x.result_id = e.result_id"
               + (" LEFT JOIN jobs j ON j.run_id = e.run_id AND j.job_id = e.job_id" if split
                                        else "") + (" WHERE e.run_id = ?" if run else "")
               + " ORDER BY r.ingested_at, e.run_id, e.job_id" + ("" if split else ", e.conc"))
        rows: list[Mapping[str, Any]] = []
        for r in self._db.execute(sql, (run,) if run else ()):
            if split:
                columns = _split_columns(r, self.path)
                rows += [{**c, "result_id": r["result_id"], "run_id": r["run_id"], "job_id": r["job_id"],
                          "result_source": r["result_source"], "eval_dataset": r["eval_dataset"],
                          "eval_limit": r["eval_limit"]} for c in sorted(columns, key=lambda c: int(c["conc"]))]
            else:
                rows.append(dict(r, reasons=_stored_eval_json(r, "reasons", self.path)))
        return [StoredEval(result_id=r["result_id"], run_id=r["run_id"], job_id=r["job_id"], conc=r["conc"],
                           status=r["status"], mode=r["mode"], task=r["task"], score=r["score"],
                           score_name=r["score_name"], score_stderr=r["score_stderr"], n_samples=r["n_samples"],
                           verdict=r["verdict"], reasons=tuple(r["reasons"]), harness_version=r["harness_version"],
                           error=r["error"], source=r["result_source"], dataset=r["eval_dataset"],
                           limit=r["eval_limit"]) for r in rows]

    # ---------------------------------------------------------------- reading

    def runs(self) -> list[RunInfo]:
        rows = self._db.execute(
            "SELECT r.run_id, r.origin, r.path, r.started, r.ingested_at, COUNT(x.result_id) AS n, "
            "GROUP_CONCAT(DISTINCT x.source) AS sources FROM runs r LEFT JOIN results x ON x.run_id = r.run_id "
            f"AND {self._own()} GROUP BY r.run_id ORDER BY r.ingested_at, r.run_id").fetchall()
        return [RunInfo(r["run_id"], r["origin"], r["path"], r["started"], r["ingested_at"], r["n"],
                        tuple(sorted((r["sources"] or "").split(",")) if r["sources"] else ())) for r in rows]

    def has_run(self, run_id: str) -> bool:
        return self._db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None

    def require_run(self, run_id: str | None) -> None:
        """Refuse a run id the store does not hold (a command given one must not answer with nothing, exit 0)."""
        if run_id is not None and not self.has_run(run_id):
            raise ResultInputError(f"no run {run_id!r} in {self.path}", fix="see `llmsweep results runs` for run ids")

    def run_path(self, run_id: str) -> str | None:
        """The folder a stored run was ingested from (None: imported rows, or no such run)."""
        row = self._db.execute("SELECT path FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return row["path"] if row else None

    def run_fix(self, run_id: str) -> str:
        """How to mend a stored run whose rows cannot be read: store it anew from the folder it was ingested from
        (`results ingest --force` rewrites every row of it), else drop it (SQLite's own shell, foreign keys on so
        its jobs, results, provenance and evals go with it) and store or import it again."""
        store = shlex.quote(str(self.path))
        drop = (f"`sqlite3 {store} \"PRAGMA foreign_keys = ON; DELETE FROM runs WHERE run_id = "
                f"'{run_id.replace(chr(39), chr(39) * 2)}'\"`")
        folder = self.run_path(run_id)
        if folder:
            return (f"store the run anew from its folder: `llmsweep results ingest {shlex.quote(folder)} {_FORCE} "
                    f"{_STORE} {store}`; if that folder is gone, drop the run ({drop})")
        return f"drop the run ({drop}) and import it again (`llmsweep results import FILE {_STORE} {store}`)"

    def run_meta(self, run_id: str) -> dict[str, Any]:
        row = self._db.execute("SELECT meta FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return _StoredRow(self, run_id).json(row["meta"], "runs.meta") if row else {}

    def job_warnings(self, run_ids: Iterable[str]) -> dict[tuple[str, str], list[str]]:
        """(run id, job id) -> the warnings the run's outcome gave the job (under the simulator, the engine rules it
        ran despite and what the simulator does not model: `JobOutcome.warnings`), as the run's `outcome` list in
        `runs.meta` holds them, else as the job's own outcome.json said when it was stored (a run interrupted before
        it wrote its outcomes); jobs without any are left out, and so are runs imported from elsewhere."""
        return {(run_id, job_id): o.warnings for run_id in dict.fromkeys(run_ids)
                for job_id, o in self._outcomes(run_id).items() if o.warnings}

    def _outcomes(self, run_id: str) -> dict[str, RecordedOutcome]:
        meta = self.run_meta(run_id)
        return known_outcomes(meta, stored_job_outcomes(meta))

    def results(self, run: str | None = None, *, point_key: str | None = None, job_id: str | None = None,
                point_keys: Collection[str] | None = None, origin: str | None = None,
                verdict: str | None = None) -> list[ResultPoint]:
        """Stored results, optionally of one run, one exact point identity (or any of `point_keys`, at most `BATCH`),
        one job id, one origin or one verdict, oldest run first. Only the rows asked for are read: a lookup by job
        id reads that job's rows, not the store."""
        where, args = [], []
        wanted = None if point_keys is None else set(point_keys)
        if point_key is not None:
            wanted = {point_key} if wanted is None else wanted & {point_key}
        if wanted is not None and len(wanted) > BATCH:
            raise AssertionError("at most BATCH point keys per query")
        # A store below schema 4 read without migrating keeps point keys from before `corpus`: its points' identities
        # are computed as the migration would (`_point`), so their keys are matched after the read, not in SQL.
        stale_keys = self._version < 4
        for column, value in (("x.run_id", run), ("x.job_id", job_id), ("x.origin", origin),
                              ("x.verdict", verdict)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        if wanted is not None and not stale_keys:
            where.append(f"j.point_key IN ({','.join('?' * len(wanted))})")
            args += sorted(wanted)
        points = [self._point(row) for row in self._select([*where, self._own()], args).fetchall()]
        if wanted is not None and stale_keys:
            points = [p for p in points if p.identity.key() in wanted]
        return points

    def _own(self) -> str:
        """The SQL condition that a row of `results x` is one of its run's results, not one the run retired (kept for
        the runs that stood on it: `_V7_SCHEMA`); always true on a store below schema 7 read as it is."""
        return "x.retired IS NULL" if "retired" in self._columns else "1"

    def _select(self, where: list[str], args: list[Any]) -> sqlite3.Cursor:
        """The rows of results (with their job's and provenance's columns); callers fetch them all before reading
        any (`_point`), so a row that does not read leaves no statement open holding the store's read lock. A
        result its run retired is among them unless `where` says `_own()`: `points` reads results by id."""
        sql = ("SELECT x.*, j.identity, j.gpus, j.job, j.artifact_dir, p.doc AS provenance FROM results x "
               "JOIN jobs j ON j.run_id = x.run_id AND j.job_id = x.job_id "
               "JOIN runs r ON r.run_id = x.run_id LEFT JOIN provenance p ON p.result_id = x.result_id"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY r.ingested_at, x.run_id, x.job_id")
        return self._db.execute(sql, args)

    def points(self, result_ids: Iterable[str]) -> dict[str, ResultPoint]:
        """The stored results of these result ids (result id -> point), read in one query per `BATCH` ids rather
        than one per id; an id the store does not hold is absent from the answer (the caller says what that
        means)."""
        wanted = list(dict.fromkeys(str(i) for i in result_ids))
        out: dict[str, ResultPoint] = {}
        for start in range(0, len(wanted), BATCH):
            chunk = wanted[start:start + BATCH]
            for row in self._select([f"x.result_id IN ({','.join('?' * len(chunk))})"], list(chunk)).fetchall():
                point = self._point(row)
                out[point.result_id] = point
        return out

    def readable_points(self, result_ids: Iterable[str],
                        unread: Callable[[str, StoreError], None] | None = None) -> dict[str, ResultPoint]:
        """`points`, leaving out a row whose columns do not read (`unread` is told which and why) instead of losing
        the whole batch to it: one damaged row is its own point's problem."""
        ids = list(result_ids)
        try:
            return self.points(ids)
        except StoreError:
            out: dict[str, ResultPoint] = {}
            for result_id in ids:
                try:
                    out.update(self.points([result_id]))
                except StoreError as exc:
                    if unread is not None:
                        unread(result_id, exc)
            return out

    def reused_points(self, reused: Mapping[str, Mapping[str, Any]], *, by: str) -> dict[str, ResultPoint]:
        """The stored results `run --reuse` stood run `by`'s jobs on (its `run.json: reused`, job id -> the result's
        run, job and result ids), by the reusing run's job id, read in one batched query (`points`). A job whose
        result the store does not hold, or holds under another run or job than the record names, is absent: never a
        point the record does not name.

        Where the result's run measured the job again since (a `--force` or `--resume` rerun keeps the job's result
        id) and kept the attempt `by` stood on (`rundir.KEPT_ATTEMPTS`: the measurement the record names, its
        `measured_at`; for a record or an attempt from before measurements were named, one of the runs that stood on
        it when it was measured again, `KeptAttempt.stood_on_by`), that kept result is read, under the job id the
        record names: not the job's newer result, whatever key it was measured under. A job result of another
        measurement than the record names is absent; one measured again that kept nothing for `by` (a release before
        they were kept) is absent where its key is not the one reused. A result its run retired since (the recipe no
        longer plans the job) is kept for them, and read here under the key the run's record of the retirement gives
        it."""
        from llmsweep.changes.reuse import split_key
        from llmsweep.results.rundir import kept_attempts_of, retired_of

        metas: dict[str, dict[str, Any]] = {}

        def meta_of(run_id: str) -> dict[str, Any]:
            if run_id not in metas:
                metas[run_id] = self.run_meta(run_id)
            return metas[run_id]

        wanted: dict[str, str] = {}
        kept_for: dict[str, str] = {}  # reusing job -> the job id the kept attempt it stood on was a result of
        for job, src in reused.items():
            if not src.get("result_id"):
                continue
            result_id, run_id = str(src["result_id"]), src.get("run_id")
            source = run_id if isinstance(run_id, str) else None
            kept = [k for k in kept_attempts_of(meta_of(source)) if result_id_for(source, k.job_id) == result_id
                    and k.stood_on_by(by, src)] if source is not None else []
            if source is not None and kept:
                wanted[job], kept_for[job] = result_id_for(source, kept[-1].stored_job_id), kept[-1].job_id
            else:
                wanted[job] = result_id
        found = self.readable_points(wanted.values())
        keys: dict[str, dict[str, Any]] = {}  # source run -> the reuse keys it records now
        out = {}
        for job, result_id in wanted.items():
            point, src = found.get(result_id), reused[job]
            if job in kept_for:
                if point is not None:
                    out[job] = dataclasses.replace(point, job_id=kept_for[job])
                continue
            if point is None or src.get("run_id") not in (None, point.run_id) \
                    or src.get("job_id") not in (None, point.job_id):
                continue
            stood, measured = src.get("measured_at"), _measured_at(point.provenance)
            if isinstance(stood, str) and measured is not None and stood != measured:
                continue  # the job measured again since, the measurement stood on not kept: never another one
            if point.run_id not in keys:
                meta = meta_of(point.run_id)
                recorded = meta.get("reuse_keys")
                keys[point.run_id] = {  # a job the run retired since: the key its kept result was measured under
                    **{job: r.reuse_key for job, r in retired_of(meta).items()},
                    **(recorded if isinstance(recorded, dict) else {})}
            now, then = keys[point.run_id].get(point.job_id), src.get("reuse_key")
            if isinstance(now, str) and isinstance(then, str) and split_key(now)[0] != split_key(then)[0]:
                continue
            out[job] = point
        return out

    def reusable(self, keys: Iterable[str], verdicts: tuple[str, ...] = ("valid",),
                 say: Callable[[str], None] | None = None,
                 refuse: Callable[[str, Reusable], str | None] | None = None) -> dict[str, Reusable]:
        """For each reuse key (`changes.reuse`), the newest stored result with one of `verdicts` recorded under it
        that the caller can stand on.

        A run records its jobs' keys in its `run.json` (`reuse_keys`, kept in `runs.meta`); a key names the job's
        full identity including llmsweep's measurement definitions and the workload (so its planned profile window:
        an identical job earns the same kind of verdict), so a match is the same measurement. Only valid results are
        reused by default: smoke, invalid and failed ones are measured again.

        A key carrying a context (`<identity>/<source>/<clock>/<corpus>`, `changes.reuse.reuse_keys`) matches a
        stored result of the same identity only when the result's own record agrees with it: its source, its
        provenance's clock, and the corpus digest its summary read back (a Mooncake trace: the file digest the
        stored run recorded). A stored result passed over for that is said once, with why (`say`: `run`'s event
        line; default the log): the job runs again.

        `refuse(key, result)`: why the caller cannot stand on a result that matches (the run's own, which `--force`
        measures again; one without the valid power a job requires), None when it can. A refused result is passed
        over as an invalid one is, for the next newest under the key: the note says so where an older one stands;
        where none does, the caller says why the job runs again (its refusal), not this lookup."""
        from llmsweep.changes.reuse import split_key

        wanted: dict[str, tuple[str, Any]] = {}
        for key in keys:
            base, context = split_key(key)
            wanted[base if context is not None else key] = (key, context)
        out: dict[str, Reusable] = {}
        passed: dict[str, str] = {}
        newer: dict[str, str] = {}  # a newer result of the job in this context whose verdict is not one of `verdicts`
        refused: dict[str, str] = {}  # a newer result of the job in this context the caller cannot stand on (`refuse`)
        runs = self._db.execute("SELECT run_id, meta, ingested_at, rowid AS row FROM runs "
                                "ORDER BY ingested_at DESC, rowid DESC").fetchall()
        metas = {run["run_id"]: _StoredRow(self, run["run_id"]).json(run["meta"], "runs.meta") for run in runs}
        for run in runs:
            recorded = metas[run["run_id"]].get("reuse_keys")
            if not isinstance(recorded, dict):
                continue
            hits: dict[str, tuple[str, Any, Any]] = {}
            for job, stored_key in recorded.items():
                if not isinstance(stored_key, str):
                    continue
                base, stored_context = split_key(stored_key)
                want = wanted.get(base) or wanted.get(stored_key)
                if want is not None and want[0] not in out:
                    hits[job] = (want[0], want[1], stored_context)
            if not hits:
                continue
            rows = self._db.execute(
                "SELECT x.result_id, x.job_id, x.verdict, x.source, j.identity, p.doc AS provenance FROM results x "
                "JOIN jobs j ON j.run_id = x.run_id AND j.job_id = x.job_id "
                f"LEFT JOIN provenance p ON p.result_id = x.result_id WHERE x.run_id = ? AND {self._own()} "
                "ORDER BY x.job_id", (run["run_id"],))
            for row in rows:
                hit = hits.get(row["job_id"])
                if hit is None or hit[0] in out:
                    continue
                key, context, stored_context = hit
                stored = _StoredRow(self, run["run_id"], row["job_id"], row["result_id"])
                prov = stored.json(row["provenance"], "provenance.doc") if row["provenance"] else {}
                why = None if context is None else _context_mismatch(
                    context, stored_context, row["source"], prov, stored.json(row["identity"], "jobs.identity"))
                if why is None and row["verdict"] not in verdicts:
                    newer.setdefault(key, f"run {run['run_id']}'s, is {row['verdict']}")
                elif why is None and (damaged := self._unreadable(row["result_id"])) is not None:
                    passed.setdefault(key, f"the {row['verdict']} result of run {run['run_id']} (job {row['job_id']}) "
                                           f"does not read ({damaged})")
                elif why is None:
                    found = Reusable(run["run_id"], row["job_id"], row["result_id"], row["verdict"],
                                     _measured_at(prov), (run["ingested_at"], run["row"]))
                    if refuse is not None and (refusal := refuse(key, found)) is not None:
                        if key not in newer:
                            refused.setdefault(key, f"run {run['run_id']}'s, {refusal}")
                        continue
                    out[key] = found
                    passed.pop(key, None)
                    stands = f"note: job {row['job_id']} stands on run {run['run_id']}'s {row['verdict']} result"
                    if key in newer:  # never unsaid: the newest measurement of this job did not pass its gates
                        note = f"{stands}, though its newest, {newer[key]} (`{_REUSE}` passes over such results)"
                    elif key in refused:  # nor that the newest is one the caller could not stand on
                        note = f"{stands}, though its newest, {refused[key]}"
                    else:
                        continue
                    if say is not None:
                        say(note)
                    else:
                        log.warning(note)
                elif key not in passed:
                    passed[key] = f"the {row['verdict']} result of run {run['run_id']} (job {row['job_id']}) {why}"
        reasons = [f"not reused: {reason}; the job runs again" for reason in passed.values()]
        reasons += self._why_not_matched([want[0] for want in wanted.values() if want[0] not in out
                                          and want[0] not in passed and want[0] not in refused],
                                         newer, [r["run_id"] for r in runs], metas)
        for reason in reasons:
            if say is not None:
                say(reason)
            else:
                log.warning("%s", reason)
        return out

    def _why_not_matched(self, keys: list[str], newer: Mapping[str, str], runs: list[str],
                         metas: Mapping[str, Any]) -> list[str]:
        """Why each of `keys` (a job's `changes.reuse.ReuseKey`) found no stored result to stand on, where nothing
        said so yet: the newest result stored under it did not pass (`newer`), or the newest stored result of the
        job was recorded under another key — naming what differs (`changes.reuse.differing_parts`: the recipe, the
        workload, llmsweep's measurement definitions, the simulator's code or catalogs, ...) — or the store holds
        no result of the job at all. A run that only stood on an earlier result recorded its key without a result:
        the result it stood on is the job's. A job whose stored result is under its other power gate's key is
        `run`'s own lookup (`POWER_GATE`), not said here."""
        from llmsweep.changes.reuse import (
            ReuseKey,
            key_differences,
            recorded_measurement,
            recorded_parts_of,
            split_key,
            stored_parts,
        )

        out: list[str] = []
        never: list[str] = []
        for key in keys:
            if not isinstance(key, ReuseKey) or key.evaluates:  # `run` says why a job with an eval runs again
                continue
            other = split_key(key.other_power)[0] if key.other_power is not None else None
            if other is not None and any(
                    isinstance(recorded := (meta or {}).get("reuse_keys"), dict)
                    and isinstance(stored := recorded.get(key.job_id), str) and split_key(stored)[0] == other
                    for meta in metas.values()):
                continue  # stored under its other power gate: `run`'s own lookup stands on it or says why not
            if key in newer:
                out.append(f"not reused: job {key.job_id}: the newest result stored under its key, {newer[key]}; the "
                           "job runs again")
                continue
            found = self._newest_of_job(key.job_id, runs, metas)
            if found is None:
                never.append(key.job_id)
                continue
            run_id, stored_key, verdict, job_doc, simulator = found
            measurement = recorded_measurement(metas.get(run_id))
            diffs = key_differences(key, stored_key, stored_parts(job_doc, key.job_id, measurement, simulator),
                                    recorded_parts=recorded_parts_of(metas.get(run_id), stored_key))
            what = "; ".join(diffs) or "its identity"
            out.append(f"not reused: job {key.job_id}: the newest stored result of the job, run {run_id}'s "
                       f"({verdict}), was recorded under another reuse key — what differs: {what}; the job runs again")
        if never:
            out.append(f"not reused: the store holds no result of {count_of(len(never), 'job')}, under any reuse key; "
                       f"{noun(len(never), 'it runs', 'they run')}: "
                       + ", ".join(never))
        return out

    def _newest_of_job(self, job_id: str, runs: list[str], metas: Mapping[str, Any]
                       ) -> tuple[str, str, str, dict[str, Any], str | None] | None:
        """(run, the key it recorded, verdict, stored job, the simulator build that served it where its provenance
        records one) of the newest stored result of `job_id` that some run measured (one that only reused it stored
        none), None when no run did."""
        for run_id in runs:
            recorded = (metas.get(run_id) or {}).get("reuse_keys")
            stored_key = recorded.get(job_id) if isinstance(recorded, dict) else None
            if not isinstance(stored_key, str):
                continue
            row = self._db.execute(
                "SELECT x.verdict, j.job, p.doc AS provenance FROM results x "
                "JOIN jobs j ON j.run_id = x.run_id AND j.job_id = x.job_id "
                "LEFT JOIN provenance p ON p.result_id = x.result_id "
                f"WHERE x.run_id = ? AND x.job_id = ? AND {self._own()} LIMIT 1", (run_id, job_id)).fetchone()
            if row is not None:
                stored = _StoredRow(self, run_id, job_id)
                job_doc = stored.json(row["job"], "jobs.job")
                prov = stored.json(row["provenance"], "provenance.doc") if row["provenance"] else {}
                return (run_id, stored_key, row["verdict"], job_doc if isinstance(job_doc, dict) else {},
                        _simulator_digest(prov))
        return None

    def _unreadable(self, result_id: str) -> str | None:
        """Why a stored result does not read as a point (a damaged summary or identity), None when it does: a job
        never stands on a result that `report` and `compare` could not draw."""
        try:
            self.points([result_id])
        except StoreError as exc:
            return exc.one_line()
        return None

    def jobs_without_result(self, run: str) -> list[str]:
        rows = self._db.execute("SELECT job_id FROM jobs WHERE run_id = ? AND has_result = 0 ORDER BY job_id", (run,))
        return [r["job_id"] for r in rows]

    def get(self, ref: str) -> ResultPoint:
        """A result by result id (whole), `run/job`, or job id. A job id (or `run/job`) that several stored results
        hold is refused (exit 2), naming each one's result id and run (runs of ours first, then imports, each in the
        order stored): the newest of them had been shown without a word, an `import:…` copy of an export where the
        user meant their own run."""
        found = self._lookup(ref)
        if len(found) == 1:
            return found[0]
        if not found:
            raise ResultInputError(f"no stored result matches {ref!r}",
                                   fix="give a result id, RUN_ID/JOB, a job id or a run's job folder "
                                       "(`llmsweep results list` lists the stored ones), or ingest the run first")
        found.sort(key=lambda p: p.origin != "llmsweep")  # runs of ours before imports: the fix's example is one
        shown = ", ".join(f"{p.result_id} (run {p.run_id})" for p in found[:5]) + (
            f" and {len(found) - 5} more" if len(found) > 5 else "")
        runs = {p.run_id for p in found}
        raise ResultInputError(f"{ref!r} matches {count_of(len(found), 'stored result')} of "
                               f"{count_of(len(runs), 'run')}: {shown}; nothing shown",
                               fix=f"give one result id (`llmsweep results show {found[0].result_id}`), or RUN/JOB "
                                   f"(`{found[0].run_id}/{found[0].job_id}`)")

    def _lookup(self, ref: str) -> list[ResultPoint]:
        """The results `ref` names, oldest run first: the one of that result id, else of `run/job`, else every
        result of that job id."""
        found = list(self.points([ref]).values())
        if not found and "/" in ref:
            run, job = ref.rsplit("/", 1)
            found = self.results(run, job_id=job)
        if not found:
            found = self.results(job_id=ref)
        return found

    def _metrics(self, row: sqlite3.Row, summary: Summary | None) -> dict[str, Any]:
        """The hot columns of a row; one an older store (read without migrating) lacks is computed from the stored
        summary, as the migration would fill it (None for an imported row)."""
        lacking = [c for c in HOT_NAMES if c not in self._columns]
        computed = hot_values(summary) if lacking and summary is not None else {}
        metrics = {c: row[c] if c in self._columns else computed.get(c) for c in HOT_NAMES}
        if row["num_requests"] == 0 and self._version < 6:  # read without migrating: as migration 6 would set it
            metrics["error_ratio"] = None
        return metrics

    def _point(self, row: sqlite3.Row) -> ResultPoint:
        art = row["artifact_dir"]
        stored = _StoredRow(self, row["run_id"], row["job_id"], row["result_id"])
        doc = stored.json(row["summary"], "results.summary")
        summary = stored.summary(doc)
        identity = stored.json(row["identity"], "jobs.identity")
        job = stored.json(row["job"], "jobs.job")
        # A store below schema 4 read without migrating: its identities predate `corpus`; computed as the migration
        # would (`_rekey`), so its points match new runs' as they will once it is migrated.
        ident = (identity_from_job(job, doc) if "corpus" not in identity and summary is not None
                 else identity_from_dict(identity))
        return ResultPoint(
            result_id=row["result_id"], run_id=row["run_id"], job_id=row["job_id"],
            identity=ident, source=row["source"], verdict=row["verdict"],
            metrics=self._metrics(row, summary), gpus=row["gpus"] or 1, origin=row["origin"],
            reasons=tuple(stored.json(row["reasons"], "results.reasons", list)), num_requests=row["num_requests"],
            num_successful=row["num_successful"], job=job, summary=summary,
            imported=doc if summary is None else {},
            provenance=stored.json(row["provenance"], "provenance.doc") if row["provenance"] else {},
            artifact_dir=Path(art) if art else None,
        )


class _StoredRow:
    """Reads the JSON columns of one stored row; a column that does not parse (or is not the JSON it should be) is a
    `StoreError` naming the store, the row (table and id), the column, and a fix that works: store the run anew from
    its folder, or drop it."""

    def __init__(self, store: Store, run_id: str, job_id: str | None = None, result_id: str | None = None) -> None:
        self.store, self.run_id, self.job_id, self.result_id = store, run_id, job_id, result_id

    def where(self, table: str) -> str:
        """The row of `table` this reader's columns come from, by its key."""
        if table == "runs":
            return f"row runs[run_id={self.run_id}]"
        if table == "jobs":
            return f"row jobs[run_id={self.run_id}, job_id={self.job_id}]"
        return f"row {table}[result_id={self.result_id}] (run {self.run_id}, job {self.job_id})"

    def json(self, value: Any, column: str, want: type = dict) -> Any:
        try:
            doc = json.loads(value)
        except (TypeError, ValueError) as exc:
            raise self.bad(column, f"not JSON: {_first_line(exc)}") from exc
        if not isinstance(doc, want):
            raise self.bad(column, f"a JSON {type(doc).__name__}, not {'an object' if want is dict else 'a list'}")
        return doc

    def summary(self, doc: Any) -> Summary | None:
        try:
            return _summary_of(doc, where="it")
        except ResultError as exc:
            raise self.bad("results.summary", f"unreadable: {_first_line(exc)}") from exc

    def bad(self, column: str, why: str) -> StoreError:
        return _bad_row(self.store.path, self.where(column.split(".")[0]), column, why,
                        self.store.run_fix(self.run_id))


def _simulator_digest(prov: object) -> str | None:
    """The simulator build that served a stored result (`metrics.model.SimulatorProvenance.digest`), from its
    provenance document; None for a result of no simulator, or one recorded before the digest was kept."""
    from pydantic import ValidationError

    from llmsweep.metrics.model import SimulatorProvenance

    said = prov.get("simulator") if isinstance(prov, dict) else None
    try:
        return SimulatorProvenance.model_validate(said).digest if isinstance(said, dict) else None
    except ValidationError:
        return None


def _measured_at(prov: object) -> str | None:
    """Which measurement a stored result is (`metrics.model.measurement_stamp`), from its provenance document."""
    return measurement_stamp(prov.get("started_at"), prov.get("finished_at")) if isinstance(prov, dict) else None


def _context_mismatch(want: Any, stored_key_context: Any, source: str, prov: Mapping[str, Any],
                      identity: Mapping[str, Any]) -> str | None:
    """Why a stored result of the job's identity does not stand for a run in context `want` (a
    `changes.reuse.ReuseContext`), from the result's own record (its source, provenance and identity); None when it
    does."""
    from llmsweep.changes.reuse import FILE_DIGEST, UNREADABLE

    if source != want.source:
        return f"is {source}, this run's would be {want.source}"
    clock = prov.get("clock")
    if clock != want.clock:
        return (f"ran in {clock} time, this run's would run in {want.clock} time" if clock
                else f"records no clock, this run's would run in {want.clock} time")
    launch = prov.get("launch")
    if want.served and isinstance(launch, dict):  # a real engine of a job naming an image: in it, or the host's
        image = launch.get("image")
        if want.served == "host" and image:
            return f"ran in image {image}; this run serves the host's engine (the local executor)"
        if want.served == "image" and not image:
            return "ran on a host's engine (the local executor, allow_image); this run serves the job's image"
    if want.served == "host" and want.engine:  # no image pins the host's engine: the build must be the one that ran
        ran = (launch.get("engine_version_reported") or launch.get("engine_version_installed")
               if isinstance(launch, dict) else None)
        if want.engine == UNREADABLE:
            return "ran on a host's engine whose version this run cannot read on this host now"
        if not ran:
            return f"records no engine version read back; the host now has {want.engine}"
        if not same_version(str(ran), want.engine):
            return f"ran on engine version {ran}; the host now has {want.engine}"
    if want.corpus == UNREADABLE:
        return "replayed a corpus this run cannot read now"
    if want.corpus.startswith(FILE_DIGEST):
        recorded = stored_key_context.corpus if stored_key_context is not None else ""
        if recorded != want.corpus:
            return (f"replayed trace file {recorded or 'of an unrecorded digest'}; the file is {want.corpus} now "
                    "(regenerated since)")
    elif want.corpus:
        stored = str(identity.get("corpus") or "")
        if stored != want.corpus:
            return (f"replayed corpus {stored or 'of an unrecorded digest'}; the trace source holds {want.corpus} "
                    "now (regenerated since)")
    return None


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _summary_of(doc: Any, where: str = "a stored summary") -> Summary | None:
    """A stored summary of ours (it carries a schema_version), or None for a row imported from elsewhere."""
    if isinstance(doc, dict) and "schema_version" in doc:
        return Summary.from_doc(doc, where=where)
    return None


def _empty_store() -> sqlite3.Connection:
    """An empty store of the current schema in memory: what a read-only command reads where none exists yet."""
    db = sqlite3.connect(":memory:")
    db.row_factory = sqlite3.Row
    for target, _, sql in MIGRATIONS:
        for statement in _statements(sql):
            db.execute(statement)
        if target == 5:
            _split_evals(db, Path(":memory:"))
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    return db


def _insert_eval_runs(db: sqlite3.Connection, result_id: str, run_id: str, job_id: str,
                      rows: list[dict[str, Any]]) -> None:
    """The `evals` rows of one result's eval: one per concurrency it ran at (`eval_run_columns`)."""
    for columns in rows:
        values = {**columns, "result_id": result_id, "run_id": run_id, "job_id": job_id}
        for key in ("reasons", "command", "doc"):
            values[key] = _dumps(values[key])
        db.execute(f"INSERT INTO evals ({', '.join(_EVAL_COLUMNS)}) VALUES ({','.join('?' * len(_EVAL_COLUMNS))})",
                   tuple(values[c] for c in _EVAL_COLUMNS))


def _split_evals(db: sqlite3.Connection, path: Path) -> None:
    """Migration 5: each row of the schema-3 `evals` table (a result's whole eval block in `doc`) becomes one row per
    concurrency the eval ran at, with that run's score (an eval that never ran: one failed row at the concurrency its
    job planned, `eval_run_columns`); the old table is dropped. A row that does not parse is a `StoreError` naming
    its result (the migration is rolled back whole)."""
    for row in db.execute("SELECT e.result_id, e.run_id, e.job_id, e.doc, j.job AS job_record FROM evals_v3 e "
                          "LEFT JOIN jobs j ON j.run_id = e.run_id AND j.job_id = e.job_id").fetchall():
        _insert_eval_runs(db, row["result_id"], row["run_id"], row["job_id"], _split_columns(row, path))
    db.execute("DROP TABLE evals_v3")


def _split_columns(row: Mapping[str, Any], path: Path) -> list[dict[str, Any]]:
    """The schema-5 `evals` columns of one schema-3/4 row (its eval block in `doc`, its job record in
    `job_record`)."""
    doc = _stored_eval_json(row, "doc", path)
    try:
        block = EvalBlock.model_validate(doc)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'the document'}: {e['msg']}" for e in exc.errors()[:3])
        raise _bad_eval_row(path, row["result_id"], "doc", f"not an eval block: {problems}") from exc
    job: Any = None
    if row["job_record"]:
        try:
            job = json.loads(row["job_record"])
        except ValueError:
            job = None  # the job record only says which concurrency an eval that never ran planned: 0 without it
    return eval_run_columns(block, planned_eval_conc(job if isinstance(job, Mapping) else None))


def _stored_eval_json(row: Mapping[str, Any], column: str, path: Path) -> Any:
    try:
        return json.loads(row[column])
    except (TypeError, ValueError) as exc:
        raise _bad_eval_row(path, row["result_id"], column, f"not JSON: {_first_line(exc)}") from exc


def _bad_row(path: Path, where: str, column: str, why: str, fix: str) -> StoreError:
    """A stored row that cannot be read: the store, the row, the column and why; one home for the message."""
    return StoreError(f"results store {path}: {where} cannot be read (its `{column}` is {why})", fix=fix)


def _bad_eval_row(path: Path, result_id: str, column: str, why: str) -> StoreError:
    return _bad_row(
        path, f"the stored eval of result {result_id}", f"evals.{column}", why,
        fix=f"drop that row (`sqlite3 {path} \"DELETE FROM evals WHERE result_id = '{result_id}'\"`), open the "
            "store again, then `llmsweep results ingest RUN_DIR` of the run it came from stores its eval anew")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _statements(script: str) -> list[str]:
    """The statements of a migration script, run one by one inside the migration's transaction (executescript
    would commit first)."""
    return [s.strip() for s in script.split(";") if s.strip()]


def _ran_in(prov: Mapping[str, Any], planned: str) -> Any:
    """The provenance's image: what a run's server ran in (its launch block; None on the host), else an imported
    row's own image, else the planned one."""
    launch = prov.get("launch")
    if isinstance(launch, dict):
        return launch.get("image")
    return prov.get("image") or planned
