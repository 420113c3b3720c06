"""The SQLite store: idempotent ingest, lookups, location rules."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest

from llmsweep.errors import ResultError, ResultInputError
from llmsweep.results.store import SCHEMA_VERSION, ImportConflictError, Store, StoreError, default_store_path


def test_default_location_env_then_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("LLMSWEEP_STORE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_store_path() == tmp_path / ".llmsweep" / "results.sqlite"
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "env.sqlite"))
    assert default_store_path() == tmp_path / "env.sqlite"
    assert default_store_path(tmp_path / "flag.sqlite") == tmp_path / "flag.sqlite"


def test_ingest_is_idempotent_and_keeps_every_column(make_run, store_path: Path) -> None:
    run = make_run("run1", concs=(1, 4, 8))
    with Store() as store:
        first = store.ingest_run(run.path)
        again = store.ingest_run(run.path)
        points = store.results("run1")
    assert first.results == 3 and not first.replaced
    assert again.replaced
    assert len(points) == 3
    assert {p.identity.conc for p in points} == {1, 4, 8}
    p = next(p for p in points if p.identity.conc == 4)
    summary = json.loads((run.path / "jobs" / p.job_id / "summary.json").read_text())
    assert p.summary is not None and p.summary.dump() == summary
    assert p.metric("tput_per_gpu") == summary["throughput"]["per_gpu"]["total_tps"]
    assert p.source == "simulated" and p.gpus == 8
    assert p.provenance["image"] == p.identity.image
    assert p.records_path is not None and p.records_path.is_file()
    db = sqlite3.connect(store_path)
    assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 3
    assert db.execute("SELECT COUNT(*) FROM provenance").fetchone()[0] == 3


def test_reingest_after_a_job_disappears_replaces_the_run_only_when_told(make_run, store_path: Path) -> None:
    run = make_run("run1", concs=(1, 4))
    with Store() as store:
        store.ingest_run(run.path)
        shutil.rmtree(run.jobs[0].dir)
        with pytest.raises(ImportConflictError, match=r"would drop 1 of the 2 results") as err:
            store.ingest_run(run.path)
        assert err.value.exit_code == 2 and err.value.fix is not None and "--force" in err.value.fix
        assert len(store.results("run1")) == 2  # refused: nothing changed
        store.ingest_run(run.path, replace=True)
        assert len(store.results("run1")) == 1


def test_results_ingest_of_a_partial_copy_is_refused_and_changes_nothing_unless_replace(
        make_run, store_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Ingesting a copy holding only run.json and an empty job folder replaced the stored run and dropped its
    results, exit 0; it is refused (exit 2, nothing written, every run checked first) and --force does it."""
    from llmsweep.cli.main import main

    run, other = make_run("run1", concs=(1, 4)), make_run("run2", concs=(1,))
    with Store() as store:
        store.ingest_run(run.path)
    partial = tmp_path / "partial"
    (partial / "jobs" / "empty").mkdir(parents=True)
    shutil.copy(run.path / "run.json", partial / "run.json")
    before = store_path.read_bytes()
    with pytest.raises(SystemExit) as done:
        main(["results", "ingest", str(other.path), str(partial)])
    err = capsys.readouterr().err
    assert done.value.code == 2 and "Traceback" not in err and err.count("error:") == 1, err
    assert "would drop 2 of the 2 results" in err and f"results ingest {partial} --force" in err
    assert store_path.read_bytes() == before  # run2 was not stored either
    with pytest.raises(SystemExit) as done:
        main(["results", "ingest", str(partial), "--force"])
    assert done.value.code == 0 and "0 results" in capsys.readouterr().out
    with Store(readonly=True) as store:
        assert store.results("run1") == []


def test_the_fix_for_an_unreadable_row_of_a_run_with_its_folder_mends_it(
        make_run, store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shlex

    from llmsweep.cli.main import main

    run = make_run("run1", concs=(1, 4))
    with Store() as store:
        store.ingest_run(run.path)
    with sqlite3.connect(store_path) as db:
        db.execute("UPDATE results SET summary = '{\"schema_version\": 2, cut'")
    db.close()
    with Store(readonly=True) as store, pytest.raises(StoreError) as err:
        store.results()
    assert err.value.fix is not None
    argv = shlex.split(err.value.fix.split("`")[1])  # `llmsweep results ingest RUN --force --store STORE`
    assert argv[:3] == ["llmsweep", "results", "ingest"]
    with pytest.raises(SystemExit) as done:
        main(argv[1:])
    assert done.value.code == 0, capsys.readouterr().err
    with Store(readonly=True) as store:
        assert len(store.results("run1")) == 2


def test_jobs_without_summary_and_expected_jobs_are_reported(make_run, store_path: Path) -> None:
    run = make_run("run1", concs=(1, 4), expected_extra=("never-started",))
    (run.jobs[0].dir / "summary.json").unlink()
    with Store() as store:
        rep = store.ingest_run(run.path)
        assert rep.results == 1
        assert rep.jobs_without_result == (run.jobs[0].job_id,)
        assert set(rep.missing_expected) == {run.jobs[0].job_id, "never-started"}
        assert store.jobs_without_result("run1") == [run.jobs[0].job_id]


def test_get_by_result_id_job_id_and_run_slash_job(make_run, store_path: Path) -> None:
    a = make_run("a", concs=(4,))
    b = make_run("b", concs=(4,), seed=1)
    with Store() as store:
        store.ingest_run(a.path)
        store.ingest_run(b.path)
        pa, pb = store.results("a")[0], store.results("b")[0]
        assert pa.result_id != pb.result_id
        assert store.get(pa.result_id).run_id == "a"
        assert store.get(f"a/{pa.job_id}").result_id == pa.result_id
        with pytest.raises(ResultInputError, match=rf"matches 2 stored results of 2 runs: {pa.result_id} \(run a\), "
                           rf"{pb.result_id} \(run b\)"):
            store.get(pa.job_id)  # the same job id in two runs: refused, naming both, not the newest shown
        with pytest.raises(ResultError, match="no stored result"):
            store.get("nope")


def test_not_a_run_directory_and_foreign_schema_are_errors(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store, pytest.raises(ResultError, match="not a run directory"):
        store.ingest_run(tmp_path)
    db = sqlite3.connect(tmp_path / "old.sqlite")
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(ResultError, match="schema version 99"):
        Store(tmp_path / "old.sqlite")


V1_STORE = Path(__file__).resolve().parents[2] / "data" / "stores" / "v1-results.sqlite"


def test_a_store_written_by_the_previous_release_opens_migrates_and_reads(tmp_path: Path) -> None:
    """tests/data/stores/v1-results.sqlite was written by the release before the metric table (store schema 1):
    it opens, migrates to the current schema (recorded), keeps its rows, and gains the hot columns the metric table
    added since (p99_tpot), filled from the summaries it stored."""
    path = tmp_path / "v1.sqlite"
    shutil.copyfile(V1_STORE, path)
    before = sqlite3.connect(path)
    assert before.execute("PRAGMA user_version").fetchone()[0] == 1
    old_columns = {r[1] for r in before.execute("PRAGMA table_info(results)")}
    assert "p99_tpot" not in old_columns
    old = {r[0]: r[1:] for r in before.execute("SELECT result_id, verdict, p50_ttft, tput_per_gpu FROM results")}
    before.close()

    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION
        points = store.results()
        assert store.evals() == []  # schema 3's evals table: no result of that release ran an eval
        runs = store.runs()
    assert len(points) == 7 and len(runs) == 3
    assert {p.result_id: (p.verdict, p.metric("p50_ttft"), p.metric("tput_per_gpu")) for p in points} == old
    ours = [p for p in points if p.origin == "llmsweep"]
    assert len(ours) == 6 and all(p.summary is not None for p in ours)
    for p in ours:
        assert p.summary is not None and p.metric("p99_tpot") == p.summary.latency.tpot.p99 > 0
    invalid = [p for p in ours if p.verdict == "invalid"]
    assert len(invalid) == 1 and any("realised acceptance length" in r for r in invalid[0].reasons)
    (imported,) = [p for p in points if p.origin == "inferencex"]
    assert imported.summary is None and imported.imported["hw"] == "b200" and imported.metric("p99_tpot") is None
    assert imported.metric("p90_intvty") == 40.0

    db = sqlite3.connect(path)
    versions = [r[0] for r in db.execute("SELECT version FROM schema_version ORDER BY version")]
    assert versions == list(range(2, SCHEMA_VERSION + 1))
    db.close()
    with Store(path) as again:  # a second open finds nothing to do
        assert again.schema_version == SCHEMA_VERSION and len(again.results()) == 7


V3_STORE = V1_STORE.with_name("v3-results.sqlite")


def test_a_schema_3_store_is_re_keyed_so_its_agentic_points_name_the_corpus_they_replayed(tmp_path: Path) -> None:
    """tests/data/stores/v3-results.sqlite was written by the release before schema 4 (two short agentic points on
    the synthetic corpus, two fixed-length ones): opened, every job is re-keyed as ingestion keys it today, so its
    points match (and do not match) new runs' points as they would have had they been stored now."""
    from llmsweep.results.identity import corpus_of, identity_from_job

    path = tmp_path / "v3.sqlite"
    shutil.copyfile(V3_STORE, path)
    before = sqlite3.connect(path)
    assert before.execute("PRAGMA user_version").fetchone()[0] == 3
    assert all('"corpus"' not in r[0] for r in before.execute("SELECT identity FROM jobs"))
    before.close()
    with Store(path, readonly=True) as ro:  # read as it is, not migrated: identities computed as migrating would
        assert ro.schema_version == 3
        unmigrated = {p.result_id: p.identity for p in ro.results()}
    with Store(path) as store:
        points = store.results()
    assert {p.result_id: p.identity for p in points} == unmigrated
    agentic = [p for p in points if p.identity.scenario == "agentic-coding"]
    fixed = [p for p in points if p not in agentic]
    assert len(agentic) == 2 and len(fixed) == 2
    for p in agentic:
        assert p.summary is not None and p.identity.corpus == corpus_of(p.summary)
        assert p.identity.corpus.startswith("sha256:") and len(p.identity.corpus) == len("sha256:") + 16
    assert all(p.identity.corpus == "" for p in fixed)
    db = sqlite3.connect(path)
    keys = dict(db.execute("SELECT job_id, point_key FROM jobs").fetchall())
    db.close()
    for p in points:
        assert keys[p.job_id] == identity_from_job(p.job, p.summary).key() == p.identity.key()
    # virtual-time results recorded before the simulator's digest was kept: read, their release standing for the build
    for p in points:
        assert p.clock == "virtual" and p.summary is not None and p.summary.provenance.simulator is not None
        assert p.summary.provenance.simulator.calibration == "uncalibrated"
        assert p.summary.provenance.simulator.digest is None and p.simulator_build == "0.1.0"


def test_a_fresh_store_has_every_hot_column_of_the_metric_table(tmp_path: Path) -> None:
    from llmsweep.metrics.registry import HOT_NAMES

    with Store(tmp_path / "s.sqlite") as store:
        assert store.schema_version == SCHEMA_VERSION
    db = sqlite3.connect(tmp_path / "s.sqlite")
    columns = {r[1] for r in db.execute("PRAGMA table_info(results)")}
    assert set(HOT_NAMES) <= columns


# ---------------------------------------------------------------- read-only opens, bad stores, job-by-job ingest


def test_a_read_only_open_of_a_missing_store_reads_empty_and_creates_nothing(tmp_path: Path) -> None:
    path = tmp_path / "nowhere" / "results.sqlite"
    with Store(path, readonly=True) as store:
        assert store.runs() == [] and store.results() == []
    assert not path.exists() and not path.parent.exists()


def test_a_read_only_open_reads_an_older_store_without_migrating_or_writing_it(tmp_path: Path) -> None:
    path = tmp_path / "v1.sqlite"
    shutil.copyfile(V1_STORE, path)
    before = path.read_bytes()
    with Store(path, readonly=True) as store:
        assert store.schema_version == 1
        points = store.results()
        assert len(points) == 7 and len(store.runs()) == 3
        with pytest.raises(ResultError, match="read-only"):
            store.check_writable()
    assert path.read_bytes() == before  # not migrated, not touched
    ours = [p for p in points if p.origin == "llmsweep"]
    # p99_tpot is not a column of a v1 store: read from the stored summary, as the migration would fill it
    assert all(p.summary is not None and p.metric("p99_tpot") == p.summary.latency.tpot.p99 > 0 for p in ours)
    (imported,) = [p for p in points if p.origin == "inferencex"]
    assert imported.metric("p99_tpot") is None and imported.metric("p90_intvty") == 40.0


def test_a_read_only_open_refuses_a_newer_schema(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "new.sqlite")
    db.execute("CREATE TABLE runs (x)")
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(StoreError, match="schema version 99"):
        Store(tmp_path / "new.sqlite", readonly=True)


@pytest.mark.parametrize("readonly", [False, True])
def test_a_directory_corrupt_or_foreign_store_is_a_store_error(tmp_path: Path, readonly: bool) -> None:
    (tmp_path / "dir.sqlite").mkdir()
    (tmp_path / "corrupt.sqlite").write_bytes(b"this is not a database, it is a text file " * 100)
    foreign = sqlite3.connect(tmp_path / "foreign.sqlite")
    foreign.execute("CREATE TABLE notes (body TEXT)")
    foreign.commit()
    foreign.close()
    for name, match in (("dir.sqlite", "is a directory"), ("corrupt.sqlite", "not a database")):
        with pytest.raises(StoreError, match=match) as err:
            Store(tmp_path / name, readonly=readonly)
        assert err.value.exit_code == 2 and err.value.fix
    with pytest.raises(StoreError, match="not an llmsweep results store"):
        Store(tmp_path / "foreign.sqlite", readonly=readonly)
    check = sqlite3.connect(tmp_path / "foreign.sqlite")  # someone else's database got none of our tables
    assert [r[0] for r in check.execute("SELECT name FROM sqlite_master WHERE type = 'table'")] == ["notes"]
    check.close()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file modes")
def test_a_read_only_file_fails_the_write_test(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    Store(path).close()
    path.chmod(0o444)
    with pytest.raises(StoreError, match=r"readonly|read-only|cannot"), Store(path) as store:
        store.check_writable()
    with Store(path, readonly=True) as store:  # still readable
        assert store.runs() == []


def test_the_write_test_passes_on_a_fresh_store_and_changes_nothing(tmp_path: Path) -> None:
    with Store(tmp_path / "s.sqlite") as store:
        store.check_writable()
        assert store.schema_version == SCHEMA_VERSION and store.runs() == []


def test_a_job_stored_again_is_reusable_under_the_key_run_json_records_for_it_now(make_run, store_path: Path) -> None:
    """The per-job ingest wrote run.json's reuse keys only with the run's first row: a job of a run already stored,
    measured again under another configuration (a `--resume` after an edit, stopped before its end-of-run ingest),
    stood under its old key, and `--reuse` of the old configuration took the new measurement for its own."""
    run = make_run("run1", concs=(1, 4))
    first, second = (j.job_id for j in run.jobs)
    meta_path = run.path / "run.json"

    def record(keys: dict[str, str]) -> None:
        meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "reuse_keys": keys}))

    record({first: "old-first", second: "old-second"})
    with Store() as store:
        for art in run.jobs:
            assert store.ingest_job(run.path, art.dir)
        record({first: "new-first", second: "new-second"})  # the resume planned both anew, measured the first
        assert store.ingest_job(run.path, run.jobs[0].dir)
        assert {k: (r.job_id) for k, r in store.reusable(["old-first", "new-first", "old-second"]).items()} \
            == {"new-first": first, "old-second": second}  # the second is still the old measurement, under its key
        assert store.run_meta("run1")["reuse_keys"] == {first: "new-first", second: "old-second"}


def test_jobs_are_stored_one_by_one_and_the_run_ingest_leaves_one_copy(make_run, store_path: Path) -> None:
    run = make_run("run1", concs=(1, 4, 8))
    (run.jobs[2].dir / "summary.json").unlink()  # the third job has not finished yet
    with Store() as store:
        assert store.ingest_job(run.path, run.jobs[0].dir) is True
        assert [p.job_id for p in store.results("run1")] == [run.jobs[0].job_id]
        assert store.ingest_job(run.path, run.jobs[0].dir) is True  # again: replaced, not doubled
        assert store.ingest_job(run.path, run.jobs[1].dir) is True
        assert store.ingest_job(run.path, run.jobs[2].dir) is False
        assert len(store.results("run1")) == 2
        assert store.jobs_without_result("run1") == [run.jobs[2].job_id]
        assert [r.run_id for r in store.runs()] == ["run1"]
        store.ingest_run(run.path)
        assert len(store.results("run1")) == 2 and len(store.runs()) == 1
    db = sqlite3.connect(store_path)
    assert db.execute("SELECT COUNT(*) FROM results").fetchone()[0] == 2
    assert db.execute("SELECT COUNT(*) FROM provenance").fetchone()[0] == 2
    assert db.execute("SELECT COUNT(*) FROM jobs").fetchone()[0] == 3


def test_the_provenance_image_column_is_what_the_server_ran_in(make_run, store_path: Path) -> None:
    """A run's launch block says where its server ran: on the host (None, though the recipe names an image) stores
    no image; in a container, that image. A summary without a launch block keeps its own (or the planned) image."""
    run = make_run("run1", concs=(1, 4, 8))
    jobs = sorted((run.path / "jobs").iterdir())
    for job_dir, ran_in in zip(jobs, (None, "reg.example/engine:1"), strict=False):
        path = job_dir / "summary.json"
        doc = json.loads(path.read_text())
        doc["provenance"]["launch"] = {"engine": "vllm", "image": ran_in, "recipe_image": "reg.example/engine:1"}
        path.write_text(json.dumps(doc))
    with Store() as store:
        store.ingest_run(run.path)
        planned = store.results("run1")[0].identity.image
    db = sqlite3.connect(store_path)
    rows = dict(db.execute("SELECT x.job_id, p.image FROM provenance p JOIN results x USING (result_id)").fetchall())
    assert rows[jobs[0].name] is None
    assert rows[jobs[1].name] == "reg.example/engine:1"
    assert rows[jobs[2].name] == planned and planned


def test_stored_results_of_older_releases_load_and_say_what_history_they_can_join(tmp_path: Path) -> None:
    """A result is a repeat of another only when both record what they measured (`ResultPoint.measurement`: the
    window, request and warm-up counts and the workload, from the summary's client options). The v1 store's
    summaries predate recorded options: they load, with no measurement and no configuration, so they join no
    history; the v3 store's record them: a fixed-length point its prompt budget, an agentic one its window."""
    for name in ("v1", "v3"):
        shutil.copyfile(V1_STORE.with_name(f"{name}-results.sqlite"), tmp_path / f"{name}.sqlite")
    with Store(tmp_path / "v1.sqlite", readonly=True) as store:
        ours = [p for p in store.results() if p.origin == "llmsweep"]
    assert ours and all(p.summary is not None and p.measurement is None and p.configuration == "" for p in ours)
    with Store(tmp_path / "v3.sqlite", readonly=True) as store:
        ours = [p for p in store.results() if p.origin == "llmsweep"]
    measured = [m for p in ours if (m := p.measurement) is not None]
    assert len(measured) == len(ours) and all(p.configuration for p in ours)
    assert {m.num_requests for m in measured if m.duration_s is None} >= {8, 16}
    assert {m.duration_s for m in measured if m.num_requests is None} == {8.0}


_GARBAGE = [("results", "summary", '{"schema_version": 1, trunc', "result_id"),
            ("results", "summary", '{"schema_version": 1, "requests": 5}', "result_id"),
            ("results", "reasons", '["cut', "result_id"),
            ("provenance", "doc", "{", "result_id"),
            ("jobs", "identity", "[1", "job_id"),
            ("runs", "meta", "{garbage", "run_id")]


@pytest.mark.parametrize(("table", "column", "garbage", "key"), _GARBAGE)
def test_a_stored_row_that_does_not_parse_is_one_error_line_naming_it(
        make_run, store_path: Path, capsys: pytest.CaptureFixture[str], table: str, column: str, garbage: str,
        key: str) -> None:
    """Garbage in a stored row's JSON column (a truncated summary, a hand edit) gave a JSONDecodeError traceback and
    exit 1 from every command reading the store; it is one `error:` line naming the row and a fix, exit 2."""
    from llmsweep.cli.main import main

    run = make_run("run1", concs=(1, 4))
    with Store() as store:
        store.ingest_run(run.path)
        result_id = store.results("run1")[0].result_id
    db = sqlite3.connect(store_path)
    (job_id,) = db.execute("SELECT job_id FROM results WHERE result_id = ?", (result_id,)).fetchone()
    ident = {"result_id": result_id, "job_id": job_id, "run_id": "run1"}[key]
    with db:
        db.execute(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (garbage, ident))
    row = {"result_id": f"[result_id={result_id}]", "job_id": f"[run_id=run1, job_id={job_id}]",
           "run_id": "[run_id=run1]"}[key]
    db.close()
    commands = [["results", "list", "--all"], ["results", "show", result_id], ["results", "frontier", "run1"],
                ["results", "list", "--run", "run1"]]
    if table != "runs":  # reading results only: export and compare never read a run's meta
        commands += [["results", "export"], ["compare", "run1", "run1"]]
    for argv in commands:
        with pytest.raises(SystemExit) as done:
            main(argv)
        err = capsys.readouterr().err
        assert done.value.code == 2, (argv, err)
        assert "Traceback" not in err and err.count("error:") == 1, err
        assert f"row {table}{row}" in err and f"`{table}.{column}`" in err, err
        assert f"results ingest {run.path} --force" in err and "DELETE FROM runs WHERE run_id = 'run1'" in err


def test_the_fix_for_an_unreadable_row_of_a_run_without_a_folder_drops_it(make_run, store_path: Path) -> None:
    run = make_run("run1", concs=(1, 4))
    with Store() as store:
        store.ingest_run(run.path)
    shutil.rmtree(run.path)
    with sqlite3.connect(store_path) as db:
        db.execute("UPDATE results SET reasons = 'x'")
    db.close()
    with Store(readonly=True) as store, pytest.raises(StoreError) as err:
        store.results()
    assert err.value.fix is not None and "DELETE FROM runs" in err.value.fix
    sql = err.value.fix.split('"')[1]  # what the fix says to run in sqlite3's shell
    db = sqlite3.connect(store_path)
    db.executescript(sql)
    db.close()
    with Store(readonly=True) as store:
        assert store.results() == [] and store.runs() == []
    db = sqlite3.connect(store_path)
    assert all(db.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] == 0 for t in ("jobs", "results", "provenance"))
    db.close()


def test_a_job_folder_without_job_json_is_not_stored_under_made_up_labels(
        make_run, store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from llmsweep.cli.main import main

    run = make_run("run1", concs=(1, 4))
    (run.jobs[0].dir / "job.json").unlink()
    with pytest.raises(SystemExit) as done:
        main(["results", "ingest", str(run.path)])
    out = capsys.readouterr()
    assert done.value.code == 0
    assert "1 result" in out.out and "1 summary not read" in out.out
    assert f"not stored: job.json missing in {run.jobs[0].dir}" in out.err
    with Store(readonly=True) as store:
        assert [p.job_id for p in store.results()] == [run.jobs[1].job_id]
    db = sqlite3.connect(store_path)
    assert [r[0] for r in db.execute("SELECT job_id FROM jobs")] == [run.jobs[1].job_id]  # no row of made-up labels
    db.close()
    with Store() as store:  # the per-job store `run` does as each job finishes stores nothing of it either
        assert store.ingest_job(run.path, run.jobs[0].dir) is False
        assert [p.job_id for p in store.results()] == [run.jobs[1].job_id]


def test_compare_and_frontier_on_a_folder_say_which_job_they_leave_out_without_job_json(
        make_run, store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Read from a folder (not the store), a job whose summary is set aside is still named, never dropped unsaid."""
    from llmsweep.cli.main import main

    run = make_run("run1", concs=(1, 4))
    (run.jobs[0].dir / "job.json").unlink()
    said = f"warning: left out: {run.path}: job.json missing in {run.jobs[0].dir}"
    for argv in (["results", "frontier", str(run.path)], ["compare", str(run.path), str(run.path)]):
        with pytest.raises(SystemExit) as done:
            main(argv)
        out = capsys.readouterr()
        assert done.value.code == 0, out.err
        assert out.err.count(said) == 1, (argv, out.err)  # once, though compare read the folder twice


def test_a_store_read_without_migrating_finds_points_by_their_key_as_computed_now(tmp_path: Path) -> None:
    """A store below schema 4 read as it is (`compare` opens the store read-only, so it never migrates) keeps point
    keys from before the identity had `corpus`; its points' identities are computed as the migration would. A lookup
    by key had matched the stale column, so `compare` found no history there (A's keys never matched)."""
    path = tmp_path / "v1.sqlite"
    shutil.copyfile(V1_STORE, path)
    with Store(path, readonly=True) as store:
        assert store.schema_version == 1
        ours = [p for p in store.results() if p.origin == "llmsweep"]
        assert ours
        for p in ours:
            key = p.identity.key()
            found = store.results(point_keys={key})
            assert p.result_id in {q.result_id for q in found} and all(q.identity.key() == key for q in found)
            assert p.result_id in {q.result_id for q in store.results(point_key=key)}
