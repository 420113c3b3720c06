"""Pick one job by id or exp-name, for commands that act on a single job (`render`, `run --job`)."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from llmsweep.errors import ConfigError
from llmsweep.option_spellings import flag as _flag
from llmsweep.plan.job import Job

_JOB_IDS = f"`llmsweep matrix full-sweep {_flag('config_files')} FILE {_flag('format')} ids`"
"""The command that prints every job id of a plan, as the fixes below name it."""

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
        if close := _closest(jobs, selector):  # a typo, or an id whose hash an edit of its recipe changed
            raise ConfigError(f"no job matches `{selector}`; did you mean:\n{_listing(close)}",
                              fix=f"pass one of these ids (or a unique exp-name); {_JOB_IDS} prints them all")
        raise ConfigError(f"no job matches `{selector}`; jobs:\n{listed}",
                          fix=f"pass a job id (or a unique exp-name) from the list; {_JOB_IDS} prints them all")
    raise ConfigError(f"`{selector}` matches {len(candidates)} jobs:\n{_listing(candidates)}",
                      fix="pass the full job id of one of them")


_CLOSE = 0.75
"""The least similarity (difflib's ratio) of a job named as the closest to a selector that matches none."""


_TIE = 0.01
"""Jobs this close to the closest one's similarity are as likely meant: all of them are named."""


def _closest(jobs: Sequence[Job], selector: str) -> list[Job]:
    """The jobs most like `selector` (as an id, an exp-name or an id prefix of its length), in plan order: a planned
    job whose id changed (its recipe's fingerprint hash) or that one keystroke misses is found among any number of
    jobs, where the listing shows only the first ones in plan order. None when nothing is close."""
    def likeness(job: Job) -> float:
        return max(difflib.SequenceMatcher(None, selector, text, autojunk=False).ratio()
                   for text in (job.id, job.exp_name, job.id[:len(selector)]))

    scores = [likeness(j) for j in jobs]
    best = max(scores, default=0.0)
    return [j for j, score in zip(jobs, scores, strict=True) if score >= max(_CLOSE, best - _TIE)]


def _listing(jobs: Sequence[Job]) -> str:
    lines = [f"  {j.id}" for j in jobs[:_MAX_LISTED]]
    if len(jobs) > _MAX_LISTED:
        lines.append(f"  … and {len(jobs) - _MAX_LISTED} more")
    return "\n".join(lines) if lines else "  (none)"
