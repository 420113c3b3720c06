"""A simulated speculative point records the acceptance length it ran at and where that came from
(`provenance.acceptance`), whether the simulator ran it in virtual time (`run --simulate`) or served it over HTTP
(`run --simulate --live`), aggregated or role by role; `results show` prints it for either."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from test_run_support import RECIPES, cli_env, cli_here, job_dirs, read_json, run_here

pytestmark = pytest.mark.slow  # a file of long tests: xdist starts it first (tests/conftest.py)


def _disagg_mtp(tmp_path: Path) -> Path:
    """disagg-sim.yaml as a DeepSeek-R1 MTP row (K=2, no pinned acceptance: the job measures real acceptance, which
    the simulator stands in for with its estimate), at one concurrency."""
    doc = yaml.safe_load((RECIPES / "disagg-sim.yaml").read_text())
    recipe = doc["run-sim-disagg"]
    recipe.update({"model": "deepseek-ai/DeepSeek-R1-0528", "model-prefix": "dsr1"})
    recipe["serve"]["spec-decoding"] = {"method": "mtp", "num-steps": 2}
    (entry,) = recipe["scenarios"]["fixed-seq-len"][0]["search-space"]
    entry.update({"spec-decoding": "mtp", "conc-list": [2]})
    path = tmp_path / "disagg-mtp.yaml"
    path.write_text(yaml.safe_dump({"run-sim-disagg-mtp": recipe}, sort_keys=False))
    return path


def _run(tmp_path: Path, recipes: list[Path], live: bool) -> tuple[dict[str, Any], Path]:
    """Each job's `provenance.acceptance` after `run RECIPES [--live]` (virtual time without), and the store."""
    tmp_path.mkdir()
    out = tmp_path / "out"
    proc = run_here([*recipes, "--simulate", *(["--live"] if live else []), "--out", out, "--no-report"],
                    cli_env(tmp_path))
    assert proc.returncode == 0, proc.stderr[-4000:]
    return ({job_id: read_json(jdir / "summary.json")["provenance"].get("acceptance")
             for job_id, jdir in job_dirs(out).items()}, tmp_path / "store.sqlite")


@pytest.mark.timeout(180)
def test_a_live_simulated_speculative_point_records_the_acceptance_virtual_time_records(tmp_path: Path) -> None:
    recipes = [_disagg_mtp(tmp_path), RECIPES / "spec-fixed-sim.yaml"]
    virtual, _ = _run(tmp_path / "virtual", recipes, live=False)
    live, store = _run(tmp_path / "live", recipes, live=True)
    assert live == virtual, (live, virtual)  # one record, whichever clock served the point
    (disagg,) = [i for i in live if "disagg-true" in i]
    assert live[disagg]["source"] == "estimate" and live[disagg]["value"] == pytest.approx(2.44)
    assert "K=2" in live[disagg]["basis"]
    pinned = [a for i, a in live.items() if i != disagg]
    assert len(pinned) == 2 and all(a["source"] == "pinned" and a["value"] == pytest.approx(3.39) for a in pinned)

    shown = cli_here(["results", "show", disagg, "--store", store], cli_env(tmp_path / "live"))
    assert shown.returncode == 0, shown.stderr
    (line,) = [s for s in shown.stdout.splitlines() if "acceptance length" in s]
    assert "2.44 (estimate: typical mtp acceptance" in line, line
