"""`llmsweep run` against a faulty engine: the local executor launches the rendered `transformers serve` command, and
a stand-in `transformers` module answers it with the fault-injecting streaming server (tests/support/stream_server.py)
faulting every request. The job is a recorded failure (verdict `invalid`, every record with the fault's error
class), the run exits 1 with no traceback, and the failed job is in the store."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from support.fake_transformers import stand_in_env
from support.real_engine import tiny_transformers_recipe


@pytest.fixture
def model_dir(tiny_model_dir: Path) -> Path:
    return tiny_model_dir


def _run(tmp_path: Path, model_dir: Path, fault: str | None) -> tuple[subprocess.CompletedProcess[str], Path, Path]:
    store = tmp_path / "store.sqlite"
    env = stand_in_env(tmp_path, LLMSWEEP_STORE=str(store), LLMSWEEP_TEST_FAULT=fault or "")
    rfile = tmp_path / "faulty.yaml"
    # the stand-in ignores the recipe's continuous-batching flags
    rfile.write_text(tiny_transformers_recipe(model_dir, key="faulty", concs="[2]", isl=32, osl=8, warmups=0,
                                              health_timeout=60))
    out = tmp_path / "run"
    res = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "run", str(rfile), "--executor-option",
                          "allow_image=true", "--out", str(out), "--no-report", "--request-timeout", "3"],
                         env=env, capture_output=True, text=True, timeout=180)
    return res, out, store


@pytest.mark.parametrize(("fault", "error_class"), [("reset", "connection"), ("http429", "http"),
                                                    ("early_end", "truncated")])
def test_a_run_against_a_faulty_engine_is_a_recorded_failure(tmp_path: Path, model_dir: Path, fault: str,
                                                             error_class: str) -> None:
    res, out, store = _run(tmp_path, model_dir, fault)
    text = res.stdout + res.stderr
    assert res.returncode == 1, text[-4000:]
    assert "Traceback" not in text
    (job,) = [p for p in (out / "jobs").iterdir() if p.is_dir()]
    records = [json.loads(x) for x in (job / "records.jsonl").read_text().splitlines()]
    assert records and {r["error_class"] for r in records} == {error_class}
    summary = json.loads((job / "summary.json").read_text())
    assert summary["validity"]["verdict"] == "invalid" and summary["requests"]["successful"] == 0
    assert json.loads((job / "outcome.json").read_text())["status"] == "invalid"
    db = sqlite3.connect(store)
    assert db.execute("SELECT job_id, verdict FROM results").fetchall() == [(job.name, "invalid")]
    assert not list((out / "servers").glob("*/server.pid")), "the faulty server was torn down"
