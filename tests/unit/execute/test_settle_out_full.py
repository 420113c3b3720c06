"""A full disk (or a read-only remount) under --out ends the sweep with one error and its fix: no job can write its
results, this one's outcome included. It failed the job as an internal error, then crashed writing its outcome.json,
two tracebacks deep (`lifecycle.settle`)."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from llmsweep.errors import ResultError
from llmsweep.execute.lifecycle import settle
from llmsweep.metrics.model import Summary
from llmsweep.plan import jobs_from_files

RECIPE = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EDQUOT, errno.EROFS])
def test_a_full_out_ends_the_sweep_with_the_fix(tmp_path: Path, code: int) -> None:
    job = jobs_from_files([RECIPE])[0]

    def measure() -> Summary:
        raise OSError(code, "No space left on device", str(tmp_path / "records.jsonl"))

    with pytest.raises(ResultError) as err:
        settle(job, tmp_path, 0.0, measure)
    assert "cannot write the results under --out" in err.value.message and "records.jsonl" in err.value.message
    assert err.value.fix is not None and "--resume" in err.value.fix and err.value.exit_code == 1


def test_another_os_error_still_fails_only_its_job(tmp_path: Path) -> None:
    job = jobs_from_files([RECIPE])[0]

    def measure() -> Summary:
        raise OSError(errno.ECONNRESET, "Connection reset by peer")

    outcome = settle(job, tmp_path, 0.0, measure)
    assert outcome.status == "failed" and outcome.reasons[0].startswith("internal error: ConnectionResetError")


def test_a_client_that_could_not_keep_its_records_fails_its_job_with_the_errno_not_an_internal_error(
        tmp_path: Path) -> None:
    """The client stops at once when a write of its records fails (`OutputWriteError`); the job fails with the errno's
    words, and the sweep goes on — unless the disk is full, which ends the sweep as above."""
    from llmsweep.client.records import OutputWriteError

    job = jobs_from_files([RECIPE])[0]
    records = str(tmp_path / "records.jsonl")

    def too_large() -> Summary:
        raise OutputWriteError(errno.EFBIG, "File too large", records)

    outcome = settle(job, tmp_path, 0.0, too_large)
    assert outcome.status == "failed"
    assert outcome.reasons == [f"the client could not write {records}: File too large (EFBIG); the run stopped at once"]

    def full() -> Summary:
        raise OutputWriteError(errno.ENOSPC, "No space left on device", records)

    with pytest.raises(ResultError) as err:
        settle(job, tmp_path, 0.0, full)
    assert err.value.message == f"cannot write the results under --out: No space left on device ({records})"
