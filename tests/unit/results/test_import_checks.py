"""An import stores what the file's results are, or refuses the file naming the row and field: a simulated result
whose row lost its `source` had been stored (and published by `export --format inferencex`) as measured, a row without
a verdict had stood on frontiers as `None`, a NaN had made a row no reader could read, and a row appended twice had
been compared with itself as a repeat."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from llmsweep.errors import ResultInputError
from llmsweep.results.interchange import export_points, import_file
from llmsweep.results.point import points_from_run


def _export(make_run: Any, **kwargs: Any) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(export_points(points_from_run(make_run("r", concs=(2, 4), **kwargs)), "json"))
    return doc


def _import(tmp_path: Path, doc: Any, name: str = "in.json") -> list[Any]:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return import_file(path)[2]


def test_a_row_with_its_summary_takes_the_summarys_source_verdict_and_figures(make_run, tmp_path: Path) -> None:
    doc = _export(make_run)  # a simulated run
    assert {r["source"] for r in doc["results"]} == {"simulated"}
    lost = copy.deepcopy(doc)
    for row in lost["results"]:
        del row["source"]
        row["verdict"] = "great"
        row["metrics"]["tput_per_gpu"] = 1e9  # a stale or edited copy of a figure the summary holds
    back = _import(tmp_path, lost)
    original = _import(tmp_path, doc, "orig.json")
    assert [p.source for p in back] == ["simulated", "simulated"]
    assert [p.verdict for p in back] == [p.verdict for p in original]
    assert [p.metrics for p in back] == [p.metrics for p in original]
    # a row that says measured of a summary that says simulated is what the summary says
    said_measured = copy.deepcopy(doc)
    for row in said_measured["results"]:
        row["source"] = "measured"
    assert {p.source for p in _import(tmp_path, said_measured, "m.json")} == {"simulated"}
    # and an InferenceX export of the store never publishes it as measured
    inferencex = json.loads(export_points(back, "inferencex", include_unpublished=True))
    assert inferencex and all(r["llmsweep"]["source"] == "simulated" for r in inferencex)


@pytest.mark.parametrize(("edit", "message"), [
    (lambda r: r.pop("source"), r"row 0 \(.*\): `source` is None, not one of measured, simulated, predicted"),
    (lambda r: r.update(source="Simulated"), r"`source` is 'Simulated', not one of"),
    (lambda r: r.pop("verdict"), r"`verdict` is None, not one of valid, smoke, invalid"),
    (lambda r: r.update(verdict="great"), r"`verdict` is 'great'"),
    (lambda r: r["metrics"].update(tput_per_gpu=float("nan")), r"`metrics.tput_per_gpu` is nan, not a finite"),
    (lambda r: r["metrics"].update(tput_per_gpu="fast"), r"`metrics.tput_per_gpu` is 'fast'"),
    (lambda r: r.update(gpus="eight"), r"`gpus` is 'eight', not a whole number of at least 1"),
    (lambda r: r.update(reasons="bad"), r"`reasons` is 'bad', not a list of texts"),
    (lambda r: r.update(num_requests=-1), r"`num_requests` is -1, not a count"),
    (lambda r: r["metrics"].update(p90_ttft=-0.2), r"`metrics.p90_ttft` is -0.2, not a figure of 0 or more"),
    (lambda r: r["metrics"].update(gpu_cache_hit_rate=1.5), r"`metrics.gpu_cache_hit_rate` is 1.5, not a figure "
                                                            r"from 0 to 1"),
    (lambda r: r.update(num_requests=10, num_successful=20), r"`num_successful` is 20, not at most `num_requests`"),
    (lambda r: r.update(source="measured", provenance={"clock": "virtual"}),
     r"`source` is 'measured', not measured: the result was timed on the simulator's virtual clock"),
])
def test_a_row_without_its_summary_has_every_field_checked(make_run, tmp_path: Path, edit: Any,
                                                           message: str) -> None:
    doc = _export(make_run)
    for row in doc["results"]:
        del row["summary"]
    assert len(_import(tmp_path, doc, "ok.json")) == 2  # as exported, without summaries: imported
    edit(doc["results"][0])
    with pytest.raises(ResultInputError, match=message) as caught:
        _import(tmp_path, doc)
    assert "results export" in (caught.value.fix or "")


def test_a_file_holding_one_result_twice_is_refused(make_run, tmp_path: Path) -> None:
    doc = _export(make_run)
    doc["results"].append(copy.deepcopy(doc["results"][0]))
    with pytest.raises(ResultInputError, match=r"row 2 names the same run and job as row 0"):
        _import(tmp_path, doc)
    rows = json.loads(export_points(points_from_run(make_run("x", concs=(2, 4))), "inferencex",
                                    include_unpublished=True))
    assert len(_import(tmp_path, rows, "ix.json")) == 2
    with pytest.raises(ResultInputError, match=r"row 2 is a copy of row 0"):
        _import(tmp_path, [*rows, rows[0]], "ix2.json")


def test_identical_inferencex_rows_without_our_block_are_stored_once_and_said(tmp_path: Path, capsys) -> None:
    """Two identical InferenceX rows (no `llmsweep` block: a copy pasted, two aggregates concatenated) had been two
    results of one point, which `compare` pooled as repeats agreeing to the last digit. Stored once, the import says
    how many rows it skipped; rows that differ in any figure stay two results."""
    from support.cli import run_main

    from llmsweep.results.interchange import read_import

    row = {"hw": "b200", "conc": 64, "image": "vllm/vllm-openai:v0.11.0", "model": "deepseek-ai/DeepSeek-R1",
           "infmax_model_prefix": "dsr1", "framework": "vllm", "precision": "fp4", "spec_decoding": "none",
           "disagg": False, "isl": 1024, "osl": 1024, "tp": 4, "ep": 4, "dp_attention": "false",
           "tput_per_gpu": 5000.0, "median_ttft": 0.2, "num_requests_total": 640, "num_requests_successful": 640}
    other = {**row, "tput_per_gpu": 5100.0}  # the same point measured again: a repeat, kept
    reordered = dict(reversed(list(row.items())))  # the same content, its keys in another order: a copy
    path = tmp_path / "agg_bmk.json"
    path.write_text(json.dumps([row, other, reordered, row]))
    code, out, err = run_main(capsys, "results", "import", path, "--store", tmp_path / "s.sqlite")
    assert code == 0, err
    assert "imported 2 results" in out and "2 duplicate rows skipped (rows 2, 3" in out, out
    parsed = read_import(path)
    assert [p.metric("tput_per_gpu") for p in parsed.points] == [5000.0, 5100.0] and parsed.copies == (2, 3)
    path.write_text(json.dumps([row, other, *[row] * 12]))  # many copies: the first ten named, the rest counted
    code, out, _ = run_main(capsys, "results", "import", path, "--store", tmp_path / "s1.sqlite")
    assert code == 0 and "12 duplicate rows skipped (rows 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 and 2 more" in out, out
    path.write_text(json.dumps([row, other]))  # nothing repeated: nothing said
    code, out, _ = run_main(capsys, "results", "import", path, "--store", tmp_path / "s2.sqlite")
    assert code == 0 and "imported 2 results" in out and "duplicate" not in out, out


def test_an_inferencex_row_of_ours_that_says_measured_on_the_virtual_clock_or_an_unknown_verdict_is_refused(
        make_run, tmp_path: Path) -> None:
    rows = json.loads(export_points(points_from_run(make_run("x", concs=(2,))), "inferencex",
                                    include_unpublished=True))
    (row,) = rows
    assert row["llmsweep"]["source"] == "simulated"
    row["llmsweep"]["clock"] = "virtual"  # what a virtual-time run's export says (the synthetic run records none)
    assert len(_import(tmp_path, [row], "ok.json")) == 1
    lost = copy.deepcopy(row)
    del lost["llmsweep"]["source"]
    lost.pop("source", None)
    with pytest.raises(ResultInputError, match=r"row 0 \(.*\) says it was measured, but its `llmsweep.clock` is "
                                               r"virtual"):
        _import(tmp_path, [lost])
    great = copy.deepcopy(row)
    great["llmsweep"]["verdict"] = "great"
    with pytest.raises(ResultInputError, match=r"`llmsweep.verdict` is 'great', not one of valid, smoke, invalid"):
        _import(tmp_path, [great], "g.json")


@pytest.mark.parametrize(("edit", "message"), [
    (lambda b: b.update(repeats={"n": "two", "job_ids": ["a", "b"]}), r"`llmsweep.repeats` is \{'n': 'two'"),
    (lambda b: b.update(repeats={"n": 2, "job_ids": "a, b"}), r"`llmsweep.repeats` is .*, not how many repeats"),
    (lambda b: b.update(repeats=[2]), r"`llmsweep.repeats` is \[2\]"),
    (lambda b: b.update(reasons="error ratio 0.4"), r"`llmsweep.reasons` is 'error ratio 0.4', not a list of texts"),
    (lambda b: b.update(job_id=["x"]), r"`llmsweep.job_id` is \['x'\], not an id"),
    (lambda b: b.update(run_id=7), r"`llmsweep.run_id` is 7, not an id"),
])
def test_an_inferencex_row_whose_llmsweep_block_is_not_what_our_export_writes_is_refused_naming_the_field(
        make_run, tmp_path: Path, edit: Any, message: str) -> None:
    """A damaged `llmsweep` block had been a traceback (`repeats.n` not a number: ValueError, exit 1), a reason
    text stored as one reason per character, a list stored as a job id: refused as bad input, naming row and field."""
    (row,) = json.loads(export_points(points_from_run(make_run("x", concs=(2,))), "inferencex",
                                      include_unpublished=True))
    assert len(_import(tmp_path, [row], "ok.json")) == 1
    edit(row["llmsweep"])
    with pytest.raises(ResultInputError, match=r"row 0 \(.*\): " + message) as caught:
        _import(tmp_path, [row])
    assert "results export --format inferencex" in (caught.value.fix or "")


_PUBLISHED = {"hw": "b200", "conc": 64, "image": "vllm/vllm-openai:v0.11.0", "model": "deepseek-ai/DeepSeek-R1",
              "infmax_model_prefix": "dsr1", "framework": "vllm", "precision": "fp4", "spec_decoding": "none",
              "disagg": False, "isl": 1024, "osl": 1024, "tp": 4, "ep": 4, "dp_attention": "false",
              "tput_per_gpu": 5000.0, "median_ttft": 0.2, "p90_ttft": 0.4, "num_requests_total": 640,
              "num_requests_successful": 640, "power_valid": 1, "joules_per_total_token": 0.5}
"""An InferenceX row as agg_bmk.json publishes it (no `llmsweep` block)."""


@pytest.mark.parametrize(("change", "message"), [
    ({"tput_per_gpu": -5.0}, r"`tput_per_gpu` is -5.0, not a figure of 0 or more"),
    ({"median_ttft": -0.2}, r"`median_ttft` is -0.2, not a figure of 0 or more"),
    ({"joules_per_total_token": -2.0}, r"`joules_per_total_token` is -2.0, not a figure of 0 or more"),
    ({"server_gpu_cache_hit_rate": 1.4}, r"`server_gpu_cache_hit_rate` is 1.4, not a figure from 0 to 1"),
    ({"gpu_kv_cache_usage_pct": -3.0}, r"`gpu_kv_cache_usage_pct` is -3.0, not a figure of 0 or more"),
    ({"num_requests_successful": 700}, r"`num_requests_successful` is 700, not at most `num_requests_total` \(640\)"),
    ({"num_requests_total": 640.5}, r"`num_requests_total` is 640.5, not a count of requests"),
    ({"num_requests_total": -1, "num_requests_successful": -3}, r"`num_requests_total` is -1, not a count"),
])
def test_an_inferencex_row_with_a_figure_no_measurement_has_is_refused_naming_it(
        tmp_path: Path, change: dict[str, Any], message: str) -> None:
    """A negative throughput, latency or energy, a ratio above 1, or request counts that are not counts had been
    stored as a valid measured point: a negative TTFT on the latency axes, tokens per joule of -0.5, an error ratio of
    -1 (more successful requests than requests) or -1347 (a fractional count read as its integer part)."""
    (back,) = _import(tmp_path, [_PUBLISHED], "ok.json")
    assert (back.metric("tput_per_gpu"), back.metric("p50_ttft"), back.metric("tokens_per_joule"),
            back.metric("error_ratio")) == (5000.0, 0.2, 2.0, 0.0)
    with pytest.raises(ResultInputError, match=r"row 0 \(row0000\): " + message):
        _import(tmp_path, [{**_PUBLISHED, **change}])
    # KV usage is a peak gauge servers report above 1 (AgentX reads up to 1.5 as a fraction): no ceiling
    (peak,) = _import(tmp_path, [{**_PUBLISHED, "gpu_kv_cache_usage_pct": 104.0}], "peak.json")
    assert peak.metric("gpu_kv_usage_max") == pytest.approx(1.04)
    # a figure that is not a number at all (NaN, as InferenceX's Python writes an undefined one) is not read
    (nan,) = _import(tmp_path, [{**_PUBLISHED, "median_ttft": float("nan")}], "nan.json")
    assert nan.metric("p50_ttft") is None and nan.metric("p90_ttft") == 0.4


@pytest.mark.parametrize(("change", "message"), [
    ({"tp": "eight"}, r"`tp` is 'eight', not a whole number of at least 1"),
    ({"tp": 0}, r"`tp` is 0, not a whole number of at least 1"),
    ({"pp": -1}, r"`pp` is -1, not a whole number of at least 1"),
    ({"conc": 2.5}, r"`conc` is 2.5, not a whole number of at least 1"),
    ({"isl": 0}, r"`isl` is 0, not a whole number of at least 1"),
    ({"is_multinode": True, "num_prefill_gpu": 0, "num_decode_gpu": 8, "prefill_tp": 8, "decode_tp": 8},
     r"`num_prefill_gpu` is 0, not a whole number of at least 1"),
])
def test_an_inferencex_row_whose_point_is_not_whole_numbers_is_refused_naming_the_field(
        tmp_path: Path, change: dict[str, Any], message: str) -> None:
    """`tp: "eight"` and `tp: 0` had been stored as a tp1 point on 1 GPU, a `conc` of 2.5 as a conc-2 point: a point the
    row never measured, matched against other runs' tp1 and conc-2 points. A whole number spelt as a float or a text
    (`4.0`, `"64"`) is the number."""
    (back,) = _import(tmp_path, [{**_PUBLISHED, "tp": 4.0, "conc": "64"}], "ok.json")
    assert (back.identity.tp, back.identity.conc, back.gpus) == (4, 64, 4)
    with pytest.raises(ResultInputError, match=r"row 0 \(row0000\): " + message):
        _import(tmp_path, [{**_PUBLISHED, **change}])


def test_a_file_that_is_not_utf8_is_refused_as_bad_input(tmp_path: Path) -> None:
    """A Latin-1 byte in the file had been a UnicodeDecodeError traceback (exit 1), not bad input (exit 2)."""
    path = tmp_path / "latin1.json"
    path.write_bytes(b'{"format": "caf\xe9"}')
    with pytest.raises(ResultInputError, match=r"cannot read .*latin1\.json: 'utf-8' codec can't decode"):
        import_file(path)


def test_a_byte_order_mark_at_the_files_start_is_read_as_utf8(make_run, tmp_path: Path) -> None:
    """A file saved as UTF-8 by Notepad or PowerShell starts with a byte-order mark: `results import` had refused it
    ('Unexpected UTF-8 BOM'). It imports as the file without the mark does, our export and InferenceX rows alike."""
    ours = _export(make_run)
    rows = json.loads(export_points(points_from_run(make_run("x", concs=(2, 4))), "inferencex",
                                    include_unpublished=True))
    for name, doc in (("ours.json", ours), ("ix.json", rows)):
        plain, marked = tmp_path / name, tmp_path / f"bom-{name}"
        plain.write_text(json.dumps(doc), encoding="utf-8")
        marked.write_text(json.dumps(doc), encoding="utf-8-sig")
        assert marked.read_bytes().startswith(b"\xef\xbb\xbf")
        assert [p.metrics for p in import_file(marked)[2]] == [p.metrics for p in import_file(plain)[2]]
