"""`llmsweep run` whose jobs cannot keep their records (a file-size limit: every write past it fails with EFBIG; no
root needed) fails each job as it happens, with the errno's words, and goes on to the next: the job's client stopped
at once. It sent every planned prompt into records it could not keep (minutes at concurrency 1), then failed the job
as an `internal error: OSError` with a traceback in the log. (A full disk, ENOSPC, ends the whole run instead, with
its fix: `test_bench_out_full.py`, `lifecycle.out_unwritable`.)"""

from __future__ import annotations

import json
import resource
import subprocess
from pathlib import Path

import pytest
from test_run_support import RECIPES, cli_env, job_dirs, kill_quietly, read_json, run_argv, server_pids

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)

_LIMIT = 128 * 1024
"""Above what the store (~70 KB), run.json and a job's small files take; its records reach it in a few seconds."""


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (_LIMIT, _LIMIT))


def test_a_job_whose_records_cannot_be_written_fails_at_once_with_the_errno_and_the_sweep_goes_on(
        tmp_path: Path) -> None:
    text = (RECIPES / "fixed-sim.yaml").read_text()
    assert "num-prompts-per-conc: 4\n" in text and "conc-list: [2, 4]" in text
    recipe = tmp_path / "fixed-sim.yaml"  # thousands of prompts: without the stop, minutes of load unrecorded
    recipe.write_text(text.replace("num-prompts-per-conc: 4\n", "num-prompts-per-conc: 200\n")
                      .replace("conc-list: [2, 4]", "conc-list: [16, 32]"))
    out = tmp_path / "out"
    try:
        res = subprocess.run(run_argv(recipe, "--live", "--out", out, "--no-report"), env=cli_env(tmp_path),
                             capture_output=True, text=True, timeout=240, preexec_fn=_limited)
    finally:  # a run cut short by the timeout leaves its server (its own session) behind
        for pid in server_pids(out) if (out / "servers").is_dir() else ():
            kill_quietly(pid)
    assert res.returncode == 1, res.stderr[-4000:]
    assert "Traceback" not in res.stderr and "internal error" not in res.stderr, res.stderr[-4000:]
    jobs = job_dirs(out)
    assert len(jobs) == 2
    for name, jdir in jobs.items():
        outcome = read_json(jdir / "outcome.json")
        assert outcome["status"] == "failed", outcome
        assert outcome["reasons"] == [f"the client could not write {jdir / 'records.jsonl'}: File too large (EFBIG); "
                                      "the run stopped at once"], outcome
        assert f"failed: {name}: the client could not write" in res.stderr
        # the client stopped sending then: what it sent is what it recorded, give or take what was in flight
        client = json.loads((jdir / "run.json").read_text())["client"]
        records = sum(1 for line in (jdir / "records.jsonl").read_bytes().splitlines() if line.endswith(b"}"))
        sent = sum(w["started"] for w in client["workers"])
        assert client["stop_reason"] == outcome["reasons"][0]
        # (those in flight when it stopped, and those finished but not yet parsed, have no record)
        planned = 200 * (16 if "_conc16_" in name else 32)
        assert 0 < records <= sent < planned // 10, (sent, records, planned)
        assert not (jdir / "summary.json").exists()
    assert not list((out / "servers").glob("*/server.pid"))  # the server was stopped
