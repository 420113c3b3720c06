"""The one home of a job's verdict: `summarise_job` re-summarises a job folder and applies every gate the run applied,
the read-back checks from job.json included, so `llmsweep summarize` and `llmsweep run` agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.errors import ResultInputError
from llmsweep.execute.readback import ReadbackSettings, summarise_job
from llmsweep.plan import Job, jobs_from_files

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "spec-fixed-sim.yaml"


def _records(n: int = 8) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        sent = float(i)
        chunks = [sent + 0.1 + 0.01 * k for k in range(5)]
        out.append({"id": str(i), "phase": "profiling", "scheduled_at": sent, "sent_at": sent,
                    "first_token_at": chunks[0], "end_at": chunks[-1] + 0.001, "chunk_times": chunks,
                    "chunk_tokens": [1] * 5, "status": 200, "error_class": None, "error": None, "prompt_tokens": 100,
                    "completion_tokens": 5, "max_tokens": 5, "worker": 0})
    return out


def _job_folder(tmp_path: Path, job: Job | None) -> Path:
    d = tmp_path / "job"
    d.mkdir()
    (d / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _records()))
    (d / "run.json").write_text(json.dumps({"gpus": 1, "source": "simulated"}))
    if job is not None:
        (d / "job.json").write_text(json.dumps(job.to_json()))
    return d


@pytest.fixture(scope="module")
def spec_job() -> Job:
    (only,) = jobs_from_files([RECIPE], config_keys=["run-sim-spec"])
    assert only.acceptance is not None
    return only


def test_a_pinned_acceptance_the_server_did_not_report_is_invalid_in_run_and_in_summarize(
        tmp_path: Path, spec_job: Job) -> None:
    d = _job_folder(tmp_path, spec_job)
    ran = summarise_job(d, settings=ReadbackSettings(al_tolerance=0.2))  # what the run path does
    assert ran.validity.verdict == "invalid" and ran.readback is not None and ran.readback.ok is False
    assert json.loads((d / "run.json").read_text())["readback"]["al_tolerance"] == 0.2  # recorded for summarize
    res = CliRunner().invoke(cli, ["summarize", str(d), "--json"], catch_exceptions=False)
    assert res.exit_code == 1
    again = json.loads(res.output)
    assert again["validity"] == ran.dump()["validity"] and again["readback"] == ran.dump()["readback"]
    assert again["readback"]["checks"][0]["tolerance"] == 0.2


def test_a_folder_without_job_json_pins_nothing(tmp_path: Path) -> None:
    d = _job_folder(tmp_path, None)
    s = summarise_job(d)
    assert s.readback is None and s.validity.verdict == "smoke"


def test_a_job_json_this_release_cannot_read_is_an_error_not_a_silent_pass(tmp_path: Path) -> None:
    d = _job_folder(tmp_path, None)
    (d / "job.json").write_text(json.dumps({"model": 3}))
    with pytest.raises(ResultInputError, match=r"job\.json is not a job"):  # hand-edited: bad input, exit 2
        summarise_job(d)


@pytest.mark.parametrize("damage", ["empty", "cut short", "not UTF-8", "a list"])
@pytest.mark.parametrize("name", ["job.json", "run.json"])
def test_a_damaged_job_or_run_json_is_bad_input_exit_2(tmp_path: Path, spec_job: Job, name: str,
                                                         damage: str, capsys: pytest.CaptureFixture[str]) -> None:
    """errors.ResultInputError: a job.json or run.json cut short or hand-edited is bad input (exit 2); `summarize`
    had exited 1, the status of a failed result."""
    from support.cli import run_main

    d = _job_folder(tmp_path, spec_job)
    path = d / name
    path.write_bytes({"empty": b"", "cut short": path.read_bytes()[:20], "not UTF-8": b'{"a": "\xff"}',
                      "a list": b"[]"}[damage])
    with pytest.raises(ResultInputError, match=rf"{name}"):
        summarise_job(d)
    code, _, err = run_main(capsys, "summarize", d)
    assert code == 2 and "Traceback" not in err and f"{path}" in err, err[-2000:]


@pytest.mark.parametrize("name", ["job.json", "run.json"])
def test_a_job_or_run_json_saved_with_a_byte_order_mark_summarises_as_without(tmp_path: Path, spec_job: Job,
                                                                               name: str) -> None:
    """A file a Windows editor saved again starts with a UTF-8 byte-order mark: `summarize JOB_DIR` refused it
    ('Unexpected UTF-8 BOM', exit 2) where `report` and `results ingest` read the same folder."""
    d = _job_folder(tmp_path, spec_job)
    plain = summarise_job(d, settings=ReadbackSettings(al_tolerance=0.2))
    path = d / name
    path.write_text(path.read_text(encoding="utf-8"), encoding="utf-8-sig")
    assert path.read_bytes().startswith(b"\xef\xbb\xbf")
    marked = summarise_job(d, settings=ReadbackSettings(al_tolerance=0.2))
    assert marked.dump()["validity"] == plain.dump()["validity"]
    assert marked.dump()["readback"] == plain.dump()["readback"]
