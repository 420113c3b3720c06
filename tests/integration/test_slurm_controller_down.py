"""A Slurm controller that does not answer (slurmctld stopped, or SLURM_CONF naming a cluster that is not up) stops
`run --executor slurm` with that error — the controller and its SLURM_CONF named, what sbatch said, exit 1 — for a
multi-node group as for a one-node group. `sbatch --test-only`'s "Unable to contact slurm controller" used to be read
as a cluster too small for the group's topology: its jobs `refused`, with the fix to choose fewer workers, after about
20 s of sbatch's retries said nowhere. Needs Slurm's client commands only, no cluster: SLURM_CONF points at a
controller port where nothing listens."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

RECIPES = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run"

pytestmark = pytest.mark.slurm

CONF = """\
ClusterName=llmsweep-down
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={port}
MessageTimeout=2
NodeName=n[0-2] CPUs=4 State=UNKNOWN
PartitionName=p Nodes=ALL Default=YES State=UP
"""
"""A cluster whose controller never answers; MessageTimeout=2 keeps sbatch's retries (10 s a request by default)
short."""


@pytest.fixture
def dead_controller(tmp_path: Path) -> Iterator[Path]:
    """A slurm.conf whose controller port is bound here and never listened on: every connection to it is refused, and
    no other process can take the port while the test runs."""
    if shutil.which("sbatch") is None or shutil.which("scontrol") is None:
        pytest.skip("Slurm client commands are not installed (apt-get install slurm-client)")
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        conf = tmp_path / "slurm.conf"
        conf.write_text(CONF.format(port=held.getsockname()[1]))
        yield conf


@pytest.mark.parametrize("recipe", ["disagg-sim.yaml", "fixed-sim.yaml"], ids=["multi-node", "one-node"])
def test_a_controller_that_does_not_answer_stops_the_run_with_that_error_not_a_refusal(
        recipe: str, dead_controller: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = {**os.environ, "SLURM_CONF": str(dead_controller), "LLMSWEEP_STORE": str(tmp_path / "store.sqlite")}
    argv = [sys.executable, "-m", "llmsweep.cli.main", "run", str(RECIPES / recipe), "--simulate", "--live",
            "--executor", "slurm", "--out", str(out), "--no-report"]
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-3000:]
    lines = proc.stderr.splitlines()
    error = next((i for i, line in enumerate(lines) if line.startswith("error: ")), None)
    assert error is not None, proc.stderr[-3000:]
    said = lines[error]
    assert f"the Slurm controller (slurmctld of SLURM_CONF={dead_controller}) does not answer: `sbatch " in said, said
    assert "Unable to contact slurm controller" in said, said  # what sbatch said
    fix = lines[error + 1].strip()
    assert fix.startswith("fix: check that slurmctld answers (`scontrol ping`"), proc.stderr[-3000:]
    # said before sbatch's retries, not only once they are over
    notice = next((i for i, line in enumerate(lines) if "does not answer `scontrol ping`" in line), None)
    assert notice is not None and notice < error and "sbatch keeps trying it" in lines[notice], proc.stderr[-3000:]
    # never a topology the cluster cannot hold, nor a job refused for it
    assert "cannot allocate" not in proc.stderr and "fewer workers" not in proc.stderr, proc.stderr[-3000:]
    recorded = [json.loads(path.read_text()) for path in (out / "jobs").glob("*/outcome.json")]
    recorded += json.loads((out / "run.json").read_text()).get("outcomes", [])
    assert not [o for o in recorded if o["status"] == "refused"], recorded
    assert not list((out / "servers").glob("*/slurm_job_id"))  # nothing was submitted
