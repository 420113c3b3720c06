"""A user's catalog files that the jobs read, checked once before any job starts (`policy.inputs`).

A malformed `power.yaml` or `sim_calibration.yaml` is bad input to `validate`, `run` and `predict` before any job
(exit 2, file, line, field and fix). And `validate --json` printed `[]` for a bad `eval_thresholds.yaml`, counted
`0 errors` and then exited 2: the error is a finding now, in the table, the totals and the JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_main

from llmsweep.catalog.sources import clear_caches

REPO = Path(__file__).resolve().parents[2]
FIXED_SIM = REPO / "tests" / "data" / "recipes" / "run" / "fixed-sim.yaml"  # mi300x, on the simulator, 2 jobs
EVALS = REPO / "examples" / "evals" / "sim-8k1k-evals.yaml"


@pytest.fixture(autouse=True)
def catalog(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    folder = tmp_path / "catalog"
    folder.mkdir()
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(folder))
    clear_caches()
    yield folder
    clear_caches()


def test_a_malformed_simulator_calibration_is_refused_before_any_job(capsys: pytest.CaptureFixture[str],
                                                                     catalog: Path, tmp_path: Path) -> None:
    user = catalog / "sim_calibration.yaml"
    user.write_text("calibrations:\n  mine:\n    engine: vllm\n", encoding="utf-8")
    code, stdout, err = run_main(capsys, "validate", FIXED_SIM, "--json")
    assert code == 2, err
    (finding,) = json.loads(stdout)
    assert finding["rule"] == "catalog.file" and finding["file"] == str(user) and finding["line"] == 2
    assert finding["path"] == "calibrations.mine.hardware" and "hardware: Field required" in finding["message"]
    out = tmp_path / "run"
    code, _, err = run_main(capsys, "run", FIXED_SIM, "--out", out, "--no-report")
    assert code == 2 and f"{user}:2: invalid calibrations entry 'mine'" in err and not out.exists(), err


def test_validate_lists_a_bad_thresholds_file_as_a_finding(capsys: pytest.CaptureFixture[str],
                                                           catalog: Path) -> None:
    user = catalog / "eval_thresholds.yaml"
    user.write_text("thresholds: {llama3.1-8b: {gsm8k: {exact_matsh: 0.5}}}\n", encoding="utf-8")
    code, stdout, err = run_main(capsys, "validate", EVALS, "--json")
    assert code == 2
    (finding,) = json.loads(stdout)
    assert finding == {
        "rule": "catalog.file", "severity": "error", "file": str(user), "line": 1,
        "path": "thresholds.llama3.1-8b.gsm8k.exact_matsh", "jobs": [],
        "message": "eval threshold llama3.1-8b.gsm8k.exact_matsh: 'exact_matsh' is not a metric the eval gate reads",
        "fix": finding["fix"], "evidence": None}
    assert str(finding["fix"]).startswith("name the metric `exact_match`")
    # the totals count it, and nothing is said after them
    assert err.strip().splitlines()[-1] == "1 recipe, 2 jobs: 1 error, 0 warnings", err
    code, stdout, err = run_main(capsys, "validate", EVALS)  # the table says it too
    assert code == 2 and f"{user}:1: error [catalog.file] thresholds.llama3.1-8b.gsm8k.exact_matsh: " in stdout
