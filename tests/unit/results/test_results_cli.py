"""`llmsweep results …` and `llmsweep compare` as a user drives them."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.errors import ResultInputError
from llmsweep.results.store import StoreError
from llmsweep.words import count_of


def _run(*args: str) -> str:
    res = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.output


def test_ingest_list_show_export_import(make_run, store_path: Path, tmp_path: Path) -> None:
    run = make_run("run1", concs=(1, 4))
    assert "ingested run1: 2 results" in _run("results", "ingest", str(run.path))
    assert "re-ingested run1" in _run("results", "ingest", str(run.path))
    assert "run1" in _run("results", "list")
    rows = json.loads(_run("results", "list", "--run", "run1", "--json"))
    assert [r["conc"] for r in rows] == [1, 4] and all(r["source"] == "simulated" for r in rows)
    shown = json.loads(_run("results", "show", rows[0]["result_id"], "--json"))
    assert shown["job_id"] == rows[0]["job_id"] and shown["summary"]["schema_version"] == 2
    # the human view names a metric as every table does, with its unit, and shows it as they do (was `p90_ttft 0.73…`)
    lines = [line.strip() for line in _run("results", "show", rows[0]["result_id"]).splitlines()]
    assert f"P90 TTFT ms  {rows[0]['p90_ttft'] * 1e3:,.1f}" in lines, lines
    assert f"Total tok/s/GPU  {rows[0]['tput_per_gpu']:,.1f}" in lines, lines
    out = tmp_path / "ix.json"
    _run("results", "export", "--format", "inferencex", "--include-unpublished", "--out", str(out))
    assert len(json.loads(out.read_text())) == 2
    assert "imported 2 results" in _run("results", "import", str(out))
    runs = {r["run_id"]: r for r in json.loads(_run("results", "runs", "--json"))}
    imported = next(r for rid, r in runs.items() if rid.startswith("import:ix-"))
    assert imported["origin"] == "llmsweep-export" and imported["sources"] == ["simulated"]
    assert runs["run1"]["origin"] == "llmsweep"
    # Imported rows are their own run: run1 still has exactly its own two results.
    assert len(json.loads(_run("results", "list", "--run", "run1", "--json"))) == 2
    # No result ran an eval: the table says so rather than print an empty frame (JSON: an empty list).
    assert _run("results", "evals").startswith("no eval stored in ")
    assert json.loads(_run("results", "evals", "--json")) == []


def test_csv_export_has_the_columns_of_list_json_with_each_rows_warnings(make_run, store_path: Path) -> None:
    """README: `export --format csv` has a result row's columns, as `results list --json`, which gives each row's
    `warnings`. The CSV had no `warnings` column: a simulated point a real engine would refuse (`valid ⚠1` in `run`'s
    table, `results list` and the JSON export) was a plain `valid` row in a spreadsheet."""
    import csv
    import io

    from llmsweep.sim_warnings import engine_refuses

    run = make_run("warned", concs=(1, 4))
    refuses = engine_refuses("engine.known-incompatibility", "HiCache with the direct I/O backend")
    meta = json.loads((run.path / "run.json").read_text())
    warned_job = run.jobs[1].job_id
    meta["outcomes"] = [{"job_id": warned_job, "exp_name": "x", "status": "valid", "warnings": [refuses]}]
    (run.path / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    _run("results", "ingest", str(run.path))
    listed = json.loads(_run("results", "list", "--run", "warned", "--json"))
    reader = csv.DictReader(io.StringIO(_run("results", "export", "--format", "csv", "--run", "warned")))
    rows = {row["job_id"]: row for row in reader}
    from llmsweep.results.interchange import csv_column

    # the same columns, in the same order (a latency's header with its unit: `p50_ttft_s`)
    assert list(reader.fieldnames or ()) == [csv_column(c) for c in listed[0]]
    assert {r["job_id"]: r["warnings"] for r in listed} == {j: ([refuses] if j == warned_job else []) for j in rows}
    assert {j: json.loads(row["warnings"]) for j, row in rows.items()} == {
        j: ([refuses] if j == warned_job else []) for j in rows}  # a JSON array: a warning may hold `;` or `,`


def test_an_export_of_several_runs_imports_each_under_its_original_id_with_its_warnings(
        make_run, store_path: Path, tmp_path: Path, monkeypatch) -> None:
    """README: each run of an export imports as its own run under its original id, and the JSON export carries each
    point's warnings so an import keeps its ⚠ marks; imported back into the store that holds the run as its own, it
    is never replaced: its rows import beside it, as `<file's run id>:<run id>`."""
    from llmsweep.sim_warnings import engine_refuses

    refuses = engine_refuses("engine.known-incompatibility", "HiCache with the direct I/O backend")
    warned = make_run("warned", concs=(1, 4))
    meta = json.loads((warned.path / "run.json").read_text())
    warned_job = warned.jobs[0].job_id
    meta["outcomes"] = [{"job_id": warned_job, "exp_name": "x", "status": "valid", "warnings": [refuses]}]
    (warned.path / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    for run in (warned, make_run("plain", concs=(2,))):
        _run("results", "ingest", str(run.path))
    ours = {r: json.loads(_run("results", "list", "--run", r, "--json")) for r in ("warned", "plain")}
    export = tmp_path / "both.json"
    _run("results", "export", "--out", str(export))  # every stored result: both runs

    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "elsewhere.sqlite"))
    assert "imported 3 results" in _run("results", "import", str(export))
    runs = {r["run_id"]: r for r in json.loads(_run("results", "runs", "--json"))}
    assert set(runs) == {"warned", "plain"} and {r["origin"] for r in runs.values()} == {"llmsweep-export"}
    for run_id, rows in ours.items():
        back = json.loads(_run("results", "list", "--run", run_id, "--json"))
        assert [(r["job_id"], r["tput_per_gpu"], r["warnings"]) for r in back] == [
            (r["job_id"], r["tput_per_gpu"], r["warnings"]) for r in rows]
    assert next(r for r in ours["warned"] if r["job_id"] == warned_job)["warnings"] == [refuses]

    monkeypatch.setenv("LLMSWEEP_STORE", str(store_path))  # back into the store that holds both runs as its own
    _run("results", "import", str(export))
    runs = {r["run_id"]: r for r in json.loads(_run("results", "runs", "--json"))}
    beside = sorted(r for r in runs if r.startswith("import:both-"))
    assert [r.rsplit(":", 1)[1] for r in beside] == ["plain", "warned"], runs
    assert runs["warned"]["origin"] == runs["plain"]["origin"] == "llmsweep"
    for run_id, rows in ours.items():
        assert json.loads(_run("results", "list", "--run", run_id, "--json")) == rows


def test_list_json_prints_the_rows_its_table_shows(make_run, store_path: Path) -> None:
    """`results list` shows runs, so its `--json` lists runs too (it used to list every stored result); every
    result of every run is `--all`, in the table as in JSON."""
    for rid in ("run1", "run2"):
        _run("results", "ingest", str(make_run(rid, concs=(1, 4)).path))
    table = _run("results", "list")
    assert "runs in" in table and "run1" in table and "run2" in table
    runs = json.loads(_run("results", "list", "--json"))
    assert runs == json.loads(_run("results", "runs", "--json"))
    assert sorted(r["run_id"] for r in runs) == ["run1", "run2"] and all(r["results"] == 2 for r in runs)
    every = json.loads(_run("results", "list", "--all", "--json"))
    assert [(r["run_id"], r["conc"]) for r in every] == [("run1", 1), ("run1", 4), ("run2", 1), ("run2", 4)]
    rows = [line for line in _run("results", "list", "--all").splitlines() if line.startswith("│")]
    assert len(rows) == 4, rows
    res = CliRunner().invoke(cli, ["results", "list", "--all", "--run", "run1"])
    assert res.exit_code == 2 and "give one of them" in res.output


def test_listing_no_results_says_so(make_run, store_path: Path) -> None:
    """`--all` on an empty store, the runs of an empty store, or `--run` of a run that stored no result, says so (it
    printed nothing, or a table with no rows); `--json` is an empty list. A store file that is not there (a
    mistyped --store) is said to be missing, not only empty."""
    assert not store_path.exists()
    missing = f"{store_path} (no store file there)"
    assert _run("results", "list", "--all") == f"no results stored in {missing}\n"
    assert json.loads(_run("results", "list", "--all", "--json")) == []
    for runs in (("results", "list"), ("results", "runs")):  # the runs view: a line, not a table with no rows
        assert _run(*runs) == f"no runs stored in {missing}\n"
        assert json.loads(_run(*runs, "--json")) == []
    run = make_run("empty", concs=(1,))
    (next(run.path.glob("jobs/*")) / "summary.json").unlink()
    assert "ingested empty: 0 results, 1 job without summary" in _run("results", "ingest", str(run.path))
    assert _run("results", "list", "--run", "empty") == f"no results stored for run empty in {store_path}\n"
    assert json.loads(_run("results", "list", "--run", "empty", "--json")) == []


def test_a_store_path_that_cannot_exist_is_refused_by_a_command_that_only_reads(tmp_path: Path) -> None:
    """`results list --store notes.txt/s.sqlite` (a regular file on the way) read as an empty store, exit 0, where a
    command that writes refused it: a store that can never be there is refused by both, naming the file."""
    (tmp_path / "notes.txt").write_text("a note\n")
    for args in (["results", "list"], ["results", "runs", "--json"], ["results", "list", "--all"]):
        res = CliRunner().invoke(cli, [*args, "--store", str(tmp_path / "notes.txt" / "s.sqlite")])
        assert isinstance(res.exception, StoreError) and res.exception.exit_code == 2, res.output
        assert (f"results store {tmp_path / 'notes.txt' / 's.sqlite'} cannot be read: {tmp_path / 'notes.txt'} is a "
                "file, not a folder") in str(res.exception), res.exception


def test_a_runs_results_are_listed_by_series_then_concurrency_as_numbers(make_run, store_path: Path) -> None:
    """Job folders sort as strings (conc12 before conc2); the list sorts by concurrency as a number."""
    run = make_run("run1", concs=(12, 1, 2, 16))
    _run("results", "ingest", str(run.path))
    rows = json.loads(_run("results", "list", "--run", "run1", "--json"))
    assert [r["conc"] for r in rows] == [1, 2, 12, 16]
    table = _run("results", "list", "--run", "run1")
    assert [row["conc"] for row in _table(table)] == ["1", "2", "12", "16"], table


def test_frontier_command(make_run, store_path: Path) -> None:
    run = make_run("run1", concs=(1, 4, 16))
    doc = json.loads(_run("results", "frontier", "--run", str(run.path), "--json"))
    (series, front), = doc.items()
    assert series.endswith("|simulated") and 1 <= len(front) <= 3
    xs = [r["x"] for r in front]
    assert xs == sorted(xs)
    text = _run("results", "frontier", "--run", str(run.path), "--x", "conc")
    assert text.splitlines()[0] == "x: Concurrency (users), y: Throughput per GPU (tok/s/GPU)"
    # the text is a table per series, as `results list` lays one out: result ids (what `results show` takes), the
    # concurrency, the figures as every table shows the metric
    rows = _table(_run("results", "frontier", "--run", str(run.path)))
    _run("results", "ingest", str(run.path))
    listed = {r["result"]: r for r in _table(_run("results", "list", "--run", "run1"))}
    assert [r["result"] for r in rows] == [r["result_id"] for r in front]
    for r in rows:
        assert r["conc"] == listed[r["result"]]["conc"]
        assert r["Total tok/s/GPU"] == listed[r["result"]]["Total tok/s/GPU"]
    # a latency axis is headed in the unit its column shows (it said `P90 TTFT (s)` over a `P90 TTFT ms` column)
    text = _run("results", "frontier", "--run", str(run.path), "--x", "p90_ttft")
    assert text.splitlines()[0] == "x: P90 TTFT (ms), y: Throughput per GPU (tok/s/GPU)", text
    assert "P90 TTFT ms" in _table(text)[0]


def test_frontier_marks_a_point_its_run_warned_of_as_results_list_does(make_run, store_path: Path) -> None:
    """`results list` marks a simulated point its run warned of (`valid ⚠1,2`: what the simulator does not model,
    the catalog estimates it modelled the job with; `sim_warnings`) and `--json` gives its `warnings`; `results
    frontier` showed the same point plain, and its --json had no word of them. It marks and says them alike, of a run
    folder (its outcomes) and of the stored run."""
    from llmsweep.sim_warnings import simulator_warnings

    run = make_run("warned", concs=(1, 4, 16))
    said = simulator_warnings(["pipeline parallelism (pp 2)"], ["mi300x hbm_gb"])
    meta = json.loads((run.path / "run.json").read_text())
    meta["outcomes"] = [{"job_id": art.job_id, "exp_name": "x", "status": "valid", "warnings": said}
                        for art in run.jobs]
    (run.path / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    _run("results", "ingest", str(run.path))
    listed = {r["result_id"]: r["warnings"] for r in json.loads(_run("results", "list", "--run", "warned", "--json"))}
    assert set(map(tuple, listed.values())) == {tuple(said)}
    for ref in (str(run.path), "warned"):
        (front,) = json.loads(_run("results", "frontier", ref, "--json")).values()
        assert front and all(p["warnings"] == listed[p["result_id"]] for p in front), front
        text = _run("results", "frontier", ref)
        assert [r["verdict"] for r in _table(text)] == ["valid ⚠1,2"] * len(front), text
        flat = " ".join(text.split())
        assert all(flat.count(" ".join(f"⚠{n} {w}".split())) == 1 for n, w in enumerate(said, 1)), text


def test_compare_json_and_markdown(make_run, store_path: Path, tmp_path: Path) -> None:
    a = make_run("a", concs=(4,))
    b = make_run("b", concs=(4, 8), seed=1)
    md = tmp_path / "cmp.md"
    doc = json.loads(_run("compare", str(a.path), str(b.path), "--json", "--markdown", str(md)))
    assert doc["a"] == "a" and len(doc["matched"]) == 1 and len(doc["only_b"]) == 1
    verdicts = {d["metric"]: d["verdict"] for d in doc["matched"][0]["deltas"]}
    assert "regression" not in verdicts.values() and "improvement" not in verdicts.values()
    assert "| Point |" in md.read_text()
    # the table gives A, B and the delta of a latency in one unit (A and B were seconds beside a delta in ms), the
    # one its row names as the metric table does (the row was `p90_ttft`, its unit in each cell)
    table = _run("compare", str(a.path), str(b.path))
    row = next(line for line in table.splitlines() if "P90 TTFT ms" in line).split("│")
    ttft = next(d for d in doc["matched"][0]["deltas"] if d["metric"] == "p90_ttft")
    a_ms, b_ms = (f"{ttft[side] * 1e3:,.1f}" for side in ("a", "b"))
    assert (row[2].strip(), row[3].strip()) == (a_ms, b_ms) and "ms" not in row[4], row


def test_compare_unknown_side_is_a_clean_error(store_path: Path) -> None:
    res = CliRunner().invoke(cli, ["compare", "nope", "nada"])
    assert res.exit_code != 0
    assert "neither a run directory nor a run id" in str(res.exception)


def test_compare_with_repeat_runs_calls_a_regression_and_can_fail(make_run, store_path: Path) -> None:
    a = make_run("a", concs=(4,), requests=100)
    reps = [make_run(f"a{i}", concs=(4,), requests=100, seed=10 + i) for i in range(2)]
    slow = make_run("b", concs=(4,), requests=100, seed=5, speed=0.5)  # half the per-user decode speed
    args = ["compare", str(a.path), str(slow.path), "--no-history"]
    for r in reps:
        args += ["--repeats-from", str(r.path)]
    doc = json.loads(_run(*args, "--json"))
    d = {x["metric"]: x for x in doc["matched"][0]["deltas"]}
    assert d["p90_e2e_norm_intvty"]["band"]["kind"] == "between-run"
    assert d["p90_e2e_norm_intvty"]["verdict"] == "regression"
    assert d["p50_tpot"]["verdict"] == "regression"  # slower tokens: a lower-is-better metric went up
    res = CliRunner().invoke(cli, [*args, "--fail-on-regression"])
    # counted in points, as the verdict counts them (it said the metrics' count, beside a verdict of points)
    regressed = sum(1 for x in doc["matched"] if any(m["verdict"] == "regression" for m in x["deltas"]))
    metrics = sum(1 for x in doc["matched"] for m in x["deltas"] if m["verdict"] == "regression")
    assert res.exit_code != 0, res.output
    assert (f"{count_of(regressed, 'point')} regressed beyond run-to-run noise ({count_of(metrics, 'metric')})"
            in str(res.exception))


def _main(*args: str) -> int:
    from llmsweep.cli.main import main

    try:
        main(list(args))
    except SystemExit as exc:
        return int(exc.code or 0)
    return 0


def test_a_bad_store_is_one_clear_error_for_every_reading_command(tmp_path: Path, capsys, monkeypatch) -> None:
    (tmp_path / "dir.sqlite").mkdir()
    (tmp_path / "corrupt.sqlite").write_bytes(b"\x00garbage, not SQLite\n" * 200)
    for store, says in (("dir.sqlite", "is a directory"), ("corrupt.sqlite", "not a database")):
        for cmd in (["results", "list"], ["results", "runs"], ["results", "list", "--json"],
                    ["results", "export"], ["results", "show", "x"], ["compare", "a", "b"]):
            rc = _main(*cmd, "--store", str(tmp_path / store))
            err = capsys.readouterr().err
            assert rc == 2, (cmd, store, err)
            # (--store refuses a directory as a click usage error; $LLMSWEEP_STORE reaches the store's own check)
            assert err.lower().count("error:") == 1 and says in err and "Traceback" not in err, err
            monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / store))
            assert _main(*cmd) == 2
            err = capsys.readouterr().err
            assert err.count("error:") == 1 and says in err and "fix:" in err and "Traceback" not in err, err
            monkeypatch.delenv("LLMSWEEP_STORE")


def test_compare_of_two_folders_without_history_never_opens_the_store(make_run, tmp_path: Path, capsys,
                                                                      monkeypatch) -> None:
    """`compare DIR DIR --no-history` reads nothing from the store: a damaged default store (or one given with
    --store) must not stop it, as it did (`file is not a database`). History, or a side named by run id, reads it."""
    a, b = make_run("a", concs=(1,)), make_run("b", concs=(1,))
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"\x00garbage, not SQLite\n" * 200)
    monkeypatch.setenv("LLMSWEEP_STORE", str(corrupt))
    folders = ["compare", str(a.path), str(b.path)]
    for extra in ([], ["--store", str(corrupt)], ["--repeats-from", str(a.path)]):
        assert _main(*folders, "--no-history", *extra) == 0, capsys.readouterr().err
        assert "not a database" not in capsys.readouterr().err
    for needs in (folders, ["compare", str(a.path), "b", "--no-history"]):  # history, a stored run id: read
        assert _main(*needs) == 2
        assert "not a database" in capsys.readouterr().err
    assert corrupt.read_bytes() == b"\x00garbage, not SQLite\n" * 200


def test_reading_commands_never_write_the_store(make_run, tmp_path: Path, capsys) -> None:
    import shutil

    old = tmp_path / "v1.sqlite"
    shutil.copyfile(Path(__file__).resolve().parents[2] / "data" / "stores" / "v1-results.sqlite", old)
    before = old.read_bytes()
    assert _main("results", "runs", "--json", "--store", str(old)) == 0
    runs = json.loads(capsys.readouterr().out)
    assert len(runs) == 3
    rid = runs[0]["run_id"]
    for cmd in (["results", "list"], ["results", "list", "--run", rid, "--json"], ["results", "export"],
                ["results", "export", "--format", "csv"]):
        assert _main(*cmd, "--store", str(old)) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "p99_tpot" in out  # the column the old store lacks is read from its summaries
    assert old.read_bytes() == before
    missing = tmp_path / "none" / "results.sqlite"
    assert _main("results", "list", "--store", str(missing)) == 0
    assert not missing.parent.exists()
    # a writing command migrates it
    run = make_run("run1", concs=(1,))
    assert _main("results", "ingest", str(run.path), "--store", str(old)) == 0
    assert old.read_bytes() != before


def test_writing_commands_refuse_a_bad_store_with_one_error(make_run, tmp_path: Path, capsys) -> None:
    run = make_run("run1", concs=(1,))
    corrupt = tmp_path / "corrupt.sqlite"
    corrupt.write_bytes(b"\x00garbage, not SQLite\n" * 200)
    export = tmp_path / "export.json"
    assert _main("results", "ingest", str(run.path), "--store", str(tmp_path / "good.sqlite")) == 0
    assert _main("results", "export", "--out", str(export), "--store", str(tmp_path / "good.sqlite")) == 0
    for cmd in (["results", "ingest", str(run.path)], ["results", "import", str(export)]):
        assert _main(*cmd, "--store", str(corrupt)) == 2
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and "not a database" in err and "Traceback" not in err, err
    assert corrupt.read_bytes() == b"\x00garbage, not SQLite\n" * 200
    # a directory given as the store is the store's one error with its fix, not a usage error without one
    for cmd in (["results", "ingest", str(run.path)], ["results", "list"]):
        assert _main(*cmd, "--store", str(tmp_path)) == 2
        err = capsys.readouterr().err
        assert err.count("error:") == 1 and "is a directory, not a SQLite file" in err and "fix:" in err, err


def _legacy_agentic_row(users: int, tput: float, **extra: object) -> dict[str, object]:
    """An agentic row as InferenceX wrote it before `conc`: the concurrency as `users`, no isl/osl (wave-2 §5.3)."""
    return {"hw": "mi355x", "users": users, "image": "lmsysorg/sglang:v0.5.6", "model": "Qwen/Qwen3.5",
            "infmax_model_prefix": "qwen3.5", "framework": "sglang", "precision": "fp8", "spec_decoding": "none",
            "scenario_type": "agentic-coding", "tp": 8, "ep": 1, "dp_attention": "false",
            "num_requests_total": 100, "num_requests_successful": 100, "tput_per_gpu": tput,
            "median_ttft": 0.3, "p90_ttft": 0.9, **extra}


def test_legacy_agentic_rows_import_at_their_users_and_compare_point_by_point(store_path: Path,
                                                                               tmp_path: Path) -> None:
    """Two legacy rows at 8 and 16 users were both conc 0: one point in list, compare and the frontier."""
    for name, scale in (("old", 1.0), ("new", 1.1)):
        rows = [_legacy_agentic_row(8, 900.0 * scale, offload_mode="off"),
                _legacy_agentic_row(16, 1500.0 * scale, offload_mode="off"),
                _legacy_agentic_row(16, 1700.0 * scale, offload_mode="on")]
        (tmp_path / f"{name}.json").write_text(json.dumps(rows))
        assert "imported 3 results" in _run("results", "import", str(tmp_path / f"{name}.json"))
    runs = sorted(r["run_id"] for r in json.loads(_run("results", "runs", "--json")))
    old, new = (next(r for r in runs if r.startswith(f"import:{name}-")) for name in ("old", "new"))
    rows = json.loads(_run("results", "list", "--run", old, "--json"))
    assert sorted((r["conc"], r["offload"]) for r in rows) == [(8, "none"), (16, "none"), (16, "on")]
    assert all(r["isl"] is None and r["osl"] is None for r in rows)
    doc = json.loads(_run("compare", old, new, "--json", "--no-history"))
    assert len(doc["matched"]) == 3 and not doc["only_a"] and not doc["only_b"]


def _table(text: str) -> list[dict[str, str]]:
    """The rows of the table a command printed (at its natural width, as into a pipe), each by its column headers."""
    lines = text.splitlines()
    headers = [c.strip() for c in next(line for line in lines if line.startswith("┃")).strip("┃").split("┃")]
    return [dict(zip(headers, (c.strip() for c in line.strip("│").split("│")), strict=True))
            for line in lines if line.startswith("│")]


def test_a_metric_prints_alike_in_list_compare_and_the_run_table(make_run, store_path: Path) -> None:
    """One stored result: `results list`, `compare` and `run`'s end table show a metric under the same header (the
    metric table's name and unit) with the same figure — throughput `2,006.9`, not `2007` beside it; TTFT in ms in
    every one, not seconds in the list."""
    import io

    from rich.console import Console

    from llmsweep.cli.run import _print_rows, outcome_rows
    from llmsweep.execute.lifecycle import JobOutcome
    from llmsweep.execute.pipeline import RunOutcome

    a, b = make_run("a", concs=(4,)), make_run("b", concs=(4,), seed=1)
    _run("results", "ingest", str(a.path))
    (point,) = json.loads(_run("results", "list", "--run", "a", "--json"))
    tput, ttft = f"{point['tput_per_gpu']:,.1f}", f"{point['p90_ttft'] * 1e3:,.1f}"
    (listed,) = _table(_run("results", "list", "--run", "a"))
    compared = {row["metric"]: row["A"] for row in _table(_run("compare", "a", str(b.path)))}
    job = point["job_id"]
    outcome = RunOutcome(run_dir=a.path, run_id="a", concurrency={job: 4}, outcomes=[JobOutcome(
        job_id=job, exp_name=job, status="valid", summary_path=str(a.path / "jobs" / job / "summary.json"))])
    out = io.StringIO()
    _print_rows(outcome_rows(outcome), console=Console(file=out, width=10_000, color_system=None, soft_wrap=False))
    (ran,) = _table(out.getvalue())
    for header, shown in (("Total tok/s/GPU", tput), ("P90 TTFT ms", ttft)):
        assert listed[header] == compared[header] == shown, (header, listed, compared)
    for header in ("Total tok/s/GPU", "Output tok/s/GPU", "P50 TTFT ms", "P50 TPOT ms"):
        assert ran[header] == compared[header], (header, ran, compared)


def test_a_latency_of_a_few_ms_keeps_its_decimals(make_run, store_path: Path, tmp_path: Path) -> None:
    """P50 TPOT 3.75 ms printed as `4 ms` in `compare`: a latency keeps the decimals it has in `run`'s table."""
    run = make_run("run1", concs=(4,))
    _run("results", "ingest", str(run.path))
    doc = json.loads(_run("results", "export", "--run", "run1"))
    del doc["results"][0]["summary"]  # a row without its summary: the row's figures are the result's
    doc["results"][0]["metrics"].update(p50_tpot=0.00375, p90_ttft=0.00375)
    for name in ("x", "y"):
        (tmp_path / f"{name}.json").write_text(json.dumps(doc))
        _run("results", "import", str(tmp_path / f"{name}.json"))
    x, y = sorted(r["run_id"] for r in json.loads(_run("results", "runs", "--json")) if r["run_id"] != "run1")
    md = tmp_path / "cmp.md"
    rows = {row["metric"]: row for row in _table(_run("compare", x, y, "--no-history", "--markdown", str(md)))}
    assert (rows["P50 TPOT ms"]["A"], rows["P50 TPOT ms"]["B"]) == ("3.75", "3.75"), rows
    assert rows["P90 TTFT ms"]["B"] == "3.8", rows
    head, _, cells = (line.split(" | ") for line in md.read_text().splitlines() if line.startswith("| "))
    assert cells[head.index("P90 TTFT ms")].startswith("3.8: "), md.read_text()


def test_a_runs_results_fit_a_120_column_terminal_with_result_ids_whole(make_run, store_path: Path, tmp_path: Path,
                                                                         monkeypatch) -> None:
    """On a 120-column terminal `results list --run RUN` cut the result id (the handle `results show` takes) to
    `rd54a43c0…` and the job id to `qwen3.5_t…`, and wrapped each row's series over 6–8 lines. Now: result ids whole,
    job ids shortened as `run`'s table shortens them (experiment name…hash), each series the title of its table."""
    import io

    from rich.console import Console
    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    import llmsweep.cli.results as results_cli
    import llmsweep.cli.tables as tables

    def job(conc: int, offload: str) -> dict[str, object]:  # ids as long as a recipe's jobs have
        doc = synthetic_job(conc=conc, spec="mtp", offload=offload)
        doc["exp-name"] = exp = f"qwen3.5_tp8_conc{conc}_kv{offload}_spec-mtp"
        doc["id"] = (f"{exp}_fp8_sglang_tp8-pp1-dcp1-pcp1-ep1-dpafalse_disagg-false_spec-mtp_conc{conc}_"
                     f"cluster-mi300x-amds_{'79501af65b18' if offload == 'none' else '69531c5971bd'}")
        return doc

    points = [SyntheticPoint(job(c, offload)) for offload in ("none", "dram") for c in (1, 4, 8, 16)]
    write_synthetic_run(tmp_path / "run1", points, run_id="run1")
    _run("results", "ingest", str(tmp_path / "run1"))
    rows = json.loads(_run("results", "list", "--run", "run1", "--json"))
    buf = io.StringIO()
    for module in (tables, results_cli):  # the terminal every table of the command prints to
        monkeypatch.setattr(module, "table_console",
                            lambda: Console(file=buf, width=120, force_terminal=True, color_system=None))
    assert _run("results", "list", "--run", "run1") == ""
    text = buf.getvalue()
    lines = text.splitlines()
    assert max(map(len, lines)) <= 120, text
    for row in rows:  # the id `results show` takes, whole on one line, with its job's experiment name beside it
        hits = [line for line in lines if row["result_id"] in line]
        assert len(hits) == 1, (row["result_id"], text)
        assert row["job_id"].split("_fp8_")[0] + "…" in hits[0], text
    shown = [line for line in lines if line.startswith("│")]
    assert len(shown) <= 2 * len(rows), text  # at most two lines a row (the job label broken after `…`)
    for offload in ("none", "dram"):  # the series, whole, once as its table's title
        series = next(p for p in rows if p["offload"] == offload)["series"]
        assert sum(f"{series} (simulated)" in line for line in lines) == 1, text
    assert "job ids shortened to their experiment name and hash" in text


def test_frontier_of_a_run_without_a_valid_point_says_there_is_none(tmp_path: Path, store_path: Path) -> None:
    """It printed an untitled empty table."""
    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    run = write_synthetic_run(tmp_path / "bad", [
        SyntheticPoint(synthetic_job(conc=c), speed=1.0, requests=20, invalid_reason="realised TP 4 differs")
        for c in (1, 4)], run_id="bad")
    text = _run("results", "frontier", str(run.path))
    why = ("Qwen3.5-397B-A17B-FP8 · mi300x · sglang · fp8 · agentic-coding [simulated]: no valid point with P90 "
           "E2E-normalised interactivity: no frontier")
    assert text.splitlines()[1:] == [why], text
    # --json: the empty frontier on stdout, and why on stderr (it printed `{"series": []}` and nothing else)
    res = CliRunner().invoke(cli, ["results", "frontier", str(run.path), "--json"], catch_exceptions=False)
    assert res.exit_code == 0 and list(json.loads(res.stdout).values()) == [[]], res.output
    assert res.stderr.splitlines() == [why], res.stderr


def test_frontier_of_a_run_that_reused_every_job_says_where_its_points_are(tmp_path: Path, store_path: Path) -> None:
    """It printed nothing but the axes' line: the run stood every job on stored results of another run."""
    import json as _json

    (tmp_path / "all-reused").mkdir()
    (tmp_path / "all-reused" / "run.json").write_text(_json.dumps({
        "run_id": "all-reused", "expected_job_ids": ["a", "b"],
        "reused": {j: {"run_id": "earlier", "job_id": j, "result_id": f"r-{j}", "verdict": "valid"} for j in "ab"}}))
    text = _run("results", "frontier", str(tmp_path / "all-reused"))
    why = ("run all-reused has no result: no frontier — its 2 jobs stood on stored results of run earlier "
           "(`run --reuse`): `llmsweep results frontier earlier`")
    assert why in text, text
    res = CliRunner().invoke(cli, ["results", "frontier", str(tmp_path / "all-reused"), "--json"],
                             catch_exceptions=False)
    assert res.exit_code == 0 and json.loads(res.stdout) == {} and why in res.stderr, res.output


def test_compare_says_only_true_notes_and_names_each_sides_source(make_run, store_path: Path, tmp_path: Path) -> None:
    """fx3 against its own rows imported as measured: the points match but are refused (sources differ), so neither
    "no point of A matches" nor "no repeats" (nothing was compared) is true; with --mix-sources the table, the
    comparison Markdown and the verdict name which side is simulated and which measured."""
    a = make_run("sim", concs=(4,), source="simulated")
    b = make_run("real", concs=(4,), source="measured", seed=1)
    refused = _run("compare", str(a.path), str(b.path), "--no-history")
    assert "sources differ" in refused and "nothing compared" in refused
    assert "no point of A matches" not in refused and "no repeats" not in refused
    mixed = _run("compare", str(a.path), str(b.path), "--no-history", "--mix-sources")
    assert "A: sim — simulated" in mixed and "B: real — measured" in mixed
    assert "A (simulated)" in mixed and "B (measured)" in mixed
    md = tmp_path / "compare.md"
    _run("compare", str(a.path), str(b.path), "--no-history", "--mix-sources", "--markdown",
         str(md))
    assert md.read_text().startswith("## llmsweep compare: `sim` (simulated) → `real` (measured)")
    verdict = _run("compare", "--baseline", str(a.path), str(b.path), "--no-history",
                   "--mix-sources", "--format", "markdown")
    assert verdict.startswith("## llmsweep verdict: `real` (measured) against baseline `sim` (simulated)")
    doc = json.loads(_run("compare", str(a.path), str(b.path), "--no-history", "--mix-sources",
                          "--json"))
    assert doc["sides"] == {"a": "simulated", "b": "measured"}
    same = _run("compare", str(a.path), str(a.path), "--no-history")
    assert "A: sim" not in same  # one kind of figure on both sides: nothing to tell apart


def test_no_repeats_is_not_said_of_a_run_with_repeats_that_matched_nothing(make_run) -> None:
    from llmsweep.results.compare import compare_points
    from llmsweep.results.point import points_from_run

    a = points_from_run(make_run("a", concs=(4,)))
    again = [*a, *(dataclasses.replace(p, job_id=f"{p.job_id}-repeat2", result_id=f"{p.result_id}-2") for p in a)]
    other = points_from_run(make_run("q", concs=(12,), image="lmsysorg/sglang-rocm:v0.5.17"))
    comp = compare_points(again, other)
    assert comp.matched == () and not any("no repeats" in n for n in comp.notes)
    single = compare_points(a, points_from_run(make_run("b", concs=(4,), seed=2)))
    assert any("no repeats" in n for n in single.notes)  # compared, and truly no repeat


def test_show_says_a_simulated_speculative_points_acceptance_is_the_simulators_estimate(make_run,
                                                                                        store_path: Path) -> None:
    """A speculative job that measures real acceptance ran on the simulator at its estimate: `results show` labels
    the figure so, with the basis the simulator wrote (as predict's `AL est.` and the dashboard do); one pinned by
    the recipe is said to be pinned."""
    from llmsweep.engines.sim import AcceptanceEstimate
    from llmsweep.metrics.model import AcceptanceProvenance, Summary

    estimate = AcceptanceEstimate(3.39, "estimate", "golden curve qwen3.5_mtp (thinking off, K=3) for Qwen/Qwen3.5 "
                                  "mtp; the job itself measures real acceptance")
    pinned = AcceptanceEstimate(2.5, "pinned", "the job's pinned acceptance length")
    run = make_run("run1", concs=(1, 4))
    for art, said in zip(run.jobs, (estimate, pinned), strict=True):
        path = art.dir / "summary.json"
        summary = Summary.load(path)
        summary.provenance.acceptance = AcceptanceProvenance.model_validate(said.provenance()["acceptance"])
        summary.write(path)
    _run("results", "ingest", str(run.path))
    rows = json.loads(_run("results", "list", "--run", "run1", "--json"))
    estimated, shown_pinned = ([line.strip() for line in _run("results", "show", r["result_id"]).splitlines()]
                               for r in rows)
    assert ("acceptance length  3.39 (estimate: golden curve qwen3.5_mtp (thinking off, K=3) for Qwen/Qwen3.5 mtp; "
            "the job itself measures real acceptance)") in estimated, estimated
    assert "acceptance length  2.5 (pinned: the job's pinned acceptance length)" in shown_pinned, shown_pinned
    assert not any(line.startswith("catalog estimates") for line in estimated)  # none recorded: none said


def test_show_names_the_catalog_estimates_a_simulated_point_was_modelled_with(make_run, store_path: Path) -> None:
    from llmsweep.metrics.model import Summary

    run = make_run("run1", concs=(1,))
    path = run.jobs[0].dir / "summary.json"
    summary = Summary.load(path)
    summary.provenance.estimated = ["glm-5.2 layers", "b300 hbm_tbps"]
    summary.write(path)
    _run("results", "ingest", str(run.path))
    (row,) = json.loads(_run("results", "list", "--run", "run1", "--json"))
    shown = [line.strip() for line in _run("results", "show", row["result_id"]).splitlines()]
    said = " ".join(shown)  # (the line may wrap at the terminal's width)
    assert ("catalog estimates  glm-5.2 layers, b300 hbm_tbps (`llmsweep catalog --json models|hardware` says how "
            "each was estimated)") in said, shown
    stored = json.loads(_run("results", "show", row["result_id"], "--json"))
    assert stored["summary"]["provenance"]["estimated"] == ["glm-5.2 layers", "b300 hbm_tbps"]


def test_one_unreadable_earlier_run_leaves_the_history_not_the_comparison(make_run, store_path: Path,
                                                                          capsys) -> None:
    """A damaged row of an earlier stored run (another point's, even) stopped `compare A B` of two run folders with
    exit 2: the history read every stored result at once. It is now that run left out of the history, said on stderr
    with the row and the fix; a compared run whose own rows do not read is still the error it was."""
    import sqlite3

    earlier = make_run("earlier", concs=(1, 4), requests=40)
    meta = json.loads((earlier.path / "run.json").read_text())
    meta["started"] = "2026-11-01T00:00:00Z"  # before A and B
    (earlier.path / "run.json").write_text(json.dumps(meta))
    a, b = make_run("a", concs=(4,), requests=40), make_run("b", concs=(4,), requests=40, seed=3)
    assert _main("results", "ingest", str(earlier.path), str(b.path)) == 0
    with sqlite3.connect(store_path) as db:
        db.execute("UPDATE results SET summary = '{bad' WHERE run_id = 'earlier' AND job_id LIKE '%conc1%'")
    capsys.readouterr()
    # another point's damaged row is not even read: the history holds A's points only
    assert _main("compare", str(a.path), str(b.path), "--json") == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)["matched"]) == 1 and "history leaves out" not in err
    with sqlite3.connect(store_path) as db:
        db.execute("UPDATE results SET summary = '{bad' WHERE run_id = 'earlier' AND job_id LIKE '%conc4%'")
    assert _main("compare", str(a.path), str(b.path), "--json") == 0
    out, err = capsys.readouterr()
    assert len(json.loads(out)["matched"]) == 1
    assert "warning: history leaves out run earlier:" in err and "results.summary" in err
    assert "results ingest" in err and "--force" in err  # the fix
    # the compared runs themselves must read
    with sqlite3.connect(store_path) as db:
        db.execute("UPDATE results SET summary = '{bad' WHERE run_id = 'b'")
    assert _main("compare", str(a.path), "b") == 2
    assert "error:" in capsys.readouterr().err


def test_a_frontier_missing_its_north_star_metric_names_that_metric(store_path: Path, tmp_path: Path) -> None:
    """Imported agentic rows have a P90 TTFT and a concurrency but no P90 E2E-normalised interactivity, by which the
    north-star rule picks an agentic frontier on every axis: `--x conc` said `no valid point with Concurrency`."""
    rows = [_legacy_agentic_row(8, 900.0, offload_mode="off"), _legacy_agentic_row(16, 1500.0, offload_mode="off")]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    _run("results", "import", str(tmp_path / "rows.json"))
    (run,) = [r["run_id"] for r in json.loads(_run("results", "runs", "--json"))]
    for axis in ("conc", "p90_ttft"):
        text = _run("results", "frontier", run, "--x", axis)
        assert ("agentic-coding: no valid point with P90 E2E-normalised interactivity, which the north-star rule "
                "ranks an agentic series by on every x axis: no frontier") in text, text
    assert "no valid point with P90 E2E-normalised interactivity: no frontier" in _run("results", "frontier", run)


def test_a_run_without_a_result_is_said_not_blamed_on_matching(make_run, store_path: Path) -> None:
    """A baseline whose jobs all failed: `compare` said `no point of A matches a point of B … see --ignore`, and the
    verdict `0 regression(s) … over 0 matched point(s)`, as if the identities differed."""
    empty, run = make_run("empty", concs=()), make_run("run1", concs=(1, 4))
    text = _run("compare", str(empty.path), str(run.path), "--no-history")
    assert "A (empty) has no result: nothing of it to compare" in text and "see --ignore" not in text, text
    md = _run("compare", "--baseline", str(run.path), str(empty.path), "--format", "markdown", "--no-history")
    assert "> B (empty) has no result: nothing of it to compare" in md, md
    doc = json.loads(_run("compare", str(empty.path), str(empty.path), "--json", "--no-history"))
    assert doc["notes"] == ["A (empty) has no result: nothing of it to compare",
                            "B (empty) has no result: nothing of it to compare"]
    # two runs whose points differ still say so, with the hint
    other = make_run("other", concs=(8,), seed=2)
    assert "no point of A matches a point of B" in _run("compare", str(run.path), str(other.path), "--no-history")


def test_smoke_points_stand_on_no_frontier_and_a_series_of_them_says_why(make_run, store_path: Path) -> None:
    """A smoke point (sound, but a window too short to publish) stood on a frontier, and a series of nothing else had
    one drawn through its smoke points. A frontier is drawn from valid points only: a smoke point beside valid ones
    is left off, and a series whose points are all smoke has none and says why (its table and `--json`'s stderr)."""
    run = make_run("short", concs=(1, 4), requests=40)
    smoke = ["smoke run: profile window 120 s is shorter than 900 s"]
    front = _table(_run("results", "frontier", str(run.path)))
    assert len(front) == 2 and "verdict" not in front[0], front  # all valid: both on it

    def set_smoke(summary: Path) -> None:
        doc = json.loads(summary.read_text())
        doc["validity"]["verdict"], doc["validity"]["reasons"] = "smoke", smoke
        summary.write_text(json.dumps(doc))

    conc4 = next(art for art in run.jobs if "_conc4_" in art.job_id)
    set_smoke(conc4.dir / "summary.json")
    rows = _table(_run("results", "frontier", str(run.path)))
    assert [r["conc"] for r in rows] == ["1"], rows  # conc 4 out-ran conc 1's throughput: it was on the frontier
    for art in run.jobs:
        set_smoke(art.dir / "summary.json")
    why = ("Qwen3.5-397B-A17B-FP8 · mi300x · sglang · fp8 · agentic-coding [simulated]: none of its 2 points is valid "
           "(2 smoke); a frontier is drawn from valid points only: no frontier")
    text = _run("results", "frontier", str(run.path))
    assert text.splitlines()[1:] == [why], text
    res = CliRunner().invoke(cli, ["results", "frontier", str(run.path), "--json"], catch_exceptions=False)
    assert res.exit_code == 0 and list(json.loads(res.stdout).values()) == [[]], res.output
    assert res.stderr.splitlines() == [why], res.stderr


def test_frontier_and_list_keep_two_configurations_of_one_point_apart(tmp_path: Path, store_path: Path) -> None:
    """mixk (conc 8 under recipe keys dsr1-mtp3 and dsr1-mtp1): `results frontier` had one series whose frontier
    chose between the two configurations, `results list` one table; each is two now, named by recipe key."""
    from support.synthetic import write_two_configurations_run

    run = write_two_configurations_run(tmp_path / "mixk")
    fronts = json.loads(_run("results", "frontier", str(run.path), "--x", "conc", "--json"))
    assert len(fronts) == 2, fronts
    for rows in fronts.values():
        assert len({r["job_id"].rsplit("-", 1)[0] for r in rows}) == 1, rows
    table = _run("results", "frontier", str(run.path), "--x", "conc")
    assert table.count("recipe key dsr1-mtp3") == 1 and table.count("recipe key dsr1-mtp1") == 1, table
    _run("results", "ingest", str(run.path))
    listed = _run("results", "list", "--run", "mixk")
    assert listed.count("recipe key dsr1-mtp3") == 1 and listed.count("recipe key dsr1-mtp1") == 1, listed
    # and the rows of `--json` and the CSV export name each row's series as the table does
    rows = json.loads(_run("results", "list", "--run", "mixk", "--json"))
    assert len({r["series"] for r in rows}) == 2 and all("recipe key dsr1-mtp" in r["series"] for r in rows), rows
    csv_text = _run("results", "export", "--run", "mixk", "--format", "csv")
    assert csv_text.count("recipe key dsr1-mtp3") == 2 and csv_text.count("recipe key dsr1-mtp1") == 2, csv_text


def test_frontier_json_says_what_its_table_says_series_label_and_axes_with_units(tmp_path: Path,
                                                                                  store_path: Path) -> None:
    """`results frontier --json` had no series label (the table's title, `AL 3.39 est.` included) and gave `--x
    p90_ttft` in s where the table says ms, with no unit: each point now says its series and its axes' keys and
    units, as the table's title and header say them (the title as the dashboard labels the series)."""
    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    estimate = {"acceptance": {"value": 3.39, "source": "estimate", "basis": "typical"}}
    run = write_synthetic_run(tmp_path / "spec", [SyntheticPoint(synthetic_job(conc=c, spec="mtp"), requests=40,
                                                                 provenance=estimate) for c in (1, 4)],
                              run_id="spec-run")
    table = _run("results", "frontier", str(run.path), "--x", "p90_ttft")
    doc = json.loads(_run("results", "frontier", str(run.path), "--x", "p90_ttft", "--json"))
    (points,) = doc.values()
    assert points and all(p["series"].endswith(" · AL 3.39 est.") for p in points), points
    flat = " ".join(table.split())
    assert f"{points[0]['series']}: frontier" in flat, table
    assert "x: P90 TTFT (ms), y: Throughput per GPU (tok/s/GPU)" in table
    for p in points:
        assert (p["x_axis"], p["x_label"], p["x_unit"]) == ("p90_ttft", "P90 TTFT", "s")
        assert (p["y_axis"], p["y_unit"]) == ("tput_per_gpu", "tok/s/GPU")
        row = next(line for line in table.splitlines() if p["result_id"] in line)
        assert f" {p['x'] * 1e3:,.1f} " in row, (p, row)  # the same value, the table in ms and the JSON in s


def test_results_list_json_rows_carry_the_topology_the_table_shows(make_run, store_path: Path) -> None:
    """`results list` showed `P1x(tp4 ep1) D1x(tp8 ep8 dpa)` in its topology column, and its --json had no topology
    (a disaggregated row's `tp` is null): each row now carries the table's topology, aggregated or not."""
    from llmsweep.results.identity import identity_from_job
    from llmsweep.results.point import points_from_run
    from llmsweep.results.store import Store

    agg = points_from_run(make_run("pd-run", concs=(8,), tp=4, ep=2))[0]
    job = {**agg.job, "multinode": True, "disagg": True, "gpus": 12,
           "prefill": {"num-worker": 1, "tp": 4, "ep": 1, "dp-attn": False},
           "decode": {"num-worker": 1, "tp": 8, "ep": 8, "dp-attn": True}}
    for key in ("tp", "ep", "pp", "dcp-size", "pcp-size", "dp-attn"):
        job.pop(key)
    disagg = dataclasses.replace(agg, job=job, identity=identity_from_job(job), gpus=12, job_id=agg.job_id + "-pd",
                                 result_id=agg.result_id + "-pd")
    with Store(store_path) as store:
        store.ingest_points("pd-run", "llmsweep", [agg, disagg], {})
    rows = {r["result_id"]: r for r in json.loads(_run("results", "list", "--run", "pd-run", "--json"))}
    assert rows[agg.result_id]["topology"] == "tp4 ep2"
    assert rows[disagg.result_id]["topology"] == "P1x(tp4 ep1) D1x(tp8 ep8 dpa)"
    assert rows[disagg.result_id]["tp"] is None
    table = _run("results", "list", "--run", "pd-run")
    for rid, row in rows.items():
        line = next(line for line in table.splitlines() if f" {rid} " in line)
        assert row["topology"] in line, (row["topology"], line)


def test_list_titles_a_series_as_frontier_and_the_dashboard_do(tmp_path: Path, store_path: Path) -> None:
    """`results list` titled a series whose acceptance length the simulator estimated without `AL 3.39 est.`, which
    `results frontier` and the dashboard say of it: the three name a series alike (`results.frontier.series_labels`),
    the table's title, `--json`'s `series` and the CSV export's column too (the listing's source in a column of its
    own)."""
    import csv
    import io

    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    from llmsweep.report import write_report

    estimate = {"acceptance": {"value": 3.39, "source": "estimate", "basis": "typical"}}
    run = write_synthetic_run(tmp_path / "spec", [SyntheticPoint(synthetic_job(conc=c, spec="mtp"), requests=40,
                                                                 provenance=estimate) for c in (1, 4)],
                              run_id="spec-run")
    _run("results", "ingest", str(run.path))
    (front,) = json.loads(_run("results", "frontier", "spec-run", "--json")).values()
    (label,) = {p["series"] for p in front}
    assert label.endswith(" · AL 3.39 est."), label
    rows = json.loads(_run("results", "list", "--run", "spec-run", "--json"))
    # the listing's series leaves the source to its column (the title says it after the series, in brackets)
    listed = label.replace(" [simulated]", "")
    assert listed != label and len(rows) == 2 and {r["series"] for r in rows} == {listed}, rows
    table = " ".join(_run("results", "list", "--run", "spec-run").split())
    assert f"{listed} (simulated)" in table, table
    exported = {row["series"] for row in csv.DictReader(io.StringIO(_run("results", "export", "--format", "csv",
                                                                          "--run", "spec-run")))}
    assert exported == {listed}, exported
    page = json.loads(write_report(run, tmp_path / "report", png=False).data.read_text())
    assert [s["label"] for s in page["series"]] == [label]


def test_the_runs_fit_an_80_column_terminal_with_run_ids_and_dates_whole(make_run, store_path: Path,
                                                                         monkeypatch) -> None:
    """`results runs` (and `results list` without --run) in an 80-column terminal folded each run id — the handle
    `--run` takes — over three lines (`run-20261` / `206T17262` / `4Z-499960`) and each date over four. Now laid out
    as every table is: the run id and the dates whole, one line a row, the columns that do not fit in a continuation
    table that repeats the run id."""
    import io

    from rich.console import Console

    import llmsweep.cli.results as results_cli

    for name in ("run-20261206T172624Z-499960", "run-20261206T172653Z-afcd39"):
        _run("results", "ingest", str(make_run(name, concs=(1, 4)).path))
    runs = json.loads(_run("results", "runs", "--json"))
    buf = io.StringIO()
    monkeypatch.setattr(results_cli, "table_console",
                        lambda: Console(file=buf, width=80, force_terminal=True, color_system=None))
    assert _run("results", "runs") == ""
    lines = buf.getvalue().splitlines()
    assert max(map(len, lines)) <= 80, buf.getvalue()
    parts = sum(line.startswith("┏") for line in lines)
    keyed = [line for line in lines if line.startswith("│ run-")]  # a row's first line (a path may wrap below it)
    assert parts >= 2 and len(keyed) == parts * len(runs), buf.getvalue()
    shown = [line for line in lines if line.startswith("│")]
    for r in runs:
        mine = [line for line in keyed if line.startswith(f"│ {r['run_id']} ")]
        assert len(mine) == parts, buf.getvalue()  # the run id whole, once in every part
        mine = [line for line in shown if r["run_id"] in line]
        for value in (r["started"], r["ingested_at"]):
            assert value and sum(value in line for line in mine) == 1, (value, buf.getvalue())


def test_list_takes_a_run_folder_as_compare_and_frontier_do(make_run, store_path: Path) -> None:
    """`results list --run runs/seed` said `error: no run 'runs/seed' in …/store.sqlite` though `compare`, `report`
    and `results frontier` take a run folder: it lists the folder's results as the stored run's are listed — a folder
    never stored too —, and a name that is neither says both forms it takes."""
    stored, loose = make_run("run1", concs=(4, 1)), make_run("loose", concs=(8,))
    _run("results", "ingest", str(stored.path))
    by_folder = json.loads(_run("results", "list", "--run", str(stored.path), "--json"))
    assert by_folder == json.loads(_run("results", "list", "--run", "run1", "--json"))
    assert [r["conc"] for r in by_folder] == [1, 4]
    assert _run("results", "list", "--run", str(stored.path)) == _run("results", "list", "--run", "run1")
    assert [(r["run_id"], r["conc"]) for r in json.loads(_run("results", "list", "--run", str(loose.path),
                                                              "--json"))] == [("loose", 8)]
    res = CliRunner().invoke(cli, ["results", "list", "--run", str(stored.path.parent / "gone")])
    assert isinstance(res.exception, ResultInputError) and res.exception.exit_code == 2, res.output
    assert "is neither a run directory nor a run id in the store" in str(res.exception)
    assert "pass the folder `llmsweep run` wrote, or a run id" in str(res.exception.fix)


def test_show_marks_a_power_figure_the_simulator_modelled_as_the_dashboard_does(make_run, store_path: Path) -> None:
    """`results show` printed a simulated point's tokens per joule and W per GPU as bare numbers, where the dashboard
    marks them `(modelled)` (the power block's `source`): a reader took the simulator's power model for a measurement.
    Each power figure of the metric table is marked after its value in the dashboard's words, a measured one not, and
    a figure that is not a power sample's (throughput) never."""
    from llmsweep.metrics.model import PowerBlock, Summary
    from llmsweep.metrics.registry import HOT_BY_NAME

    mark = "(modelled)"  # the dashboard's words, which its key explains (`metrics.registry.MODELLED_MARK`)
    figures = {"tokens_per_joule": 2.5, "joules_per_output_token": 0.75, "avg_power_w": 400.0}
    shown: dict[str, list[str]] = {}
    for source in ("simulated", "measured"):
        run = make_run(f"run-{source}", concs=(1,))
        path = run.jobs[0].dir / "summary.json"
        summary = Summary.load(path)
        summary.power = PowerBlock(source=source, backend="sim" if source == "simulated" else "nvml", power_valid=True,
                                   **figures)
        summary.write(path)
        _run("results", "ingest", str(run.path))
        (row,) = json.loads(_run("results", "list", "--run", f"run-{source}", "--json"))
        shown[source] = [line.strip() for line in _run("results", "show", row["result_id"]).splitlines()]
    power = [c for c in HOT_BY_NAME.values() if c.metric.power]
    assert {c.name for c in power} == set(figures)
    for c in power:
        line = f"{c.header}  {c.cell(figures[c.name])}"
        assert f"{line} {mark}" in shown["simulated"], (line, shown["simulated"])
        assert line in shown["measured"], (line, shown["measured"])
    assert not [line for line in shown["simulated"] if line.startswith("Total tok/s/GPU") and mark in line]


def test_show_says_the_assumed_price_a_cost_was_figured_at(make_run, store_path: Path) -> None:
    """A stored result keeps the cost of the price its run assumed (a reused one too, whatever the catalog says now),
    yet `results show` printed the cost per million output tokens with no word of the price: a $1.00 contract's cost
    read as the catalog's $2.20 one's. The price, whose it is and when, follows the cost."""
    from llmsweep.metrics.model import PowerBlock, PowerCost, Summary

    run = make_run("run-priced", concs=(1,))
    path = run.jobs[0].dir / "summary.json"
    summary = Summary.load(path)
    summary.power = PowerBlock(source=None, reasons=["not_sampled"], cost=PowerCost(
        sku="mi300x", usd_per_gpu_hour=1.0, source="our contract", date="2026-12-07", usd_per_mtok_output=6.5))
    summary.write(path)
    _run("results", "ingest", str(run.path))
    (row,) = json.loads(_run("results", "list", "--run", "run-priced", "--json"))
    shown = [line.strip() for line in _run("results", "show", row["result_id"]).splitlines()]
    at = shown.index("Assumed output cost $/Mtok  6.50")
    assert shown[at + 1] == "assumed price  $1.00/GPU-h for mi300x (our contract, 2026-12-07)", shown


def test_export_out_says_what_a_file_it_refuses_holds(make_run, store_path: Path, tmp_path: Path, capsys) -> None:
    """`results export --out notes.txt` (a file of the user's, not an export) was refused as "already holds an
    export". The rule stands (a file that is not empty is refused unless --force; an empty one is fine), and the words
    say what it holds: an export of ours by its kind, else something that is not an llmsweep export."""
    from support.cli import run_main

    _run("results", "ingest", str(make_run("run1", concs=(1,)).path))
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\n")
    code, out, err = run_main(capsys, "results", "export", "--out", notes)
    assert code == 2 and out == "" and notes.read_text() == "my notes\n", err
    assert f"--out {notes} already holds something that is not an llmsweep export (9 bytes)" in err, err
    assert "fix: pass a new path to --out, or --force to replace it" in err, err
    for fmt, held in (("json", "an llmsweep export (JSON)"), ("csv", "an llmsweep export (CSV)"),
                      ("inferencex", "a JSON list of rows (the shape of an inferencex export)")):
        out_file = tmp_path / f"export.{fmt}"
        out_file.write_text("")  # an empty file is fine
        assert run_main(capsys, "results", "export", "--format", fmt, "--out", out_file)[0] == 0
        code, _, err = run_main(capsys, "results", "export", "--out", out_file)
        assert code == 2 and f"--out {out_file} already holds {held}; nothing was written" in err, err
    code, _, err = run_main(capsys, "results", "export", "--out", notes, "--force")
    assert code == 0 and json.loads(notes.read_text())["format"] == "llmsweep-results", err
    # the file is replaced, which the notice says of the file (it said "replacing … in notes.txt")
    assert f"--force: replacing {notes}, which holds something that is not an llmsweep export" in err, err


def test_show_refuses_a_job_id_several_runs_hold_naming_each(make_run, store_path: Path, tmp_path: Path,
                                                             capsys) -> None:
    """`results show JOB` where the run and an import of its export both hold the job showed the newest copy (the
    `import:…` run's) without a word. A job id several stored results hold is refused (exit 2) naming each result id
    and run, with the forms that pick one; a result id or RUN/JOB shows that one."""
    from support.cli import run_main

    run = make_run("run1", concs=(4,))
    _run("results", "ingest", str(run.path))
    export = tmp_path / "export.json"
    _run("results", "export", "--out", str(export))
    _run("results", "import", str(export))
    rows = json.loads(_run("results", "list", "--all", "--json"))
    own = next(r for r in rows if r["run_id"] == "run1")
    copy = next(r for r in rows if r["run_id"] != "run1")
    assert copy["run_id"].startswith("import:") and copy["job_id"] == own["job_id"]
    code, out, err = run_main(capsys, "results", "show", own["job_id"])
    assert code == 2 and out == "", (out, err)
    assert (f"matches 2 stored results of 2 runs: {own['result_id']} (run run1), {copy['result_id']} "
            f"(run {copy['run_id']}); nothing shown") in err, err
    assert f"`llmsweep results show {own['result_id']}`" in err and f"`run1/{own['job_id']}`" in err, err
    for ref, want in ((own["result_id"], own), (copy["result_id"], copy), (f"run1/{own['job_id']}", own)):
        shown = json.loads(_run("results", "show", ref, "--json"))
        assert (shown["result_id"], shown["run_id"]) == (want["result_id"], want["run_id"]), ref


def test_show_takes_a_runs_job_folder_as_its_stored_result(make_run, store_path: Path) -> None:
    """`results show RUN_DIR/jobs/JOB` (or RUN_DIR/JOB) said `no stored result matches … or ingest the run first`
    although the run was stored: only RUN_ID/JOB worked. A job folder is that job's stored result; a run folder, or a
    job of a run the store does not hold, is refused saying what to pass."""
    run = make_run("run1", concs=(1, 4))
    job = sorted((run.path / "jobs").iterdir())[0]
    res = CliRunner().invoke(cli, ["results", "show", str(job)])
    assert isinstance(res.exception, ResultInputError)  # bad input: exit 2
    assert f"ingest the run first (`llmsweep results ingest {run.path}`)" in str(res.exception.fix)
    _run("results", "ingest", str(run.path))
    by_id = json.loads(_run("results", "show", f"run1/{job.name}", "--json"))
    for ref in (job, run.path / job.name):
        shown = json.loads(_run("results", "show", str(ref), "--json"))
        assert (shown["result_id"], shown["run_id"], shown["job_id"]) == (by_id["result_id"], "run1", job.name)
    res = CliRunner().invoke(cli, ["results", "show", str(run.path)])
    assert isinstance(res.exception, ResultInputError) and "not one stored result" in str(res.exception)
    assert f"--run {run.path}" in str(res.exception.fix)


def test_show_prints_each_reason_as_a_line_of_text(tmp_path: Path, store_path: Path) -> None:
    """`results show` printed a result's reasons as a Python list (`reasons  ['error ratio …', '…']`)."""
    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    run = write_synthetic_run(tmp_path / "bad", [SyntheticPoint(synthetic_job(conc=4), error_rate=0.5,
                                                                invalid_reason="read-back: tp 4, not 8")],
                              run_id="bad")
    _run("results", "ingest", str(run.path))
    (row,) = json.loads(_run("results", "list", "--run", "bad", "--json"))
    reasons = row["reasons"]
    assert len(reasons) >= 2 and "read-back: tp 4, not 8" in reasons
    lines = _run("results", "show", row["result_id"]).splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("reasons "))
    width = lines[at].index("reasons") + len("reasons  ")
    assert [line[width:] for line in lines[at:at + len(reasons)]] == reasons, lines
    assert all(not line[:width].strip() for line in lines[at + 1:at + len(reasons)])
    assert "['" not in "\n".join(lines)
