"""A simulated result records the simulator build that computed it (`provenance.simulator.digest`): in virtual time
this process's core (`sim.identity.simulator_digest`), live the server's own, as its `/version` says it — a dev tree
keeps one `llmsweep_version` across simulator edits, so the release alone cannot tell two builds' numbers apart
(`ResultPoint.simulator_build`, `compare`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.execute import virtual
from llmsweep.execute.lifecycle import LifecycleSettings, ServerGroup, run_group
from llmsweep.execute.local import LocalLauncher
from llmsweep.plan import Job, jobs_from_files
from llmsweep.results.point import point_from_job
from llmsweep.results.rundir import load_job
from llmsweep.sim.identity import simulator_digest

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "fixed-sim.yaml"


def _job() -> Job:
    jobs = jobs_from_files([RECIPE])
    return min(jobs, key=lambda j: j.concs[0])


def _provenance(run_dir: Path, job: Job) -> dict:
    return json.loads((run_dir / "jobs" / job.id / "summary.json").read_text())["provenance"]


def test_a_virtual_time_result_records_this_processs_simulator_build(tmp_path: Path) -> None:
    job = _job()
    group = ServerGroup(id="virtual", spec=engines.render(job, port=0), jobs=[job], source="simulated")
    (outcome,) = virtual.run_groups([group], tmp_path, LifecycleSettings(stop_grace_s=5), event=lambda _m: None)
    assert outcome.status == "valid", outcome.reasons
    said = _provenance(tmp_path, job)
    assert said["clock"] == "virtual"
    assert said["simulator"]["digest"] == simulator_digest()


def test_a_live_result_records_the_servers_simulator_build_not_this_processs(tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The server reads one more catalog directory than this process (its launch's environment): its build is
    another, and the result records the server's, read from its `/version`."""
    extra = tmp_path / "catalog"
    extra.mkdir()
    (extra / "notes.json").write_text("{}\n", encoding="utf-8")  # read by no catalog, covered by the digest
    job = _job()
    spec = engines.render(job, port=0)
    spec = spec.model_copy(update={"env": {**spec.env, "LLMSWEEP_CATALOG_DIR": str(extra)}})
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(extra))
    try:
        simulator_digest.cache_clear()
        servers = simulator_digest()
    finally:
        monkeypatch.delenv("LLMSWEEP_CATALOG_DIR")
        simulator_digest.cache_clear()
    ours = simulator_digest()
    assert servers != ours
    run_dir = tmp_path / "run"
    (outcome,) = run_group(ServerGroup(id="live", spec=spec, jobs=[job], source="simulated"), LocalLauncher(),
                           run_dir, LifecycleSettings(stop_grace_s=5))
    assert outcome.status == "valid", outcome.reasons
    said = _provenance(run_dir, job)
    assert said["clock"] == "wall"
    assert said["simulator"]["digest"] == servers
    # and the point read from the folder names that build
    art = load_job(run_dir / "jobs" / job.id)
    assert art is not None
    point = point_from_job("live", art)
    assert point is not None and point.simulator_build == servers


def test_predict_records_the_simulator_build_as_run_does() -> None:
    """`predict` (aggregated and disaggregated units): each point's provenance names the build that predicted it."""
    from click.testing import CliRunner

    from llmsweep.cli.main import cli

    res = CliRunner().invoke(cli, ["predict", str(RECIPE), str(RECIPE.with_name("disagg-sim.yaml")),
                                   "--max-requests", "3", "--processes", "1", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert {"disagg-true" in r["job"] for r in rows} == {True, False}
    assert {r["summary"]["provenance"]["simulator"]["digest"] for r in rows} == {simulator_digest()}
