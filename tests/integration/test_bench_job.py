"""`bench_job`: the load generator driven by a Job, as a library call, against a simulator serving that job."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.execute.lifecycle import bench_job
from llmsweep.execute.preflight import pick_free_port
from llmsweep.plan import jobs_from_files

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "fixed-sim.yaml"


@pytest.fixture()
def served_job(tmp_path: Path):
    job = min(jobs_from_files([RECIPE]), key=lambda j: j.concs[0])
    spec = engines.render(job, port=pick_free_port())
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(list(spec.argv), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{spec.base_url}/health", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"simulator did not start: {(tmp_path / 'server.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield job, spec
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def test_bench_job_follows_the_job_and_gates_the_result(served_job, tmp_path: Path) -> None:
    job, spec = served_job
    out = tmp_path / "bench"
    summary = bench_job(job, spec.base_url, out, spec=spec, source="simulated")

    conc = job.concs[0]
    records = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    profiling = [r for r in records if r["phase"] == "profiling"]
    assert len(profiling) == 4 * conc  # the recipe's num-prompts-per-conc, not a client default
    assert sum(r["phase"] == "warmup" for r in records) == 1
    # InferenceX range ratio 0.8: output lengths are drawn in [0.8·OSL, OSL].
    assert all(int(0.8 * job.osl) <= r["max_tokens"] <= job.osl for r in profiling)
    assert summary.source == "simulated"
    assert summary.requests.successful == 4 * conc
    assert summary.validity.verdict in ("smoke", "valid")
    assert json.loads((out / "summary.json").read_text())["requests"] == summary.dump()["requests"]
