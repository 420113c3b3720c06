"""The README's quickstart, exactly as a new user runs it (the one full-quickstart test of the suite: ~3.5 min).

Beyond "it finishes": every point is a smoke result whose acceptance length was read back *conclusively* (enough
verify steps) and within 0.10 of the golden 3.39 — the simulator used to read ~+0.2 at conc 1 and ~-0.1 at conc 8-12.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_run_support import cli_env, job_dirs, read_json, run_cli

QUICKSTART = Path(__file__).resolve().parents[2] / "examples" / "quickstart.yaml"


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_quickstart_runs_every_point_to_a_smoke_result_with_a_conclusive_read_back(tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = run_cli([QUICKSTART, "--out", out], cli_env(tmp_path), timeout=560)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.strip().splitlines()[-1] == str(out / "report" / "index.html")
    jobs = job_dirs(out)
    assert len(jobs) == 9
    for name, jdir in jobs.items():
        summary = read_json(jdir / "summary.json")
        assert summary["validity"]["verdict"] == "smoke", (name, summary["validity"])
        (check,) = summary["readback"]["checks"]
        assert check["ok"] is True, (name, check)
        assert abs(check["realised"] - 3.39) <= 0.10
