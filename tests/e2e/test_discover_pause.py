"""`llmsweep discover` stopped with Ctrl-Z mid-run and continued, its stages served by a real engine's command line
(`transformers serve`, the stand-in of `support.fake_transformers`: a streaming server on loopback, launched by the
local executor). On the simulator in virtual time a stop changes nothing: the runs' clocks are the simulator's."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from support.fake_transformers import stand_in_env
from support.procs import ctrl_z, wait_for
from support.real_engine import tiny_transformers_recipe


@pytest.mark.timeout(240)
def test_a_run_measured_across_a_ctrl_z_is_left_out_named_and_fails_the_discovery(tmp_path: Path,
                                                                                   tiny_model_dir: Path) -> None:
    """Ctrl-Z (SIGTSTP to the discovery's process group) once the ladder's first run has its first record, held 1.5 s,
    then SIGCONT. The stage's run judged that job invalid (as `run` does), the discovery left it out and exited 0
    without a word; its noise came from one repeat fewer than asked. Now discovery.json names the run and why, the
    table says so, and the exit status is 1 as `run`'s is; the other runs are analysed as before."""
    env = stand_in_env(tmp_path, LLMSWEEP_STORE=str(tmp_path / "s.sqlite"), PYTHONUNBUFFERED="1")
    recipe = tmp_path / "d.yaml"
    # 300-token answers: a request takes ~0.6 s on the stand-in, so the first run has two left at its first record
    recipe.write_text(tiny_transformers_recipe(tiny_model_dir, key="tfd", concs="[1]", isl=32, osl=300, warmups=0,
                                               prompts_per_conc=3, health_timeout=60))
    out, log = tmp_path / "disc", tmp_path / "discover.log"
    argv = [sys.executable, "-m", "llmsweep.cli.main", "discover", str(recipe), "--executor-option", "allow_image=true",
            "--repeats", "2", "--ladder-top", "2", "--refine", "0", "--out", str(out)]
    jobs = out / "stages" / "ladder" / "jobs"

    def measuring() -> Path | None:
        found = [j for j in jobs.iterdir() if (r := j / "records.jsonl").is_file() and r.read_text().strip()] \
            if jobs.is_dir() else []
        return found[0] if found else None

    with open(log, "wb") as fh:
        proc = subprocess.Popen(argv, env=env, stdout=fh, stderr=subprocess.STDOUT, process_group=0)
    try:
        first = wait_for(measuring, timeout=120, what="the first run's first record", proc=proc, log=log, poll_s=0.02)
        ctrl_z(proc.pid)  # held 1.5 s: the pause the run's clocks count
        rc = proc.wait(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    said = log.read_text()
    assert rc == 1, said[-4000:]
    result = json.loads((out / "discovery.json").read_text())
    (ladder,) = result["stages"]
    assert list(ladder["paused"]) == [first.name], ladder
    why = ladder["paused"][first.name]
    assert why.startswith("llmsweep was stopped for ") and "(Ctrl-Z, SIGTSTP or SIGSTOP, then SIGCONT)" in why
    assert why.endswith("left out of the discovery (a discovery does not resume: run it again with another --out)")
    assert float(why.removeprefix("llmsweep was stopped for ").split(" s ")[0]) >= 1.4, why  # the pause, measured
    assert json.loads((first / "outcome.json").read_text())["status"] == "invalid"
    assert (ladder["runs_planned"], ladder["runs_measured"]) == (4, 3)
    assert first.name not in {r["job_id"] for r in result["runs"]}  # the noise comes from the other runs
    assert result["interrupted"] is None and result["arms"][0]["error"] is None  # the rest analysed as before
    assert f"invalid stage ladder job {first.name}: {why}" in " ".join(said.split()), said[-4000:]
