"""Reuse: a job whose full identity matches a stored valid result is not run again.

The identity (:func:`reuse_key`) is the recipe fingerprint, the image, the rendered launch (the LaunchSpec's
fingerprint: argv, env, files — so engine args, env and the simulator-or-engine choice), the resolved workload, the
job's concurrency and repeat index, and llmsweep's measurement definitions (`metrics.version`). `llmsweep run`
records every job's key in its `run.json` (`reuse_keys`); the store keeps that file, and `run --reuse` looks the
keys of the jobs it is about to launch up there (`results.store.Store.reusable`).
"""

from __future__ import annotations

import hashlib
import json

from llmsweep.metrics.version import measurement_identity
from llmsweep.plan import Job

REPEAT_MARK = "-repeat"


def reuse_key(job: Job, launch_fingerprint: str, *, repeat: int = 1) -> str:
    """64 hex: what must be equal for a stored result to stand for this job."""
    doc = {
        "recipe_fingerprint": job.recipe_fingerprint,
        "image": job.image,
        "launch": launch_fingerprint,
        "workload": job.workload.model_dump(mode="json"),
        "conc": job.conc,
        "eval": [job.run_eval, job.eval_only, job.eval_conc, job.eval_all_concs],
        "repeat": repeat,
        "measurement": measurement_identity(),
    }
    blob = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def repeat_of(job_id: str) -> int:
    """The repeat index a job id carries (`<id>-repeat<k>` → k; else 1)."""
    head, sep, tail = job_id.rpartition(REPEAT_MARK)
    return int(tail) if sep and head and tail.isdigit() else 1


def reuse_keys(jobs: list[Job], *, simulate: bool) -> dict[str, str]:
    """Every job's reuse key, by job id; a job that cannot be rendered (not runnable) has none."""
    from llmsweep import engines
    from llmsweep.errors import LlmsweepError

    out: dict[str, str] = {}
    for job in jobs:
        if job.engine is None and not simulate:
            continue
        try:
            spec = engines.render(job, simulate=simulate or job.engine == "sim", port=0)
        except LlmsweepError:
            continue
        out[job.id] = reuse_key(job, spec.fingerprint(), repeat=repeat_of(job.id))
    return out
