"""Export and import: our JSON round trip, InferenceX aggregate rows both ways."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest

from llmsweep.errors import ResultError, ResultInputError
from llmsweep.results.identity import SERVER_FIELDS, identity_from_job
from llmsweep.results.interchange import (
    EXPORT_FORMAT,
    export_points,
    from_inferencex_row,
    import_file,
    import_into,
    inferencex_row,
)
from llmsweep.results.point import RESULT_COLUMNS, ResultPoint, describe, points_from_run
from llmsweep.results.store import Store


def test_inferencex_rows_have_the_published_fields_in_seconds(make_run) -> None:
    points = points_from_run(make_run("r", concs=(4,)))
    row = json.loads(export_points(points, "inferencex", include_unpublished=True))[0]
    p = points[0]
    s = p.summary
    assert s is not None
    for key in ("hw", "conc", "image", "model", "infmax_model_prefix", "framework", "precision", "spec_decoding",
                "disagg", "tp", "ep", "dp_attention", "pp", "dcp_size", "pcp_size", "tput_per_gpu",
                "output_tput_per_gpu", "input_tput_per_gpu"):
        assert key in row, key
    assert row["hw"] == "cluster:mi300x-synthetic" and row["conc"] == 4 and row["scenario_type"] == "agentic-coding"
    assert row["tput_per_gpu"] == pytest.approx(s.throughput.total_tps / 8)
    assert row["median_ttft"] == s.latency.ttft.p50
    assert row["p99.9_e2el"] == s.latency.e2el.p99_9
    assert row["p90_intvty"] == s.interactivity.p90
    assert row["p90_e2e_norm_intvty"] == s.e2e_norm_interactivity.p90
    assert "std_intvty" not in row  # 1/std is meaningless; InferenceX exported it anyway
    assert row["llmsweep"]["source"] == "simulated"


def test_an_agentic_rows_itl_is_the_per_request_itl_agentx_derives_interactivity_from(make_run) -> None:
    """AgentX's `itl` is AIPerf's per-request (E2EL − TTFT)/(OSL − 1), from which the app re-derives interactivity
    (agentx-spec §3.3): an agentic row carries those samples (our `tpot`), not the gaps between stream chunks a
    fixed-length row's `itl` is (benchmark_serving's). The chunk gaps of 16-token chunks made the app's
    interactivity a sixteenth of the run's. The row has AgentX's p75/p95 and its scalars too (§6.2)."""
    (agentic,) = points_from_run(make_run("a", concs=(4,)))
    (fixed,) = points_from_run(make_run("f", concs=(4,), scenario="fixed-seq-len", isl=1024, osl=256))
    rows = json.loads(export_points([agentic, fixed], "inferencex", include_unpublished=True))
    arow, frow = rows
    sa, sf = agentic.summary, fixed.summary
    assert sa is not None and sf is not None
    assert sa.latency.itl.p90 > 4 * sa.latency.tpot.p90  # 16-token chunks: the two differ, by a lot
    for prefix, stat in (("median", "p50"), ("p75", "p75"), ("p90", "p90"), ("p95", "p95"), ("p99", "p99")):
        assert arow[f"{prefix}_itl"] == arow[f"{prefix}_tpot"] == sa.latency.tpot.stat(stat), prefix
        assert arow[f"{prefix}_intvty"] == sa.interactivity.stat(stat), prefix
    assert 1 / arow["p90_itl"] == pytest.approx(arow["p90_intvty"])  # what the app re-derives is what the run said
    assert arow["total_tput_tps"] == sa.throughput.total_tps and arow["output_tput_tps"] == sa.throughput.output_tps
    assert arow.get("theoretical_cache_hit_rate") == sa.cache.theoretical_hit_rate  # absent when not recorded
    assert frow["p90_itl"] == sf.latency.itl.p90 and "p95_itl" not in frow  # benchmark_serving's, unchanged


def test_json_round_trip_keeps_source_and_metrics(make_run, tmp_path: Path) -> None:
    points = points_from_run(make_run("r", concs=(1, 4)))
    path = tmp_path / "export.json"
    path.write_text(export_points(points, "json"))
    run_id, origin, back = import_file(path)
    assert run_id.startswith("import:export-") and origin == "llmsweep-export"
    assert [p.source for p in back] == ["simulated", "simulated"]
    assert [p.metrics for p in back] == [p.metrics for p in points]
    assert [p.identity for p in back] == [p.identity for p in points]


def test_inferencex_export_imports_back_with_its_source(make_run, tmp_path: Path) -> None:
    points = points_from_run(make_run("r", concs=(4,), source="predicted"))
    path = tmp_path / "ix.json"
    path.write_text(export_points(points, "inferencex", include_unpublished=True))
    _, _, back = import_file(path)
    assert back[0].source == "predicted"
    assert back[0].identity == points[0].identity
    assert back[0].metric("p90_e2e_norm_intvty") == points[0].metric("p90_e2e_norm_intvty")


def test_published_inferencex_rows_import_as_measured_in_their_own_run(tmp_path: Path) -> None:
    rows = [
        {"hw": "b200", "conc": 64, "image": "vllm/vllm-openai:v0.11.0", "model": "deepseek-ai/DeepSeek-R1",
         "infmax_model_prefix": "dsr1", "framework": "vllm", "precision": "fp4", "spec_decoding": "none",
         "disagg": False, "isl": 1024, "osl": 1024, "tp": 4, "ep": 4, "dp_attention": "false",
         "tput_per_gpu": 5000.0, "output_tput_per_gpu": 2500.0, "input_tput_per_gpu": 2500.0,
         "median_ttft": 0.2, "p90_ttft": 0.4, "median_intvty": 50.0, "p90_intvty": 40.0, "p90_e2el": 30.0},
        {"hw": "mi355x", "conc": 8, "image": "lmsysorg/sglang:v0.5.16", "model": "Qwen/Qwen3.5", "framework": "sglang",
         "precision": "fp8", "scenario_type": "agentic-coding", "tp": 8, "kv_offloading": "none",
         "num_requests_total": 100, "num_requests_successful": 95,
         "request_metrics": {"latency": {"ttft": {"p50": 0.3, "p90": 0.9},
                                         "e2e_norm_intvty": {"p75": 35.0, "p90": 30.0}},
                             "throughput": {"per_gpu": {"total_tput_tps": 1200.0}}}},
    ]
    path = tmp_path / "agg_bmk.json"
    path.write_text(json.dumps(rows))
    _, origin, points = import_file(path)
    assert origin == "inferencex"
    fixed, agentic = points
    assert fixed.source == "measured" and fixed.origin == "inferencex"
    assert fixed.identity.scenario == "fixed-1k1k" and fixed.identity.hardware == "b200"
    assert fixed.gpus == 4 and fixed.metric("p90_intvty") == 40.0
    assert fixed.metric("p90_e2e_norm_intvty") is None  # no traces: cannot join the north-star frontier
    assert agentic.metric("p90_e2e_norm_intvty") == 30.0 and agentic.metric("tput_per_gpu") == 1200.0
    assert agentic.metric("p50_ttft") == 0.3 and agentic.metric("error_ratio") == pytest.approx(0.05)
    with Store(tmp_path / "s.sqlite") as store:
        (rid,), n, _ = import_into(store, path)
        assert n == 2 and store.results(rid)[0].origin == "inferencex"
        assert [r.origin for r in store.runs()] == ["inferencex"]


def test_csv_export_is_flat(make_run) -> None:
    points = points_from_run(make_run("r", concs=(1, 4)))
    rows = list(csv.DictReader(io.StringIO(export_points(points, "csv"))))
    assert len(rows) == 2 and {"result_id", "tput_per_gpu", "source", "conc", "image"} <= set(rows[0])


def test_unreadable_or_foreign_files_are_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ResultError, match="cannot read"):
        import_file(bad)
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ResultError, match="neither"):
        import_file(other)
    with pytest.raises(ResultError, match="unknown export format"):
        export_points([], "xml")


def test_a_csv_export_given_to_import_is_named_as_one_with_the_format_to_export_instead(make_run,
                                                                                     tmp_path: Path) -> None:
    """`results import` of our CSV export said `cannot read export.csv: Expecting value: line 1 column 1`, as of any
    damaged JSON; as written, and as a spreadsheet saves it again (a byte-order mark, quoted headers, `;` between
    cells), it is named as the CSV export it is, with the export to import instead."""
    text = export_points(points_from_run(make_run("r", concs=(1, 4))), "csv")
    header, _, body = text.partition("\r\n")
    saved = {"export.csv": (text, "utf-8"), "resaved.csv": (text.replace(",", ";"), "utf-8-sig"),
             "quoted.csv": ('"' + header.replace(",", '","') + '"\r\n' + body, "utf-8")}
    for name, (content, encoding) in saved.items():
        path = tmp_path / name
        path.write_text(content, encoding=encoding, newline="")
        with pytest.raises(ResultInputError, match=rf"{name} is a CSV export \(`results export --format csv`\)"
                                                   r".*results import reads JSON") as caught:
            import_file(path)
        assert "results export --format json" in (caught.value.fix or "")
    other = tmp_path / "table.csv"  # some other table: not ours, said as before
    other.write_text("a,b\n1,2\n")
    with pytest.raises(ResultInputError, match="cannot read"):
        import_file(other)


def test_an_export_of_a_version_this_release_does_not_know_is_refused(make_run, tmp_path: Path) -> None:
    """An export a newer release wrote (`version` 2) had been read as version 1 without a word."""
    doc = json.loads(export_points(points_from_run(make_run("r", concs=(4,))), "json"))
    path = tmp_path / "export.json"
    for version in (2, "1", None):
        path.write_text(json.dumps({**doc, "version": version}))
        with pytest.raises(ResultInputError, match=rf"is an llmsweep export of version {version!r}; this llmsweep "
                                                   r"reads version 1") as caught:
            import_file(path)
        assert "newer one" in (caught.value.fix or "")
    path.write_text(json.dumps({k: v for k, v in doc.items() if k != "version"}))  # an export without one: version 1
    assert len(import_file(path)[2]) == 1


@pytest.mark.parametrize("doc", [[], {"format": EXPORT_FORMAT, "results": []}], ids=["inferencex", "ours"])
def test_a_file_without_rows_imports_nothing_and_says_so(tmp_path: Path, doc: object) -> None:
    """No empty run appears in the store as if something had been imported."""
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(doc))
    with Store(tmp_path / "s.sqlite") as store:
        with pytest.raises(ResultError, match="holds no result rows: nothing imported"):
            import_into(store, path)
        assert store.runs() == []
    from llmsweep.cli.main import main

    with pytest.raises(SystemExit) as done:  # the command refuses it before it opens, or makes, a store
        main(["results", "import", str(path), "--store", str(tmp_path / "new.sqlite")])
    assert done.value.code == 2 and not (tmp_path / "new.sqlite").exists()


def test_fixed_length_multinode_rows_normalise_per_role(make_run) -> None:
    p = points_from_run(make_run("r", concs=(8,), scenario="fixed-seq-len", isl=1024, osl=256))[0]
    job = {**p.job, "multinode": True, "disagg": True, "gpus": 12,
           "prefill": {"num-worker": 1, "tp": 4, "ep": 1, "dp-attn": False, "pp": 1, "dcp-size": 1, "pcp-size": 1},
           "decode": {"num-worker": 1, "tp": 8, "ep": 8, "dp-attn": True, "pp": 1, "dcp-size": 1, "pcp-size": 1}}
    for key in ("tp", "ep", "pp", "dcp-size", "pcp-size", "dp-attn"):
        job.pop(key)
    mn = dataclasses.replace(p, job=job, identity=identity_from_job(job), gpus=12, metrics=_per_12_gpus(p))
    row = json.loads(export_points([mn], "inferencex", include_unpublished=True))[0]
    assert p.summary is not None
    thr = p.summary.throughput
    assert row["is_multinode"] is True and row["num_prefill_gpu"] == 4 and row["num_decode_gpu"] == 8
    assert row["decode_ep"] == 8 and row["decode_dp_attention"] is True and "tp" not in row
    assert row["tput_per_gpu"] == pytest.approx(thr.total_tps / 12)
    assert row["output_tput_per_gpu"] == pytest.approx(thr.output_tps / 8)
    assert row["input_tput_per_gpu"] == pytest.approx((thr.total_tps - thr.output_tps) / 4)
    # Imported back, the per-GPU figures mean what llmsweep's columns mean (every GPU of the deployment), so a
    # stored point and an imported row of it compare like with like: as our block carries them, and as the row's
    # per-role fields are read where it carries none (a published row, an export before the block had them)
    for read in (row, {**row, "llmsweep": {k: v for k, v in row["llmsweep"].items() if k != "metrics"}}):
        back = from_inferencex_row("import:x", read, 0)
        assert back.identity.workers == mn.identity.workers == "P1x(tp4 ep1) D1x(tp8 ep8 dpa)"
        assert back.metrics["output_tput_per_gpu"] == pytest.approx(thr.output_tps / 12)
        assert back.metrics["input_tput_per_gpu"] == pytest.approx((thr.total_tps - thr.output_tps) / 12)
        assert back.metrics["tput_per_gpu"] == pytest.approx(thr.total_tps / 12)


def test_agentic_multinode_rows_divide_every_figure_by_all_gpus_as_agentx_does(make_run) -> None:
    """AgentX's `per_gpu` divides input, output and total by every GPU of a prefill/decode deployment (agentx-spec
    §3.6), unlike a fixed-length row's per-role §6.2 normalisation: an agentic row exports and imports back as the
    run's own table shows it, and a published AgentX row is not rescaled (input + output still add up to total)."""
    p = _disaggregated(points_from_run(make_run("r", concs=(8,)))[0])
    assert p.summary is not None
    thr = p.summary.throughput
    (row,) = json.loads(export_points([p], "inferencex", include_unpublished=True))
    assert row["scenario_type"] == "agentic-coding" and row["num_decode_gpu"] == 8
    assert row["output_tput_per_gpu"] == pytest.approx(thr.output_tps / 12)
    assert row["input_tput_per_gpu"] == pytest.approx((thr.total_tps - thr.output_tps) / 12)
    back = from_inferencex_row("import:x", row, 0)
    assert back.metrics["output_tput_per_gpu"] == pytest.approx(row["output_tput_per_gpu"])
    published = {"hw": "mi355x", "conc": 64, "model": "m", "infmax_model_prefix": "m", "framework": "sglang",
                 "precision": "fp8", "scenario_type": "agentic-coding", "is_multinode": True,
                 "num_prefill_gpu": 8, "num_decode_gpu": 24, "num_requests_total": 10, "num_requests_successful": 10,
                 "tput_per_gpu": 1100.0, "output_tput_per_gpu": 100.0, "input_tput_per_gpu": 1000.0}
    got = from_inferencex_row("import:y", published, 0).metrics
    assert (got["input_tput_per_gpu"], got["output_tput_per_gpu"], got["tput_per_gpu"]) == (1000.0, 100.0, 1100.0)


def test_an_agentic_rows_kv_usage_is_the_peak_as_agentx_reports_it(make_run) -> None:
    """AgentX's `gpu_kv_cache_usage_pct` is max-first (agentx-spec §3.7: the worst pressure, not mean occupancy)."""
    (p,) = points_from_run(make_run("r", concs=(8,)))
    assert p.summary is not None and p.summary.server_metrics.kv_cache is not None
    kv = p.summary.server_metrics.kv_cache
    assert kv.gpu_usage_max is not None and kv.gpu_usage_mean is not None and kv.gpu_usage_max > kv.gpu_usage_mean
    (row,) = json.loads(export_points([p], "inferencex", include_unpublished=True))
    assert row["gpu_kv_cache_usage_pct"] == pytest.approx(kv.gpu_usage_max)
    # and its pool as its engines reported it, AgentX's `kv_cache_pool_tokens`
    assert kv.pool_tokens is not None and kv.pool_tokens > 0 and row["kv_cache_pool_tokens"] == kv.pool_tokens


def test_agentx_kv_usage_is_a_fraction_whatever_its_name_says(tmp_path: Path) -> None:
    """AgentX's `gpu_kv_cache_usage_pct` is a fraction (its aggregation divides a gauge above 1.5 by 100, the app
    ingests 0.82134 as 0.82134: agentx-spec §3.7). Our export wrote it ×100 and our import divided by 100, so a
    published 82 % peak was stored as 0.8 %. A fraction is read as one; a figure above 1.5 is a percentage, as AgentX
    reads it (our exports before this wrote one)."""
    base = {"hw": "b300", "conc": 16, "image": "vllm/vllm-openai:v0.23.0", "model": "m/M", "framework": "vllm",
            "precision": "fp4", "scenario_type": "agentic-coding", "tp": 4, "kv_offloading": "none",
            "num_requests_total": 10, "num_requests_successful": 10}
    path = tmp_path / "agg.json"
    path.write_text(json.dumps([{**base, "gpu_kv_cache_usage_pct": 0.82134},
                                {**base, "conc": 32, "gpu_kv_cache_usage_pct": 82.134}]))
    fraction, percent = import_file(path)[2]
    assert fraction.metric("gpu_kv_usage_max") == pytest.approx(0.82134)
    assert percent.metric("gpu_kv_usage_max") == pytest.approx(0.82134)



def test_inferencex_rows_carry_power_as_aggregate_power_writes_it(make_run, tmp_path: Path) -> None:
    from llmsweep.metrics.model import PowerBlock

    points = points_from_run(make_run("r", concs=(1, 4)))
    valid, invalid = points[0].summary, points[1].summary
    assert valid is not None and invalid is not None
    valid.power = PowerBlock(source="simulated", backend="sim", power_valid=True, energy_j=5400.12345,
                             avg_total_gpu_power_w=540.0, avg_power_w=270.0, joules_per_successful_query=54.0,
                             joules_per_input_token=5.4, joules_per_output_token=1.3500004,
                             joules_per_total_token=1.08, tokens_per_joule=1 / 1.08)
    invalid.power = PowerBlock(power_valid=False, reasons=["expected_gpu_count_mismatch"])
    rows = json.loads(export_points(points, "inferencex", include_unpublished=True))
    assert rows[0]["power_metric_schema_version"] == 2 and rows[0]["power_valid"] == 1
    assert rows[0]["total_gpu_energy_j"] == 5400.123 and rows[0]["avg_power_w"] == 270.0
    assert "gpu_energy_j" not in rows[0]
    assert rows[0]["joules_per_output_token"] == 1.35  # ratios to 6 places
    assert rows[0]["llmsweep"]["power"]["source"] == "simulated"
    assert rows[1]["power_valid"] == 0 and "joules_per_output_token" not in rows[1]
    # Read back: a 0 verdict carries no power figures (the app deletes them); a valid row's figures come back.
    invalid_row = {**rows[0], "power_valid": 0}
    assert from_inferencex_row("x", invalid_row, 0).metric("joules_per_output_token") is None
    back = from_inferencex_row("x", rows[0], 0)
    assert back.metric("joules_per_output_token") == 1.35 and back.metric("avg_power_w") == 270.0
    assert back.metric("tokens_per_joule") == pytest.approx(1 / 1.08)
    # Exported again from the store it was imported into: how its run measured power stays in our block.
    again = inferencex_row(back)
    assert again["llmsweep"]["power"] == rows[0]["llmsweep"]["power"]
    assert again["total_gpu_energy_j"] == 5400.123


def test_an_exported_agentic_point_keeps_its_corpus_through_an_inferencex_round_trip(make_run) -> None:
    """Points match on the corpus they replayed: exported as InferenceX rows and imported back, ours must still
    match the originals (an imported InferenceX row of its own has no corpus and matches only with --ignore)."""
    p = points_from_run(make_run("r", concs=(8,)))[0]
    agentic = dataclasses.replace(p, identity=dataclasses.replace(p.identity, corpus="sha256:0123456789abcdef"))
    (row,) = json.loads(export_points([agentic], "inferencex", include_unpublished=True))
    back = from_inferencex_row("import:x", row, 0)
    assert back.identity.corpus == "sha256:0123456789abcdef" and back.identity.key() == agentic.identity.key()
    row.pop("llmsweep")
    assert from_inferencex_row("import:y", row, 0).identity.corpus == ""


def test_an_export_of_a_release_before_the_corpus_was_part_of_the_identity_imports_with_its_corpus(
        make_run, tmp_path: Path) -> None:
    """A JSON export written before 2026-12-02 has no `corpus` in its rows' identity (checked against that release's
    export of agentic-sim.yaml); its summaries record the corpus replayed. The import left it empty, so an agentic
    point matched its own run's points nowhere (their identity keys differ), where ingesting the run's folder, or the
    store that release wrote, reads it from the summary. Read the same way, it matches again."""
    from llmsweep.metrics.model import Summary
    from llmsweep.results.rundir import load_run

    run = make_run("r", concs=(4, 8))
    for art in run.jobs:  # the corpus each point replayed, as a run on a trace corpus records it
        summary = Summary.load(art.dir / "summary.json")
        summary.provenance.workload = {"corpus_digest": "sha256:" + "ab" * 32}
        summary.write(art.dir / "summary.json")
    points = points_from_run(load_run(run.path))
    assert {p.identity.corpus for p in points} == {"sha256:abababababababab"}
    doc = json.loads(export_points(points, "json"))
    for row in doc["results"]:
        del row["identity"]["corpus"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    _, _, back = import_file(path)
    assert [p.identity for p in back] == [p.identity for p in points]
    assert [p.identity.key() for p in back] == [p.identity.key() for p in points]


def _per_12_gpus(p: ResultPoint) -> dict[str, Any]:
    """The point's figures with its throughput per GPU of a 12-GPU deployment, as its summary would give them."""
    assert p.summary is not None
    thr = p.summary.throughput
    return {**p.metrics, "tput_per_gpu": thr.total_tps / 12, "output_tput_per_gpu": thr.output_tps / 12,
            "input_tput_per_gpu": (thr.total_tps - thr.output_tps) / 12}


def _disaggregated(p: ResultPoint) -> ResultPoint:
    """The point as a 1P(tp4) + 1D(tp8) disaggregated job (the store's topology check is the run's business)."""
    job = {**p.job, "multinode": True, "disagg": True, "gpus": 12,
           "prefill": {"num-worker": 1, "tp": 4, "ep": 1, "dp-attn": False},
           "decode": {"num-worker": 1, "tp": 8, "ep": 8, "dp-attn": True}}
    for key in ("tp", "ep", "pp", "dcp-size", "pcp-size", "dp-attn"):
        job.pop(key)
    return dataclasses.replace(p, job=job, identity=identity_from_job(job), gpus=12, metrics=_per_12_gpus(p))


def test_a_disaggregated_points_flat_row_shows_its_workers_not_single_server_defaults(make_run,
                                                                                    tmp_path: Path) -> None:
    """`results list --json`, `results show` and the CSV export showed a prefill/decode point as `tp 1, ep 1,
    dp_attn false` beside its workers: single-server defaults no worker ran with. Its row leaves those null (empty
    in the CSV), as the dashboard leaves them out; an aggregated point's row keeps them, every row has the same
    columns, and our JSON export still imports back to the same identity."""
    agg = points_from_run(make_run("r", concs=(8,), tp=4, ep=2))[0]
    disagg = _disaggregated(agg)
    row = describe(disagg)
    assert tuple(row) == RESULT_COLUMNS and row["workers"] == "P1x(tp4 ep1) D1x(tp8 ep8 dpa)"
    assert {f: row[f] for f in SERVER_FIELDS} == dict.fromkeys(SERVER_FIELDS), row
    assert (describe(agg)["tp"], describe(agg)["ep"], describe(agg)["dp_attn"]) == (4, 2, False)
    single, multi = csv.DictReader(io.StringIO(export_points([agg, disagg], "csv")))
    assert (single["tp"], single["ep"]) == ("4", "2")
    assert (multi["tp"], multi["ep"], multi["dp_attn"], multi["workers"]) == ("", "", "", row["workers"])
    path = tmp_path / "export.json"
    disagg = dataclasses.replace(disagg, job_id=disagg.job_id + "-pd", result_id=disagg.result_id + "-pd")
    path.write_text(export_points([agg, disagg], "json"))
    _, _, back = import_file(path)
    assert [p.identity for p in back] == [agg.identity, disagg.identity]
    assert [p.identity.key() for p in back] == [agg.identity.key(), disagg.identity.key()]


def test_a_disaggregated_row_carries_each_roles_power_only_where_the_run_recorded_it(make_run) -> None:
    """InferenceX's multinode rows add each role's energy, watts per GPU and J per input (prefill) or output (decode)
    token to the whole-deployment power keys; a figure the run did not record, or power that is not valid, exports
    nothing, and where the watts came from is the run's own word."""
    from llmsweep.metrics.model import PowerBlock, RolePower

    points = [_disaggregated(p) for p in points_from_run(make_run("r", concs=(4, 8, 16)))]
    modelled, invalid, without = (p.summary for p in points)
    assert modelled is not None and invalid is not None and without is not None
    roles = {"prefill": RolePower(expected_gpus=4, observed_gpus=4, energy_j=1234.56789, avg_power_w=220.12345,
                                  joules_per_input_token=0.1234567891),
             "decode": RolePower(expected_gpus=8, observed_gpus=8, energy_j=4321.0, avg_power_w=410.0,
                                 joules_per_output_token=None)}
    modelled.power = PowerBlock(source="simulated", backend="sim", power_valid=True, energy_j=5555.56789,
                                avg_power_w=300.0, roles=roles)
    invalid.power = PowerBlock(source="simulated", backend="sim", power_valid=False,
                               reasons=["role_gpu_count_mismatch"],
                               roles={r: RolePower(expected_gpus=b.expected_gpus) for r, b in roles.items()})
    without.power = None
    rows = json.loads(export_points(points, "inferencex", include_unpublished=True))
    assert all(r["is_multinode"] for r in rows)
    role_keys = {k for r in rows for k in r if k.startswith(("prefill_", "decode_"))
                 and ("energy" in k or "power" in k or "joules" in k)}
    assert {k for k in role_keys if k in rows[0]} == {
        "prefill_gpu_energy_j", "prefill_avg_power_w", "prefill_joules_per_input_token", "decode_gpu_energy_j",
        "decode_avg_power_w"}  # the decode J/token the run did not record stays absent
    assert (rows[0]["prefill_gpu_energy_j"], rows[0]["prefill_avg_power_w"], rows[0]["decode_gpu_energy_j"],
            rows[0]["decode_avg_power_w"]) == (1234.568, 220.123, 4321.0, 410.0)
    assert rows[0]["prefill_joules_per_input_token"] == 0.123457  # ratios to 6 places
    assert rows[0]["total_gpu_energy_j"] == 5555.568 and rows[0]["power_valid"] == 1
    assert rows[0]["llmsweep"]["power"]["source"] == "simulated" and rows[0]["source"] == "simulated"
    assert rows[1]["power_valid"] == 0 and not any(k in rows[1] for k in role_keys)
    # sampled no power: the 0 verdict every InferenceX row without samples has (it wrote no power keys at all)
    assert rows[2]["power_valid"] == 0 and rows[2]["power_metric_schema_version"] == 2
    assert not any(k in rows[2] for k in role_keys)
    assert "power" not in rows[2]["llmsweep"]


def test_a_row_without_a_concurrency_is_refused_naming_it(tmp_path: Path) -> None:
    """It was stored as conc 0 without a word, and the dashboard drew a `c0` point."""
    row = {"hw": "mi355x", "model": "m", "infmax_model_prefix": "m", "framework": "sglang", "precision": "fp8",
           "isl": 1024, "osl": 1024, "tp": 8, "tput_per_gpu": 100.0}
    with pytest.raises(ResultInputError, match="row 3 names no concurrency"):  # bad input, exit 2
        from_inferencex_row("import:x", row, 3)
    assert from_inferencex_row("import:x", {**row, "conc": 4}, 3).identity.conc == 4
    with pytest.raises(ResultInputError, match="row 3 has unknown source 'guessed'"):
        from_inferencex_row("import:x", {**row, "conc": 4, "source": "guessed"}, 3)


def test_a_row_without_hardware_is_refused_naming_it() -> None:
    """A row with no `hw` was stored on hardware "" (its per-GPU figures of no GPU; a series without hardware that
    matches nothing), where InferenceX's app skips it as unmapped."""
    row = {"conc": 4, "model": "m", "infmax_model_prefix": "m", "framework": "sglang", "precision": "fp8",
           "isl": 1024, "osl": 1024, "tp": 8, "tput_per_gpu": 100.0}
    for missing in (row, {**row, "hw": None}, {**row, "hw": ""}):
        with pytest.raises(ResultInputError, match=r"row 3 \(row0003\) names no hardware \(`hw`"):
            from_inferencex_row("import:x", missing, 3)
    assert from_inferencex_row("import:x", {**row, "hw": "cluster:mi355x-amds"}, 3).identity.hardware == "mi355x"


def test_an_import_that_would_drop_results_of_an_earlier_import_is_refused(make_run, tmp_path: Path) -> None:
    """Importing a part of an export (its first row, its published rows) over the whole one replaced the run and
    silently dropped the rest; as `results ingest` does for a partial folder, it is refused, nothing written, unless
    forced."""
    from llmsweep.results.store import ImportConflictError

    points = points_from_run(make_run("r", concs=(1, 4, 16)))
    whole, part = tmp_path / "whole.json", tmp_path / "part.json"
    whole.write_text(export_points(points, "json"))
    doc = json.loads(whole.read_text())
    rows_key = next(k for k, v in doc.items() if isinstance(v, list)) if isinstance(doc, dict) else None
    if rows_key is None:
        part.write_text(json.dumps(doc[:1]))
    else:
        part.write_text(json.dumps({**doc, rows_key: doc[rows_key][:1]}))
    with Store(tmp_path / "s.sqlite") as store:
        (run_id,), n, _ = import_into(store, whole)
        assert n == 3
        with pytest.raises(ImportConflictError, match="drop 2 of the 3"):
            import_into(store, part)
        assert len(store.result_job_ids(run_id)) == 3  # nothing written
        assert import_into(store, whole)[1] == 3  # the whole file again replaces the run as before
        assert import_into(store, part, force=True)[1] == 1
        assert len(store.result_job_ids(run_id)) == 1


def test_an_agentic_rows_cache_hit_rate_and_kv_peak_come_back_on_import(make_run, tmp_path: Path) -> None:
    """Our AgentX rows carry `server_gpu_cache_hit_rate` and `gpu_kv_cache_usage_pct` (a percentage); an import read
    neither, so both hot columns were empty after a round trip."""
    (point,) = points_from_run(make_run("r", concs=(4,)))
    path = tmp_path / "ix.json"
    path.write_text(export_points([point], "inferencex", include_unpublished=True))
    _, _, (back,) = import_file(path)
    for column in ("gpu_cache_hit_rate", "gpu_kv_usage_max", "request_qps"):  # (and its requests per second)
        assert point.metric(column) is not None
        assert back.metric(column) == pytest.approx(point.metric(column)), column


def test_a_nested_agentx_rows_cache_kv_and_qps_figures_are_read_into_their_columns(tmp_path: Path) -> None:
    """AgentX's v3 aggregate nests its figures (`request_metrics`, `server_metrics`: agentx-spec §3.8); the import read
    the latency blocks and the per-GPU throughput only, so the point stored lacked the GPU prefix-cache hit rate, the
    KV peak and the requests per second the row holds. Each is read into its hot column, as InferenceX-app's ingest
    flattens them; a flat field the row also has wins, as before."""
    row: dict[str, Any] = {
           "hw": "cluster:b300-nv", "conc": 16, "image": "vllm/vllm-openai:v0.23.0", "model": "deepseek-ai/DSV4",
           "infmax_model_prefix": "dsv4", "framework": "vllm", "precision": "fp4", "spec_decoding": "none",
           "scenario_type": "agentic-coding", "tp": 4, "ep": 1, "kv_offloading": "none", "kv_offload_backend": "",
           "num_requests_total": 1648, "num_requests_successful": 1648,
           "request_metrics": {
               "qps": {"window_seconds": 1, "samples": 7209, "mean": 0.22846, "p50": 0, "p90": 1, "std": 0.60707},
               "latency": {"ttft": {"mean": 12.9, "p50": 1.49712, "p90": 56.22194},
                           "tpot": {"p50": 0.03677, "p90": 0.16652}},
               "throughput": {"total": {"tokens_per_second": 36173.88892}, "duration_seconds": 7222.04352,
                              "per_gpu": {"total_tput_tps": 9043.47223, "output_tput_tps": 48.43723}},
               "cache": {"theoretical_cache_hit_rate": 0.97509}},
           "server_metrics": {"present": True, "adapter": "vllm",
                              "cache": {"gpu_cache_hit_rate": 0.78539, "cpu_cache_hit_rate": 0,
                                        "overall_cache_hit_rate": 0.78539},
                              "kv_cache": {"gpu_usage_pct": 0.82134, "cpu_usage_pct": None},
                              "tokens": {"prompt_total": 261750519, "generation_total": 1422696}},
           "kv_cache_pool_tokens": 3000000}
    path = tmp_path / "agg_agentic.json"
    path.write_text(json.dumps([row, {**row, "conc": 32, "server_gpu_cache_hit_rate": 0.5}]))
    nested, flat_wins = import_file(path)[2]
    assert {c: nested.metric(c) for c in ("request_qps", "gpu_cache_hit_rate", "gpu_kv_usage_max", "tput_per_gpu",
                                          "p50_ttft", "p90_tpot")} == {
        "request_qps": 0.22846, "gpu_cache_hit_rate": 0.78539, "gpu_kv_usage_max": 0.82134,
        "tput_per_gpu": 9043.47223, "p50_ttft": 1.49712, "p90_tpot": 0.16652}
    assert flat_wins.metric("gpu_cache_hit_rate") == 0.5
    bad = {**row, "request_metrics": {**row["request_metrics"], "qps": {"mean": -1.0}}}
    path.write_text(json.dumps([bad]))
    with pytest.raises(ResultInputError, match=r"`mean_qps` is -1.0, not a figure of 0 or more"):
        import_file(path)



def test_an_inferencex_round_trip_keeps_what_the_run_warned_and_its_clock(make_run, tmp_path: Path) -> None:
    """Our InferenceX rows dropped the run's warnings (the ⚠ a real engine would refuse the job) and the clock (virtual
    or wall-clock time), so an imported point lost both; the block carries them now."""
    (point,) = points_from_run(make_run("r", concs=(4,)))
    point = dataclasses.replace(point, provenance={**point.provenance, "clock": "virtual"})
    said = ["a real engine would refuse it: engine.feature-gate"]
    path = tmp_path / "ix.json"
    path.write_text(export_points([point], "inferencex", include_unpublished=True,
                                  warnings={(point.run_id, point.job_id): said}))
    _, _, back = import_file(path)
    assert back[0].provenance.get("clock") == "virtual"
    from llmsweep.results.interchange import read_import

    assert read_import(path).warned == {(back[0].run_id, back[0].job_id): said}


def test_a_published_row_over_its_scenarios_error_gate_is_invalid(tmp_path: Path) -> None:
    """A row without our block had its verdict from its successes alone: 70 of 100 requests failed and it was stored
    valid, on a frontier. It is judged by the error gate `run` judges its scenario's points by (agentic 0.10, fixed
    length 0.05), the reason saying so; within the gate it stays valid."""
    def row(conc: int, ok: int, **kw: object) -> dict[str, object]:
        return {"hw": "mi355x", "conc": conc, "image": "lmsysorg/sglang:v0.5.16", "model": "Qwen/Qwen3.5",
                "framework": "sglang", "precision": "fp8", "tp": 8, "num_requests_total": 100,
                "num_requests_successful": ok, "tput_per_gpu": 1000.0, **kw}

    agentic = {"scenario_type": "agentic-coding", "kv_offloading": "none"}
    fixed = {"isl": 1024, "osl": 1024, "spec_decoding": "none", "disagg": False, "ep": 1, "dp_attention": "false"}
    path = tmp_path / "agg_bmk.json"
    path.write_text(json.dumps([row(8, 30, **agentic), row(16, 92, **agentic), row(4, 94, **fixed),
                                row(8, 96, **fixed)]))
    _, _, points = import_file(path)
    assert [p.verdict for p in points] == ["invalid", "valid", "invalid", "valid"]
    assert points[0].reasons == ("error ratio 0.7000 exceeds 0.1 (the agentic-coding gate; the published row holds "
                                 "no verdict)",)
    assert points[2].reasons[0].startswith("error ratio 0.0600 exceeds 0.05 (the fixed-seq-len gate")


def _strict(text: str) -> Any:
    """The document of a strict JSON text (JavaScript's JSON.parse, jq: NaN and Infinity are not JSON)."""
    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_a_published_nan_figure_exports_again_as_null_and_round_trips(tmp_path: Path) -> None:
    """InferenceX's Python writes a figure it has no number for as NaN (and Infinity), and an import reads it as no
    figure. Exporting the imported row again wrote NaN back into the file, which strict JSON readers refuse. The
    field is exported null (the row has it, without a number), our JSON export's copy of the row too; the
    re-export imports as the NaN row did and exports again the same."""
    from click.testing import CliRunner

    from llmsweep.cli.main import cli

    row = {"hw": "h100", "conc": 8, "image": "vllm/vllm-openai:v0.9.0", "model": "m/M", "infmax_model_prefix": "m",
           "framework": "vllm", "precision": "fp8", "spec_decoding": "none", "disagg": False, "tp": 8, "ep": 1,
           "dp_attention": "false", "isl": 1024, "osl": 1024, "tput_per_gpu": 1000.0, "output_tput_per_gpu": 500.0,
           "median_ttft": float("nan"), "p99_ttft": float("inf"), "median_tpot": 0.02, "median_intvty": 50.0,
           "num_requests_total": 100, "num_requests_successful": 100}
    published = tmp_path / "agg_bmk.json"
    published.write_text(json.dumps([row]))  # (Python's json writes NaN and Infinity)
    runner = CliRunner()

    def export(store: Path, fmt: str) -> str:
        done = runner.invoke(cli, ["results", "export", "--format", fmt, "--store", str(store)],
                             catch_exceptions=False)
        assert done.exit_code == 0, done.output
        return done.stdout

    first, second = tmp_path / "first.sqlite", tmp_path / "second.sqlite"
    assert runner.invoke(cli, ["results", "import", str(published), "--store", str(first)]).exit_code == 0
    (again,) = _strict(export(first, "inferencex"))
    assert again["median_ttft"] is None and again["p99_ttft"] is None and again["median_tpot"] == 0.02
    (ours,) = _strict(export(first, "json"))["results"]
    assert ours["summary"]["median_ttft"] is None and ours["metrics"]["p50_ttft"] is None
    (tmp_path / "again.json").write_text(json.dumps([again]))
    assert runner.invoke(cli, ["results", "import", str(tmp_path / "again.json"), "--store",
                               str(second)]).exit_code == 0
    (third,) = _strict(export(second, "inferencex"))
    with Store(first, readonly=True) as a, Store(second, readonly=True) as b:
        assert [p.metrics for p in a.results()] == [p.metrics for p in b.results()]
    assert third["llmsweep"].pop("origin") == "llmsweep-export" and again["llmsweep"].pop("origin") == "inferencex"
    assert third == again


def test_a_csv_exports_lists_read_back_whole_and_its_latency_columns_name_their_unit(make_run) -> None:
    """The CSV export joined a row's reasons and warnings with `;`, which a reason may hold itself (two reasons, one
    with a `;`, read as three; one warning with a `;` as two). A list is a JSON array in its cell, which any reader
    splits back whole. A latency column's header said no unit: it says seconds (`p50_ttft_s`), from the registry."""
    from llmsweep.metrics.registry import HOT_BY_NAME

    (p,) = points_from_run(make_run("r", concs=(4,)))
    reasons = ("TTFT above 2 s; at conc 4, twice", 'a "quoted" reason', "smoke")
    p = dataclasses.replace(p, reasons=reasons)
    warned = ["a real engine would refuse it; engine.feature-gate"]
    reader = csv.DictReader(io.StringIO(export_points([p], "csv", warnings={(p.run_id, p.job_id): warned})))
    (row,) = reader
    assert json.loads(row["reasons"]) == list(reasons) and json.loads(row["warnings"]) == warned
    seconds = [c for c in RESULT_COLUMNS if c in HOT_BY_NAME and HOT_BY_NAME[c].metric.unit == "s"]
    assert {"p50_ttft", "p90_tpot", "p90_e2el"} <= set(seconds)
    header = list(reader.fieldnames or ())
    assert header == [f"{c}_s" if c in seconds else c for c in (*RESULT_COLUMNS, "warnings")]
    assert float(row["p50_ttft_s"]) == pytest.approx(p.metric("p50_ttft"))
