"""A point where no profiling request finished (a run stopped while its first requests were in flight) has no
error ratio: the dashboard, the store, `results list`/`show`, `compare` and every export said 0.0 % ("no errors").
Here it is null in data.json and JSON, empty in CSV, `-` in a table, and absent from an InferenceX row (whose
`num_requests_total`/`num_requests_successful` say 0 of 0, as InferenceX's own rows carry it). A store an earlier
release wrote with 0.0 reads as null, and migrating it sets NULL."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.metrics import GateConfig, summarise
from llmsweep.metrics.model import Summary
from llmsweep.report import write_report
from llmsweep.results.rundir import RunDir
from llmsweep.results.store import SCHEMA_VERSION, Store


def _run(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def _none_finished(run: RunDir, conc: int) -> str:
    """Make the run's `conc` job one stopped while its requests were in flight: its records are a finished warm-up
    and two cancelled profiling requests, summarised (and closed) as `run` does."""
    job = next(d for d in (run.path / "jobs").iterdir() if f"_conc{conc}_" in d.name)
    records = [json.loads(line) for line in (job / "records.jsonl").read_text().splitlines()]
    kept = [r for r in records if r["phase"] == "warmup"]
    for r in [r for r in records if r["phase"] == "profiling"][:2]:
        kept.append({**r, "status": None, "error_class": "cancelled", "error": "cancelled: interrupted by SIGINT",
                     "first_token_at": None, "chunk_times": [], "chunk_tokens": [], "completion_tokens": None})
    (job / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    summary = summarise(job / "records.jsonl", gpus=8, source="simulated", gates=GateConfig(min_submission_s=0))
    assert summary.requests.successful == summary.requests.failed == 0 and summary.requests.cancelled == 2
    (job / "summary.json").write_text(json.dumps(summary.dump()))
    (job / "outcome.json").write_text(json.dumps({"job_id": job.name, "exp_name": job.name, "status": "invalid",
                                                  "reasons": summary.validity.reasons}))
    return job.name


def _rows(text: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("│").split("│")] for line in text.splitlines() if line.startswith("│")]


def test_no_finished_request_shows_no_error_ratio_in_the_dashboard_store_tables_and_exports(
        make_run, store_path: Path, tmp_path: Path) -> None:
    run = make_run("run1", concs=(1, 4))
    stopped = _none_finished(run, 4)

    data = json.loads(write_report(run.path, png=False).data.read_text())
    errors = {p["job_id"]: p["metrics"]["error_ratio"] for p in data["points"]}
    assert errors[stopped] is None and errors.keys() - {stopped} and all(  # the dashboard's Errors cell: `–`
        v == 0.0 for k, v in errors.items() if k != stopped)

    _run("results", "ingest", str(run.path))
    listed = {r["job_id"]: r for r in json.loads(_run("results", "list", "--run", "run1", "--json"))}
    assert listed[stopped]["error_ratio"] is None
    other = next(r for k, r in listed.items() if k != stopped)
    assert other["error_ratio"] == 0.0
    shown = [line.split() for line in _run("results", "show", listed[stopped]["result_id"]).splitlines()]
    assert not [line for line in shown if line[:1] == ["Errors"]]  # no figure, as for every metric without one
    assert ["Errors", "0.0%"] in [line.split() for line in _run("results", "show", other["result_id"]).splitlines()]

    compared = [row[:3] for row in _rows(_run("compare", "run1", str(run.path)))
                if row[0] == "Errors"]  # one table per point
    assert sorted(compared) == [["Errors", "-", "-"], ["Errors", "0.0%", "0.0%"]], compared

    out = tmp_path / "export.csv"
    _run("results", "export", "--format", "csv", "--out", str(out))
    by_job = {r["job_id"]: r for r in csv.DictReader(io.StringIO(out.read_text()))}
    assert by_job[stopped]["error_ratio"] == "" and by_job[other["job_id"]]["error_ratio"] == "0.0"
    out = tmp_path / "export.json"
    _run("results", "export", "--format", "json", "--out", str(out))
    exported = {r["job_id"]: r for r in json.loads(out.read_text())["results"]}
    assert exported[stopped]["metrics"]["error_ratio"] is None

    out = tmp_path / "ix.json"
    _run("results", "export", "--format", "inferencex", "--include-unpublished", "--out", str(out))
    (row,) = [r for r in json.loads(out.read_text()) if r["llmsweep"]["job_id"] == stopped]
    assert "error_ratio" not in row  # InferenceX rows carry counts, not a ratio: 0 of 0
    assert row["num_requests_total"] == row["num_requests_successful"] == 0
    _run("results", "import", str(out))
    imported = [r for r in json.loads(_run("results", "list", "--all", "--json"))
                if r["job_id"] == stopped and r["run_id"] != "run1"]
    assert imported and all(r["error_ratio"] is None for r in imported)


def test_a_store_an_earlier_release_wrote_with_0_reads_as_undefined_and_migrates_to_null(
        make_run, store_path: Path) -> None:
    run = make_run("run1", concs=(1, 4))
    stopped = _none_finished(run, 4)
    summary_file = run.path / "jobs" / stopped / "summary.json"
    doc = json.loads(summary_file.read_text())
    doc["requests"]["error_ratio"] = 0.0  # what earlier releases wrote
    summary_file.write_text(json.dumps(doc))
    assert Summary.load(summary_file).requests.error_ratio is None
    _run("results", "ingest", str(run.path))
    db = sqlite3.connect(store_path)  # as a release before store schema 6 left it
    db.execute("UPDATE results SET error_ratio = 0.0")
    db.execute("PRAGMA user_version = 5")
    db.commit()
    db.close()
    with Store(store_path, readonly=True) as store:  # read without migrating
        metrics = {p.job_id: p.metrics["error_ratio"] for p in store.results("run1")}
    assert metrics[stopped] is None and [v for k, v in metrics.items() if k != stopped] == [0.0]
    with Store(store_path) as store:
        assert store.schema_version == SCHEMA_VERSION
    db = sqlite3.connect(store_path)
    stored = dict(db.execute("SELECT job_id, error_ratio FROM results").fetchall())
    db.close()
    assert stored[stopped] is None and [v for k, v in stored.items() if k != stopped] == [0.0]
