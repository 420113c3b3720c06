"""Change control: which jobs a recipe change touches, the changelog that selects them, and results reused.

Public API:
    diff_jobs(base, head) -> ChangeSet                       (jobs of two plans, matched by identity)
    changes_between(spec, files=(), repo=None, runner_config=None, evals=None) -> ChangeSet   (`BASE..HEAD`)
    reuse_key(job, launch_fingerprint) -> str                 (the identity a stored result is reused under)
"""

from __future__ import annotations

from llmsweep.changes.diff import CAUSES, ChangeSet, JobChange, changes_between, diff_jobs
from llmsweep.changes.reuse import reuse_key

__all__ = ["CAUSES", "ChangeSet", "JobChange", "changes_between", "diff_jobs", "reuse_key"]
