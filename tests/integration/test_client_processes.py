"""The client's extra processes (worker processes, record helpers) do their job and never outlive the run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest
from support.procs import alive, descendants, read_proc
from support.stream_server import ServerConfig, StreamServer, run_in_subprocess
from support.workloads import DrainingWorkload, SimpleWorkload, TreeWorkload

from llmsweep.client import Endpoint, RunOptions, run_benchmark

REPO = Path(__file__).resolve().parents[2]


def _records(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "records.jsonl").read_text().splitlines()]


def _children(pid: int) -> set[int]:
    """Every live descendant of `pid`."""
    return set(descendants(pid))


def _alive(pids: set[int]) -> set[int]:
    return {pid for pid in pids if alive(pid)}


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads the process tree from /proc")
def test_worker_processes_and_record_helpers_die_with_a_killed_parent(tmp_path: Path) -> None:
    server, url = run_in_subprocess(ServerConfig(ttft_s=0.01, itl_s=0.05))  # long streams: the run is mid-flight
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(REPO / "tests")!r})
        from pathlib import Path
        from support.workloads import SimpleWorkload
        from llmsweep.client import Endpoint, RunOptions, run_benchmark
        run_benchmark(SimpleWorkload(max_tokens=2000, lanes_hint=4), Endpoint(base_url={url!r}, model="m"),
                      RunOptions(concurrency=4, duration_s=600, workers=2, record_process=True),
                      Path({str(tmp_path)!r}))
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    try:
        deadline = time.time() + 60
        kids: set[int] = set()
        while time.time() < deadline and (len(_named(kids, b"spawn_main")), len(_named(kids, b"_record_helper"))) != (
                2, 2):  # two worker processes, each with its record helper
            time.sleep(0.2)
            kids = _children(parent.pid)
        assert len(_named(kids, b"spawn_main")) == 2 and len(_named(kids, b"_record_helper")) == 2, kids
        deadline = time.time() + 30  # requests in flight: all four lanes' streams, as the server counts them
        while _running(url) < 4 and time.time() < deadline:
            time.sleep(0.05)
        assert _running(url) >= 4
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        deadline = time.time() + 10
        while _alive(kids) and time.time() < deadline:
            time.sleep(0.1)
        assert not _alive(kids), f"processes outlived the killed run: {_alive(kids)}"
    finally:
        for pid in _alive(_children(parent.pid)):
            os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            parent.kill()
        server.terminate()
        server.wait(timeout=10)


def _running(url: str) -> int:
    """The requests the stream server is serving now (its `num_requests_running` gauge)."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    return sum(int(float(line.split()[-1])) for line in text.splitlines() if "num_requests_running{" in line)


def _named(pids: set[int], word: bytes) -> set[int]:
    """The processes among `pids` whose command line holds `word` (`spawn_main`: a worker; `_record_helper`)."""
    return {pid for pid in pids if word in read_proc(pid, "cmdline")}


def test_failures_found_by_the_record_helper_stop_the_run_early(tmp_path: Path) -> None:
    """A stream that arrives whole but is broken inside is judged by the helper; its tally still trips the
    failure ratio."""
    with StreamServer(ServerConfig(fault="invalid_json", fault_every=1)) as bad:
        res = run_benchmark(
            SimpleWorkload(lanes_hint=2), Endpoint(base_url=bad.url, model="m"),
            RunOptions(concurrency=2, num_requests=5000, max_failure_ratio=0.1, failure_floor=10,
                       record_process=True), tmp_path,
        )
    recs = _records(tmp_path)
    assert 10 <= len(recs) < 200 and {r["error_class"] for r in recs} == {"protocol"}
    assert res.verdict == "invalid"
    assert any("stopped early" in r for r in res.summary.validity.reasons)


def test_helpers_in_worker_processes_keep_session_trees_in_their_lane(tmp_path: Path) -> None:
    """Two workers with record helpers: every request recorded once, a session tree's turns in one worker."""
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.001)) as srv:
        res = run_benchmark(
            TreeWorkload(children=2, trees_per_lane=2, think_s=0.01), Endpoint(base_url=srv.url, model="m"),
            RunOptions(concurrency=4, workers=2, record_process=True), tmp_path,
        )
    recs = _records(tmp_path)
    assert recs and all(r["error_class"] is None for r in recs)
    assert len({r["id"] for r in recs}) == len(recs)
    for lane in range(4):
        assert {r["worker"] for r in recs if r["lane"] == lane} == {lane % 2}
    workers = res.summary.client_health.workers
    assert [w["record_helper"] for w in workers] == [True, True]
    # the client's CPU counts the helpers' too
    assert all(w["helper_cpu_s"] > 0 for w in workers)
    assert res.summary.client_health.cpu_s_total == pytest.approx(sum(w["cpu_s"] + w["helper_cpu_s"] for w in workers))
    assert res.summary.requests.successful == len(recs)


def test_an_interrupt_with_a_record_helper_records_every_request_and_leaves_no_process(tmp_path: Path) -> None:
    """Interrupted mid-stream: finished streams (written by the helper) and in-flight ones (cancelled, written by the
    loop) are all recorded once, and the helper is gone when the run returns."""
    def interrupt_once_some_are_written() -> str | None:  # mid-run, however slowly the machine starts the helper
        path = tmp_path / "records.jsonl"
        return "interrupted by SIGTERM" if path.exists() and len(path.read_bytes().splitlines()) >= 16 else None

    with StreamServer(ServerConfig(ttft_s=0.005, itl_s=0.01)) as srv:
        res = run_benchmark(
            SimpleWorkload(max_tokens=40, lanes_hint=8), Endpoint(base_url=srv.url, model="m"),
            RunOptions(concurrency=8, duration_s=600, record_process=True),
            tmp_path, stop_requested=interrupt_once_some_are_written,
        )
    recs = _records(tmp_path)
    done = [r for r in recs if r["error_class"] is None]
    cancelled = [r for r in recs if r["error_class"] == "cancelled"]
    (worker,) = res.summary.client_health.workers
    assert done and cancelled and len(done) + len(cancelled) == len(recs) == worker["started"], (  # none lost
        len(done), len(cancelled), len(recs), worker)
    assert len({r["id"] for r in recs}) == len(recs)
    assert res.summary.client_health.stop_reason == "interrupted by SIGTERM"
    assert res.summary.requests.successful == len(done) and res.summary.requests.cancelled == len(cancelled)
    assert worker["record_helper"] is True
    assert not _alive(_named(_children(os.getpid()), b"_record_helper"))


def test_a_script_without_a_main_guard_gets_its_record_helper_and_its_records(tmp_path: Path) -> None:
    """The helper is a fresh interpreter that imports nothing of the calling script (a multiprocessing spawn would
    run the script's top level again, and a second benchmark with it)."""
    with StreamServer(ServerConfig(itl_s=0.001)) as srv:
        script = tmp_path / "naive.py"
        script.write_text(textwrap.dedent(f"""
            import sys
            sys.path.insert(0, {str(REPO / "tests")!r})
            from pathlib import Path
            from support.workloads import SimpleWorkload
            from llmsweep.client import Endpoint, RunOptions, run_benchmark
            print("top level ran", flush=True)
            run_benchmark(SimpleWorkload(max_tokens=4, lanes_hint=2), Endpoint(base_url={srv.url!r}, model="m"),
                          RunOptions(concurrency=2, num_requests=20, record_process=True), Path({str(tmp_path)!r}))
        """))
        run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    assert run.returncode == 0, run.stderr
    assert run.stdout.count("top level ran") == 1
    recs = _records(tmp_path)
    assert len(recs) == 20 and all(r["error_class"] is None for r in recs)
    assert json.loads((tmp_path / "run.json").read_text())["client"]["workers"][0]["record_helper"] is True


def test_a_record_helper_that_cannot_start_leaves_parsing_to_the_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """No interpreter to start the helper with: the run goes on, parsed in the event loop, and says so."""
    monkeypatch.setattr(sys, "executable", str(tmp_path / "no-such-python"))
    with StreamServer(ServerConfig(itl_s=0.001)) as srv:
        res = run_benchmark(SimpleWorkload(max_tokens=4, lanes_hint=2), Endpoint(base_url=srv.url, model="m"),
                            RunOptions(concurrency=2, num_requests=10, record_process=True), tmp_path)
    assert len(_records(tmp_path)) == 10 and res.summary.requests.successful == 10
    assert res.summary.client_health.workers[0]["record_helper"] is False
    assert "the record helper failed" in caplog.text


@pytest.mark.parametrize("workers", [1, 2])
def test_profiling_starts_once_every_lanes_warm_up_has_drained_in_every_worker(tmp_path: Path, workers: int) -> None:
    """Lane 0 (worker 0) warms up for ~0.6 s, the other lanes for a few ms: no profiling request, in either worker,
    goes out before lane 0's (and its child's) warm-up ended, nor does a lane's second session."""
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.005)) as srv:
        res = run_benchmark(DrainingWorkload(lanes=4), Endpoint(base_url=srv.url, model="m"),
                            RunOptions(concurrency=4, workers=workers), tmp_path)
    recs = _records(tmp_path)
    warm = [r for r in recs if r["phase"] == "warmup"]
    prof = [r for r in recs if r["phase"] == "profiling"]
    assert len(warm) == 3 + 1 + 3 and len(prof) == 2 + 1 + 2 * 2 + 2 * 4
    assert all(r["error_class"] is None for r in recs)
    last_warm_end = max(r["end_at"] for r in warm)
    assert last_warm_end - min(r["sent_at"] for r in warm) > 0.5  # lane 0's slow warm-up
    assert min(r["sent_at"] for r in prof) >= last_warm_end
    drained = [w["warmup_drained_at"] for w in res.summary.client_health.workers]
    assert len(drained) == workers and all(t is not None and t <= min(r["sent_at"] for r in prof) for t in drained)


def test_a_warm_up_that_outlasts_its_grace_stops_every_worker_with_the_reason(tmp_path: Path) -> None:
    with StreamServer(ServerConfig(ttft_s=0.002, itl_s=0.05)) as srv:  # lane 0's warm-up: 3 x 2 s
        t0 = time.monotonic()
        res = run_benchmark(DrainingWorkload(lanes=4, grace_s=0.5), Endpoint(base_url=srv.url, model="m"),
                            RunOptions(concurrency=4, workers=2), tmp_path)
        took = time.monotonic() - t0
    recs = _records(tmp_path)
    assert recs and all(r["phase"] == "warmup" for r in recs)
    assert took < 20
    assert res.verdict == "invalid"
    assert any(r.startswith("run stopped early: the warm-up did not drain within 0.5 s") for r in
               res.summary.validity.reasons), res.summary.validity.reasons
