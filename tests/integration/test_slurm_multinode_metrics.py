"""A disaggregated job served role by role on the REAL multi-node Slurm (scripts/ci/start_slurm_multinode.sh) reads
what each worker did from the worker's own `/metrics`, as the virtual-time run of the same recipe reads it from its
modelled workers: `server_metrics.jsonl` holds every worker's series labelled with its role, the summary carries
`server_metrics` and each role's `metrics` (and the role's `tp`/`ep`) in the virtual path's shape, and the
required-metrics gate runs. Skipped when that cluster is not running."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

MN_CONF = Path("/etc/slurm-mn/slurm.conf")
RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "disagg-sim.yaml"
NODES_NEEDED = 3

pytestmark = [pytest.mark.slurm, pytest.mark.slow]


def slurm(*argv: str) -> str:
    env = {**os.environ, "SLURM_CONF": str(MN_CONF)}
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=30, check=True).stdout


@pytest.fixture(scope="module", autouse=True)
def multinode_cluster() -> None:
    if not MN_CONF.is_file():
        pytest.skip(f"no multi-node Slurm ({MN_CONF} missing; start it with scripts/ci/start_slurm_multinode.sh)")
    try:
        lines = slurm("sinfo", "-h", "-N", "-o", "%N %T").split("\n")
    except (subprocess.SubprocessError, OSError):
        pytest.skip("the multi-node Slurm controller does not answer (scripts/ci/start_slurm_multinode.sh)")
    up = [line for line in lines if len(line.split()) == 2 and line.split()[1] in ("idle", "mixed")]
    if len(up) < NODES_NEEDED:
        pytest.skip(f"the multi-node Slurm has {len(up)} usable node(s); {NODES_NEEDED} needed")


def run(recipe: Path, out: Path, tmp_path: Path, *live: str) -> list[dict[str, Any]]:
    env = {**os.environ, "SLURM_CONF": str(MN_CONF), "LLMSWEEP_STORE": str(tmp_path / f"{out.name}.sqlite")}
    argv = [sys.executable, "-m", "llmsweep.cli.main", "run", str(recipe), *live, "--out", str(out), "--no-report"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads((out / "jobs" / o["job_id"] / "summary.json").read_text())
            for o in json.loads((out / "run.json").read_text())["outcomes"]]


def test_a_role_by_role_job_scrapes_every_worker_and_its_summary_says_what_each_role_did(tmp_path: Path) -> None:
    recipe = tmp_path / "one-conc.yaml"  # one job: one deployment brought up is what this needs
    recipe.write_text(RECIPE.read_text().replace("conc-list: [2, 4]", "conc-list: [2]"))
    out = tmp_path / "live"
    (live,) = run(recipe, out, tmp_path, "--simulate", "--live", "--executor", "slurm", "--executor-option",
                  "poll_s=0.5", "--executor-option", "time_limit=00:05:00")
    (virtual,) = run(recipe, tmp_path / "virtual", tmp_path)
    try:
        (job_dir,) = (out / "jobs").iterdir()
        scrapes = [json.loads(line) for line in (job_dir / "server_metrics.jsonl").read_text().splitlines()]
        ok = [s for s in scrapes if "samples" in s]
        assert len(ok) >= 2 and len(ok) == len(scrapes), scrapes[:3]
        # every worker's own series, each labelled with its role and index (three workers: 2 prefill, 1 decode)
        workers = {(labels.get("role"), labels.get("worker")) for s in ok for _n, labels, _v in s["samples"]}
        assert workers == {("prefill", "0"), ("prefill", "1"), ("decode", "0")}
        metrics = live["server_metrics"]
        assert metrics["present"] and metrics["scrapes"] == len(ok) and metrics["scrape_errors"] == 0
        # the required-metrics gate ran, on the workers' prefix, as in virtual time
        gate = virtual["validity"]["gates"]["require_metrics_prefix"]
        assert gate and live["validity"]["gates"]["require_metrics_prefix"] == gate
        assert metrics["required_prefix"] == {"prefix": gate, "found": True}
        assert live["validity"]["verdict"] == "valid", live["validity"]
        # the roles block in the virtual path's shape: each worker role's metrics, its tp and ep
        for role in ("prefill", "decode"):
            got, want = live["roles"][role], virtual["roles"][role]
            assert set(got["metrics"]) == set(want["metrics"])
            assert {k: got[k] for k in ("tp", "ep", "max_running_requests")} == {
                k: want[k] for k in ("tp", "ep", "max_running_requests")}
        # the router runs no engine: its block is the virtual path's (what ran, no metrics, no parallelism)
        assert set(live["roles"]["router"]) - {"placed"} == set(virtual["roles"]["router"])
        # what each role did: the prompts on the prefill workers, the generated tokens on the decode worker
        prefill, decode = live["roles"]["prefill"]["metrics"], live["roles"]["decode"]["metrics"]
        assert prefill["prompt_tokens"] > 0 and decode["prompt_tokens"] == 0
        assert decode["generation_tokens"] > prefill["generation_tokens"]
        assert decode["running_max"] >= 1
    finally:
        wait_gone(out)


def wait_gone(out: Path) -> None:
    """The run's allocation has left the queue (its steps, the workers, with it)."""
    ids = [p.read_text().strip() for p in (out / "servers").glob("*/slurm_job_id")]
    deadline = time.monotonic() + 30
    for job_id in ids:
        while time.monotonic() < deadline:
            try:
                if not slurm("squeue", "-h", "-j", job_id).strip():
                    break
            except subprocess.CalledProcessError:
                break  # "Invalid job id": it has left
            time.sleep(0.5)
        else:
            raise AssertionError(f"Slurm job {job_id} is still queued")
