"""The files of a run: where each job's artifacts live and how they are written without leaking secrets.

Layout of `--out RUN/`:

    RUN/run.json                      run id, recipe files, executor, expected job ids, outcome
    RUN/servers/<group>/              one folder per shared server: group.json, server.log, server.pid
                                      (Slurm: job.sbatch, slurm-<id>.out/.err, progress.json…)
    RUN/jobs/<job-id>/                job.json, server_command.txt, server.log, records.jsonl,
                                      server_metrics.jsonl, run.json (client), summary.json, outcome.json,
                                      the launch's files (TensorRT-LLM: extra_llm_api_options.yaml);
                                      attempts/N/ holds what an earlier attempt left (finished, rerun with
                                      --force, or cut short and rerun)
    RUN/traces/<digest>.jsonl.gz      a synthetic corpus a real engine's agentic jobs replayed
                                      (`workload.traces.kept`: what `sim calibrate` replays them from)
    RUN/report/index.html             the dashboard
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmsweep.metrics.model import Summary

# the client's files in a job folder, named where the client writes them (re-exported: a job folder's files are here)
from llmsweep import atomic
from llmsweep.client.files import RECORDS_FILE as RECORDS_FILE
from llmsweep.client.files import RUN_FILE as RUN_FILE
from llmsweep.client.files import SERVER_METRICS_FILE as SERVER_METRICS_FILE
from llmsweep.client.files import SUMMARY_FILE as SUMMARY_FILE
from llmsweep.engines.launch import LaunchSpec
from llmsweep.execute.secrets import SecretScrubber
from llmsweep.job_files import COMMAND_FILE as COMMAND_FILE
from llmsweep.job_files import JOB_FILE as JOB_FILE
from llmsweep.job_files import OUTCOME_FILE as OUTCOME_FILE
from llmsweep.job_files import read_json as read_json
from llmsweep.power.samples import GPU_METRICS_FILE

SERVER_LOG = "server.log"
REUSED_FILE = "reused.json"
"""In a job folder `run --reuse` did not run: the stored result it stands on (run, job and result ids, verdict)."""
GROUP_FILE = "group.json"
PID_FILE = "server.pid"
PID_FILES = "server*.pid"
"""Every pid file a server folder may hold: the launch in progress's `PID_FILE`, those of earlier launches that could
not be stopped (`keep_pid_file`), a role deployment's per worker. What a stale-server sweep reads."""


def keep_pid_file(folder: Path, launch: int) -> None:
    """Keep on record, as `server.<launch>.pid`, the pid file of a launch in `folder` that could not be stopped, so
    the next launch's `PID_FILE` does not replace it and a later sweep (`PID_FILES`) still stops its process."""
    left = folder / PID_FILE
    if left.exists():
        left.replace(left.with_name(f"server.{launch}.pid"))
SLURM_JOB_ID_FILE = "slurm_job_id"
PROGRESS_FILE = "progress.json"
"""In a server folder run by a Slurm batch job: its worker's report of its job in flight, rewritten as it goes
(`progress.WorkerReport`), which the driver shows."""
ATTEMPTS_DIR = "attempts"
_ATTEMPT_FILES = (RECORDS_FILE, SERVER_METRICS_FILE, RUN_FILE, SUMMARY_FILE, OUTCOME_FILE, SERVER_LOG, JOB_FILE,
                  COMMAND_FILE, GPU_METRICS_FILE, REUSED_FILE)
"""What an attempt writes into its job folder (beside its eval folder, `evals.results.EVAL_DIR`): moved aside whole,
so `summarize` on `attempts/N/` reads that attempt's job, launch and power as it ran."""


RETIRED_DIR = "retired"
"""In a run folder: the job folders a full `--resume`/`--force` found no planned job for (a concurrency or arm taken
out of the recipe since), moved out of `jobs/` so they are no longer the run's."""


def jobs_dir(run_dir: Path) -> Path:
    return run_dir / "jobs"


def job_dir(run_dir: Path, job_id: str) -> Path:
    return jobs_dir(run_dir) / job_id


def servers_dir(run_dir: Path) -> Path:
    """Where a run's servers keep their folders: the only place its servers' marks (`process.SERVER_DIR_ENV`) point
    to, so a leftover search there never reaches another run whose `--out` lies inside this one's."""
    return run_dir / "servers"


def server_dir(run_dir: Path, group_id: str) -> Path:
    return servers_dir(run_dir) / group_id


def write_json(path: Path, doc: Any, scrubber: SecretScrubber | None = None) -> Path:
    """Write JSON atomically (temp file + rename), scrubbed of secret values, so a kill never leaves half a file."""
    text = json.dumps(doc, indent=2, default=str)
    if scrubber is not None:
        text = scrubber.scrub(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(path, text + "\n")
    return path


def write_launch_files(spec: LaunchSpec, directory: Path, scrubber: SecretScrubber | None = None) -> LaunchSpec:
    """Write the spec's files (`LaunchSpec.files`) into `directory` and return the spec whose argv and env name them
    there (`{launch_dir}` → the absolute folder). Call it where the server runs, before launching; a spec without
    files comes back unchanged."""
    if not spec.files:
        return spec
    directory = directory.resolve()
    write_files_beside(spec, directory, scrubber)
    return spec.with_launch_dir(str(directory))


def write_files_beside(spec: LaunchSpec, directory: Path, scrubber: SecretScrubber | None = None) -> list[Path]:
    """Write the spec's launch files into `directory` (a job's folder keeps what its server read); their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    for file in spec.files:
        text = scrubber.scrub(file.content) if scrubber is not None else file.content
        path = directory / file.name
        atomic.write_text(path, text)
        paths.append(path)
    return paths


def finished_summary(directory: Path) -> Summary | None:
    """A job folder's summary, or None when it has none that reads (never run or half done)."""
    from llmsweep.errors import ResultError
    from llmsweep.metrics.model import Summary

    path = directory / SUMMARY_FILE
    if not path.is_file():
        return None
    try:
        return Summary.load(path)
    except ResultError:
        return None


def finished_verdict(directory: Path) -> str | None:
    """The validity verdict of a job folder's summary, or None when it has none (never run or half done)."""
    summary = finished_summary(directory)
    return None if summary is None else summary.validity.verdict


def keep_previous_attempt(directory: Path) -> Path | None:
    """Move the artifacts of an earlier attempt of a job aside (`attempts/N/`) before it runs again.

    The client starts every run by deleting its records file; without this, rerunning a job a crash or an interrupted
    run left half done would destroy the only raw record of what that attempt saw. Returns the folder, or None when
    there was nothing to keep.
    """
    from llmsweep.evals.results import EVAL_DIR

    # the summary first: it is what makes a job done, so a kill between two moves leaves a job that runs again, never
    # a done one whose records (moved already) are gone
    names = (SUMMARY_FILE, *(n for n in _ATTEMPT_FILES if n != SUMMARY_FILE), EVAL_DIR)
    present = [directory / name for name in names if (directory / name).exists()]
    # then what a kill mid-write left (`summary.json.tmp`: every writer here writes NAME.tmp, then renames it): half
    # of that attempt's file, which goes with it rather than lingering beside the next attempt's
    present += sorted(p for p in directory.glob(f"*{atomic.TMP_SUFFIX}") if p.is_file())
    if not present:
        return None
    attempts = directory / ATTEMPTS_DIR
    n = 1
    while (attempts / str(n)).exists():
        n += 1
    target = attempts / str(n)
    target.mkdir(parents=True)
    for path in present:
        os.replace(path, target / path.name)
    return target


def keep_earlier_attempt(job_id: str, directory: Path, event: Callable[[str], None]) -> Path | None:
    """`keep_previous_attempt`, saying where the artifacts went: the one wording for every executor. An earlier
    attempt may have finished (a `--force` rerun) or not (cut short, then `--resume`d): it is kept, not judged."""
    kept = keep_previous_attempt(directory)
    if kept is not None:
        event(f"job {job_id}: the artifacts of an earlier attempt are kept in {kept}")
    return kept
