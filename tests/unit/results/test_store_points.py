"""`Store.points`: many stored results read by id in one query (what `run --reuse` and its dashboard read), the ids
the store lacks left out; `Store.reused_points`: a reused job's stored result, only the one its record names."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from llmsweep.results import store as store_module
from llmsweep.results.point import ResultPoint
from llmsweep.results.store import Store


def _selects(store: Store) -> list[str]:
    """The SELECTs on `results` the store runs from now on (SQLite's statement trace)."""
    seen: list[str] = []
    conn: sqlite3.Connection = store._db
    conn.set_trace_callback(lambda sql: seen.append(sql) if "FROM results" in sql else None)
    return seen


def test_many_ids_are_read_in_one_query_and_missing_ids_are_left_out(make_run, store_path: Path) -> None:
    old, new = make_run("old", concs=(1, 4, 8)), make_run("new", concs=(1, 4), seed=3)
    with Store(store_path) as store:
        store.ingest_run(old.path)
        store.ingest_run(new.path)
        every = {p.result_id: p for p in store.results()}
        assert len(every) == 5
        wanted = [*every, "r-not-stored", next(iter(every))]  # five stored ids, one unknown, one asked twice
    with Store(store_path, readonly=True) as store:
        queries = _selects(store)
        found = store.points(wanted)
        assert len(queries) == 1, queries  # one query for every id, not one per id
        assert found.keys() == every.keys()  # the unknown id is absent, not an error; the repeated one once
        for result_id, point in found.items():  # each as the store holds it
            assert point == every[result_id]
        assert store.points([]) == {} and store.points(["r-not-stored"]) == {}


def test_more_ids_than_one_batch_are_read_in_batches(make_run, store_path: Path, monkeypatch) -> None:
    run = make_run("run1", concs=(1, 2, 4, 8, 16))
    monkeypatch.setattr(store_module, "BATCH", 2)
    with Store(store_path) as store:
        store.ingest_run(run.path)
        ids = [p.result_id for p in store.results()]
        queries = _selects(store)
        assert store.points([*ids, "r-missing"]).keys() == set(ids)
        assert len(queries) == 3  # six ids, two a query


def test_a_reused_job_gets_only_the_stored_result_its_record_names(make_run, store_path: Path) -> None:
    old = make_run("old", concs=(1, 4))
    with Store(store_path) as store:
        store.ingest_run(old.path)
        a, b = store.results("old")
        reused = {
            "job-a": {"run_id": "old", "job_id": a.job_id, "result_id": a.result_id, "verdict": "valid"},
            "job-b": {"run_id": "another-run", "job_id": b.job_id, "result_id": b.result_id, "verdict": "valid"},
            "job-c": {"run_id": "old", "job_id": "gone", "result_id": "r-deleted", "verdict": "valid"},
        }
        queries = _selects(store)
        found = store.reused_points(reused, by="reusing")
        assert len(queries) == 1
    # keyed by the reusing run's job; a record whose result the store holds under another run, or not at all, is
    # not answered with some other point
    assert found == {"job-a": a}


def test_the_run_table_reads_every_reused_result_in_one_store_query(make_run, store_path: Path,
                                                                    monkeypatch) -> None:
    """`run --reuse`'s end table showed each reused job's stored figures by one `Store.get` per job (each a scan
    of the whole store): one batched read now serves them all."""
    from llmsweep.cli.run import outcome_rows
    from llmsweep.execute.lifecycle import JobOutcome
    from llmsweep.execute.pipeline import RunOutcome

    old = make_run("old", concs=(1, 4, 8))
    with Store(store_path) as store:
        store.ingest_run(old.path)
        stored = {p.job_id: p for p in store.results("old")}
    reads: list[int] = []
    batched = Store.points

    def counted(self: Store, result_ids: Iterable[str]) -> dict[str, ResultPoint]:
        ids = list(result_ids)
        reads.append(len(ids))
        return batched(self, ids)

    monkeypatch.setattr(Store, "points", counted)
    outcome = RunOutcome(
        run_dir=old.path.parent / "new", run_id="new", store_path=store_path,
        outcomes=[JobOutcome(job_id=j, exp_name=j, status="skipped", reused=True, reasons=["reused"])
                  for j in stored],
        reused={j: {"run_id": "old", "job_id": j, "result_id": p.result_id, "verdict": p.verdict}
                for j, p in stored.items()})
    rows = {r["job"]: r for r in outcome_rows(outcome)}
    assert reads == [3]
    for job, p in stored.items():
        assert p.summary is not None
        assert rows[job]["tput_per_gpu"] == p.summary.throughput.per_gpu.total_tps
        assert rows[job]["reused"] and rows[job]["verdict"] == p.verdict  # the stored verdict, not `skipped`
