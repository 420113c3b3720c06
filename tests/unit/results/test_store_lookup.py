"""`results show JOB_ID` reads that job's rows, not the store: it had read and parsed every stored result (20 s and
2 GB on a 20k-result store), and one damaged row of any other run stopped it."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from llmsweep.results.point import points_from_run
from llmsweep.results.store import Store, StoreError


def test_a_lookup_by_job_id_reads_only_that_jobs_rows(make_run, tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    good, other = make_run("good", concs=(2,)), make_run("other", concs=(4,))
    with Store(path) as store:
        store.ingest_points("good", "llmsweep", points_from_run(good), {})
        store.ingest_points("other", "llmsweep", points_from_run(other), {})
        (job,) = [p.job_id for p in points_from_run(good)]
    with sqlite3.connect(path) as db:
        db.execute("UPDATE results SET summary = '{bad' WHERE run_id = 'other'")
    with Store(path) as store:
        with pytest.raises(StoreError):
            store.results()  # the damaged row is there: reading the whole store fails
        assert store.get(job).run_id == "good"
        assert store.get(f"good/{job}").job_id == job
        assert [p.run_id for p in store.results(job_id=job)] == ["good"]


def test_a_writer_opening_a_current_store_takes_no_lock_and_a_busy_store_names_its_fix(make_run,
                                                                                         tmp_path: Path) -> None:
    """Every writer's open took the write lock even when the store needed nothing: with another process writing
    (a long import), each job of a run waited SQLite's 30 s, then failed with "point --store at a writable SQLite
    file" although the file was writable, only busy."""
    import time

    from llmsweep.results.store import _LOCKED_FIX, _fix_for

    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.ingest_points("good", "llmsweep", points_from_run(make_run("good", concs=(2,))), {})
    holder = sqlite3.connect(path)
    holder.execute("BEGIN IMMEDIATE")  # another process, in the middle of a write
    try:
        began = time.monotonic()
        with Store(path) as store:
            assert [p.run_id for p in store.results()] == ["good"]
        assert time.monotonic() - began < 5
    finally:
        holder.rollback()
        holder.close()
    assert _fix_for(sqlite3.OperationalError("database is locked")) == _LOCKED_FIX
    assert "another process is writing this store" in _LOCKED_FIX
    assert _fix_for(sqlite3.OperationalError("attempt to write a readonly database")) != _LOCKED_FIX


def test_a_run_that_could_not_store_one_job_does_not_try_again_for_every_job(tmp_path: Path, monkeypatch) -> None:
    from llmsweep.results import store as store_module

    opened: list[Path] = []

    class Busy:
        def __init__(self, path: Path) -> None:
            opened.append(path)
            locked = sqlite3.OperationalError("database is locked")  # what SQLite says once its wait ran out
            raise store_module.StoreError(f"cannot open and migrate results store {path}: {locked}",
                                          fix="wait") from locked

    monkeypatch.setattr(store_module, "Store", Busy)
    said: list[str] = []
    jobs = _three_jobs_stored(tmp_path, said)
    jobs.superseded(tmp_path / "j0", tmp_path / "j0" / "attempts" / "1")
    assert len(opened) == 1 and len(said) == 1 and "could not store job j0" in said[0]


def test_a_job_that_could_not_be_stored_for_its_own_reason_leaves_the_next_jobs_stored(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    """Only a busy store stops the per-job storing: one job whose folder does not store (a damaged summary) had
    stopped it for the rest of the sweep, so a run killed before its end-of-run ingest lost every later job."""
    from llmsweep.results import store as store_module

    tried: list[str] = []

    class OneBadJob:
        def __init__(self, path: Path) -> None:
            pass

        def __enter__(self) -> OneBadJob:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def ingest_job(self, run_dir: Path, job_dir: Path) -> bool:
            tried.append(job_dir.name)
            if job_dir.name == "j0":
                raise store_module.StoreError(f"{job_dir}/summary.json does not read", fix="summarize it again")
            return True

    monkeypatch.setattr(store_module, "Store", OneBadJob)
    said: list[str] = []
    jobs = _three_jobs_stored(tmp_path, said)
    assert tried == ["j0", "j1", "j2"] and jobs.finished == 2
    assert len(said) == 1 and "could not store job j0" in said[0]


def test_a_store_is_busy_when_sqlite_says_so_not_when_its_path_does(tmp_path: Path) -> None:
    """`store_busy` read our message, which names the store's path: a damaged store under `h100-locked-clocks/` was
    taken for a busy one, and the run stopped storing its jobs."""
    from llmsweep.results.store import Store, StoreError, store_busy

    path = tmp_path / "h100-locked-clocks" / "results.sqlite"
    path.parent.mkdir()
    path.write_text("not a database")
    with pytest.raises(StoreError) as caught:
        Store(path)
    assert not store_busy(caught.value)
    assert store_busy(sqlite3.OperationalError("database is locked"))
    try:
        raise StoreError("cannot write results store /x: database is locked", fix="wait") from \
            sqlite3.OperationalError("database is locked")
    except StoreError as exc:
        assert store_busy(exc)


def _three_jobs_stored(tmp_path: Path, said: list[str]) -> Any:
    """A run's per-job storing (`pipeline._JobStore`) told of three jobs j0..j2 ending in turn."""
    from llmsweep.execute import pipeline
    from llmsweep.execute.lifecycle import JobOutcome

    jobs = pipeline._JobStore.__new__(pipeline._JobStore)
    jobs.run_dir, jobs.path, jobs.event, jobs.failed, jobs.finished = tmp_path, tmp_path / "s.sqlite", said.append, \
        False, 0
    jobs.keys = pipeline._MeasuredKeys(tmp_path, {}, None)  # no planned keys: run.json is left as it is
    for n in range(3):
        jobs(tmp_path / f"j{n}", JobOutcome(job_id=f"j{n}", exp_name=f"j{n}", status="valid"))
    return jobs
