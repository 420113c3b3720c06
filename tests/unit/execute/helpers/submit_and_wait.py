"""Submits long jobs through the Slurm executor and waits; the interrupt tests signal this process.

argv: OUT [N [--install]]: N jobs (default 1); --install installs the CLI's signal handling first (`llmsweep run`
does), so a second signal hurries the shutdown instead of raising."""

from __future__ import annotations

import faulthandler
import logging
import signal
import sys
from pathlib import Path

from llmsweep.engines.launch import LaunchSpec
from llmsweep.execute import signals
from llmsweep.execute.slurm import SlurmExecutor, SlurmOptions, cancel_on_interrupt


def main(out: str, count: int = 1, install: bool = False) -> int:
    logging.basicConfig(level=logging.INFO)
    if install:
        signals.install()
    # a test that waited in vain asks where this process is stuck: SIGURG, no interrupt signal (those, SIGUSR1
    # included, `install` and `cancel_on_interrupt` take) and none that anything sends this process
    faulthandler.register(signal.SIGURG)
    out_dir = Path(out)
    executor = SlurmExecutor(SlurmOptions(worker_command=("sleep", "300"), poll_s=0.5, time_limit="00:10:00"))
    spec = LaunchSpec(engine="tiny", argv=("true",), port=1)
    (out_dir / "group.json").write_text("{}")
    with cancel_on_interrupt([]) as jobs:
        for i in range(count):
            job_dir = out_dir / f"job{i}" if count > 1 else out_dir
            job_dir.mkdir(exist_ok=True)
            executor.submit(spec, group_file=out_dir / "group.json", out_dir=job_dir, name=f"interrupt-me-{i}",
                            into=jobs)
        # Whole or not at all: the test reads the ids as soon as the file exists (it read an empty one, once).
        (out_dir / "submitted.tmp").write_text(" ".join(job.job_id for job in jobs))
        (out_dir / "submitted.tmp").replace(out_dir / "submitted")
        for job in jobs:
            job.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1, "--install" in sys.argv[3:]))
