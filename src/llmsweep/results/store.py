"""The results store: one SQLite file holding runs, jobs, results (hot columns + full summary) and provenance.

Location, first match wins: an explicit path (`--store`), the `LLMSWEEP_STORE` environment variable, then
`~/.llmsweep/results.sqlite`. One store per user means `compare` finds earlier runs of the same point (the repeats
that turn a within-run noise band into a between-run one) wherever the run directories were written.

Ingest is idempotent: a run is replaced as a whole in one transaction, so ingesting twice (or after re-summarising)
leaves exactly one copy. Imported rows live in runs whose `origin` says where they came from.
"""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from llmsweep.errors import ResultError
from llmsweep.results.extract import HOT_COLUMNS
from llmsweep.results.identity import get_field, gpus_of, identity_from_dict, identity_from_job
from llmsweep.results.point import ResultPoint, points_from_run
from llmsweep.results.rundir import RunDir, load_run

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
ENV_VAR = "LLMSWEEP_STORE"

_HOT_SQL = ",\n  ".join(f'"{c}" REAL' for c in HOT_COLUMNS)
SCHEMA = f"""
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
  {_HOT_SQL},
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

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = default_store_path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, timeout=30)  # the run pipeline and a user may write at once
        except (OSError, sqlite3.Error) as exc:
            raise ResultError(f"cannot open results store {self.path}: {exc}",
                              fix=f"pass --store PATH or set {ENV_VAR} to a writable file") from exc
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA foreign_keys = ON")
        self._migrate()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    def _migrate(self) -> None:
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version not in (0, SCHEMA_VERSION):
            raise ResultError(f"results store {self.path} has schema version {version}, this llmsweep reads {SCHEMA_VERSION}",
                              fix="use a newer llmsweep, or point --store at a new file and re-ingest the runs")
        with self._db:
            self._db.executescript(SCHEMA)
            self._db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    # ---------------------------------------------------------------- writing

    def ingest_run(self, run: RunDir | Path | str) -> IngestReport:
        """Store (or replace) every job and result of a run directory."""
        run = run if isinstance(run, RunDir) else load_run(run)
        points = points_from_run(run)
        meta = run.meta
        with self._db:
            replaced = self._delete_run(run.run_id)
            self._insert_run(run.run_id, "llmsweep", str(run.path.resolve()), meta)
            with_result = {p.job_id for p in points}
            for art in run.jobs:
                if art.job_id not in with_result:
                    ident = identity_from_job(art.job)
                    self._insert_job(run.run_id, art.job_id, ident.key(), ident.series_key(), ident.as_dict(),
                                     art.job, gpus_of(art.job, ident), str(art.dir.resolve()), has_result=False)
            for point in points:
                self._insert_point(point)
        missing = tuple(j.job_id for j in run.jobs if j.summary is None)
        log.info("ingested run %s: %d results", run.run_id, len(points))
        return IngestReport(run.run_id, len(points), missing, run.missing_job_ids, replaced)

    def ingest_points(self, run_id: str, origin: str, points: Iterable[ResultPoint], meta: Mapping[str, Any]) -> int:
        """Store imported points as one run (replacing an earlier import with the same run id)."""
        points = list(points)
        with self._db:
            self._delete_run(run_id)
            self._insert_run(run_id, origin, None, meta)
            for point in points:
                self._insert_point(point)
        return len(points)

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

    def _insert_point(self, p: ResultPoint) -> None:
        ident = p.identity
        self._insert_job(p.run_id, p.job_id, ident.key(), ident.series_key(), ident.as_dict(), p.job, p.gpus,
                         str(p.artifact_dir.resolve()) if p.artifact_dir else None, has_result=True)
        hot = [p.metrics.get(c) for c in HOT_COLUMNS]
        placeholders = ",".join("?" * (10 + len(HOT_COLUMNS)))
        self._db.execute(
            f"INSERT INTO results VALUES ({placeholders})",
            (p.result_id, p.run_id, p.job_id, p.source, p.origin, p.verdict, _dumps(list(p.reasons)),
             p.num_requests, p.num_successful, *hot, _dumps(p.summary)),
        )
        prov = p.provenance
        self._db.execute(
            "INSERT INTO provenance VALUES (?,?,?,?,?,?,?,?)",
            (p.result_id, _str(prov.get("recipe_fingerprint")), _str(prov.get("image") or ident.image),
             _str(prov.get("engine_version")), _str(prov.get("llmsweep_version")), _str(prov.get("seed")),
             _str(prov.get("hardware") or ident.hardware), _dumps(prov)),
        )

    # ---------------------------------------------------------------- reading

    def runs(self) -> list[RunInfo]:
        rows = self._db.execute(
            "SELECT r.run_id, r.origin, r.path, r.started, r.ingested_at, COUNT(x.result_id) AS n, "
            "GROUP_CONCAT(DISTINCT x.source) AS sources FROM runs r LEFT JOIN results x ON x.run_id = r.run_id "
            "GROUP BY r.run_id ORDER BY r.ingested_at, r.run_id").fetchall()
        return [RunInfo(r["run_id"], r["origin"], r["path"], r["started"], r["ingested_at"], r["n"],
                        tuple(sorted((r["sources"] or "").split(",")) if r["sources"] else ())) for r in rows]

    def has_run(self, run_id: str) -> bool:
        return self._db.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone() is not None

    def run_meta(self, run_id: str) -> dict[str, Any]:
        row = self._db.execute("SELECT meta FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        return json.loads(row["meta"]) if row else {}

    def results(self, run: str | None = None, *, point_key: str | None = None) -> list[ResultPoint]:
        """Stored results, optionally of one run or one exact point identity, oldest run first."""
        where, args = [], []
        if run is not None:
            where.append("x.run_id = ?")
            args.append(run)
        if point_key is not None:
            where.append("j.point_key = ?")
            args.append(point_key)
        sql = ("SELECT x.*, j.identity, j.gpus, j.job, j.artifact_dir, p.doc AS provenance FROM results x "
               "JOIN jobs j ON j.run_id = x.run_id AND j.job_id = x.job_id "
               "JOIN runs r ON r.run_id = x.run_id LEFT JOIN provenance p ON p.result_id = x.result_id"
               + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY r.ingested_at, x.run_id, x.job_id")
        return [self._point(row) for row in self._db.execute(sql, args)]

    def jobs_without_result(self, run: str) -> list[str]:
        rows = self._db.execute("SELECT job_id FROM jobs WHERE run_id = ? AND has_result = 0 ORDER BY job_id", (run,))
        return [r["job_id"] for r in rows]

    def get(self, ref: str) -> ResultPoint:
        """A result by result id, `run/job`, or job id (the newest run when several hold that job id)."""
        for point in self._lookup(ref):
            return point
        raise ResultError(f"no stored result matches {ref!r}",
                          fix="see `llmsweep results list` for result and job ids, or ingest the run first")

    def _lookup(self, ref: str) -> Iterator[ResultPoint]:
        found = [p for p in self.results() if p.result_id == ref]
        if not found and "/" in ref:
            run, job = ref.rsplit("/", 1)
            found = [p for p in self.results(run) if p.job_id == job]
        if not found:
            found = [p for p in self.results() if p.job_id == ref]
        yield from reversed(found)

    def _point(self, row: sqlite3.Row) -> ResultPoint:
        art = row["artifact_dir"]
        return ResultPoint(
            result_id=row["result_id"], run_id=row["run_id"], job_id=row["job_id"],
            identity=identity_from_dict(json.loads(row["identity"])), source=row["source"], verdict=row["verdict"],
            metrics={c: row[c] for c in HOT_COLUMNS}, gpus=row["gpus"] or 1, origin=row["origin"],
            reasons=tuple(json.loads(row["reasons"])), num_requests=row["num_requests"],
            num_successful=row["num_successful"], job=json.loads(row["job"]), summary=json.loads(row["summary"]),
            provenance=json.loads(row["provenance"]) if row["provenance"] else {},
            artifact_dir=Path(art) if art else None,
        )


def _str(value: Any) -> str | None:
    return None if value is None else str(value)
