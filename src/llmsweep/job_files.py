"""The names of a job folder's own files (the executor's, beside the client's in `client.files`) and whether its
summary is the job's result, below the rooms that read job folders: the executors write them (`execute.artifacts`
re-exports the names with the writers), and the results, the report and the simulator's calibration (`sim
calibrate`, which reads measured runs) read them without importing the executors. Light to import."""

from __future__ import annotations

from pathlib import Path
from typing import Any

JOB_FILE = "job.json"
"""The planned job as it ran (`plan.Job`)."""
COMMAND_FILE = "server_command.txt"
"""The server's command line, secrets scrubbed."""
OUTCOME_FILE = "outcome.json"
"""How the job ended (`lifecycle.JobOutcome`)."""


def read_json(path: Path) -> Any | None:
    """A run's JSON file (run.json, a job's files) as :func:`llmsweep.jsonline.load_json_file` reads it; None when it
    is missing or does not read (`execute.artifacts` re-exports it for the executors)."""
    from llmsweep.jsonline import load_json_file

    try:
        return load_json_file(path)
    except (OSError, ValueError):
        return None


def read_outcome(folder: Path) -> object | None:
    """The job folder's `outcome.json` document, as :func:`unjudged` takes it: None when it is missing or does not
    read (a job killed before the executor closed it)."""
    document: object | None = read_json(folder / OUTCOME_FILE)
    return document


def unjudged(verdict: str, outcome: object) -> str | None:
    """Why a job folder's summary of `verdict` does not count as the job's result, or None when it does: the one
    definition `--resume` (`lifecycle.resumed`), the report and the results store read.

    The client writes its summary when the load ends, before the job's verdict is made (the read-back checks, the
    power record, the server found alive, the eval); `outcome.json` (`outcome`: its document, None when absent or
    unreadable) closes the job after them. A `valid` or `smoke` summary counts only beside an outcome that closed the
    job so: a run killed in between (SIGKILL, OOM, a node lost) left a summary nobody judged, and a job closed
    `failed` after its summary was written (a signal, Slurm's time limit, an error) did not earn its summary's
    verdict either. An `invalid` summary claims nothing and stands as it is."""
    from llmsweep.metrics.model import DONE_VERDICTS

    if verdict not in DONE_VERDICTS:
        return None
    status = outcome.get("status") if isinstance(outcome, dict) else None
    if status in DONE_VERDICTS:
        return None
    if status is None:
        return (f"unjudged: its summary says {verdict} but no {OUTCOME_FILE} closed the job — the run was killed (or "
                "is still running) after the client wrote the summary and before the job's read-back checks, power "
                "record and server check")
    assert isinstance(outcome, dict)
    said = "; ".join(str(r) for r in outcome.get("reasons") or ())
    return f"its summary says {verdict} but {OUTCOME_FILE} closed the job {status}" + (f": {said}" if said else "")
