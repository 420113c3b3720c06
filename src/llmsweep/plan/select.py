"""Pick one job by id or exp-name, for commands that act on a single job (`render`, `run --job`)."""

from __future__ import annotations

from collections.abc import Sequence

from llmsweep.errors import ConfigError
from llmsweep.plan.job import Job

_MAX_LISTED = 20


def select_job(jobs: Sequence[Job], selector: str) -> Job:
    """The job whose id is `selector`, else the only job with that exp-name (or id prefix).

    Raises :class:`ConfigError` listing the candidates when nothing or more than one job matches.
    """
    for job in jobs:
        if job.id == selector:
            return job
    by_name = [j for j in jobs if j.exp_name == selector]
    if len(by_name) == 1:
        return by_name[0]
    candidates = by_name or [j for j in jobs if j.id.startswith(selector)]
    if len(candidates) == 1:
        return candidates[0]
    if not candidates:
        listed = _listing(jobs)
        if "_eval_" in selector and not any(j.is_eval for j in jobs):  # an eval job's id (`changelog check` lists them)
            raise ConfigError(f"no job matches `{selector}`: it names an eval-only job, and this plan holds none",
                              fix="add --evals-only (or --all-evals), which plans the eval rows as eval-only jobs")
        raise ConfigError(f"no job matches `{selector}`; jobs:\n{listed}",
                          fix="pass a job id (or a unique exp-name) from the list; `llmsweep matrix full-sweep "
                              "--config-files FILE --format ids` prints them all")
    raise ConfigError(f"`{selector}` matches {len(candidates)} jobs:\n{_listing(candidates)}",
                      fix="pass the full job id of one of them")


def _listing(jobs: Sequence[Job]) -> str:
    lines = [f"  {j.id}" for j in jobs[:_MAX_LISTED]]
    if len(jobs) > _MAX_LISTED:
        lines.append(f"  … and {len(jobs) - _MAX_LISTED} more")
    return "\n".join(lines) if lines else "  (none)"
