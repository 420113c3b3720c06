"""aiperf's exports read back as llmsweep records: the same requests, times and tokens, under our definitions.

The fixtures are real aiperf 0.13.0 output (tests/data/aiperf/README.md). Where the two tools define a figure the same
way (TTFT, TPOT, E2EL), our summary of aiperf's records must reproduce aiperf's own aggregate: a wrong time base, a
dropped chunk or a mis-assigned phase shows up as a mismatch.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from support.cli import run_main

from llmsweep.client import Endpoint
from llmsweep.errors import ConfigError, DatasetError
from llmsweep.peers import (
    AiperfRun,
    aiperf_argv,
    import_aiperf_dir,
    read_aiperf_figures,
    read_aiperf_records,
    read_aiperf_server_latency,
    write_aiperf_dataset,
)
from llmsweep.workload.fixed import FixedLengthConfig, FixedLengthWorkload

DATA = Path(__file__).resolve().parents[2] / "data" / "aiperf"
OK, FAILED = DATA / "ok", DATA / "failed"
WARMUPS = 4
EP = Endpoint(base_url="http://h:8000", model="m")


def _max_tokens() -> list[int]:
    return [json.loads(line)["output_length"] for line in (OK / "dataset.jsonl").read_text().splitlines()]


def test_records_keep_phase_position_times_and_server_usage() -> None:
    records = list(read_aiperf_records(OK, max_tokens=_max_tokens(), warmups=WARMUPS))
    assert [r.phase for r in records].count("warmup") == WARMUPS and len(records) == 12
    assert sorted(r.request_index for r in records) == list(range(12))  # warm-ups first, as the dataset was written
    for r in records:
        assert r.ok and r.status == 200
        assert r.completion_tokens == r.max_tokens  # each request got what its dataset line asked for
        assert len(r.chunk_times) == r.completion_tokens  # one chunk per token from this server
        assert r.sent_at is not None and r.first_token_at == r.chunk_times[0] and r.sent_at < r.first_token_at
        assert r.chunk_times == sorted(r.chunk_times) and r.end_at is not None and r.end_at >= r.chunk_times[-1]
        assert r.prompt_tokens and r.prompt_tokens > 32


def test_summary_of_the_records_reproduces_aiperfs_own_figures_where_definitions_agree(tmp_path: Path) -> None:
    summary = import_aiperf_dir(OK, tmp_path / "run", max_tokens=_max_tokens(), warmups=WARMUPS)
    own = read_aiperf_figures(OK)
    assert summary.requests.successful == own["requests"]["successful"] == 8
    assert summary.requests.warmup == WARMUPS and summary.requests.output_length_mismatch == 0
    for name in ("ttft", "tpot", "e2el"):
        for stat in ("mean", "p50"):
            # absolute unix times in float64 resolve ~0.2 µs: 1e-4 of a 5 ms gap, far below one lost chunk (1/16)
            got = getattr(summary.latency, name).stat(stat)
            assert got == pytest.approx(own["latency"][name][stat], rel=1e-4), (name, stat)
    raw = json.loads((OK / "profile_export_aiperf.json").read_text())
    assert summary.tokens.output_total == raw["total_osl"]["avg"]
    assert summary.tokens.input_total == raw["total_isl"]["avg"]
    # throughput: aiperf divides by its last response − first start; we by last end − first send: within 2 %
    assert summary.throughput.output_tps == pytest.approx(own["throughput"]["output_tps"], rel=0.02)
    assert own["aiperf_version"] == "0.13.0"
    assert (summary.provenance.model_extra or {}).get("aiperf_version") == "0.13.0"  # an open field of the import


def test_the_imported_directory_resummarises_to_the_same_summary(tmp_path: Path) -> None:
    from llmsweep.client.folder import summarise_dir

    first = import_aiperf_dir(OK, tmp_path / "run", warmups=WARMUPS)
    again = summarise_dir(tmp_path / "run", write=False)
    assert again.latency == first.latency and again.throughput == first.throughput


def test_failed_requests_are_failed_records_with_their_class_not_a_crash(tmp_path: Path) -> None:
    records = list(read_aiperf_records(FAILED))
    assert records and all(r.error_class == "http" and r.status == 501 for r in records)
    assert all("Unsupported method" in (r.error or "") for r in records)
    summary = import_aiperf_dir(FAILED, tmp_path / "run")  # no aggregate: aiperf wrote none
    assert summary.requests.failed == len(records) and summary.requests.error_categories == {"http": 4}
    assert summary.validity.verdict == "invalid"
    with pytest.raises(DatasetError, match=r"profile_export_aiperf\.json"):
        read_aiperf_figures(FAILED)


def test_a_damaged_export_names_its_file_and_line(tmp_path: Path) -> None:
    lines = (OK / "profile_export.jsonl").read_text().splitlines()
    (tmp_path / "profile_export.jsonl").write_text("\n".join([lines[0], lines[1][:40], *lines[2:]]) + "\n")
    with pytest.raises(DatasetError, match=r"profile_export\.jsonl:2: not JSON"):
        list(read_aiperf_records(tmp_path))
    with pytest.raises(DatasetError, match="holds no aiperf"):
        list(read_aiperf_records(tmp_path / "nowhere"))


def test_the_dataset_is_the_workloads_sequence_warmups_first(tmp_path: Path) -> None:
    cfg = FixedLengthConfig(isl=80, osl=12, api="chat", num_prompts=5, num_warmups=2, range_ratio=0.5, seed=9,
                            extra_body={"temperature": 0})
    endpoint = Endpoint(base_url="http://h:8000", model="m")
    max_tokens = write_aiperf_dataset(FixedLengthWorkload(cfg), tmp_path / "d.jsonl", endpoint)
    lines = [json.loads(x) for x in (tmp_path / "d.jsonl").read_text().splitlines()]
    twin = FixedLengthWorkload(cfg)
    expected = [twin.request(i) for i in range(7)]
    assert [line["text"] for line in lines] == [s.messages[0]["content"] for s in expected]  # type: ignore[index]
    assert [line["output_length"] for line in lines] == [s.max_tokens for s in expected] == max_tokens
    assert all(line["extra"] == {"ignore_eos": True, "temperature": 0} for line in lines)
    strict = endpoint.model_copy(update={"send_ignore_eos": False})  # a server that answers 422 to ignore_eos
    write_aiperf_dataset(FixedLengthWorkload(cfg), tmp_path / "e.jsonl", strict)
    assert all(json.loads(x)["extra"] == {"temperature": 0} for x in (tmp_path / "e.jsonl").read_text().splitlines())


def test_the_dataset_refuses_what_aiperf_cannot_replay(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="chat"):
        write_aiperf_dataset(FixedLengthWorkload(FixedLengthConfig(isl=8, osl=2, num_prompts=2)), tmp_path / "d", EP)
    with pytest.raises(ConfigError, match="request count"):
        write_aiperf_dataset(FixedLengthWorkload(FixedLengthConfig(isl=8, osl=2, api="chat")), tmp_path / "d", EP)


def test_the_command_sends_what_llmsweep_sends() -> None:
    run = AiperfRun(endpoint=Endpoint(base_url="http://h:8000/v1", model="m"), dataset=Path("d.jsonl"),
                    artifact_dir=Path("a"), concurrency=8, requests=32, warmups=16, tokenizer="/tok")
    argv = aiperf_argv(run)
    flags = dict(zip(argv[2::2], argv[3::2], strict=False))
    assert argv[:2] == ["aiperf", "profile"] and flags["--url"] == "http://h:8000"
    assert "--use-legacy-max-tokens" in argv  # llmsweep sends max_tokens, not max_completion_tokens
    assert "--use-server-token-count" in argv and "--streaming" in argv
    opts = {a: argv[i + 1] for i, a in enumerate(argv) if a.startswith("--") and i + 1 < len(argv)}
    assert (opts["--concurrency"], opts["--request-count"], opts["--warmup-request-count"]) == ("8", "32", "16")
    assert opts["--dataset-sampling-strategy"] == "sequential" and opts["--custom-dataset-type"] == "single_turn"


def test_the_servers_own_latency_over_aiperfs_run_comes_from_the_scrapes_aiperf_made() -> None:
    """A real export: aiperf against vLLM 0.26.0 on the H200, 16 measured requests at concurrency 1."""
    vllm = DATA / "vllm-h200"
    lat = read_aiperf_server_latency(vllm)
    assert lat is not None and lat["requests"] == 16  # the profiling phase, not the warm-ups
    hist = json.loads((vllm / "server_metrics_export.json").read_text())["metrics"]
    ttft = hist["vllm:time_to_first_token_seconds"]["series"][0]["stats"]
    assert lat["ttft_mean_s"] == pytest.approx(ttft["sum"] / ttft["count"])
    tpot = hist["vllm:request_time_per_output_token_seconds"]["series"][0]["stats"]
    assert lat["tpot_mean_s"] == pytest.approx(tpot["avg"])
    assert lat["itl_mean_s"] == pytest.approx(lat["tpot_mean_s"], rel=0.05)  # one token per step at concurrency 1
    assert read_aiperf_server_latency(OK) is None  # the simulator's run: no latency histograms scraped


def test_a_folder_of_several_aiperf_runs_is_refused_not_guessed(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="holds 2 aiperf runs"):
        list(read_aiperf_records(DATA))  # ok/ and failed/ both hold an export
    from click.testing import CliRunner

    from llmsweep.cli.peer import peer

    made = CliRunner().invoke(peer, ["import", str(OK), "--out", str(tmp_path / "a"), "--num-warmups", "4",
                                     "--served-by", "simulated"])
    assert made.exit_code == 0
    assert CliRunner().invoke(peer, ["import", str(FAILED), "--out", str(tmp_path / "b"), "--served-by", "measured"]
                              ).exit_code == 1  # invalid


def test_an_overflowing_prompt_is_classed_as_our_client_would_class_it(tmp_path: Path) -> None:
    line = json.loads((FAILED / "profile_export.jsonl").read_text().splitlines()[0])
    line["error"] = {"code": 400, "type": "Bad Request",
                     "message": "This model's maximum context length is 4096 tokens. However, you requested 5000"}
    (tmp_path / "profile_export.jsonl").write_text(json.dumps(line) + "\n")
    (record,) = read_aiperf_records(tmp_path)
    assert record.error_class == "context_overflow" and record.status == 400


def test_an_import_says_what_served_the_load_as_told_and_summarize_keeps_it(tmp_path: Path) -> None:
    """The artifacts do not say what served aiperf's load (OK's run was against the simulator): `--served-by` does (it
    is required: a default of measured labelled OK's simulated load as measured), and the folder's run.json carries
    it, so `summarize` gives the same label back."""
    from click.testing import CliRunner

    from llmsweep.cli.peer import peer
    from llmsweep.client.folder import summarise_dir

    made = CliRunner().invoke(peer, ["import", str(OK), "--out", str(tmp_path / "sim"), "--num-warmups", "4",
                                     "--served-by", "simulated", "--json"])
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout)["source"] == "simulated"
    assert summarise_dir(tmp_path / "sim", write=False).source == "simulated"
    real = CliRunner().invoke(peer, ["import", str(OK), "--out", str(tmp_path / "real"), "--served-by", "measured"])
    assert real.exit_code == 0 and summarise_dir(tmp_path / "real", write=False).source == "measured"
    unsaid = CliRunner().invoke(peer, ["import", str(OK), "--out", str(tmp_path / "unsaid"), "--num-warmups", "4"])
    assert unsaid.exit_code == 2 and "--served-by" in unsaid.output  # never guessed: OK's load was the simulator's
    assert not (tmp_path / "unsaid").exists()
    assert CliRunner().invoke(peer, ["import", str(OK), "--out", str(tmp_path / "x"), "--served-by", "predicted"]
                              ).exit_code == 2  # a prediction is no run: not a source an import can claim


def test_no_warm_ups_is_no_warm_up_flag_as_aiperf_refuses_a_count_of_zero() -> None:
    """aiperf 0.13 exits 1 on `--warmup-request-count 0` ("Input should be greater than 0"): a cross-check with
    `--num-warmups-per-conc 0` lost every aiperf run. No warm-ups is no flag; aiperf then sends none."""
    run = AiperfRun(endpoint=EP, dataset=Path("d.jsonl"), artifact_dir=Path("a"), concurrency=2, requests=4,
                    warmups=0, tokenizer="/tok")
    argv = aiperf_argv(run)
    assert "--warmup-request-count" not in argv
    assert argv[argv.index("--request-count") + 1] == "4" and argv[argv.index("--tokenizer") + 1] == "/tok"


def test_an_import_without_gpus_claims_no_gpu_count(tmp_path: Path) -> None:
    """aiperf's artifacts do not say how many GPUs served the load: without `--gpus` the import divided by 1 and
    printed tok/s/GPU for 1 GPU. Now the count is recorded as unknown and the figures read per endpoint, as `bench`'s
    against a server that reports none; `--gpus N` is the label the user gives, and `summarize` keeps either."""
    from click.testing import CliRunner

    from llmsweep.cli.peer import peer
    from llmsweep.client.folder import summarise_dir

    unsaid = CliRunner().invoke(peer, ["import", str(OK), "--out", str(tmp_path / "u"), "--num-warmups", "4",
                                       "--served-by", "simulated"])
    assert unsaid.exit_code == 0, unsaid.output
    assert "tok/s/endpoint" in unsaid.output and "GPUs unknown" in unsaid.output and "tok/s/GPU" not in unsaid.output
    again = summarise_dir(tmp_path / "u", write=False)
    assert again.provenance.gpus_known is False and "--gpus" in (again.provenance.gpus_from or "")
    said = CliRunner().invoke(peer, ["import", str(OK), "--out", str(tmp_path / "s"), "--num-warmups", "4",
                                     "--served-by", "simulated", "--gpus", "8", "--json"])
    assert said.exit_code == 0, said.output
    doc = json.loads(said.stdout)
    assert doc["throughput"]["gpus"] == 8 and doc["provenance"]["gpus_known"] is True
    assert doc["throughput"]["per_gpu"]["output_tps"] == pytest.approx(doc["throughput"]["output_tps"] / 8)
    assert summarise_dir(tmp_path / "s", write=False).throughput.gpus == 8


def _copy_ok(dest: Path) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("profile_export.jsonl", "profile_export_aiperf.json"):
        (dest / name).write_bytes((OK / name).read_bytes())
    return dest


def _import(capsys: pytest.CaptureFixture[str], artifacts: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    """`llmsweep peer import` as a user runs it (errors printed by `main`): (exit status, stdout, stderr)."""
    return run_main(capsys, "peer", "import", artifacts, "--out", out, "--num-warmups", "4", "--served-by",
                    "simulated", *extra)


def test_a_line_that_is_not_a_record_names_its_file_line_and_fix_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    art = _copy_ok(tmp_path / "a")
    lines = (art / "profile_export.jsonl").read_text().splitlines()
    for number, bad in ((3, "[1, 2]"), (5, '{"metadata": "x", "metrics": {}}'),
                        (2, lines[1].replace('"request_start_ns":', '"request_start_ns":"soon","was":'))):
        (art / "profile_export.jsonl").write_text("\n".join([*lines[:number - 1], bad, *lines[number:]]) + "\n")
        code, _, err = _import(capsys, art, tmp_path / f"o{number}")
        assert code == 2, err
        assert f"profile_export.jsonl:{number}: not an aiperf 0.13 record" in err and "fix:" in err


def test_a_damaged_aggregate_is_an_error_or_no_figures_never_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, text in (("cut", '{"aiperf_version": '), ("list", "[]")):
        art = _copy_ok(tmp_path / name)
        (art / "profile_export_aiperf.json").write_text(text)
        with pytest.raises(DatasetError, match=r"profile_export_aiperf\.json"):
            read_aiperf_figures(art)
        code, out, err = _import(capsys, art, tmp_path / f"o-{name}", "--json")  # the records still import
        assert code == 0, err
        doc = json.loads(out)
        assert doc["requests"]["successful"] == 8 and doc["provenance"]["aiperf_version"] is None


def test_an_empty_export_is_refused_before_any_folder_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """aiperf killed before it sent anything leaves an empty export: that is no run (it imported as one, 0 requests,
    `source` and all), and nothing is written."""
    art = tmp_path / "a"
    art.mkdir()
    (art / "profile_export.jsonl").write_text("\n")
    code, out, err = _import(capsys, art, tmp_path / "o", "--json")
    assert code == 2 and "holds no request" in err and out.strip() == ""
    assert not (tmp_path / "o").exists()


def _in_unit(line: dict[str, Any], unit: str, per_ms: float) -> dict[str, Any]:
    for entry in line["metrics"].values():
        if isinstance(entry, dict) and entry.get("unit") == "ms":
            value = entry["value"]
            entry["value"] = [v * per_ms for v in value] if isinstance(value, list) else value * per_ms
            entry["unit"] = unit
    return line


def test_latencies_are_read_in_the_unit_the_export_states(tmp_path: Path) -> None:
    """aiperf writes every per-request time with its unit; a record in seconds (or ns) was read as milliseconds, its
    TTFT 1000× too small, with no error. The unit is honoured, and a unit that is not a time unit is refused."""
    baseline = import_aiperf_dir(OK, tmp_path / "ms", warmups=WARMUPS)
    for unit, per_ms in (("s", 1e-3), ("ns", 1e6)):
        art = tmp_path / unit
        art.mkdir()
        lines = [json.loads(x) for x in (OK / "profile_export.jsonl").read_text().splitlines()]
        (art / "profile_export.jsonl").write_text("".join(json.dumps(_in_unit(x, unit, per_ms)) + "\n" for x in lines))
        summary = import_aiperf_dir(art, tmp_path / f"o-{unit}", warmups=WARMUPS)
        for name in ("ttft", "tpot", "itl", "e2el"):
            assert getattr(summary.latency, name).mean == pytest.approx(getattr(baseline.latency, name).mean,
                                                                        rel=1e-6), (unit, name)
    lines = (OK / "profile_export.jsonl").read_text().splitlines()
    odd = json.loads(lines[0])
    odd["metrics"]["time_to_first_token"]["unit"] = "tokens"
    (tmp_path / "odd").mkdir()
    (tmp_path / "odd" / "profile_export.jsonl").write_text(json.dumps(odd) + "\n")
    with pytest.raises(DatasetError, match=r"profile_export\.jsonl:1: .*time_to_first_token.*'tokens'"):
        list(read_aiperf_records(tmp_path / "odd"))
    agg = json.loads((OK / "profile_export_aiperf.json").read_text())
    agg["time_to_first_token"] = {k: (v / 1e3 if isinstance(v, float) else v)
                                  for k, v in agg["time_to_first_token"].items()} | {"unit": "s"}
    (tmp_path / "agg").mkdir()
    (tmp_path / "agg" / "profile_export_aiperf.json").write_text(json.dumps(agg))
    assert read_aiperf_figures(tmp_path / "agg")["latency"]["ttft"]["mean"] == pytest.approx(
        read_aiperf_figures(OK)["latency"]["ttft"]["mean"])
    assert read_aiperf_figures(OK)["throughput"]["duration_s"] == pytest.approx(
        json.loads((OK / "profile_export_aiperf.json").read_text())["benchmark_duration"]["avg"])  # aiperf: sec


def test_a_record_without_its_start_or_end_time_is_no_success(tmp_path: Path) -> None:
    """A line whose metadata lacks `request_start_ns` (a hand-trimmed or foreign export) counted as a successful
    request with no latency at all: one more success, its tokens in the throughput, its time nowhere. It is now a
    failed record that says which field is missing, as a record without an output token count already was."""
    lines = [json.loads(x) for x in (OK / "profile_export.jsonl").read_text().splitlines()]
    del lines[6]["metadata"]["request_start_ns"]
    del lines[7]["metadata"]["request_end_ns"]
    (tmp_path / "profile_export.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    records = list(read_aiperf_records(tmp_path, warmups=WARMUPS))
    assert [r.ok for r in records].count(False) == 2
    assert records[6].error_class == "protocol" and "request_start_ns" in (records[6].error or "")
    assert records[7].error_class == "protocol" and "request_end_ns" in (records[7].error or "")
    summary = import_aiperf_dir(tmp_path, tmp_path / "run", warmups=WARMUPS)
    assert summary.requests.successful == 6 and summary.requests.failed == 2
    assert summary.latency.ttft.count == summary.latency.e2el.count == 6  # every success has its times


def test_results_import_of_a_peer_clients_file_says_what_it_is_and_where_it_goes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`results import` takes llmsweep and InferenceX exports; given aiperf's own files it said "export with `llmsweep
    results export`" (which cannot make one from them) and for the per-request JSONL printed a JSON parse error.
    It now names the file's kind and points at `peer import`; a vllm bench / guidellm result says none is read."""
    vllm = tmp_path / "vllm.json"
    vllm.write_text(json.dumps({"backend": "vllm", "model_id": "m", "completed": 10, "mean_ttft_ms": 20.0}))
    guidellm = tmp_path / "guidellm.json"
    guidellm.write_text(json.dumps({"benchmarks": [{"type_": "generative_benchmark"}]}))
    cases = {OK / "profile_export_aiperf.json": ("an aiperf export", "peer import"),
             OK / "profile_export.jsonl": ("an aiperf export", "peer import"),
             vllm: ("vllm bench serve", "llmsweep bench"), guidellm: ("a guidellm report", "llmsweep bench")}
    for path, (kind, fix) in cases.items():
        code, out, err = run_main(capsys, "results", "import", path, "--store", tmp_path / "s.sqlite")
        assert code == 2 and out == "", err
        assert f"{path} is" in err and kind in err and fix in err.split("fix:")[1], err


def test_an_export_of_another_aiperf_release_is_imported_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The reader follows aiperf 0.13's fields; an export of another release was read as one without a word. The
    warning goes to stderr as a log line (outside pytest: `WARNING llmsweep.peers.aiperf: ...`), so `--json` stays
    valid."""
    art = _copy_ok(tmp_path / "a")
    agg = json.loads((art / "profile_export_aiperf.json").read_text())
    agg["aiperf_version"] = "0.21.0"
    (art / "profile_export_aiperf.json").write_text(json.dumps(agg))
    with caplog.at_level("WARNING", logger="llmsweep.peers.aiperf"):
        code, out, err = _import(capsys, art, tmp_path / "o", "--json")
    assert code == 0 and json.loads(out)["provenance"]["aiperf_version"] == "0.21.0", err
    assert any("aiperf 0.21.0" in r.getMessage() and "0.13." in r.getMessage() for r in caplog.records)
    caplog.clear()
    with caplog.at_level("WARNING", logger="llmsweep.peers.aiperf"):
        code, _, err = _import(capsys, OK, tmp_path / "o13")
    assert code == 0 and not any("written by aiperf" in r.getMessage() for r in caplog.records), err


def test_a_reasoning_answers_ttft_and_chunks_start_at_its_first_token_reasoning_included(tmp_path: Path) -> None:
    """aiperf's time to first *output* token skips reasoning chunks, its inter-chunk gaps count every chunk: anchored
    on the former, TTFT and E2EL came out late by the reasoning time and the last chunk fell after the request's end.
    The anchor is `time_to_first_token`, as llmsweep's client stamps and AgentX reports it."""
    lines = [json.loads(x) for x in (OK / "profile_export.jsonl").read_text().splitlines()]
    for line in lines:
        m = line["metrics"]
        if "time_to_first_token" in m and "inter_chunk_latency" in m:
            reasoning = sum(m["inter_chunk_latency"]["value"][:5])
            m["time_to_first_output_token"] = {**m["time_to_first_token"],
                                               "value": m["time_to_first_token"]["value"] + reasoning}
    art = tmp_path / "reasoning"
    art.mkdir()
    (art / "profile_export.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    for record in read_aiperf_records(art):
        if record.status == 200 and record.chunk_times and record.end_at is not None:
            assert record.chunk_times[-1] <= record.end_at + 1e-6, record
    baseline = import_aiperf_dir(OK, tmp_path / "base", warmups=WARMUPS)
    summary = import_aiperf_dir(art, tmp_path / "out", warmups=WARMUPS)
    assert summary.latency.ttft.mean == pytest.approx(baseline.latency.ttft.mean)


def test_a_crosscheck_naming_a_level_twice_is_refused_before_any_run(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`--concurrency 1,1`: both levels' runs wrote c1/llmsweep-0 and c1/aiperf-0, the second over the first, and the
    table built a noise band from repeats never asked for, comparing a run with itself."""
    code, _, err = run_main(capsys, "peer", "crosscheck", "--url", "http://127.0.0.1:9", "--model", "m",
                            "--tokenizer", tmp_path, "--isl", "16", "--osl", "4", "--concurrency", "1,1",
                            "--repeats", "1", "--out", tmp_path / "cc")
    assert code == 2 and "--concurrency names 1 more than once" in err, err
    assert not (tmp_path / "cc" / "c1").exists()


def test_an_export_saved_with_a_byte_order_mark_at_its_start_reads(tmp_path: Path) -> None:
    """aiperf's exports copied through a Windows tool start with a UTF-8 byte-order mark: line 1 of the records had
    been 'not JSON' and the aggregate's figures unread. They read as the files without the mark."""
    art = _copy_ok(tmp_path / "a")
    for name in ("profile_export.jsonl", "profile_export_aiperf.json"):
        (art / name).write_bytes(b"\xef\xbb\xbf" + (OK / name).read_bytes())
    assert list(read_aiperf_records(art)) == list(read_aiperf_records(OK))
    assert read_aiperf_figures(art) == read_aiperf_figures(OK)
    vllm = tmp_path / "vllm"  # the server's own scrapes too (was None: no latency, as if aiperf scraped none)
    shutil.copytree(DATA / "vllm-h200", vllm)
    scrapes = vllm / "server_metrics_export.json"
    scrapes.write_bytes(b"\xef\xbb\xbf" + scrapes.read_bytes())
    assert read_aiperf_server_latency(vllm) == read_aiperf_server_latency(DATA / "vllm-h200") is not None


def test_an_export_damaged_past_its_first_lines_leaves_out_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A line damaged after the first few (aiperf killed mid-write) was met after the lines before it were written:
    OUT kept a partial records.jsonl, the next import was refused as replacing results, and under --force the
    partial records sat beside the summary.json of the import being replaced. Nothing is written now."""
    art = _copy_ok(tmp_path / "a")
    lines = (art / "profile_export.jsonl").read_text().splitlines()
    (art / "profile_export.jsonl").write_text("\n".join([*lines[:6], lines[6][:40], *lines[7:]]) + "\n")
    code, _, err = _import(capsys, art, tmp_path / "o")
    assert code == 2 and "profile_export.jsonl:7" in err
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())
    good = tmp_path / "good"
    code, _, err = _import(capsys, _copy_ok(tmp_path / "b"), good)  # an earlier, complete import
    assert code == 0, err
    before = {f.name: f.read_bytes() for f in good.iterdir()}
    code, _, err = _import(capsys, art, good, "--force")
    assert code == 2 and "profile_export.jsonl:7" in err
    assert {f.name: f.read_bytes() for f in good.iterdir()} == before  # the complete import stands, untouched


def _one_warm_up(dest: Path) -> Path:
    """OK's artifacts with its first warm-up record only: an export aiperf labelled with 1 warm-up and 8 requests."""
    art = _copy_ok(dest)
    lines = (OK / "profile_export.jsonl").read_text().splitlines()
    kept = [line for i, line in enumerate(lines)
            if json.loads(line)["metadata"]["benchmark_phase"] != "warmup" or i == 0]
    (art / "profile_export.jsonl").write_text("\n".join(kept) + "\n")
    return art


def test_num_warmups_is_checked_against_the_warm_ups_the_export_labels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`peer import --num-warmups 3` of an export aiperf labelled with 1 warm-up imported `warmup: 1` (the option only
    moved the measured requests' numbering, which its help did not say). aiperf labels each record's phase, and those
    are the warm-ups: another count is refused, naming the export's, with nothing written; by default (or the same
    count) the import takes the export's, each request at its position in the dataset (warm-ups first)."""
    art = _one_warm_up(tmp_path / "a")
    code, out, err = run_main(capsys, "peer", "import", art, "--out", tmp_path / "three", "--num-warmups", "3",
                              "--served-by", "simulated")
    assert code == 2 and out == "", (out, err)
    assert "--num-warmups 3, but" in err and "labels 1 request as warm-up" in err and "nothing was imported" in err
    assert "fix: drop --num-warmups: the warm-ups are the 1 the export labels" in err
    assert not (tmp_path / "three").exists()
    for extra in ((), ("--num-warmups", "1")):
        folder = tmp_path / f"o{len(extra)}"
        code, out, err = run_main(capsys, "peer", "import", art, "--out", folder, *extra, "--served-by", "simulated",
                                  "--json")
        assert code == 0 and json.loads(out)["requests"]["warmup"] == 1, err
        records = [json.loads(line) for line in (folder / "records.jsonl").read_text().splitlines()]
        assert sorted(r["request_index"] for r in records) == list(range(9))  # none numbered over the warm-up
    help_text = run_main(capsys, "peer", "import", "--help")[1]
    assert "another is refused" in " ".join(help_text.split())


def test_a_window_under_10_s_is_said_as_measured_not_rounded_to_0(tmp_path: Path) -> None:
    """OK's run measured over 0.35 s, and its smoke reason said `profile window 0 s is shorter than 900 s`."""
    summary = import_aiperf_dir(OK, tmp_path / "run", source="simulated")
    assert summary.validity.reasons == ["smoke run: profile window 0.346 s is shorter than 900 s"]
