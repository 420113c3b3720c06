"""`results export --format inferencex-evals`: one row per concurrency an eval ran at, and only the evals InferenceX
would publish (measured ones) unless --include-unpublished, by the throughput export's rule."""

from __future__ import annotations

import json
import logging
import multiprocessing
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli, main
from llmsweep.errors import ResultInputError
from llmsweep.evals.gate import judge
from llmsweep.metrics.model import EvalBlock, EvalMetric, EvalRun, Summary
from llmsweep.results.interchange import export_points, import_file, import_into, left_out
from llmsweep.results.point import ResultPoint, points_from_run
from llmsweep.results.rundir import RunDir, load_run
from llmsweep.results.store import SCHEMA_VERSION, Store, StoreError

MakeRun = Callable[..., RunDir]


def _run(conc: int, strict: float | None, *, n: int = 1319) -> EvalRun:
    if strict is None:
        return EvalRun(conc=conc, status="failed", error="lm-eval exited 1")
    return EvalRun(conc=conc, status="completed", n_samples=n, results_file=f"eval/results_conc{conc}.json",
                   command=["python", "-m", "lm_eval", "--model_args", f"num_concurrent={conc}"],
                   metrics=[EvalMetric(name="exact_match,strict-match", value=strict, stderr=0.006),
                            EvalMetric(name="exact_match,flexible-extract", value=round(strict + 0.01, 6),
                                       stderr=0.005)])


def with_eval(run: RunDir, runs: list[EvalRun], *, mode: Literal["eval-only", "run-eval"] = "eval-only") -> RunDir:
    """Give the run's first job an eval block batched over `runs` (judged as `llmsweep.evals` judges it)."""
    art = run.jobs[0]
    summary = Summary.load(art.dir / "summary.json")
    summary.eval = judge(EvalBlock(mode=mode, task="gsm8k", harness_version="0.4.13",
                                   dataset="openai/gsm8k", model_prefix="qwen3.5", context_length=9472,
                                   max_tokens=5376, runs=runs, verdict="invalid"))
    if mode == "eval-only":
        summary.validity.verdict = summary.eval.verdict
    summary.write(art.dir / "summary.json")
    return load_run(run.path)


def test_an_eval_batched_over_concurrencies_exports_one_row_per_completed_concurrency(make_run: MakeRun,
                                                                                       tmp_path: Path) -> None:
    run = with_eval(make_run("a", concs=(4,), source="measured"), [_run(4, 0.95), _run(64, 0.93, n=1300),
                                                                    _run(128, None)])
    with Store(tmp_path / "s.sqlite") as store:
        store.ingest_run(run)
        points = store.results()
    rows = json.loads(export_points(points, "inferencex-evals"))
    assert [(r["conc"], r["em_strict"], r["em_flexible"], r["n_eff"], r["source"]) for r in rows] == [
        (4, 0.95, 0.96, 1319, "eval/results_conc4.json"), (64, 0.93, 0.94, 1300, "eval/results_conc64.json")]
    assert [(r["score"], r["score_name"], r["score_se"]) for r in rows] == [
        (0.95, "exact_match,strict-match", 0.006), (0.93, "exact_match,strict-match", 0.006)]
    assert {r["task"] for r in rows} == {"gsm8k"} and all(r["llmsweep"]["eval_concs"] == [4, 64, 128] for r in rows)


def test_eval_rows_follow_the_throughput_exports_publication_rule(make_run: MakeRun) -> None:
    simulated = points_from_run(with_eval(make_run("sim", concs=(4,)), [_run(4, 0.0), _run(8, 0.0)]))
    measured = points_from_run(with_eval(make_run("real", concs=(4,), source="measured"), [_run(4, 0.95)]))
    assert json.loads(export_points(simulated, "inferencex-evals")) == []
    assert left_out(simulated, "eval") == {"simulated": 2} and left_out(measured, "eval") == {}
    marked = json.loads(export_points(simulated, "inferencex-evals", include_unpublished=True))
    assert [r["conc"] for r in marked] == [4, 8]
    assert all(r["benchmark_outcome"]["status"] == "failed" and r["llmsweep"]["source"] == "simulated"
               for r in marked)
    (row,) = json.loads(export_points(measured, "inferencex-evals"))
    assert "benchmark_outcome" not in row and row["llmsweep"]["source"] == "measured"


def test_a_measured_eval_below_its_threshold_is_still_published_with_its_verdict(make_run: MakeRun) -> None:
    """InferenceX collects every completed eval run whatever the score gate said (the gate fails the job apart)."""
    points = points_from_run(with_eval(make_run("low", concs=(4,), source="measured"), [_run(4, 0.5)]))
    assert points[0].verdict == "invalid"
    (row,) = json.loads(export_points(points, "inferencex-evals"))
    assert row["score"] == 0.5 and row["llmsweep"]["verdict"] == "invalid" and "benchmark_outcome" not in row
    assert left_out(points, "eval") == {}


def test_results_export_applies_include_unpublished_to_eval_rows(make_run: MakeRun, store_path: Path) -> None:
    run = with_eval(make_run("sim", concs=(4,)), [_run(4, 0.0)])
    runner = CliRunner()
    assert runner.invoke(cli, ["results", "ingest", str(run.path)], catch_exceptions=False).exit_code == 0
    plain = runner.invoke(cli, ["results", "export", "--format", "inferencex-evals"], catch_exceptions=False)
    assert plain.exit_code == 0 and json.loads(plain.stdout) == []
    assert "left out 1 eval row InferenceX does not publish (1 simulated)" in plain.stderr
    every = runner.invoke(cli, ["results", "export", "--format", "inferencex-evals", "--include-unpublished"],
                          catch_exceptions=False)
    (row,) = json.loads(every.stdout)
    assert row["benchmark_outcome"] == {"status": "failed", "reason": "simulated"}


def _job_ran(run: RunDir, **job: object) -> RunDir:
    """The run's first job as its job record says it ran (job.json rewritten: what the export reads)."""
    path = run.jobs[0].dir / "job.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **job}))
    return load_run(run.path)


def test_an_eval_row_says_the_dp_attention_its_job_ran_with_as_the_throughput_row_does(make_run: MakeRun) -> None:
    """A job served with DP attention: its eval rows carry it, spelt as its throughput row and InferenceX's collector
    spell it, read from the job record the run wrote."""
    run = with_eval(_job_ran(make_run("dpa", concs=(4,), source="measured"), **{"dp-attn": True}),
                    [_run(4, 0.95), _run(8, 0.94)], mode="run-eval")
    points = points_from_run(run)
    (throughput,) = json.loads(export_points(points, "inferencex", include_unpublished=True))
    evals = json.loads(export_points(points, "inferencex-evals"))
    assert throughput["dp_attention"] == "true"
    assert [r["dp_attention"] for r in evals] == ["true", "true"]
    plain = points_from_run(with_eval(make_run("plain", concs=(4,), source="measured"), [_run(4, 0.95)]))
    assert [r["dp_attention"] for r in json.loads(export_points(plain, "inferencex-evals"))] == ["false"]


def test_a_multinode_eval_row_says_its_roles_dp_attention(make_run: MakeRun) -> None:
    """A disaggregated deployment whose roles differ: `prefill=<x>,decode=<y>`, as collect_eval_results.py writes
    it; roles that agree: their value; each role's own field beside it, a boolean as meta_env.json carries it (wave-2
    spec §1.6, §1.8) and as the multinode throughput row writes it."""
    import dataclasses

    from llmsweep.results.identity import identity_from_job

    def multinode(point: ResultPoint, prefill: bool, decode: bool) -> ResultPoint:
        job = {k: v for k, v in point.job.items() if k not in ("tp", "ep", "dp-attn")}
        job.update({"multinode": True, "disagg": True,
                    "prefill": {"num-worker": 1, "tp": 4, "ep": 4, "dp-attn": prefill},
                    "decode": {"num-worker": 1, "tp": 8, "ep": 8, "dp-attn": decode}})
        return dataclasses.replace(point, job=job, identity=identity_from_job(job))

    (point,) = points_from_run(with_eval(make_run("mn", concs=(4,), source="measured"), [_run(64, 0.95)],
                                         mode="run-eval"))
    (mixed,) = json.loads(export_points([multinode(point, True, False)], "inferencex-evals"))
    assert mixed["dp_attention"] == "prefill=true,decode=false"
    assert (mixed["prefill_dp_attention"], mixed["decode_dp_attention"]) == (True, False)
    (throughput,) = json.loads(export_points([multinode(point, True, False)], "inferencex", include_unpublished=True))
    assert {k: throughput[k] for k in ("prefill_dp_attention", "decode_dp_attention")} == {
        k: mixed[k] for k in ("prefill_dp_attention", "decode_dp_attention")}
    (both,) = json.loads(export_points([multinode(point, True, True)], "inferencex-evals"))
    assert both["dp_attention"] == "true" and both["is_multinode"] is True
    assert (both["prefill_dp_attention"], both["decode_dp_attention"]) == (True, True)


# ---------------------------------------------------------------- the store: one eval row per concurrency


def _batched(make_run: MakeRun) -> RunDir:
    return with_eval(make_run("batched", concs=(4,), source="measured"),
                     [_run(4, 0.95), _run(64, 0.91, n=1300), _run(128, None)])


def test_the_store_holds_one_eval_row_per_concurrency_with_that_runs_score(make_run: MakeRun,
                                                                           store_path: Path) -> None:
    run = _batched(make_run)
    runner = CliRunner()
    for _ in range(2):  # ingesting again replaces, never doubles
        assert runner.invoke(cli, ["results", "ingest", str(run.path)], catch_exceptions=False).exit_code == 0
    with Store(store_path, readonly=True) as store:
        rows = store.evals()
    assert [(r.conc, r.status, r.score, r.score_stderr, r.n_samples) for r in rows] == [
        (4, "completed", 0.95, 0.006, 1319), (64, "completed", 0.91, 0.006, 1300), (128, "failed", None, None, None)]
    assert rows[2].error == "lm-eval exited 1" and {r.verdict for r in rows} == {"invalid"}  # the eval's own verdict
    listed = runner.invoke(cli, ["results", "evals", "--json"], catch_exceptions=False)
    assert [(r["conc"], r["score"]) for r in json.loads(listed.stdout)] == [(4, 0.95), (64, 0.91), (128, None)]
    # a simulator's score is no model's accuracy: every row says where its result came from
    assert {r["source"] for r in json.loads(listed.stdout)} == {"measured"}
    simulated = with_eval(make_run("simulated", concs=(4,), source="simulated", seed=1), [_run(4, 0.0)])
    assert runner.invoke(cli, ["results", "ingest", str(simulated.path)], catch_exceptions=False).exit_code == 0
    both = json.loads(runner.invoke(cli, ["results", "evals", "--json"], catch_exceptions=False).stdout)
    assert sorted({(r["run_id"], r["source"]) for r in both}) == sorted(
        {(run.run_id, "measured"), (simulated.run_id, "simulated")})
    table = runner.invoke(cli, ["results", "evals"], catch_exceptions=False)
    assert table.exit_code == 0 and "0.91" in table.stdout and "lm-eval exited 1" in table.stdout
    assert "source" in table.stdout and "measured" in table.stdout
    # The rows of the completed concurrencies are the scores the InferenceX export reads from the run.
    with Store(store_path, readonly=True) as store:
        exported = json.loads(export_points(store.results(), "inferencex-evals"))
    assert [(r["conc"], r["score"]) for r in exported] == [(r.conc, r.score) for r in rows if r.status == "completed"]


_SCHEMA_4_EVALS = """CREATE TABLE evals (
  result_id TEXT PRIMARY KEY REFERENCES results(result_id) ON DELETE CASCADE,
  run_id TEXT NOT NULL, job_id TEXT NOT NULL, mode TEXT NOT NULL, task TEXT NOT NULL, score REAL, score_name TEXT,
  score_stderr REAL, em_strict REAL, em_strict_se REAL, em_flexible REAL, em_flexible_se REAL, n_samples INTEGER,
  verdict TEXT NOT NULL, reasons TEXT NOT NULL, harness_version TEXT, command TEXT NOT NULL, doc TEXT NOT NULL
)"""
"""The `evals` table stores of schema 3 and 4 hold: one row per result, its whole eval block in `doc`."""


def _as_schema_4(path: Path) -> None:
    """Rewrite a store as llmsweep wrote it at schema 4: the eval of each result in one row (the headline of its
    first completed run, the samples of its first run, every run's command), no record of migration 5."""
    db = sqlite3.connect(path)
    with db:
        olds = []
        for result_id, run_id, job_id, summary in db.execute(
                "SELECT x.result_id, x.run_id, x.job_id, x.summary FROM results x").fetchall():
            block = json.loads(summary).get("eval")
            if block is None:
                continue
            first = next((r for r in block["runs"] if r["status"] == "completed"), None)
            strict, flexible = first["metrics"][:2] if first else ({"value": None, "stderr": None},) * 2
            olds.append((result_id, run_id, job_id, block["mode"], block["task"], block.get("score"),
                         block.get("score_name"), block.get("score_stderr"), strict["value"], strict["stderr"],
                         flexible["value"], flexible["stderr"],
                         block["runs"][0]["n_samples"] if block["runs"] else None, block["verdict"],
                         json.dumps(block["reasons"]), block["harness_version"],
                         json.dumps([r["command"] for r in block["runs"]]), json.dumps(block)))
        db.execute("DROP TABLE evals")
        db.execute(_SCHEMA_4_EVALS)
        db.execute("CREATE INDEX evals_run ON evals(run_id)")
        db.executemany(f"INSERT INTO evals VALUES ({','.join('?' * 18)})", olds)
        db.execute("DELETE FROM schema_version WHERE version > 4")
    db.execute("PRAGMA user_version = 4")
    db.close()


def test_a_schema_4_store_opens_reads_and_migrates_to_one_eval_row_per_concurrency(make_run: MakeRun,
                                                                                  tmp_path: Path) -> None:
    path = tmp_path / "v4.sqlite"
    with Store(path) as store:
        store.ingest_run(_batched(make_run))
        expected = [(r.conc, r.status, r.score, r.n_samples) for r in store.evals()]
        before = [(p.result_id, p.metrics) for p in store.results()]
    _as_schema_4(path)
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT COUNT(*) FROM evals").fetchone()[0] == 1
    untouched = path.read_bytes()
    with Store(path, readonly=True) as ro:  # read as it is: each stored block split as the migration would
        assert ro.schema_version == 4
        assert [(r.conc, r.status, r.score, r.n_samples) for r in ro.evals()] == expected
    assert path.read_bytes() == untouched
    with Store(path) as store:  # a writer migrates it
        assert store.schema_version == SCHEMA_VERSION
        assert [(r.conc, r.status, r.score, r.n_samples) for r in store.evals()] == expected
        assert [(p.result_id, p.metrics) for p in store.results()] == before
        assert len(json.loads(export_points(store.results(), "inferencex-evals"))) == 2
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT conc, score FROM evals ORDER BY conc").fetchall() == [
            (4, 0.95), (64, 0.91), (128, None)]
        assert "evals_v3" not in {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        assert db.execute("SELECT MAX(version) FROM schema_version").fetchone()[0] == SCHEMA_VERSION


# ---------------------------------------------------------------- two processes opening an old store at once


_READ_VERSION: Callable[[Store], int] = vars(Store)["schema_version"].fget
"""`Store.schema_version` as the store reads it (the tests below patch the property to interleave two opens)."""


def _schema_4_store(make_run: MakeRun, path: Path) -> list[tuple[int, str, float | None, int | None]]:
    """A schema-4 store holding one batched eval; the rows its evals read as at schema 5."""
    with Store(path) as store:
        store.ingest_run(_batched(make_run))
        expected = [(r.conc, r.status, r.score, r.n_samples) for r in store.evals()]
    _as_schema_4(path)
    return expected


def _assert_migrated_once(path: Path, expected: list[tuple[int, str, float | None, int | None]]) -> None:
    with Store(path, readonly=True) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert [(r.conc, r.status, r.score, r.n_samples) for r in store.evals()] == expected
    with sqlite3.connect(path) as db:
        assert "evals_v3" not in {r[0] for r in db.execute("SELECT name FROM sqlite_master")}
        assert db.execute("SELECT version FROM schema_version ORDER BY version").fetchall() == [
            (v,) for v in range(2, SCHEMA_VERSION + 1)]


def test_a_store_migrated_by_another_connection_after_this_one_read_its_version_is_not_migrated_twice(
        make_run: MakeRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """The second open reads schema 4, then the first open migrates the store to 5 and commits before the second
    starts migrating: the second re-reads the version under the write lock and applies nothing (it used to rename the
    first one's schema-5 `evals` and crash splitting its rows as eval blocks)."""
    path = tmp_path / "v4.sqlite"
    expected = _schema_4_store(make_run, path)
    read_version = _READ_VERSION
    raced: list[int] = []

    def racing(self: Store) -> int:
        version = read_version(self)
        if not raced:  # this open has read the version: another migrates the store before it goes on
            raced.append(version)
            with Store(path) as first:
                assert read_version(first) == SCHEMA_VERSION
        return version

    monkeypatch.setattr(Store, "schema_version", property(racing))
    caplog.set_level(logging.INFO, logger="llmsweep.results.store")
    with Store(path) as second:
        assert raced == [4] and read_version(second) == SCHEMA_VERSION
        assert [(r.conc, r.status, r.score, r.n_samples) for r in second.evals()] == expected
    # Migration 5 (and each later one) was applied once, by the first: the second skipped them, having read the
    # version under the lock.
    assert [r.getMessage().split(": ")[0] for r in caplog.records if "migrated to schema" in r.getMessage()] == [
        f"results store {path} migrated to schema {v}" for v in range(5, SCHEMA_VERSION + 1)]
    monkeypatch.undo()
    _assert_migrated_once(path, expected)


def _open_in_a_process(path: Path, read: Any, go_on: Any, out: Any) -> None:
    """A process opening the store for writing that, once it has read the store's version, waits for `go_on`."""
    read_version = _READ_VERSION

    def waiting(self: Store) -> int:
        version = read_version(self)
        if not read.is_set():
            read.set()
            go_on.wait(60)
        return version

    Store.schema_version = property(waiting)  # type: ignore[method-assign,assignment]  # this process only
    try:
        with Store(path) as store:
            out.put(("ok", store.schema_version, [(r.conc, r.status, r.score, r.n_samples) for r in store.evals()]))
    except BaseException as exc:  # report whatever it was, a raw traceback included
        out.put(("error", type(exc).__name__, str(exc)))


def test_two_processes_opening_a_schema_4_store_at_once_both_end_at_schema_5_with_the_evals_intact(
        make_run: MakeRun, tmp_path: Path) -> None:
    """A real second process reads schema 4, this one migrates the store and commits, then the other goes on."""
    if "fork" not in multiprocessing.get_all_start_methods():
        pytest.skip("needs fork to patch the other process's store")
    path = tmp_path / "v4.sqlite"
    expected = _schema_4_store(make_run, path)
    ctx = multiprocessing.get_context("fork")
    read, go_on, out = ctx.Event(), ctx.Event(), ctx.Queue()
    other = ctx.Process(target=_open_in_a_process, args=(path, read, go_on, out))
    other.start()
    try:
        assert read.wait(60), "the other process never read the store's version"
        with Store(path) as store:  # this process migrates while the other holds schema 4 in hand
            assert store.schema_version == SCHEMA_VERSION
        go_on.set()
        result = out.get(timeout=60)
    finally:
        go_on.set()
        other.join(60)
    assert result == ("ok", SCHEMA_VERSION, expected)
    assert other.exitcode == 0
    _assert_migrated_once(path, expected)


def test_a_schema_5_store_whose_version_says_4_opens_with_its_evals_intact(make_run: MakeRun,
                                                                          tmp_path: Path) -> None:
    """What the second process of a race saw (the reviewer's reproduction): schema 5's `evals` under version 4.
    Migration 5 finds its table already there and splits nothing."""
    path = tmp_path / "s.sqlite"
    with Store(path) as store:
        store.ingest_run(_batched(make_run))
        expected = [(r.conc, r.status, r.score, r.n_samples) for r in store.evals()]
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM schema_version WHERE version = 5")
    db.close()
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA user_version = 4")
    db.close()
    with Store(path, readonly=True) as ro:
        assert [(r.conc, r.status, r.score, r.n_samples) for r in ro.evals()] == expected
    with Store(path) as store:
        assert store.schema_version == SCHEMA_VERSION
    _assert_migrated_once(path, expected)


@pytest.mark.parametrize("doc", ['{"mode": "eval-only", "task": "gsm8k"}', "not json"])
def test_a_stored_eval_that_does_not_parse_is_a_store_error_naming_its_result(
        make_run: MakeRun, store_path: Path, capsys: pytest.CaptureFixture[str], doc: str) -> None:
    path = store_path
    _schema_4_store(make_run, path)
    with sqlite3.connect(path) as db:
        (result_id,) = db.execute("SELECT result_id FROM evals").fetchone()
        db.execute("UPDATE evals SET doc = ?", (doc,))
    db.close()
    untouched = path.read_bytes()
    with Store(path, readonly=True) as ro, pytest.raises(StoreError) as read:
        ro.evals()
    with pytest.raises(StoreError) as migrate:
        Store(path)
    for exc in (read.value, migrate.value):
        assert result_id in exc.message and "evals.doc" in exc.message
        assert exc.fix is not None and f"DELETE FROM evals WHERE result_id = '{result_id}'" in exc.fix
    assert path.read_bytes() == untouched  # the migration rolled back whole: still schema 4, its row still there
    with pytest.raises(SystemExit) as listed:  # `llmsweep results evals`: one error line and its fix, exit 2
        main(["results", "evals"])
    err = capsys.readouterr().err
    assert listed.value.code == 2 and f"eval of result {result_id} cannot be read" in err and "fix: drop" in err
    assert "Traceback" not in err


def test_the_evals_table_keeps_result_ids_whole_on_a_120_column_terminal(make_run: MakeRun, store_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The evals table cut the result id (what `results show` takes) to `r1a2b3c…` on a 120-column terminal, as
    `results list` did: it is laid out the same way now."""
    import io

    from rich.console import Console

    import llmsweep.cli.results as results_cli
    import llmsweep.cli.tables as tables

    run = _batched(make_run)
    runner = CliRunner()
    assert runner.invoke(cli, ["results", "ingest", str(run.path)], catch_exceptions=False).exit_code == 0
    rows = json.loads(runner.invoke(cli, ["results", "evals", "--json"], catch_exceptions=False).stdout)
    buf = io.StringIO()
    for module in (tables, results_cli):  # the terminal every table of the command prints to
        monkeypatch.setattr(module, "table_console",
                            lambda: Console(file=buf, width=120, force_terminal=True, color_system=None))
    assert runner.invoke(cli, ["results", "evals"], catch_exceptions=False).exit_code == 0
    lines = buf.getvalue().splitlines()
    assert max(map(len, lines)) <= 120, buf.getvalue()
    for row in rows:
        assert any(row["result_id"] in line for line in lines), (row["result_id"], buf.getvalue())


# ---------------------------------------------------------------- an eval that never ran


def test_an_eval_that_never_ran_keeps_one_failed_row_at_its_planned_concurrency(make_run: MakeRun,
                                                                                store_path: Path) -> None:
    run = with_eval(make_run("never", concs=(16,), source="measured"), [])
    assert Summary.load(run.jobs[0].dir / "summary.json").eval.verdict == "invalid"  # type: ignore[union-attr]
    runner = CliRunner()
    assert runner.invoke(cli, ["results", "ingest", str(run.path)], catch_exceptions=False).exit_code == 0
    with Store(store_path, readonly=True) as store:
        (row,) = store.evals()
    assert (row.conc, row.status, row.score, row.n_samples, row.verdict) == (16, "failed", None, None, "invalid")
    assert row.error is not None and "lm-eval never ran" in row.error
    listed = runner.invoke(cli, ["results", "evals", "--json"], catch_exceptions=False)
    assert [(r["conc"], r["status"], r["error"]) for r in json.loads(listed.stdout)] == [(16, "failed", row.error)]
    table = runner.invoke(cli, ["results", "evals"], catch_exceptions=False)
    assert table.exit_code == 0 and "failed" in table.stdout and "never ran" in table.stdout
    assert json.loads(export_points(points_from_run(run), "inferencex-evals")) == []  # no score: no InferenceX row
    # A schema-4 store holding it splits it the same way, read-only and migrated, the concurrency from its job record.
    _as_schema_4(store_path)
    with Store(store_path, readonly=True) as ro:
        assert [(r.conc, r.status, r.error) for r in ro.evals()] == [(16, "failed", row.error)]
    with Store(store_path) as store:
        assert [(r.conc, r.status, r.error) for r in store.evals()] == [(16, "failed", row.error)]


def test_the_planned_eval_concurrency_is_read_from_the_job_record_as_the_eval_plans_it() -> None:
    from llmsweep.results.evals import eval_run_columns, planned_eval_conc

    multinode = {"multinode": True, "conc": [4, 64, 8]}
    assert planned_eval_conc(multinode) == 64
    assert planned_eval_conc({**multinode, "eval-conc": 8}) == 8
    assert planned_eval_conc({**multinode, "eval-all-concs": True}) == 4
    assert planned_eval_conc({"conc": 16, "eval-conc": 64}) == 16  # a single server evaluates its own conc
    assert planned_eval_conc({"conc": [32]}) == 32
    assert planned_eval_conc(None) == planned_eval_conc({}) == planned_eval_conc({"conc": "many"}) == 0
    block = judge(EvalBlock(mode="eval-only", task="gsm8k", dataset="openai/gsm8k", context_length=9472,
                            max_tokens=5376, runs=[], verdict="invalid"))
    (only,) = eval_run_columns(block)
    assert (only["conc"], only["status"], only["score"], only["command"]) == (0, "failed", None, [])
    assert [c["conc"] for c in eval_run_columns(block, 64)] == [64]


# ---------------------------------------------------------------- import: eval rows are evals again


def test_an_eval_export_imports_as_evals_and_exports_again_as_it_was(make_run: MakeRun, store_path: Path,
                                                                     tmp_path: Path) -> None:
    """`results import` of an `inferencex-evals` export: each eval (its rows, one per completed concurrency) is one
    eval result again — listed by `results evals` with its scores, verdict and mode, no throughput row, no frontier
    — and it exports again exactly as it was written. It was stored as an empty throughput result."""
    run = with_eval(make_run("batched", concs=(4,), source="measured"),
                    [_run(4, 0.95), _run(64, 0.91, n=1300), _run(128, None)], mode="run-eval")
    runner = CliRunner()
    assert runner.invoke(cli, ["results", "ingest", str(run.path)], catch_exceptions=False).exit_code == 0
    exported = runner.invoke(cli, ["results", "export", "--format", "inferencex-evals"], catch_exceptions=False)
    rows = json.loads(exported.stdout)
    assert [r["conc"] for r in rows] == [4, 64]
    (tmp_path / "evals.json").write_text(exported.stdout)
    other = tmp_path / "other.sqlite"
    imported = runner.invoke(cli, ["results", "import", str(tmp_path / "evals.json"), "--store", str(other)],
                             catch_exceptions=False)
    assert imported.exit_code == 0, imported.output
    assert "imported 1 result" in imported.output  # its two rows are one eval: one result, not "2 rows"
    listed = json.loads(runner.invoke(cli, ["results", "evals", "--json", "--store", str(other)],
                                      catch_exceptions=False).stdout)
    assert [(r["run_id"], r["conc"], r["status"], r["score"], r["n_samples"], r["mode"], r["verdict"], r["source"])
            for r in listed] == [
        (run.run_id, 4, "completed", 0.95, 1319, "run-eval", "invalid", "measured"),
        (run.run_id, 64, "completed", 0.91, 1300, "run-eval", "invalid", "measured"),
        (run.run_id, 128, "failed", None, None, "run-eval", "invalid", "measured")]
    assert listed[2]["error"] == "lm-eval exited 1"  # why that run has no row
    with Store(other, readonly=True) as store:
        (point,) = store.results()
    assert point.eval_only and point.eval is not None and point.identity == points_from_run(run)[0].identity
    again = runner.invoke(cli, ["results", "export", "--format", "inferencex-evals", "--store", str(other)],
                          catch_exceptions=False)
    assert json.loads(again.stdout) == rows
    throughput = runner.invoke(cli, ["results", "export", "--format", "inferencex", "--include-unpublished",
                                     "--store", str(other)], catch_exceptions=False)
    assert json.loads(throughput.stdout) == []  # an eval has no throughput row
    # comparable: the imported eval pairs with the run's own (its throughput point has no counterpart)
    cmp = runner.invoke(cli, ["compare", str(run.path), run.run_id, "--store", str(other), "--json"],
                        catch_exceptions=False)
    (m,) = json.loads(cmp.stdout)["matched"]
    assert m["eval"]["a"] == m["eval"]["b"] == 0.95 and m["eval"]["verdict"] == "within noise"
    # a row of ours that lost its source is not taken for measured (InferenceX's own rows, without our block, are)
    for row in rows:
        del row["llmsweep"]["source"]
    (tmp_path / "lost.json").write_text(json.dumps(rows))
    lost = runner.invoke(cli, ["results", "import", str(tmp_path / "lost.json"), "--store", str(tmp_path / "l.db")])
    assert isinstance(lost.exception, ResultInputError), lost.output  # exit 2 from the command line
    assert "has an `llmsweep` block without its `source`" in str(lost.exception)


def test_an_inferencex_eval_row_imports_as_an_eval_judged_against_its_threshold(store_path: Path,
                                                                                tmp_path: Path) -> None:
    """A row of InferenceX's agg_eval_all.json (no `llmsweep` block, no verdict): an eval-only result on its runner's
    hardware (the collector upper-cases the label), judged against the threshold `llmsweep run` would hold it to."""
    row = {"is_multinode": False, "model_prefix": "qwen3.5", "model": "Qwen/Qwen3.5-397B-A17B-FP8", "hw": "MI300X",
           "framework": "sglang", "precision": "fp8", "spec_decoding": "none", "isl": 8192, "osl": 1024, "tp": 8,
           "ep": 1, "conc": 64, "dp_attention": "false", "task": "gsm8k", "em_strict": 0.95, "em_strict_se": 0.006,
           "em_flexible": 0.96, "em_flexible_se": 0.007, "n_eff": 1319, "source": "results_2026.json",
           "score": 0.95, "score_name": "exact_match,strict-match", "score_se": 0.006}
    path = tmp_path / "agg_eval_all.json"
    path.write_text(json.dumps([row, {**row, "conc": 128, "em_strict": 0.5, "score": 0.5}]))
    runner = CliRunner()
    assert runner.invoke(cli, ["results", "import", str(path)], catch_exceptions=False).exit_code == 0
    with Store(store_path, readonly=True) as store:
        points = store.results()
        evals = store.evals()
    assert [(p.identity.hardware, p.identity.conc, p.identity.tp, p.eval_only, p.origin) for p in points] == [
        ("mi300x", 64, 8, True, "inferencex"), ("mi300x", 128, 8, True, "inferencex")]
    assert [(e.conc, e.score, e.verdict, e.mode) for e in evals] == [
        (64, 0.95, "valid", "eval-only"), (128, 0.5, "invalid", "eval-only")]
    assert "below the threshold 0.94" in evals[1].reasons[0]  # qwen3.5's gsm8k floor
    (again, _) = json.loads(export_points(points, "inferencex-evals"))
    assert {k: again[k] for k in row} == row


def test_an_eval_run_that_did_not_complete_is_said_on_stderr_and_exported_marked_with_its_error(
        make_run: MakeRun, store_path: Path, tmp_path: Path) -> None:
    """A failed eval run has no InferenceX row (the collector reads completed concurrencies only), but it does not
    vanish unsaid: stderr counts it with why, and --include-unpublished exports it marked failed with its error —
    an eval that never ran too (one row at its planned concurrency). Such an export imports back as it was."""
    from llmsweep.results.interchange import DID_NOT_COMPLETE

    batched = points_from_run(_batched(make_run))
    assert left_out(batched, "eval") == {DID_NOT_COMPLETE: 1}
    never = with_eval(make_run("never", concs=(16,), source="measured", seed=2), [])
    assert left_out(points_from_run(never), "eval") == {DID_NOT_COMPLETE: 1}
    runner = CliRunner()
    for run in (_batched(make_run), never):
        assert runner.invoke(cli, ["results", "ingest", str(run.path)], catch_exceptions=False).exit_code == 0
    plain = runner.invoke(cli, ["results", "export", "--format", "inferencex-evals"], catch_exceptions=False)
    assert [r["conc"] for r in json.loads(plain.stdout)] == [4, 64]
    assert (f"left out 2 eval rows InferenceX does not publish (2 {DID_NOT_COMPLETE}); --include-unpublished "
            "exports them marked failed") in plain.stderr
    every = runner.invoke(cli, ["results", "export", "--format", "inferencex-evals", "--include-unpublished"],
                          catch_exceptions=False)
    rows = json.loads(every.stdout)
    assert [(r["conc"], r["score"], r.get("benchmark_outcome")) for r in rows] == [
        (4, 0.95, None), (64, 0.91, None),
        (128, None, {"status": "failed", "reason": f"{DID_NOT_COMPLETE} (lm-eval exited 1)"}),
        (16, None, {"status": "failed", "reason": f"{DID_NOT_COMPLETE} (eval gsm8k: lm-eval never ran)"})]
    assert [r["llmsweep"]["status"] for r in rows] == ["completed", "completed", "failed", "failed"]
    (tmp_path / "every.json").write_text(every.stdout)
    other = str(tmp_path / "other.sqlite")
    assert runner.invoke(cli, ["results", "import", str(tmp_path / "every.json"), "--store", other],
                         catch_exceptions=False).exit_code == 0
    listed = json.loads(runner.invoke(cli, ["results", "evals", "--json", "--store", other]).stdout)
    assert [(r["conc"], r["status"], r["error"]) for r in listed] == [
        (4, "completed", None), (64, "completed", None), (128, "failed", "lm-eval exited 1"),
        (16, "failed", "eval gsm8k: lm-eval never ran")]
    again = runner.invoke(cli, ["results", "export", "--format", "inferencex-evals", "--include-unpublished",
                                "--store", other], catch_exceptions=False)
    assert json.loads(again.stdout) == rows


def test_compare_does_not_judge_evals_scored_on_other_samples_or_budgets(make_run: MakeRun) -> None:
    """A pull request's `--eval-limit 200` on a local file was judged against main's full GSM8K (`within noise`,
    `regression`) with nothing saying the inputs differ: evals whose dataset, limit, few-shot, context or answer budget
    differ are `n/a`, and the settings are named."""
    from dataclasses import replace

    from llmsweep.results.compare import compare_points

    a = points_from_run(with_eval(make_run("a", concs=(16,)), [_run(16, 0.95)]))
    b = points_from_run(with_eval(make_run("b", concs=(16,)), [_run(16, 0.80)]))
    (pa,), (pb,) = a, b
    assert pa.eval is not None and pb.eval is not None
    same = compare_points([pa], [pb])
    (judged,) = [pc.eval for pc in same.matched if pc.eval is not None]
    assert judged.verdict == "regression" and not judged.differs  # same settings: a real drop, beyond its stderr
    assert pb.summary is not None
    pb.summary.eval = pb.eval.model_copy(update={"dataset": "local.jsonl", "limit": 200})
    other = compare_points([pa], [replace(pb, summary=pb.summary)])
    (refused,) = [pc.eval for pc in other.matched if pc.eval is not None]
    assert refused.verdict == "n/a" and refused.delta is None
    assert refused.differs == "dataset openai/gsm8k vs local.jsonl; limit None vs 200", refused.differs
    assert refused.as_dict()["settings_differ"] == refused.differs


@pytest.mark.parametrize("order", [("inferencex", "inferencex-evals"), ("inferencex-evals", "inferencex")])
def test_a_runs_throughput_and_eval_exports_imported_into_one_store_keep_both_halves(
        make_run: MakeRun, tmp_path: Path, order: tuple[str, str]) -> None:
    """InferenceX's formats publish a run in two files, its throughput rows and its eval rows, each naming the run and
    the run-eval job. Importing one after the other into one store replaced the run with the second file's rows:
    the job's throughput result (or its eval) was gone, exit 0, without a word — and with a second job in the run,
    the second import was refused as dropping results unless --force, which dropped them. Both halves are kept, in
    either order; importing a file again replaces only its own half, and each exports again as it was."""
    run = with_eval(make_run("halves", concs=(4, 8), source="measured"), [_run(4, 0.95)], mode="run-eval")
    with Store(tmp_path / "origin.sqlite") as store:
        store.ingest_run(run)
        points = store.results()
    files = {}
    for fmt in ("inferencex", "inferencex-evals"):
        files[fmt] = tmp_path / f"{fmt}.json"
        files[fmt].write_text(export_points(points, fmt))
    with Store(tmp_path / "both.sqlite") as store:
        for fmt in (*order, *order):  # each file twice: a second import replaces its own half only
            assert import_into(store, files[fmt])[:2] == ([run.run_id], 2 if fmt == "inferencex" else 1)
        held = store.results(run.run_id)
        evals = store.evals(run.run_id)
        again = {fmt: json.loads(export_points(held, fmt)) for fmt in files}
    throughput = sorted((p.job_id, p.metric("tput_per_gpu")) for p in held if not p.eval_only)
    assert throughput == sorted((p.job_id, p.metric("tput_per_gpu")) for p in points)
    assert [(e.conc, e.score, e.mode) for e in evals] == [(4, 0.95, "run-eval")]
    (half,) = [p for p in held if p.eval_only]
    assert half.job_id == f"{points[0].job_id}-eval"  # beside the job's throughput result, under an id of its own
    want = {fmt: json.loads(path.read_text()) for fmt, path in files.items()}
    for row in again["inferencex"]:  # (our block names where the row is stored now: an import of an export)
        assert row["llmsweep"].pop("origin") == "llmsweep-export"
    for row in want["inferencex"]:
        assert row["llmsweep"].pop("origin") == "llmsweep"
    assert again == want
    # one file holding both (the two lists concatenated) stores the same results under the same ids
    both = tmp_path / "both.json"
    both.write_text(json.dumps([*json.loads(files["inferencex"].read_text()),
                                *json.loads(files["inferencex-evals"].read_text())]))
    with Store(tmp_path / "one.sqlite") as store:
        import_into(store, both)
        assert sorted(p.result_id for p in store.results()) == sorted(p.result_id for p in held)
    # our JSON export holds the run-eval job whole (one result, throughput and eval): it replaces the eval half
    whole = tmp_path / "whole.json"
    whole.write_text(export_points(points, "json"))
    with Store(tmp_path / "both.sqlite") as store:
        import_into(store, whole)
        assert sorted(p.job_id for p in store.results(run.run_id)) == sorted(p.job_id for p in points)
        assert [(e.job_id, e.score) for e in store.evals(run.run_id)] == [(points[0].job_id, 0.95)]


def test_an_eval_row_whose_reasons_are_not_a_list_is_refused(make_run: MakeRun, tmp_path: Path) -> None:
    """An eval row's `llmsweep.reasons` text had been stored as one reason per character."""
    points = points_from_run(with_eval(make_run("e", concs=(4,), source="measured"), [_run(4, 0.5)]))
    (row,) = json.loads(export_points(points, "inferencex-evals"))
    path = tmp_path / "evals.json"
    path.write_text(json.dumps([row]))
    assert import_file(path)[2][0].reasons == tuple(row["llmsweep"]["reasons"])
    row["llmsweep"]["reasons"] = "below the threshold"
    path.write_text(json.dumps([row]))
    with pytest.raises(ResultInputError, match=r"`llmsweep.reasons` is 'below the threshold', not a list of texts"):
        import_file(path)


def test_an_eval_export_imported_after_the_json_export_of_its_run_is_not_stored_twice(
        make_run: MakeRun, tmp_path: Path) -> None:
    """Our JSON export holds a run-eval job whole (its throughput and its eval, one result). Importing the run's
    `inferencex-evals` export after it stored the eval a second time, beside the whole result under `<job>-eval`:
    `results evals` listed it twice. Importing its `inferencex` export after it replaced the whole result with the
    throughput row and dropped the eval. Either file's rows of that job are the result the store holds: skipped, and
    said; the run's other results are stored as before."""
    run = with_eval(make_run("twice", concs=(4, 8), source="measured"), [_run(4, 0.95)], mode="run-eval")
    runner = CliRunner()
    origin = str(tmp_path / "origin.sqlite")
    assert runner.invoke(cli, ["results", "ingest", str(run.path), "--store", origin]).exit_code == 0
    files = {}
    for fmt in ("json", "inferencex-evals", "inferencex"):
        files[fmt] = tmp_path / f"{fmt}.json"
        exported = runner.invoke(cli, ["results", "export", "--format", fmt, "--out", str(files[fmt]),
                                       "--store", origin], catch_exceptions=False)
        assert exported.exit_code == 0, exported.output
    job = points_from_run(run)[0].job_id
    other = str(tmp_path / "other.sqlite")
    said = {}
    for fmt in ("json", "inferencex-evals", "inferencex"):
        imported = runner.invoke(cli, ["results", "import", str(files[fmt]), "--store", other],
                                 catch_exceptions=False)
        assert imported.exit_code == 0, imported.output
        said[fmt] = imported.output
        listed = json.loads(runner.invoke(cli, ["results", "evals", "--json", "--store", other],
                                          catch_exceptions=False).stdout)
        assert [(r["job_id"], r["conc"], r["score"]) for r in listed] == [(job, 4, 0.95)], fmt
    assert "imported 0 results as run twice; 1 result already stored, skipped (twice/" + job in said[
        "inferencex-evals"]
    assert "imported 1 result as run twice; 1 result already stored, skipped" in said["inferencex"]
    with Store(Path(other), readonly=True) as store:
        held = store.results(run.run_id)
    assert sorted(p.job_id for p in held) == sorted(p.job_id for p in points_from_run(run))
    (whole,) = [p for p in held if p.job_id == job]
    assert whole.summary is not None and whole.eval is not None  # the lossless result the JSON export stored


def test_an_eval_of_part_of_a_local_file_says_so_where_its_task_is_named(make_run: MakeRun, store_path: Path,
                                                                          tmp_path: Path) -> None:
    """`--eval-dataset adds.jsonl --eval-limit 6`: its export read `task: gsm8k … n_eff: 6` at the top level (dataset
    and limit only inside the `llmsweep` block) and `results evals` named no dataset. The top level says what it ran
    on, the table's task says it, and the row reads back with its `smoke` verdict."""
    run = make_run("adds", concs=(4,), source="measured")
    art = run.jobs[0]
    summary = Summary.load(art.dir / "summary.json")
    small = EvalRun(conc=4, status="completed", n_samples=6, n_samples_original=32, results_file="eval/r.json",
                    metrics=[EvalMetric(name="exact_match,strict-match", value=1.0, stderr=0.0),
                             EvalMetric(name="exact_match,flexible-extract", value=1.0, stderr=0.0)])
    summary.eval = judge(EvalBlock(mode="eval-only", task="gsm8k", dataset="/data/adds.jsonl", limit=6,
                                   model_prefix="qwen3.5", context_length=9472, max_tokens=5376, runs=[small],
                                   verdict="invalid"))
    assert summary.eval.verdict == "smoke"
    summary.validity.verdict = summary.eval.verdict
    summary.write(art.dir / "summary.json")
    runner = CliRunner()
    assert runner.invoke(cli, ["results", "ingest", str(run.path)], catch_exceptions=False).exit_code == 0
    with Store(store_path, readonly=True) as store:
        (row,) = json.loads(export_points(store.results(), "inferencex-evals"))
        (stored,) = store.evals()
    assert (row["task"], row["dataset"], row["limit"], row["n_eff"]) == ("gsm8k", "/data/adds.jsonl", 6, 6)
    assert row["llmsweep"]["verdict"] == "smoke"
    assert (stored.dataset, stored.limit, stored.task_label) == ("/data/adds.jsonl", 6, "gsm8k (adds.jsonl, first 6)")
    table = runner.invoke(cli, ["results", "evals"], catch_exceptions=False)
    assert "gsm8k (adds.jsonl, first 6)" in table.stdout and "smoke" in table.stdout, table.stdout
    path = tmp_path / "rows.json"
    path.write_text(json.dumps([row]))
    (back,) = import_file(path)[2]
    assert back.eval is not None and (back.eval.verdict, back.eval.dataset, back.eval.limit) == (
        "smoke", "/data/adds.jsonl", 6)
    bare = {k: v for k, v in row.items() if k != "llmsweep"}  # a row of ours some tool stripped to InferenceX's own
    path.write_text(json.dumps([bare]))
    (plain_back,) = import_file(path)[2]
    assert plain_back.eval is not None and (plain_back.eval.dataset, plain_back.eval.limit) == ("/data/adds.jsonl", 6)
    assert plain_back.eval.verdict == "smoke"  # judged again: part of the samples
