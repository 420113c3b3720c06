"""`llmsweep results …` and `llmsweep compare` as a user drives them."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from llmsweep.cli.main import cli


def _run(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def test_ingest_list_show_export_import(make_run, store_path: Path, tmp_path: Path) -> None:
    run = make_run("run1", concs=(1, 4))
    assert "ingested run1: 2 result(s)" in _run("results", "ingest", str(run.path))
    assert "re-ingested run1" in _run("results", "ingest", str(run.path))
    assert "run1" in _run("results", "list")
    rows = json.loads(_run("results", "list", "--run", "run1", "--json"))
    assert [r["conc"] for r in rows] == [1, 4] and all(r["source"] == "simulated" for r in rows)
    shown = json.loads(_run("results", "show", rows[0]["result_id"], "--json"))
    assert shown["job_id"] == rows[0]["job_id"] and shown["summary"]["schema_version"] == 2
    out = tmp_path / "ix.json"
    _run("results", "export", "--format", "inferencex", "--out", str(out))
    assert len(json.loads(out.read_text())) == 2
    assert "imported 2 row(s)" in _run("results", "import", str(out))
    runs = {r["run_id"]: r for r in json.loads(_run("results", "runs", "--json"))}
    imported = next(r for rid, r in runs.items() if rid.startswith("import:ix-"))
    assert imported["origin"] == "llmsweep-export" and imported["sources"] == ["simulated"]
    assert runs["run1"]["origin"] == "llmsweep"
    # Imported rows are their own run: run1 still has exactly its own two results.
    assert len(json.loads(_run("results", "list", "--run", "run1", "--json"))) == 2


def test_frontier_command(make_run, store_path: Path) -> None:
    run = make_run("run1", concs=(1, 4, 16))
    doc = json.loads(_run("results", "frontier", "--run", str(run.path), "--json"))
    (series, front), = doc.items()
    assert series.endswith("|simulated") and 1 <= len(front) <= 3
    xs = [r["x"] for r in front]
    assert xs == sorted(xs)


def test_compare_json_and_markdown(make_run, store_path: Path, tmp_path: Path) -> None:
    a = make_run("a", concs=(4,))
    b = make_run("b", concs=(4, 8), seed=1)
    md = tmp_path / "cmp.md"
    doc = json.loads(_run("compare", str(a.path), str(b.path), "--json", "--resamples", "30", "--markdown", str(md)))
    assert doc["a"] == "a" and len(doc["matched"]) == 1 and len(doc["only_b"]) == 1
    verdicts = {d["metric"]: d["verdict"] for d in doc["matched"][0]["deltas"]}
    assert "regression" not in verdicts.values() and "improvement" not in verdicts.values()
    assert "| Point |" in md.read_text()


def test_compare_unknown_side_is_a_clean_error(store_path: Path) -> None:
    res = CliRunner().invoke(cli, ["compare", "nope", "nada"])
    assert res.exit_code != 0
    assert "neither a run directory nor a run id" in str(res.exception)


def test_compare_with_repeat_runs_calls_a_regression_and_can_fail(make_run, store_path: Path) -> None:
    a = make_run("a", concs=(4,), requests=100)
    reps = [make_run(f"a{i}", concs=(4,), requests=100, seed=10 + i) for i in range(2)]
    slow = make_run("b", concs=(4,), requests=100, seed=5, speed=0.5)  # half the per-user decode speed
    args = ["compare", str(a.path), str(slow.path), "--resamples", "30", "--no-history"]
    for r in reps:
        args += ["--repeats-from", str(r.path)]
    doc = json.loads(_run(*args, "--json"))
    d = {x["metric"]: x for x in doc["matched"][0]["deltas"]}
    assert d["p90_e2e_norm_intvty"]["band"]["kind"] == "between-run"
    assert d["p90_e2e_norm_intvty"]["verdict"] == "regression"
    assert d["p50_tpot"]["verdict"] == "regression"  # slower tokens: a lower-is-better metric went up
    res = CliRunner().invoke(cli, [*args, "--fail-on-regression"])
    assert res.exit_code != 0 and "regression(s) beyond run-to-run noise" in str(res.exception)
