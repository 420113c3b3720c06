"""`results import` of llmsweep's own exports, as a user runs it: what it stores reads back (a NaN in an imported
summary had made the whole store unreadable), a figure no measurement has is refused in our JSON export's summaries
as in InferenceX rows, an `inferencex` export imports back with every figure it carries, and a JSON export keeps its
run's start time."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_main

from llmsweep.errors import ResultInputError
from llmsweep.results.interchange import export_points, import_into, read_import
from llmsweep.results.point import points_from_run
from llmsweep.results.store import Store

REPO = Path(__file__).resolve().parents[3]
MEASURED_RUNS = (REPO / "examples/results/h200-vllm-0.26.0/llama", REPO / "examples/results/h100-vllm-0.26.0/llama-b")
"""Committed measured runs: vLLM on an H200 (no power samples) and on an H100 (power measured, with its cost)."""


def _export(make_run: Any, **kwargs: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(export_points(points_from_run(make_run("r", concs=(2, 4), **kwargs)), "json"))
    return doc


def _import(capsys: pytest.CaptureFixture[str], tmp_path: Path, doc: Any, store: Path,
            name: str = "in.json") -> tuple[int, str, str]:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return run_main(capsys, "results", "import", path, "--store", store)


def _reads_back(capsys: pytest.CaptureFixture[str], store: Path) -> None:
    for command in (("list", "--all"), ("runs",), ("export",)):
        code, _, err = run_main(capsys, "results", *command, "--store", store)
        assert code == 0, (command, err)


def test_a_nan_in_an_imported_summary_is_read_as_none_or_refused_and_the_store_reads_back(
        make_run, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A NaN in our JSON export's summary had been imported (exit 0) into a form the store could not read: `results
    list --all` then failed for every run of the store. A figure the summary may lack is read as none (and exports
    again as null); one it must hold is refused, naming the file, row and field, and nothing is stored."""
    store = tmp_path / "s.sqlite"
    other = _export(make_run)
    assert _import(capsys, tmp_path, other, store, "other.json")[0] == 0  # another run the store holds
    doc = json.loads(export_points(points_from_run(make_run("nan", concs=(2, 4))), "json"))
    assert doc["results"][0]["summary"]["server_metrics"]["kv_cache"]["gpu_usage_max"] is not None
    doc["results"][0]["summary"]["server_metrics"]["kv_cache"]["gpu_usage_max"] = float("nan")
    code, out, err = _import(capsys, tmp_path, doc, store)
    assert code == 0 and "imported 2 results" in out, err
    _reads_back(capsys, store)
    code, out, _ = run_main(capsys, "results", "export", "--run", "nan", "--store", store)
    assert code == 0
    row = json.loads(out)["results"][0]
    assert row["summary"]["server_metrics"]["kv_cache"]["gpu_usage_max"] is None
    assert row["metrics"]["gpu_kv_usage_max"] is None and row["metrics"]["p90_ttft"] is not None
    # a figure the summary must hold: refused, naming the file, row and field
    bad = json.loads(export_points(points_from_run(make_run("bad", concs=(2,))), "json"))
    bad["results"][0]["summary"]["throughput"]["total_tps"] = float("nan")
    code, _, err = _import(capsys, tmp_path, bad, store, "bad.json")
    assert code == 2, err
    assert "bad.json: result row 0 (" in err and "`summary.throughput.total_tps` is nan, not a number" in err, err
    _reads_back(capsys, store)
    with Store(store, readonly=True) as held:
        assert not held.has_run("bad")


def _numbers(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _numbers(value, (*path, key))
    elif isinstance(node, list):
        for k, value in enumerate(node):
            yield from _numbers(value, (*path, k))
    elif isinstance(node, float):
        yield path


def test_whatever_figure_of_a_summary_is_not_a_number_the_import_stores_only_what_the_store_reads(
        make_run, tmp_path: Path) -> None:
    """Every float of an exported summary in turn set to NaN or Infinity: the import refuses the file (bad input) or
    stores the run in a form the store reads back, whole."""
    doc = _export(make_run)
    floats = list(_numbers(doc["results"][0]["summary"]))
    assert len(floats) > 50
    path = tmp_path / "in.json"
    for n, where in enumerate(floats):
        damaged = copy.deepcopy(doc)
        node = damaged["results"][0]["summary"]
        for key in where[:-1]:
            node = node[key]
        node[where[-1]] = float("nan") if n % 2 else float("inf")
        path.write_text(json.dumps(damaged))
        try:
            parsed = read_import(path)
        except ResultInputError as exc:
            assert "`summary." in exc.message, exc.message
            continue
        with Store(tmp_path / f"s{n}.sqlite") as store:
            import_into(store, path, parsed)
            assert len(store.results("r")) == 2, where


@pytest.mark.parametrize(("edit", "message"), [
    (lambda r: r["summary"]["throughput"]["per_gpu"].update(total_tps=-5),
     r"`summary.throughput.per_gpu.total_tps` is -5.0, not a figure of 0 or more"),
    (lambda r: r["summary"]["latency"]["ttft"].update(p90=-0.5), r"`summary.latency.ttft.p90` is -0.5, not a figure"),
    (lambda r: r["summary"]["server_metrics"]["cache"].update(gpu_hit_rate=7.0),
     r"`summary.server_metrics.cache.gpu_hit_rate` is 7.0, not a figure from 0 to 1"),
    (lambda r: r["summary"]["requests"].update(successful=1000000),
     r"`summary.requests.successful` is 1000000, not at most `summary.requests.total` \(\d+\)"),
    (lambda r: r["summary"]["requests"].update(failed=-2), r"`summary.requests.failed` is -2, not a count"),
    (lambda r: r["identity"].update(conc=0), r"`identity.conc` is 0, not a whole number of at least 1"),
    (lambda r: r["identity"].update(tp=2.5), r"`identity.tp` is 2.5, not a whole number"),
    (lambda r: r["identity"].update(ep=-1), r"`identity.ep` is -1, not a whole number of at least 0"),
    (lambda r: r["identity"].update(hardware=7), r"`identity.hardware` is 7, not a text"),
    (lambda r: r.update(gpus=0), r"`gpus` is 0, not a whole number of at least 1"),
])
def test_a_row_with_its_summary_holding_a_figure_no_measurement_has_is_refused_naming_it(
        make_run, tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: Callable[[dict[str, Any]], None],
        message: str) -> None:
    """The summary-carrying rows of our JSON export had not been checked at all (a negative throughput, a TTFT of
    -0.5 s, a hit rate of 700 %, a million successful requests of 20, a conc-0 point: each imported, exit 0): they are
    judged by the one judge InferenceX rows are, naming the file, row and field."""
    doc = _export(make_run)
    doc["results"][0]["summary"]["server_metrics"]["cache"] = {"gpu_hit_rate": 0.5}
    assert _import(capsys, tmp_path, doc, tmp_path / "ok.sqlite", "ok.json")[0] == 0
    edit(doc["results"][0])
    code, out, err = _import(capsys, tmp_path, doc, tmp_path / "s.sqlite")
    assert code == 2 and not out, out
    assert "in.json: result row 0 (" in err, err
    assert re.search(message, err), err
    assert not (tmp_path / "s.sqlite").exists()


def test_a_summary_field_that_is_not_what_a_summary_holds_names_the_file_row_and_field_not_pydantic(
        make_run, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`requests.successful = 3.5` had printed pydantic's error with its errors.pydantic.dev link and told the user to
    re-run `llmsweep summarize` on a job folder the file's reader does not have."""
    doc = _export(make_run)
    doc["results"][1]["summary"]["requests"]["successful"] = 3.5
    code, _, err = _import(capsys, tmp_path, doc, tmp_path / "s.sqlite", "frac.json")
    assert code == 2
    assert "frac.json: result row 1 (" in err and "`summary.requests.successful` is 3.5" in err, err
    assert "pydantic" not in err and "summarize" not in err and "validation error" not in err, err
    assert "drop the row" in err, err


def test_an_inferencex_row_holding_our_summarys_schema_version_is_refused_not_stored_unreadable(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The store tells our summaries from imported rows by `schema_version`: a published row holding one had been
    stored, and the store then could not read it (nor list any run)."""
    row = {"hw": "b200", "conc": 64, "image": "vllm/vllm-openai:v0.11.0", "model": "deepseek-ai/DeepSeek-R1",
           "framework": "vllm", "precision": "fp4", "isl": 1024, "osl": 1024, "tp": 4, "tput_per_gpu": 5000.0,
           "num_requests_total": 640, "num_requests_successful": 640, "schema_version": 1}
    code, _, err = _import(capsys, tmp_path, [row], tmp_path / "s.sqlite")
    assert code == 2 and "row 0 (row0000): `schema_version` is 1" in err, err
    del row["schema_version"]
    assert _import(capsys, tmp_path, [row], tmp_path / "s.sqlite")[0] == 0
    _reads_back(capsys, tmp_path / "s.sqlite")


def test_an_eval_without_a_concurrency_imports_again_from_its_json_export(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An eval-only result has no throughput point: one imported from eval rows that name no concurrency is stored at
    conc 0, and its JSON export imports again (the concurrency a throughput point needs is not asked of it)."""
    rows = [{"hw": "h200", "model": "m", "framework": "vllm", "precision": "fp8", "tp": 1, "task": "gsm8k",
             "score": 0.9, "score_name": "exact_match,strict-match"}]
    assert _import(capsys, tmp_path, rows, tmp_path / "a.sqlite", "evals.json")[0] == 0
    export = tmp_path / "ex.json"
    assert run_main(capsys, "results", "export", "--out", export, "--store", tmp_path / "a.sqlite")[0] == 0
    assert json.loads(export.read_text())["results"][0]["identity"]["conc"] == 0
    code, _, err = run_main(capsys, "results", "import", export, "--store", tmp_path / "b.sqlite")
    assert code == 0, err
    _reads_back(capsys, tmp_path / "b.sqlite")


def _listed(capsys: pytest.CaptureFixture[str], store: Path) -> dict[str, dict[str, Any]]:
    code, out, err = run_main(capsys, "results", "list", "--all", "--json", "--store", store)
    assert code == 0, err
    return {row["job_id"]: {k: v for k, v in row.items() if k != "origin"} for row in json.loads(out)}


@pytest.mark.parametrize("folder", MEASURED_RUNS, ids=lambda p: p.parent.name)
def test_an_inferencex_export_imports_back_with_every_figure_it_carries(
        folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Importing our own `--format inferencex` export had lost the requests per second, GPU cache hit rate and KV peak
    (a fixed-length row has no field for them) and the assumed cost (in the row's `llmsweep.power.cost`), and had
    recomputed tokens per joule from J per token rounded to 6 places (30.791095856 -> 30.791021338); power and J per
    output token came back rounded. Every figure comes back as the store held it."""
    original = tmp_path / "a.sqlite"
    assert run_main(capsys, "results", "ingest", folder, "--store", original)[0] == 0
    export = tmp_path / "ix.json"
    code, _, err = run_main(capsys, "results", "export", "--format", "inferencex", "--include-unpublished",
                            "--out", export, "--store", original)
    assert code == 0, err
    copy_ = tmp_path / "b.sqlite"
    assert run_main(capsys, "results", "import", export, "--store", copy_)[0] == 0
    before, after = _listed(capsys, original), _listed(capsys, copy_)
    assert before == after
    figures = {k for row in before.values() for k, v in row.items() if v is not None}
    assert {"request_qps", "gpu_cache_hit_rate", "gpu_kv_usage_max"} <= figures
    if folder.name == "llama-b":  # the run that measured power
        assert {"tokens_per_joule", "avg_power_w", "joules_per_output_token", "usd_per_mtok_output"} <= figures


def test_an_inferencex_row_without_our_block_or_its_figures_keeps_the_rows_own(make_run, tmp_path: Path) -> None:
    """A row of ours from before the block carried the point's figures, or one published without the block, is read
    from its InferenceX fields as before; a figure of the block no measurement has is refused, naming it."""
    rows = json.loads(export_points(points_from_run(make_run("x", concs=(2,), scenario="fixed-seq-len")),
                                    "inferencex", include_unpublished=True))
    path = tmp_path / "in.json"
    old = copy.deepcopy(rows)
    del old[0]["llmsweep"]["metrics"]
    path.write_text(json.dumps(old))
    (point,) = read_import(path).points
    assert point.metric("request_qps") is None and point.metric("tput_per_gpu") == rows[0]["tput_per_gpu"]
    rows[0]["llmsweep"]["metrics"]["p90_ttft"] = -1.0
    path.write_text(json.dumps(rows))
    with pytest.raises(ResultInputError, match=r"row 0 \(.*\): `llmsweep.metrics.p90_ttft` is -1.0, not a figure"):
        read_import(path)
    rows[0]["llmsweep"]["metrics"]["p90_ttft"] = float("nan")  # not a number: not read, the row's own stands
    path.write_text(json.dumps(rows))
    (nan,) = read_import(path).points
    assert nan.metric("p90_ttft") == rows[0]["p90_ttft"]


def _started(capsys: pytest.CaptureFixture[str], store: Path) -> dict[str, str | None]:
    code, out, err = run_main(capsys, "results", "--json", "runs", "--store", store)
    assert code == 0, err
    return {r["run_id"]: r["started"] for r in json.loads(out)}


def test_a_json_export_keeps_its_runs_start_time_through_an_import(
        make_run, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`results runs` had shown `started –` for a run imported from its JSON export; an export without the runs'
    start times (before 2026-12-07) imports as before."""
    original = tmp_path / "a.sqlite"
    assert run_main(capsys, "results", "ingest", make_run("r", concs=(2,)).path, "--store", original)[0] == 0
    assert _started(capsys, original) == {"r": "2026-11-29T12:00:00Z"}
    export = tmp_path / "ex.json"
    assert run_main(capsys, "results", "export", "--out", export, "--store", original)[0] == 0
    assert run_main(capsys, "results", "import", export, "--store", tmp_path / "b.sqlite")[0] == 0
    assert _started(capsys, tmp_path / "b.sqlite") == {"r": "2026-11-29T12:00:00Z"}
    again = tmp_path / "again.json"
    assert run_main(capsys, "results", "export", "--out", again, "--store", tmp_path / "b.sqlite")[0] == 0
    assert json.loads(again.read_text())["runs"] == {"r": {"started": "2026-11-29T12:00:00Z"}}
    older = json.loads(export.read_text())
    del older["runs"]
    assert _import(capsys, tmp_path, older, tmp_path / "c.sqlite", "older.json")[0] == 0
    assert _started(capsys, tmp_path / "c.sqlite") == {"r": None}
    older["runs"] = {"r": {"started": 7}}
    code, _, err = _import(capsys, tmp_path, older, tmp_path / "d.sqlite", "bad.json")
    assert code == 2 and "`runs.r.started` is 7, not a time" in err, err
