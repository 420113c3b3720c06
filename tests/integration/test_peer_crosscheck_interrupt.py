"""`peer crosscheck` stopped by Ctrl-C (SIGINT) during llmsweep's own run, against the live simulator: the run's
summary (invalid: stopped early) is what the cross-check records, tables and prints for it, and the runs it never
started say `not run`. aiperf's side is never reached: a stand-in that fails if it is ever started."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import sim_serve
from support.procs import wait_for

NEVER = f"#!{sys.executable}\nimport sys\nsys.exit('aiperf was started')\n"


@pytest.fixture
def sim_url() -> Iterator[str]:
    with sim_serve("--model", "llama-3.1-8b", "--served-model-name", "sim", "--timing", "constant", "--ttft-ms", "2",
                   "--itl-ms", "10") as url:
        yield url


def test_a_crosscheck_interrupted_in_llmsweeps_run_keeps_what_it_measured_and_says_the_rest_not_run(
        sim_url: str, tmp_path: Path) -> None:
    """Before, the interrupted run was recorded `summary: null` (`0 / 0`, `not measured`) though its folder held a
    summary of what it had measured (requests ok, one cancelled, invalid), and the levels never reached were not in the
    table at all."""
    aiperf = tmp_path / "aiperf"
    aiperf.write_text(NEVER)
    aiperf.chmod(0o755)
    out, log = tmp_path / "cc", tmp_path / "cc.log"
    # 3 requests of 150 tokens at 10 ms a token, one at a time: 4.5 s, interrupted once the first has ended
    argv = [sys.executable, "-m", "llmsweep.cli.main", "peer", "crosscheck", "--url", sim_url, "--model", "sim",
            "--tokenizer", "builtin", "--isl", "32", "--osl", "150", "--concurrency", "1,2", "--repeats", "1",
            "--min-prompts", "3", "--num-prompts-per-conc", "1", "--num-warmups-per-conc", "0", "--aiperf", str(aiperf),
            "--out", str(out)]
    records = out / "c1" / "llmsweep-0" / "records.jsonl"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            wait_for(lambda: records.is_file() and records.read_text().strip(), 60, "the first record", proc, log,
                     poll_s=0.02)
            proc.send_signal(signal.SIGINT)
            rc = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    said = log.read_text()
    assert rc == 130, said[-3000:]
    stored = json.loads((out / "c1" / "llmsweep-0" / "summary.json").read_text())
    assert stored["validity"]["verdict"] == "invalid" and stored["requests"]["successful"] >= 1
    assert stored["requests"]["cancelled"] >= 1, stored["requests"]
    check = json.loads((out / "crosscheck.json").read_text())
    (run,) = check["runs"]
    assert run["summary"] is not None and run["summary"]["requests"] == stored["requests"], run  # not a null
    assert run["interrupted"] and check["interrupted"] == "SIGINT"
    ok, cancelled = stored["requests"]["successful"], stored["requests"]["cancelled"]
    assert run["error"].startswith(f"interrupted by SIGINT: {ok} request{'s' if ok > 1 else ''} ok, {cancelled} "
                                   "cancelled; its summary is invalid (run stopped early: interrupted by SIGINT)")
    levels = {(lv["concurrency"], lv["client"]): lv for lv in check["levels"]}
    assert levels[(1, "llmsweep")]["successful"] == ok and levels[(1, "llmsweep")]["errors"] == [run["error"]]
    assert [levels[k]["not_run"] for k in ((1, "aiperf"), (2, "llmsweep"), (2, "aiperf"))] == [1, 1, 1]
    assert {r["verdict"] for r in check["rows"] if r["concurrency"] == 2} == {"not run"}
    table = (out / "crosscheck.md").read_text()
    assert f"| 1 | llmsweep | {ok} / 0 |" in table and "| 2 | aiperf | 0 / 0 |" in table
    assert "Interrupted by SIGINT: 1 of 4 runs started, 3 not run" in table
    # conc 2's eight figures, and in the levels' table aiperf at conc 1 and both clients at conc 2
    assert table.count("| not run |") == 8 + 3
    assert table.strip() in said  # printed as it stopped, as `bench` prints its summary
    assert f"conc 1 llmsweep #0: {run['error']}" in said and "aiperf was started" not in said
