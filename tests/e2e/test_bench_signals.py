"""`llmsweep bench` interrupted by SIGINT or SIGTERM against a live simulator: it stops at once, records every
request that was in flight (cancelled, saying why), writes run.json and a summary marked interrupted (an invalid run,
never a clean smoke one, also when `summarize` recomputes it) and exits 130 or 143."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.procs import wait_for
from test_run_support import cli_env, record_lines

from llmsweep.execute.preflight import pick_free_port

CONC = 4


@pytest.fixture(scope="module")
def sim_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A simulator whose requests take long (2000 tokens at 20 ms each): a signal always finds CONC in flight."""
    port = pick_free_port()
    log = tmp_path_factory.mktemp("sim") / "sim.log"
    with open(log, "wb") as fh:
        server = subprocess.Popen(
            [sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--host", "127.0.0.1", "--port", str(port),
             "--timing", "constant", "--ttft-ms", "10", "--itl-ms", "20"], stdout=fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _get(f"{url}/health") is not None, timeout=60, what="the simulator", proc=server, log=log)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=30)


def _get(url: str) -> str | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return str(resp.read().decode())
    except OSError:
        return None


def running(url: str) -> int:
    """Requests the simulator is serving now (its SGLang-style gauge)."""
    text = _get(f"{url}/metrics") or ""
    values = [float(line.split()[-1]) for line in text.splitlines() if line.startswith("sglang:num_running_reqs")]
    return int(sum(values))


def start_bench(url: str, out: Path, log: Path, tmp_path: Path, *extra: str,
                group: bool = False) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "llmsweep.cli.main", "bench", "fixed", "--url", url, "--model", "llama-3.1-8b",
            "--isl", "64", "--osl", "2000", "--concurrency", str(CONC), "--num-prompts", "8", "--num-warmups", "0",
            "--out", str(out), *extra]
    fh = open(log, "wb")  # noqa: SIM115 - the child's; closed with the test's tmp dir
    return subprocess.Popen(argv, env=cli_env(tmp_path), stdout=fh, stderr=subprocess.STDOUT,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), start_new_session=group)


def interrupt(url: str, tmp_path: Path, *signals: signal.Signals, extra: tuple[str, ...] = (),
              group: bool = False) -> tuple[int, Path]:
    """Start a bench, wait until CONC requests are in flight, send `signals` (to its whole process group with
    `group`, as a terminal or `kill -TERM -PGID` does); its exit status and out dir."""
    out, log = tmp_path / "bench", tmp_path / "bench.log"
    proc = start_bench(url, out, log, tmp_path, *extra, group=group)
    try:
        wait_for(lambda: running(url) >= CONC, timeout=60, what=f"{CONC} requests in flight", proc=proc, log=log)
        for sig in signals:
            if group:
                os.killpg(proc.pid, sig)
            else:
                proc.send_signal(sig)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_for(lambda: running(url) == 0, timeout=30, what="the simulator to see the requests go")
    return rc, out


def assert_interrupted(out: Path, name: str) -> None:
    summary = json.loads((out / "summary.json").read_text())
    reason = f"interrupted by {name}"
    assert summary["client_health"]["stop_reason"] == reason
    assert summary["validity"]["verdict"] == "invalid"
    assert f"run stopped early: {reason}" in summary["validity"]["reasons"]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines() if line.strip()]
    assert len(records) == CONC == summary["requests"]["cancelled"]  # every request that was in flight
    # none finished: the error ratio is undefined (null), not the 0.0 that every table showed as "no errors"
    assert summary["requests"]["successful"] == summary["requests"]["failed"] == 0
    assert summary["requests"]["error_ratio"] is None
    assert all(r["error_class"] == "cancelled" for r in records)
    assert all(name in r["error"] or "stopped by the parent" in r["error"] for r in records)


def test_sigint_writes_every_in_flight_record_and_an_interrupted_summary_and_exits_130(
    sim_url: str, tmp_path: Path
) -> None:
    rc, out = interrupt(sim_url, tmp_path, signal.SIGINT)
    assert rc == 130
    assert_interrupted(out, "SIGINT")


@pytest.fixture(scope="module")
def sigterm_run(sim_url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[int, Path]:
    """One bench stopped by SIGTERM mid-run: its exit status and out dir, for the two tests that read it."""
    return interrupt(sim_url, tmp_path_factory.mktemp("sigterm"), signal.SIGTERM)


def test_sigterm_does_the_same_and_exits_143(sigterm_run: tuple[int, Path]) -> None:
    rc, out = sigterm_run
    assert rc == 143
    assert_interrupted(out, "SIGTERM")


def test_sigint_twice_quickly_still_writes_the_summary(sim_url: str, tmp_path: Path) -> None:
    rc, out = interrupt(sim_url, tmp_path, signal.SIGINT, signal.SIGINT)
    assert rc == 130
    assert_interrupted(out, "SIGINT")


def test_sigterm_with_worker_processes_stops_them_all_and_writes_their_records(sim_url: str, tmp_path: Path) -> None:
    rc, out = interrupt(sim_url, tmp_path, signal.SIGTERM, extra=("--client-workers", "2"))
    assert rc == 143
    assert_interrupted(out, "SIGTERM")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_the_whole_process_group_with_worker_processes_still_records_every_request_in_flight(
        sim_url: str, tmp_path: Path, sig: signal.Signals) -> None:
    """`kill -TERM -PGID`, or a closed SSH session's SIGHUP, reaches the client workers too: they ignored only
    SIGINT, so the signal killed them with their requests in flight unrecorded (8 in flight, `cancelled: 0`)."""
    rc, out = interrupt(sim_url, tmp_path, sig, extra=("--client-workers", "2"), group=True)
    assert rc == 128 + sig
    assert_interrupted(out, sig.name)
    # SIGHUP to the group killed multiprocessing's resource tracker, whose relaunch printed warnings and tracebacks
    said = (tmp_path / "bench.log").read_text()
    assert "resource_tracker" not in said and "Traceback" not in said, said[-3000:]


def test_summarize_of_an_interrupted_bench_says_so_and_fails(sigterm_run: tuple[int, Path], tmp_path: Path) -> None:
    rc, ran = sigterm_run  # the SIGTERM test's run, copied: its summary is removed here
    out = tmp_path / "bench"
    shutil.copytree(ran, out)
    assert rc == 143 and record_lines(out / "records.jsonl") == CONC
    (out / "summary.json").unlink()
    started = time.monotonic()
    again = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "summarize", str(out), "--json"],
                           env=cli_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert time.monotonic() - started < 120
    assert again.returncode == 1, again.stderr[-2000:]
    assert json.loads(again.stdout)["validity"]["verdict"] == "invalid"
    assert_interrupted(out, "SIGTERM")


def test_summarize_of_a_sigkilled_bench_is_not_a_clean_run(sim_url: str, tmp_path: Path) -> None:
    rc, out = interrupt(sim_url, tmp_path, signal.SIGKILL)
    assert rc == -signal.SIGKILL and not (out / "summary.json").exists()
    again = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "summarize", str(out), "--json"],
                           env=cli_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert again.returncode == 1, again.stderr[-2000:]
    validity = json.loads(again.stdout)["validity"]
    assert validity["verdict"] == "invalid"
    assert any("the run ended before writing its final run.json" in r for r in validity["reasons"])


def test_a_bench_stopped_in_its_warm_up_says_the_warm_up_requests_it_cancelled(sim_url: str, tmp_path: Path) -> None:
    """Stopped while the warm-up ran, the table said `0 cancelled` (the profiling requests': none had started) and
    nothing of the warm-up requests the stop cut, which summary.json counts (`requests.warmup_cancelled`)."""
    out, log = tmp_path / "bench", tmp_path / "bench.log"
    argv = [sys.executable, "-m", "llmsweep.cli.main", "bench", "fixed", "--url", sim_url, "--model", "llama-3.1-8b",
            "--isl", "64", "--osl", "2000", "--concurrency", str(CONC), "--num-prompts", "8", "--num-warmups",
            str(CONC), "--out", str(out)]
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, env=cli_env(tmp_path), stdout=fh, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: running(sim_url) >= CONC, timeout=60, what="the warm-up in flight", proc=proc, log=log)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            proc.kill()
    wait_for(lambda: running(sim_url) == 0, timeout=30, what="the simulator to see the requests go")
    cut = json.loads((out / "summary.json").read_text())["requests"]["warmup_cancelled"]
    assert cut > 0 and f"warmup ({cut} cancelled)" in log.read_text(), log.read_text()[-3000:]


def test_a_bench_stopped_with_ctrl_z_and_continued_is_invalid_and_exits_1(sim_url: str, tmp_path: Path) -> None:
    """Ctrl-Z (SIGSTOP here), then SIGCONT, mid-load: the simulator answered on through the pause and the client's
    clocks counted it, so the figures are not the server's. `run` judged such a job invalid; `bench` printed it
    valid. Now the same note (`readback.PAUSED`) makes it invalid, `summarize` agrees, and the exit status is 1."""
    out, log = tmp_path / "bench", tmp_path / "bench.log"
    proc = start_bench(sim_url, out, log, tmp_path, "--osl", "100")  # ~2 s a request, the last after the command's
    try:
        wait_for(lambda: running(sim_url) >= CONC, timeout=60, what=f"{CONC} requests in flight", proc=proc, log=log)
        proc.send_signal(signal.SIGSTOP)
        time.sleep(1.5)
        proc.send_signal(signal.SIGCONT)
        rc = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rc == 1, log.read_text()[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["validity"]["verdict"] == "invalid"
    (reason,) = [r for r in summary["validity"]["reasons"] if "was stopped for" in r]
    assert "run the bench again with --force" in reason
    assert summary["requests"]["failed"] == 0  # nothing else was wrong: the pause alone makes it invalid
    again = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "summarize", str(out), "--json"],
                           env=cli_env(tmp_path), capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 1 and json.loads(again.stdout)["validity"]["verdict"] == "invalid", again.stderr
