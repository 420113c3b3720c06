"""The simulated engine is an unauthenticated server: it listens on loopback unless a user asks otherwise."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from llmsweep import engines
from llmsweep.cli.sim import sim
from llmsweep.policy import validate_files

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


def test_a_run_starts_the_simulator_on_loopback() -> None:
    job = validate_files([RECIPE]).jobs[0]
    argv = engines.render(job, simulate=True, port=0).argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"
    assert "0.0.0.0" not in argv


def test_sim_serve_binds_loopback_by_default() -> None:
    out = CliRunner().invoke(sim, ["serve", "--help"])
    assert out.exit_code == 0
    assert "--host" in out.output and "127.0.0.1" in out.output
