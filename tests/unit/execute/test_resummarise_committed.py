"""Re-summarising committed H200 evidence gives the verdict its run gave, or refuses and says why.

The job folders under `examples/results/h200-*` were packed for the repository: the first 20 records and the first and
last `/metrics` scrape beside the run's own `summary.json` (docs/gpu.md §5). Re-summarised as if whole, a slice's
profile window ended at its last kept request, the scrape that closed the run's window fell outside it, and the
realised acceptance length "could not be read back": `llmsweep summarize` turned the valid Qwen3-Next calibration
points invalid and wrote that over the run's summary. A folder whose raw files are all there re-summarises to the
stored verdict and realised acceptance; a slice is refused with the counts, and its summary.json stays the run's.
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
COMMITTED = sorted(p.parent for p in RESULTS.glob("h200-*/**/jobs/*/records.jsonl") if (p.parent / "summary.json").is_file())


@pytest.mark.skipif(not COMMITTED, reason="no committed H200 job folders in this checkout")
@pytest.mark.parametrize("folder", COMMITTED, ids=lambda p: f"{p.parents[2].name}/{p.parents[1].name}/{p.name[:40]}")
def test_committed_evidence_resummarises_to_its_verdict_or_is_refused_as_a_slice(folder: Path, tmp_path: Path) -> None:
    job_dir = tmp_path / "job"
    shutil.copytree(folder, job_dir)
    before = (job_dir / "summary.json").read_bytes()
    stored = Summary.load(job_dir / "summary.json")
    try:
        again = summarise_job(job_dir)
    except ResultError as exc:
        assert "is a slice of what its run recorded" in str(exc) and "left as the run wrote it" in str(exc)
        assert (job_dir / "summary.json").read_bytes() == before  # the run's own summary stands
        return
    assert again.validity.verdict == stored.validity.verdict
    was = [(c.check, c.ok, c.realised) for c in (stored.readback.checks if stored.readback else [])]
    now = [(c.check, c.ok, c.realised) for c in (again.readback.checks if again.readback else [])]
    assert [(c, ok) for c, ok, _ in now] == [(c, ok) for c, ok, _ in was]
    for (_, _, realised), (_, _, stored_al) in zip(now, was, strict=True):
        assert realised == pytest.approx(stored_al, rel=1e-9, abs=1e-12)


@pytest.mark.skipif(not CALIB.is_dir(), reason="the committed Qwen3-Next calibration run is not in this checkout")
def test_summarize_on_a_packed_calibration_point_says_it_is_a_slice_and_keeps_the_valid_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from llmsweep.cli.main import main

    (folder,) = CALIB.glob("qwen3.5_4096_128_*_conc32_*")
    job_dir = tmp_path / folder.name
    shutil.copytree(folder, job_dir)
    with pytest.raises(SystemExit) as exited:
        main(["summarize", str(job_dir), "--json"])
    assert exited.value.code == 1
    out = capsys.readouterr()
    assert out.out == ""  # no summary printed for a folder that cannot be re-summarised
    assert "records.jsonl holds 20 of the 256 requests the client started (run.json)" in out.err
    assert "server_metrics.jsonl holds 2 of the 25 /metrics scrapes" in out.err
    assert "fix: re-summarise the job folder the run wrote" in out.err
    kept = json.loads((job_dir / "summary.json").read_text())
    assert kept["validity"]["verdict"] == "valid"
    (check,) = kept["readback"]["checks"]
    assert check["ok"] is True and check["realised"] == pytest.approx(3.399345822182575)
