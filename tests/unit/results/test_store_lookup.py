"""`results show JOB_ID` reads that job's rows, not the store: it had read and parsed every stored result (20 s and
2 GB on a 20k-result store), and one damaged row of any other run stopped it."""

from __future__ import annotations

import sqlite3
from pathlib import Path

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
