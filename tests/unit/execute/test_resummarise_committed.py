"""Re-summarising committed H200 evidence gives the verdict and realised acceptance its run gave.

The job folders under `examples/results/h200-*` were packed for the repository: the first 20 records and the first and
last `/metrics` scrape beside the run's own `summary.json` (docs/gpu.md §5). Re-summarised as if whole, a slice's
profile window ended at its last kept request, the scrape that closed the run's window fell outside it, and the
realised acceptance length "could not be read back": `llmsweep summarize` turned the valid Qwen3-Next calibration
points invalid and wrote that over the run's summary. Now a folder whose raw files are a slice (fewer records than the
client started, fewer scrapes than its summary read) is re-judged from the figures its summary measured over the
run's window, and says so; a slice with no summary of its run is refused with the counts.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llmsweep.errors import ResultError
from llmsweep.execute.readback import summarise_job
from llmsweep.metrics.model import Summary

RESULTS = Path(__file__).resolve().parents[3] / "examples" / "results"
CALIB = RESULTS / "h200-vllm-0.26.0" / "qwen3next-calib" / "jobs"
COMMITTED = sorted(p.parent for p in RESULTS.glob("h200-*/**/jobs/*/records.jsonl")
                   if (p.parent / "summary.json").is_file())


def _copy(folder: Path, tmp_path: Path) -> Path:
    job_dir = tmp_path / folder.name
    shutil.copytree(folder, job_dir)
    return job_dir


@pytest.mark.skipif(not COMMITTED, reason="no committed H200 job folders in this checkout")
@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: f"{p.parents[2].name}/{p.parents[1].name}/{p.name[:40]}")
def test_committed_evidence_resummarises_to_the_verdict_and_acceptance_its_run_gave(folder: Path,
                                                                                    tmp_path: Path) -> None:
    job_dir = _copy(folder, tmp_path)
    stored = Summary.load(job_dir / "summary.json")
    again = summarise_job(job_dir)
    assert again.validity.verdict == stored.validity.verdict, again.validity.reasons
    was = stored.readback.checks if stored.readback else []
    now = again.readback.checks if again.readback else []
    assert [(c.check, c.ok, c.verify_steps) for c in now] == [(c.check, c.ok, c.verify_steps) for c in was]
    for check, stored_check in zip(now, was, strict=True):
        assert check.realised == pytest.approx(stored_check.realised, rel=1e-9)
    assert Summary.load(job_dir / "summary.json").validity == again.validity  # what it printed is what it wrote
    assert summarise_job(job_dir, write=False).validity == again.validity  # and a second pass changes nothing


@pytest.mark.skipif(not CALIB.is_dir(), reason="the committed Qwen3-Next calibration run is not in this checkout")
def test_summarize_on_a_packed_calibration_point_keeps_it_valid_and_says_it_was_re_judged(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from llmsweep.cli.main import main

    (folder,) = CALIB.glob("qwen3.5_4096_128_*_conc32_*")
    job_dir = _copy(folder, tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(["summarize", str(job_dir), "--json"])
    assert exited.value.code == 0  # a valid point
    printed = json.loads(capsys.readouterr().out)
    assert printed["validity"]["verdict"] == "valid" and printed["validity"]["reasons"] == []
    (check,) = printed["readback"]["checks"]
    assert check["ok"] is True and check["verify_steps"] == 6726
    assert check["realised"] == pytest.approx(3.399345822182575, rel=1e-12)
    (note,) = [w for w in printed["validity"]["warnings"] if w.startswith("re-judged")]
    assert "records.jsonl holds 20 of the 256 requests the client started (run.json)" in note
    assert "server_metrics.jsonl holds 2 of the 25 /metrics scrapes its summary.json was computed from" in note
    assert printed["requests"]["total"] == 256  # the run's figures, not the slice's


@pytest.mark.skipif(not CALIB.is_dir(), reason="the committed Qwen3-Next calibration run is not in this checkout")
def test_a_slice_without_its_runs_summary_is_refused_with_the_counts(tmp_path: Path) -> None:
    (folder,) = CALIB.glob("qwen3.5_1024_128_*_conc64_*")
    job_dir = _copy(folder, tmp_path)
    (job_dir / "summary.json").unlink()
    with pytest.raises(ResultError) as raised:
        summarise_job(job_dir)
    assert "records.jsonl holds 20 of the 512 requests the client started (run.json)" in str(raised.value)
    assert "holds no summary.json of the run's to re-judge" in str(raised.value)
    assert not (job_dir / "summary.json").exists()
