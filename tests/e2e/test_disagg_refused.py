"""A multinode, disaggregated prefill/decode job is refused by `run` (every executor, the simulator included) and
by `predict` with its reason, never run as one aggregated server under the disaggregated job's identity: no stored
result carries a disaggregated identity with an aggregated topology."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from test_run_support import RECIPES, cli_env, job_dirs, read_json, run_cli

from llmsweep.engines import DISAGG_NOT_LAUNCHABLE

REASON = "disaggregated prefill/decode launch is not supported by this executor yet"


@pytest.mark.parametrize("simulate", [False, True], ids=["sim-engine", "--simulate"])
def test_run_refuses_the_disagg_job_and_runs_the_aggregated_one(tmp_path: Path, simulate: bool) -> None:
    out, store = tmp_path / "out", tmp_path / "store.sqlite"
    args: list[str | Path] = [RECIPES / "disagg-sim.yaml", RECIPES / "fixed-sim.yaml", "--out", out]
    proc = run_cli([*args, "--simulate"] if simulate else args, cli_env(tmp_path))
    outcomes = {o["job_id"]: o for o in read_json(out / "run.json")["outcomes"]}
    disagg = [o for i, o in outcomes.items() if "disagg-true" in i]
    aggregated = [o for i, o in outcomes.items() if "disagg-true" not in i]
    assert len(disagg) == 1 and len(aggregated) == 2, outcomes
    assert disagg[0]["status"] == "refused" and disagg[0]["reasons"] == [DISAGG_NOT_LAUNCHABLE]
    assert REASON in DISAGG_NOT_LAUNCHABLE
    assert f"job {disagg[0]['job_id']}: refused — {REASON}" in proc.stderr
    assert all(o["status"] == "valid" for o in aggregated), aggregated  # fixed-length points: no 900 s minimum
    # Nothing was launched for it: no job folder, no server rendered with its name.
    assert disagg[0]["job_id"] not in job_dirs(out)
    assert all("disagg-true" not in (j / "job.json").read_text() for j in job_dirs(out).values())

    from llmsweep.results.store import Store

    with Store(store, readonly=True) as st:
        points = st.results()
    assert sorted(p.job_id for p in points) == sorted(o["job_id"] for o in aggregated)
    for p in points:
        assert not p.job.get("multinode") and not p.job.get("disagg") and p.job.get("prefill") is None, p.job_id
    # The dashboard lists it as refused, with its reason.
    html = (out / "report" / "index.html").read_text()
    assert disagg[0]["job_id"] in html and REASON in html


def test_predict_refuses_the_disagg_job_and_predicts_the_rest(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "predict", str(RECIPES / "disagg-sim.yaml"),
                           str(RECIPES / "fixed-sim.yaml"), "--duration", "3", "--json"],
                          env=cli_env(tmp_path), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)  # every point: a prediction or a refusal with its reason
    predicted = [r for r in rows if "summary" in r]
    assert len(predicted) == 2 and all("disagg-true" not in p["job"] for p in predicted)
    assert all(p["summary"]["throughput"]["gpus"] == 8 for p in predicted)
    refused = [r for r in rows if "refused" in r]
    assert refused and all("disagg-true" in r["job"] and REASON in r["refused"] for r in refused)
    lines = [line for line in proc.stderr.splitlines() if line.startswith("refused ")]
    assert lines and all("disagg-true" in line and REASON in line for line in lines)


def test_predict_of_only_disagg_jobs_is_an_error_that_says_why(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "predict", str(RECIPES / "disagg-sim.yaml"),
                           "--duration", "3"], env=cli_env(tmp_path), capture_output=True, text=True, timeout=240)
    assert proc.returncode == 2, proc.stderr
    assert REASON in proc.stderr and "were refused" in proc.stderr


def test_run_refuses_a_framework_llmsweep_cannot_launch_with_why(tmp_path: Path) -> None:
    recipe = tmp_path / "tilert.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text().replace("framework: sglang", "framework: tilert")
                      .replace("  serve:\n    engine: { name: sim }\n", ""))
    out = tmp_path / "out"
    proc = run_cli([recipe, "--out", out], cli_env(tmp_path))
    outcomes = read_json(out / "run.json")["outcomes"]
    assert len(outcomes) == 2 and all(o["status"] == "refused" for o in outcomes), proc.stderr
    assert all("TileRT is its own engine" in o["reasons"][0] for o in outcomes)
