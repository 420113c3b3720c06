"""llmsweep's client and the real aiperf side by side on the live simulator, and the GPU call's script rehearsed.

Needs aiperf 0.13 (`.ci/run` installs it in a venv of its own and points `LLMSWEEP_AIPERF` at it; otherwise an
`aiperf` on PATH); skips cleanly without. The simulator runs with constant timing (TTFT 20 ms, 8 ms per token), so
whatever either client reports, the per-token gap it measures must be the server's.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.procs import ctrl_z, wait_for

REPO = Path(__file__).resolve().parents[2]
AIPERF = os.environ.get("LLMSWEEP_AIPERF") or shutil.which("aiperf")

pytestmark = [pytest.mark.slow, pytest.mark.skipif(AIPERF is None, reason="needs aiperf (set LLMSWEEP_AIPERF)")]

AIPERF_ENV = {"AIPERF_SERVER_METRICS_COLLECTION_FLUSH_PERIOD": "0"}
"""aiperf goes on scraping the server's /metrics for 2 s after its last response, for an engine's counters to settle:
2 s of every aiperf run. The cross-check reads only latency histograms from those scrapes (its server column), and
the simulator exports none that aiperf reads: the column is empty with or without the wait."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **AIPERF_ENV, "PYTHONUNBUFFERED": "1"})


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("tokenizers")
    out = tmp_path_factory.mktemp("model") / "llama-1b"
    run = cli("model", "synth", "llama-1b", "--out", str(out), "--weights", "none")
    assert run.returncode == 0, run.stderr
    return out


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmsweep.cli.main", "sim", "serve", "--model", "llama-3.1-8b", "--port", str(port),
         "--served-model-name", "sim", "--timing", "constant", "--ttft-ms", "20", "--itl-ms", "8"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            urllib.request.urlopen(f"{url}/health", timeout=1)
            break
        except OSError:
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(timeout=15)


def test_both_clients_send_the_same_prompts_and_agree_on_the_servers_token_gap(
    server: str, tokenizer: Path, tmp_path: Path
) -> None:
    # One level, two repeats (the between-run band needs them): every aiperf run costs ~20 CPU-seconds of start-up
    # whatever it sends, and what a level checks a second level would only re-prove. Concurrency 4, the level where
    # the clients' overheads differ most; the GPU call's script below runs another level with one repeat.
    out = tmp_path / "cc"
    run = cli("peer", "crosscheck", "--url", server, "--model", "sim", "--tokenizer", str(tokenizer), "--isl", "200",
              "--osl", "24", "--concurrency", "4", "--repeats", "2", "--min-prompts", "8",
              "--num-prompts-per-conc", "2", "--aiperf", str(AIPERF), "--out", str(out))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    check = json.loads((out / "crosscheck.json").read_text())
    assert len(check["runs"]) == 4 and all(r["error"] is None for r in check["runs"]), check["runs"]
    levels = {(lv["concurrency"], lv["client"]): lv for lv in check["levels"]}
    for conc in (4,):
        ours, theirs = levels[(conc, "llmsweep")], levels[(conc, "aiperf")]
        assert ours["successful"] == theirs["successful"] == 2 * 8 and ours["failed"] == theirs["failed"] == 0
        assert ours["isl_mean"] == theirs["isl_mean"]  # the server counted the same prompt lengths for both
        assert ours["osl_mean"] == theirs["osl_mean"] == 24
        assert ours["output_length_mismatch"] == theirs["output_length_mismatch"] == 0
    rows = {(r["concurrency"], r["figure"]): r for r in check["rows"]}
    assert rows[(4, "TPOT p50")]["band_pct"] is not None  # the repeats gave a band
    for conc in (4,):
        tpot = rows[(conc, "TPOT p50")]
        assert tpot["llmsweep"] == pytest.approx(8.0, rel=0.25)  # our client: the server's gap
        # aiperf's client is a multiprocess app of its own: alone it reads the served 8 ms as ours does, but on the
        # suite's 2 cores beside two other test workers it falls behind the stream (11.6 and 10.4 ms measured in two
        # full-suite runs, never alone). Its gap is never below the server's, and stays within the contention's reach.
        assert 8.0 * 0.9 <= tpot["aiperf_ours"] <= 8.0 * 1.6
        assert abs(tpot["measurement_pct"]) < 60
        assert abs(rows[(conc, "TTFT mean")]["definition_pct"]) < 1  # aiperf's own TTFT is its records' TTFT
    for run_ in check["runs"]:
        folder = out / run_["out_dir"]
        assert (folder / "records.jsonl").exists() and (folder / "summary.json").exists()
        if run_["client"] == "aiperf":
            assert "--use-legacy-max-tokens" in (folder / "command.txt").read_text()
    table = cli("peer", "table", str(out))
    assert table.returncode == 0 and table.stdout.strip() == (out / "crosscheck.md").read_text().strip()
    again = cli("peer", "table", str(out), "--resummarize")  # from the raw records and exports: the same table
    assert again.returncode == 0 and again.stdout.strip() == table.stdout.strip()
    assert (out / "crosscheck.md").read_text().strip() in run.stdout


def test_the_gpu_calls_script_serves_runs_both_clients_and_packs_the_evidence(tokenizer: Path, tmp_path: Path) -> None:
    """scripts/gpu/run_crosscheck.sh on the CPU: the stand-in vLLM module serves the simulator (docs/gpu.md)."""
    if shutil.which("curl") is None:
        pytest.skip("needs curl")
    out = tmp_path / "out"
    env = {**os.environ, **AIPERF_ENV, "OUT": str(out), "SKIP_INSTALL": "1", "AIPERF": str(AIPERF), "LEVELS": "2",
           "ISL": "128", "OSL": "16", "REPEATS": "1", "MIN_PROMPTS": "6", "CALL_LIMIT": "240", "PORT": str(free_port()),
           "MODELS_ROOT": str(tmp_path / "models"), "CC_DIR": str(tmp_path / "cc"),
           "PYTHONPATH": str(REPO / "scripts" / "gpu" / "cpu_rehearsal" / "py"),
           "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"}
    run = subprocess.run(["bash", str(REPO / "scripts" / "gpu" / "run_crosscheck.sh")], cwd=REPO, env=env,
                         capture_output=True, text=True, timeout=280)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    command = (out / "server_command.txt").read_text()
    assert "vllm.entrypoints.openai.api_server" in command and "--load-format dummy" in command
    with tarfile.open(out / "crosscheck.tgz") as tar:
        names = set(tar.getnames())
        table = tar.extractfile("./crosscheck.md").read().decode()  # type: ignore[union-attr]
    kept = {"./crosscheck.json", "./c2/llmsweep-0/summary.json", "./c2/aiperf-0/artifacts/profile_export.jsonl"}
    assert kept <= names
    assert not any(n.endswith(("dataset.jsonl", "inputs.json")) for n in names)  # re-made from the seeds
    assert "| 2 | TPOT p50 (ms) |" in table
    assert "aiperf 0.13" in (out / "steps.txt").read_text()


def test_a_run_measured_across_a_ctrl_z_is_invalid_compared_with_nothing_and_fails_the_crosscheck(
    server: str, tokenizer: Path, tmp_path: Path
) -> None:
    """Ctrl-Z (SIGTSTP to the cross-check's process group) once llmsweep's first run has its first record, held 1.5 s,
    then SIGCONT: the server answered on through the pause and the run's clocks counted it. `run` and `bench` judge
    such a measurement invalid; the cross-check compared it with aiperf's as any run and exited 0. Now its summary is
    invalid saying why (`summarize` agrees), it is compared with nothing (the second repeat's run stands for
    llmsweep), and the exit status is 1."""
    out, log = tmp_path / "cc", tmp_path / "cc.log"
    argv = [sys.executable, "-m", "llmsweep.cli.main", "peer", "crosscheck", "--url", server, "--model", "sim",
            "--tokenizer", str(tokenizer), "--isl", "64", "--osl", "150", "--concurrency", "1", "--repeats", "2",
            "--min-prompts", "3", "--num-prompts-per-conc", "1", "--num-warmups-per-conc", "0", "--aiperf",
            str(AIPERF), "--out", str(out), "--json"]
    records = out / "c1" / "llmsweep-0" / "records.jsonl"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, process_group=0,
                                env={**os.environ, **AIPERF_ENV, "PYTHONUNBUFFERED": "1"})
        try:
            wait_for(lambda: records.is_file() and records.read_text().strip(), 120, "the first record", proc, log,
                     poll_s=0.02)
            ctrl_z(proc.pid)  # held 1.5 s: the pause the run's clocks count
            rc = proc.wait(timeout=280)
        finally:
            if proc.poll() is None:
                proc.kill()
    said = log.read_text()
    assert rc == 1, said[-3000:]
    check = json.loads((out / "crosscheck.json").read_text())
    runs = {r["out_dir"]: r for r in check["runs"]}
    paused = runs["c1/llmsweep-0"]
    why = "llmsweep was stopped for "
    assert paused["paused"] and paused["error"].startswith(why), paused
    assert float(paused["error"][len(why):].split(" s ")[0]) >= 1.4 and "(Ctrl-Z, SIGTSTP or SIGSTOP, then SIGCONT)" \
        in paused["error"] and "run the cross-check again into a fresh --out" in paused["error"], paused
    assert paused["summary"]["validity"]["verdict"] == "invalid", paused["summary"]["validity"]
    assert f"conc 1 llmsweep #0: {paused['error']}" in said
    assert [r["paused"] for r in check["runs"]] == [True, False, False, False], check["runs"]
    (level,) = [lv for lv in check["levels"] if lv["client"] == "llmsweep"]
    assert level["errors"] == [paused["error"]]
    rows = {r["figure"]: r for r in check["rows"]}
    ours = json.loads((out / "c1" / "llmsweep-1" / "summary.json").read_text())
    assert rows["TTFT mean"]["llmsweep"] == pytest.approx(ours["latency"]["ttft"]["mean"] * 1e3)  # the unpaused run's
    again = cli("summarize", str(out / "c1" / "llmsweep-0"), "--json")
    assert again.returncode == 1 and json.loads(again.stdout)["validity"]["verdict"] == "invalid", again.stderr
