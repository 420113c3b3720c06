"""`llmsweep sim calibrate` fits measurements only: a run the simulator produced (what `llmsweep run` of the
quickstart writes) is refused with the fix, a simulated point among measured ones is left out with its reason, and
a fit says where it is between its iteration lines (on stderr, timestamped; `--json` keeps stdout one document)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli, main
from llmsweep.cli.sim import calibrate as calibrate_cmd

REPO = Path(__file__).resolve().parents[3]
REHEARSAL = REPO / "tests" / "data" / "calib-rehearsal-qwen3next"  # measured over HTTP (source: measured)
FIXED_SIM = REPO / "tests" / "data" / "recipes" / "run" / "fixed-sim.yaml"  # engine: sim, two points in seconds
STAMPED = re.compile(r"^\[\d\d:\d\d:\d\d\] ")


pytestmark = pytest.mark.usefixtures("user_catalog")


def _simulated_run(tmp_path: Path) -> Path:
    """A run directory of `llmsweep run` on the simulator in virtual time (two fixed-length points)."""
    out = tmp_path / "sim-run"
    res = CliRunner().invoke(cli, ["run", str(FIXED_SIM), "--out", str(out), "--store", str(tmp_path / "s.sqlite"),
                                   "--no-report"])
    assert res.exit_code == 0, res.output
    summaries = sorted(out.glob("jobs/*/summary.json"))
    assert len(summaries) == 2 and {json.loads(s.read_text())["source"] for s in summaries} == {"simulated"}
    return out


def test_a_simulated_run_is_refused_with_the_fix_before_any_replay(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    run = _simulated_run(tmp_path)
    capsys.readouterr()
    with pytest.raises(SystemExit) as exited:
        main(["sim", "calibrate", str(run), "--json"])
    out, err = capsys.readouterr()
    assert exited.value.code == 2, err  # bad input
    assert out == ""  # no document: nothing was fitted
    assert "these are simulated results, not measurements" in err and "(2 simulated)" in err
    assert "fix: calibrate against a run on a real engine" in err
    assert "calibrating" not in err and "iteration" not in err  # refused before any replay


def test_simulated_points_are_left_out_and_the_fit_says_where_it_is(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    sim_run = _simulated_run(tmp_path)
    run = tmp_path / "mixed"
    for job in sorted((REHEARSAL / "jobs").glob("qwen3.5_*_conc[14]_*")):
        shutil.copytree(job, run / "jobs" / job.name)
    shutil.copy(REHEARSAL / "run.json", run / "run.json")
    simulated = sorted(p.name for p in (sim_run / "jobs").iterdir())
    for name in simulated:
        shutil.copytree(sim_run / "jobs" / name, run / "jobs" / name)
    # every replay says so (10 s apart by default); not raising: without the heartbeat the asserts below say why
    monkeypatch.setattr("llmsweep.sim.calibrate.HEARTBEAT_S", 0.0, raising=False)
    res = CliRunner().invoke(calibrate_cmd, [str(run), "--factors", "step_s", "--max-iter", "1", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # stdout is the JSON document alone
    (fit,) = doc["calibrations"]
    assert len(fit["points"]) == 3  # the measured points only
    assert len(doc["skipped"]) == 2
    for name, why in zip(simulated, sorted(doc["skipped"]), strict=True):
        assert why.startswith(name) and "source is simulated, not measured" in why
    lines = res.stderr.splitlines()
    assert lines and all(STAMPED.match(line) for line in lines), res.stderr  # a left-out point is said once, up front
    # said before the fit starts, not only after it
    left = [i for i, line in enumerate(lines) if "left out" in line and "source is simulated" in line]
    first_fit = next(i for i, line in enumerate(lines) if "calibrating " in line)
    assert len(left) == 2 and max(left) < first_fit
    # between the iteration lines: which pass, which point of how many, seconds into the iteration
    key = "vllm/h200/hybrid-moe-tiny+mtp/bf16/tp1/kv-bf16"
    assert any(f"{key}: replay at the defaults: point 3/3 replayed (fixed 1024/128 c4)" in line for line in lines)
    beat = re.compile(rf"{re.escape(key)} \(from the defaults\): iteration 1/1, sensitivity to step_s \(1/1\): "
                      r"point [123]/3 replayed \(fixed \d+/\d+ c\d+\), \d+ s in$")
    assert sum(1 for line in lines if beat.search(line)) == 3
    assert any("iteration 1/1, trial step 1: point 3/3 replayed" in line for line in lines)


def test_a_key_whose_fit_fails_is_said_when_it_fails(tmp_path: Path) -> None:
    """One hardware fits; the other has one point, too few for four factors: its failure is said on stderr, once,
    as a left-out point is (the table shows only the key that fitted)."""
    run = tmp_path / "two-skus"
    for job in sorted((REHEARSAL / "jobs").glob("qwen3.5_*_conc[14]_*")):
        shutil.copytree(job, run / "jobs" / job.name)
    shutil.copy(REHEARSAL / "run.json", run / "run.json")
    (lone,) = (REHEARSAL / "jobs").glob("qwen3.5_1024_128_*_conc64_*")
    h100 = run / "jobs" / "h100-copy"
    shutil.copytree(lone, h100)
    job = json.loads((h100 / "job.json").read_text())
    assert job["sku"] == "h200"
    (h100 / "job.json").write_text(json.dumps({**job, "sku": "h100"}))
    res = CliRunner().invoke(calibrate_cmd, [str(run), "--factors", "mem,compute,step_s,per_seq_s",
                                             "--max-iter", "1"])
    assert res.exit_code == 0, res.output
    assert "vllm/h200/" in res.stdout and "h100" not in res.stdout  # the table: the key that fitted
    said = [line for line in res.stderr.splitlines() if "vllm/h100/" in line]
    assert len(said) == 1, res.stderr
    assert STAMPED.match(said[0]) and "left out vllm/h100/hybrid-moe-tiny+mtp/bf16/tp1/kv-bf16: " in said[0]
    assert "3 measured metrics cannot constrain 4 factors" in said[0] and "(fix: measure more" in said[0]


def test_a_summary_no_outcome_closed_is_left_out_as_the_report_and_store_leave_it(tmp_path: Path) -> None:
    """A `valid` summary counts only beside an outcome.json that closed the job so (`job_files.unjudged`, the
    definition --resume, the report and the store read): one with none (the run killed after the client wrote the
    summary, before the job's checks) or one that closed the job failed is not fitted, and is listed with why."""
    from llmsweep.job_files import unjudged

    run = tmp_path / "run"
    jobs = sorted((REHEARSAL / "jobs").glob("qwen3.5_1024_*"))  # conc 1, 4, 16, 64, each closed by its outcome.json
    for job in jobs:
        assert json.loads((job / "outcome.json").read_text())["status"] == "valid"
        shutil.copytree(job, run / "jobs" / job.name)
    shutil.copy(REHEARSAL / "run.json", run / "run.json")
    killed, failed = (run / "jobs" / jobs[0].name), (run / "jobs" / jobs[1].name)
    (killed / "outcome.json").unlink()
    closed = json.loads((failed / "outcome.json").read_text())
    closed.update(status="failed", reasons=["server died during the power record"])
    (failed / "outcome.json").write_text(json.dumps(closed, indent=2))
    res = CliRunner().invoke(calibrate_cmd, [str(run), "--factors", "step_s", "--max-iter", "1", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    (fit,) = doc["calibrations"]
    assert len(fit["points"]) == 2  # the two jobs their outcome closed valid
    skipped = dict(line.split(": ", 1) for line in doc["skipped"])
    assert set(skipped) == {killed.name, failed.name}
    assert unjudged("valid", None) in skipped[killed.name]  # the one definition's words
    assert unjudged("valid", closed) in skipped[failed.name]
    assert "outcome.json closed the job failed: server died during the power record" in skipped[failed.name]
    assert f"--out {run} --resume" in skipped[killed.name]  # and how to get the job's result
    assert sum(1 for line in res.stderr.splitlines() if "left out" in line and "not the job's result" in line) == 2
