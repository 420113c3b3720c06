"""A user's catalog files that the jobs read, checked once before any job starts (`policy.inputs`).

A price set as the README says (`power: {mi300x: {usd_per_gpu_hour: …, cost_source: …, cost_date: …}}`) failed every
job in 0.1 s (`idle_w: Field required`) while `validate` said `0 errors`: it now sets the price alone, over the packaged
watts. A malformed `power.yaml` or `sim_calibration.yaml` is bad input to `validate`, `run` and `predict` before any
job (exit 2, file, line, field and fix). And `validate --json` printed `[]` for a bad `eval_thresholds.yaml`, counted
`0 errors` and then exited 2: the error is a finding now, in the table, the totals and the JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.cli import run_main

from llmsweep.catalog.sources import PACKAGED_DIR, clear_caches

REPO = Path(__file__).resolve().parents[2]
FIXED_SIM = REPO / "tests" / "data" / "recipes" / "run" / "fixed-sim.yaml"  # mi300x, on the simulator, 2 jobs
EVALS = REPO / "examples" / "evals" / "sim-8k1k-evals.yaml"
PRICE = 'power: {mi300x: {usd_per_gpu_hour: 1.0, cost_source: our contract, cost_date: "2026-12-07"}}\n'


@pytest.fixture(autouse=True)
def catalog(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    folder = tmp_path / "catalog"
    folder.mkdir()
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(folder))
    clear_caches()
    yield folder
    clear_caches()


def _summaries(out: Path) -> list[dict[str, object]]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(out.glob("jobs/*/summary.json"))]


def test_a_price_alone_sets_the_price_over_the_packaged_watts(capsys: pytest.CaptureFixture[str], catalog: Path,
                                                               tmp_path: Path) -> None:
    (catalog / "power.yaml").write_text(PRICE, encoding="utf-8")
    code, _, err = run_main(capsys, "validate", FIXED_SIM)
    assert code == 0 and "0 errors" in err, err
    out = tmp_path / "run"
    code, _, err = run_main(capsys, "run", FIXED_SIM, "--out", out, "--no-report")
    assert code == 0, err
    summaries = _summaries(out)
    assert len(summaries) == 2
    for summary in summaries:
        power = summary["power"]
        assert isinstance(power, dict) and power["power_valid"], power
        cost = power["cost"]
        # the price and its source are the user's ...
        assert cost["usd_per_gpu_hour"] == 1.0 and cost["source"] == "our contract" and cost["date"] == "2026-12-07"
        assert cost["usd_per_mtok_output"] is not None
        # ... and the simulator's watts stay the packaged MI300X's (750 W board, idle 140 W), never above its limit
        assert 140 * 8 <= power["avg_total_gpu_power_w"] <= 750 * 8


def test_a_watts_group_given_in_part_is_refused_before_any_job(capsys: pytest.CaptureFixture[str], catalog: Path,
                                                               tmp_path: Path) -> None:
    user = catalog / "power.yaml"
    user.write_text("power:\n  mi300x:\n    idle_w: 100\n", encoding="utf-8")
    code, stdout, err = run_main(capsys, "validate", FIXED_SIM, "--json")
    assert code == 2 and "1 error" in err, err
    (finding,) = json.loads(stdout)
    assert finding["rule"] == "catalog.file" and finding["severity"] == "error"
    assert finding["file"] == str(user) and finding["line"] == 2 and finding["path"] == "power.mi300x.max_w"
    assert "max_w: Field required; watts_source: Field required" in finding["message"]
    # the fix says what to copy from the packaged entry, which keeps its source
    assert f"{PACKAGED_DIR / 'power.yaml'}:" in finding["fix"] and "max_w: 750.0" in finding["fix"]
    assert "watts_source: 'https://www.amd.com/" in finding["fix"]

    out = tmp_path / "run"
    code, _, err = run_main(capsys, "run", FIXED_SIM, "--out", out, "--no-report")
    assert code == 2 and f"{user}:2: invalid power entry 'mi300x' in power.yaml" in err, err
    assert not out.exists()  # refused before --out, the store or a server were touched
    code, _, err = run_main(capsys, "predict", FIXED_SIM)
    assert code == 2 and f"{user}:2: invalid power entry 'mi300x'" in err and "refused" not in err, err


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
