"""Submits one long job through the Slurm executor and waits; the interrupt test signals this process."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from llmsweep.engines.launch import LaunchSpec
from llmsweep.execute.slurm import SlurmExecutor, SlurmOptions, cancel_on_interrupt


def main(out: str) -> int:
    logging.basicConfig(level=logging.INFO)
    out_dir = Path(out)
    executor = SlurmExecutor(SlurmOptions(worker_command=("sleep", "300"), poll_s=0.5, time_limit="00:10:00"))
    spec = LaunchSpec(engine="tiny", argv=("true",), port=1)
    (out_dir / "group.json").write_text("{}")
    with cancel_on_interrupt([]) as jobs:
        job = executor.submit(spec, group_file=out_dir / "group.json", out_dir=out_dir, name="interrupt-me")
        jobs.append(job)
        (out_dir / "submitted").write_text(job.job_id)
        job.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
