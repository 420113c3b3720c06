"""Artifacts: summary recomputed from the directory is identical; records survive SIGKILL; server metrics are read
back (realised acceptance length, required prefix); the CLI exits 1 only when a gate fails."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from support.stream_server import ServerConfig, StreamServer, run_in_subprocess
from support.workloads import SimpleWorkload

from llmsweep.client import Endpoint, RunOptions, run_benchmark
from llmsweep.client.runner import UNFINISHED, Progress
from llmsweep.metrics import summarise

REPO = Path(__file__).resolve().parents[2]


def test_summarize_recomputes_the_same_summary_from_the_directory(tmp_path: Path) -> None:
    with StreamServer(ServerConfig(ttft_s=0.005, itl_s=0.002, spec_accept_length=3.0, cached_fraction=0.5)) as srv:
        res = run_benchmark(
            SimpleWorkload(max_tokens=30, lanes_hint=2), Endpoint(base_url=srv.url, model="m"),
            RunOptions(concurrency=2, num_requests=30, gpus=8, scrape_interval_s=0.05), tmp_path,
        )
    written = json.loads((tmp_path / "summary.json").read_text())
    assert written == res.summary.dump()
    cli = subprocess.run(
        [sys.executable, "-m", "llmsweep.cli.main", "summarize", str(tmp_path), "--json"],
        capture_output=True, text=True, cwd=REPO,
    )
    assert cli.returncode == 0, cli.stderr
    assert json.loads(cli.stdout) == written
    sm = written["server_metrics"]
    assert sm["adapter"] == "vllm" and sm["scrapes"] > 2
    assert sm["spec_decode"]["acceptance_length"] == pytest.approx(3.0, abs=0.1)
    assert written["cache"]["observed_hit_rate"] == pytest.approx(0.5, abs=0.05)
    assert written["throughput"]["per_gpu"]["output_tps"] == pytest.approx(written["throughput"]["output_tps"] / 8)


def test_required_metrics_prefix_missing_makes_the_run_invalid(tmp_path: Path) -> None:
    with StreamServer(ServerConfig()) as srv:
        res = run_benchmark(
            SimpleWorkload(), Endpoint(base_url=srv.url, model="m"),
            RunOptions(concurrency=1, num_requests=3, require_metrics_prefix="sglang:"), tmp_path,
        )
    assert res.verdict == "invalid"
    assert any("sglang:" in r for r in res.summary.validity.reasons)


def test_finished_records_survive_a_sigkill_of_the_client(tmp_path: Path) -> None:
    proc, url = run_in_subprocess(ServerConfig(itl_s=0.002))
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO / "tests")!r})
        from support.workloads import SimpleWorkload
        from llmsweep.client import Endpoint, RunOptions, run_benchmark
        run_benchmark(SimpleWorkload(max_tokens=20, lanes_hint=4), Endpoint(base_url={url!r}, model="m"),
                      RunOptions(concurrency=4, duration_s=120), {str(tmp_path)!r})
    """)
    client = subprocess.Popen([sys.executable, "-c", script], cwd=REPO)
    try:
        path = tmp_path / "records.jsonl"
        deadline = time.time() + 60
        while time.time() < deadline and (not path.exists() or path.read_bytes().count(b"\n") < 40):
            time.sleep(0.05)
        os.kill(client.pid, signal.SIGKILL)
        client.wait()
    finally:
        client.kill()
        proc.kill()
        proc.wait()
    lines = path.read_bytes().split(b"\n")
    complete = [json.loads(x) for x in lines[:-1]]
    assert len(complete) >= 40 and lines[-1] == b""  # whole lines only: one write per record
    assert all(r["error_class"] is None for r in complete)
    assert summarise(path, gpus=1).requests.successful == len(complete)


def test_the_run_json_a_killed_client_leaves_says_what_served_it(tmp_path: Path) -> None:
    """Until the final run.json, the one written at the start stands for the run (a client killed outright): it says
    the source it was given, so `summarize` never labels a simulator's records measured."""
    during: list[dict[str, Any]] = []
    with StreamServer(ServerConfig(itl_s=0.002)) as srv:
        run_benchmark(SimpleWorkload(max_tokens=10), Endpoint(base_url=srv.url, model="m"),
                      RunOptions(concurrency=1, num_requests=5), tmp_path, source="simulated",
                      on_progress=lambda _: during.append(json.loads((tmp_path / "run.json").read_text())))
    assert during and all(doc["client"]["stop_reason"] == UNFINISHED for doc in during)
    assert all(doc["source"] == "simulated" for doc in during)


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *args], capture_output=True, text=True, cwd=REPO)


def test_cli_bench_fixed_writes_artifacts_and_exits_by_the_gate(tmp_path: Path) -> None:
    with StreamServer(ServerConfig(usage="final_chunk", send_done=False)) as srv:
        ok = _cli("bench", "fixed", "--url", srv.url, "--model", "m", "--isl", "32", "--osl", "8",
                  "--concurrency", "2", "--num-prompts", "10", "--out", str(tmp_path / "ok"), "--json")
    assert ok.returncode == 0, ok.stderr
    summary = json.loads(ok.stdout)
    assert summary["requests"]["successful"] == 10 and summary["requests"]["warmup"] == 4
    assert summary["validity"]["verdict"] == "valid"  # its planned prompts completed: no window minimum
    assert summary["tokens"]["input"]["mean"] == 32  # the test server counts prompt ids as tokens
    for name in ("records.jsonl", "summary.json", "run.json", "server_metrics.jsonl"):
        assert (tmp_path / "ok" / name).exists()
    with StreamServer(ServerConfig(fault="http500", fault_every=2)) as bad:
        failed = _cli("bench", "fixed", "--url", bad.url, "--model", "m", "--isl", "16", "--osl", "4",
                      "--request-rate", "50", "--num-prompts", "20", "--out", str(tmp_path / "bad"),
                      "--max-failure-ratio", "0.2")
    assert failed.returncode == 1
    assert "invalid" in failed.stdout
    bad_args = _cli("bench", "fixed", "--url", "http://127.0.0.1:1", "--model", "m", "--isl", "1", "--osl", "1",
                    "--num-prompts", "1")
    assert bad_args.returncode == 2 and "--concurrency" in bad_args.stderr


def test_cli_fixed_with_two_workers_sends_each_prompt_once(tmp_path: Path) -> None:
    with StreamServer(ServerConfig()) as srv:
        res = _cli("bench", "fixed", "--url", srv.url, "--model", "m", "--isl", "16", "--osl", "4",
                   "--concurrency", "4", "--num-prompts", "24", "--num-warmups", "0", "--client-workers", "2",
                   "--out", str(tmp_path), "--json")
    assert res.returncode == 0, res.stderr
    recs = [json.loads(x) for x in (tmp_path / "records.jsonl").read_text().splitlines()]
    assert sorted(r["request_index"] for r in recs) == list(range(24))
    assert {r["worker"] for r in recs} == {0, 1}


def test_the_progress_counts_the_windows_output_tokens_not_the_warm_ups(tmp_path: Path) -> None:
    """`bench`'s bar says `tok N` from the progress: the window's output tokens, as the summary counts them, with the
    warm-up's left out (they were in before: 2 × concurrency warm-ups of 10 tokens each)."""
    seen: list[Progress] = []
    with StreamServer(ServerConfig(itl_s=0.001)) as srv:
        res = run_benchmark(SimpleWorkload(max_tokens=10), Endpoint(base_url=srv.url, model="m"),
                            RunOptions(concurrency=2, num_requests=6, warmup_requests=4), tmp_path,
                            on_progress=seen.append)
    assert res.summary.requests.warmup == 4 and res.summary.requests.successful == 6
    assert seen[-1].warmup_finished == 4
    assert seen[-1].profiling_output_tokens == res.summary.tokens.output_total == 60


def test_summarize_refuses_records_of_another_run(tmp_path: Path) -> None:
    """`summarize` judges records by the run.json beside them: another run's records.jsonl copied in (fewer records:
    once taken for a packed slice and passed `valid`; as many: re-summarised under this run's gates), or two runs'
    joined, is refused (exit 2) with the fix, and the folder's summary.json is left as it was."""
    slack_s = 1.0  # client.folder.CLOCK_SLACK_S: how far a record may lie outside its run's window

    fixed = ("--isl", "16", "--osl", "4", "--concurrency", "2")
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as srv:
        this = _cli("bench", "fixed", "--url", srv.url, "--model", "m", *fixed, "--num-prompts", "10",
                    "--out", str(tmp_path / "this"))
        assert this.returncode == 0, this.stderr
        finished = json.loads((tmp_path / "this" / "run.json").read_text())["provenance"]["finished_at"]
        while time.time() <= finished + slack_s:  # the next run's stamps lie past this run's slack
            time.sleep(0.05)
        other = _cli("bench", "fixed", "--url", srv.url, "--model", "m", *fixed, "--num-prompts", "4",
                     "--num-warmups", "0", "--out", str(tmp_path / "other"))
        assert other.returncode == 0, other.stderr
    own = (tmp_path / "this" / "records.jsonl").read_bytes()
    theirs = (tmp_path / "other" / "records.jsonl").read_bytes()
    summary = (tmp_path / "this" / "summary.json").read_text()
    for records, said in ((theirs, "they were sent and ended between"),  # 4 records of the 14 this run started
                          (own + theirs, "it has 18 lines, but the client of this run (run.json) started 14")):
        (tmp_path / "this" / "records.jsonl").write_bytes(records)
        res = _cli("summarize", str(tmp_path / "this"))
        assert res.returncode == 2, res.stdout + res.stderr
        assert "holds records of another run" in res.stderr and said in res.stderr, res.stderr
        assert "fix: put back the records.jsonl this run wrote" in res.stderr
        assert (tmp_path / "this" / "summary.json").read_text() == summary
    (tmp_path / "this" / "records.jsonl").write_bytes(own)  # its own records: summarized as bench wrote them
    res = _cli("summarize", str(tmp_path / "this"), "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout) == json.loads(summary)


def test_summarize_judges_a_line_damaged_in_place_not_a_slice_and_names_an_inserted_one(tmp_path: Path) -> None:
    """A records line damaged in place (a disk or an editor) is still one of the lines the client wrote: `summarize`
    counts it (`requests.unreadable`) and the point is invalid. It used to take the folder for a packed slice (fewer
    readable records than the client started) and pass it `valid` from the stored summary. A line inserted is no
    record of the run either: the refusal says so, not only that another run's records were added."""
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as srv:
        res = _cli("bench", "fixed", "--url", srv.url, "--model", "m", "--isl", "16", "--osl", "4",
                   "--concurrency", "2", "--num-prompts", "8", "--out", str(tmp_path / "b"))
    assert res.returncode == 0, res.stderr
    records = tmp_path / "b" / "records.jsonl"
    whole = records.read_text().splitlines()
    damaged = [*whole[:3], '{"this is not": a record}', *whole[4:]]
    records.write_text("\n".join(damaged) + "\n")
    res = _cli("summarize", str(tmp_path / "b"), "--json")
    assert res.returncode == 1, res.stdout + res.stderr
    summary = json.loads(res.stdout)
    assert summary["requests"]["unreadable"] == 1 and summary["validity"]["verdict"] == "invalid"
    assert "slice" not in res.stderr
    records.write_text("\n".join([*whole[:3], "garbage", *whole[3:]]) + "\n")
    res = _cli("summarize", str(tmp_path / "b"))
    assert res.returncode == 2 and "lines that are no record of this run's" in res.stderr, res.stderr


def test_summarize_tells_a_runs_records_by_their_ids_not_by_counting_lines(tmp_path: Path) -> None:
    """A records.jsonl is its run's when its records are requests the run's client started, each once (`w<worker>-<n>`,
    n below what that worker started). Counting lines refused a blank line (no record: the summary is the same) and
    passed another job's file of as many lines run beside this one (its clock within this run's), or a record twice
    in place of one. Each is judged by its records now."""
    from llmsweep.client import summarise_dir
    from llmsweep.errors import ResultInputError

    def bench(name: str, concurrency: int, workers: int) -> subprocess.Popen[str]:
        return subprocess.Popen([sys.executable, "-m", "llmsweep.cli.main", "bench", "fixed", "--url", srv.url,
                                 "--model", "m", "--isl", "16", "--osl", "4", "--num-prompts", "16", "--num-warmups",
                                 "2", "--concurrency", str(concurrency), "--client-workers", str(workers),
                                 "--out", str(tmp_path / name)],
                                cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.05)) as srv:  # a request takes ~0.2 s
        # two jobs of one sweep side by side on one host, the second inside the first's window: one lane (~3.6 s)
        # and six lanes on two client workers (~0.6 s), as many requests each
        this = bench("this", 1, 1)
        deadline = time.monotonic() + 60
        while not (tmp_path / "this" / "run.json").is_file() and time.monotonic() < deadline:
            time.sleep(0.02)
        other = bench("other", 6, 2)
        for proc in (this, other):
            assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
    records = tmp_path / "this" / "records.jsonl"
    own, theirs = records.read_bytes(), (tmp_path / "other" / "records.jsonl").read_bytes()
    assert own.count(b"\n") == theirs.count(b"\n") == 18
    summary = (tmp_path / "this" / "summary.json").read_text()
    lines = own.splitlines(keepends=True)
    for text, said in ((theirs, "its record 'w1-"),  # the other job's second worker: no worker of this run
                       (b"".join([*lines[:-1], lines[0]]), "its record 'w0-0' is there twice")):
        records.write_bytes(text)
        with pytest.raises(ResultInputError, match="holds records of another run") as refused:
            summarise_dir(tmp_path / "this")
        assert said in str(refused.value), refused.value
        assert (tmp_path / "this" / "summary.json").read_text() == summary
    records.write_bytes(b"".join([*lines[:3], b"\n", *lines[3:], b"\n"]))  # blank lines hold no record
    assert summarise_dir(tmp_path / "this", write=False).model_dump(mode="json") == json.loads(summary)


def test_summarize_refuses_a_finished_runs_records_cut_mid_line(tmp_path: Path) -> None:
    """A finished run's records.jsonl that ends inside a record was cut after the run (a copy cut short): once taken
    for a packed slice and passed `valid` from the stored summary, it is refused with the fix (exit 2), its summary
    left as it was. A run killed before its final run.json may end on a torn line: that one is still summarized."""
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as srv:
        res = _cli("bench", "fixed", "--url", srv.url, "--model", "m", "--isl", "16", "--osl", "4",
                   "--concurrency", "2", "--num-prompts", "6", "--out", str(tmp_path / "b"))
    assert res.returncode == 0, res.stderr
    records, run_file = tmp_path / "b" / "records.jsonl", tmp_path / "b" / "run.json"
    summary = (tmp_path / "b" / "summary.json").read_text()
    whole = records.read_bytes()
    records.write_bytes(whole[:-100])  # the last record cut 100 bytes short
    cut = _cli("summarize", str(tmp_path / "b"))
    assert cut.returncode == 2, cut.stdout + cut.stderr
    assert "records.jsonl ends inside a record" in cut.stderr and "fix: copy records.jsonl whole again" in cut.stderr
    assert (tmp_path / "b" / "summary.json").read_text() == summary
    # What a client killed outright leaves (the run.json of its start: no finished_at, no client figures; no
    # summary): the torn line is skipped and the run is judged, invalid.
    info = json.loads(run_file.read_text())
    del info["provenance"]["finished_at"]
    info["client"] = {"stop_reason": UNFINISHED}
    run_file.write_text(json.dumps(info))
    (tmp_path / "b" / "summary.json").unlink()
    killed = _cli("summarize", str(tmp_path / "b"), "--json")
    assert killed.returncode == 1, killed.stdout + killed.stderr  # invalid: the run never finished
    assert json.loads(killed.stdout)["requests"]["total"] == whole.count(b"\n") - 1


def test_bench_out_over_a_measurement_is_refused_unless_forced(tmp_path: Path) -> None:
    """`--out` naming a folder that holds a measurement is refused before any load (exit 2, the folder untouched):
    the run used to delete its records, summary and run.json without a word. `--force` replaces it, and says so; a
    run folder of `llmsweep run` is refused even then."""
    out = tmp_path / "b"
    load = ("--isl", "16", "--osl", "4", "--concurrency", "2", "--num-prompts", "4")
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.0005)) as srv:
        first = _cli("bench", "fixed", "--url", srv.url, "--model", "m", *load, "--out", str(out))
        assert first.returncode == 0, first.stderr
        files = {p.name: p.read_bytes() for p in out.iterdir()}
        served = len(srv.served)
        again = _cli("bench", "fixed", "--url", srv.url, "--model", "m", *load, "--out", str(out))
        assert again.returncode == 2, again.stdout + again.stderr
        assert f"--out {out} already holds a measurement" in again.stderr and "--force" in again.stderr
        assert len(srv.served) == served and {p.name: p.read_bytes() for p in out.iterdir()} == files
        forced = _cli("bench", "fixed", "--url", srv.url, "--model", "m", *load, "--out", str(out), "--force")
        assert forced.returncode == 0, forced.stderr
        assert f"--force: replacing the measurement in {out}" in forced.stderr
        assert (out / "run.json").read_bytes() != files["run.json"] and len(srv.served) > served
        run_root = tmp_path / "sweep"
        (run_root / "jobs").mkdir(parents=True)
        (run_root / "run.json").write_text('{"run_id": "r1"}')
        into_run = _cli("bench", "fixed", "--url", srv.url, "--model", "m", *load, "--out", str(run_root), "--force")
    assert into_run.returncode == 2, into_run.stdout + into_run.stderr
    assert "is a run of `llmsweep run`" in into_run.stderr
    assert (run_root / "run.json").read_text() == '{"run_id": "r1"}' and not (run_root / "records.jsonl").exists()
