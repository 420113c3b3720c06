"""Trust, then verify: compare what the engine reports it did with what the job asked for.

Values come only from the server's `/metrics` scrapes (already folded into the summary's `server_metrics` block by
the metrics room), never from the job itself. A disagreement marks the result invalid with a reason a reader can act
on; a check whose value the engine does not expose fails (unchecked is not passed), and one with too little evidence
in the window (a smoke run) is recorded as inconclusive: a warning, never a pass that would look like proof.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from llmsweep.errors import ResultError
from llmsweep.execute.artifacts import JOB_FILE, RUN_FILE, SUMMARY_FILE, write_json
from llmsweep.metrics.model import Readback, ReadbackCheck, SpecDecode, Summary
from llmsweep.plan import Job

DEFAULT_AL_TOLERANCE = 0.10
DEFAULT_MIN_VERIFY_STEPS = 100


class ReadbackSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    al_tolerance: float = Field(
        default=DEFAULT_AL_TOLERANCE, ge=0, description="Allowed |realised − pinned| acceptance length, tokens/step."
    )
    min_verify_steps: int = Field(
        default=DEFAULT_MIN_VERIFY_STEPS,
        ge=0,
        description="Fewest verify steps in the window for a verdict: a per-step mean over fewer (a smoke run of "
        "short agentic turns) is dominated by first tokens and max_tokens cuts, not by the acceptance the engine ran.",
    )


def acceptance_check(job: Job, summary: Summary, settings: ReadbackSettings) -> ReadbackCheck | None:
    """Realised vs pinned acceptance length, or None when the job's launch pins none (non-spec or eval jobs)."""
    from llmsweep.engines.base import synthetic_acceptance

    pinned_value = synthetic_acceptance(job)  # the value the launch spelled: eval jobs keep real verification
    if job.acceptance is None or pinned_value is None:
        return None
    pinned = pinned_value
    spec = summary.server_metrics.spec_decode or SpecDecode()
    realised, steps = spec.acceptance_length, spec.verify_steps
    check = ReadbackCheck(check="acceptance_length", pinned=pinned, realised=realised, tolerance=settings.al_tolerance,
                          verify_steps=steps, source="server /metrics: " + (spec.method or "n/a"), ok=True)
    if realised is None:
        check.ok = False
        check.reason = (
            f"realised acceptance length could not be read back from the server's /metrics (pinned {pinned:.2f}); "
            "the engine may have ignored the synthetic-acceptance setting or exposes no speculative counters"
        )
    elif steps is not None and steps < settings.min_verify_steps:
        check.ok = None
        check.reason = (
            f"realised acceptance length {realised:.3f} (pinned {pinned:.2f}) rests on {steps:.0f} verify "
            f"steps, fewer than {settings.min_verify_steps}: too few to judge; run longer for a read-back verdict"
        )
    elif abs(realised - pinned) > settings.al_tolerance:
        check.ok = False
        check.reason = (
            f"realised acceptance length {realised:.3f} differs from the pinned {pinned:.2f} by more than "
            f"{settings.al_tolerance} (read from /metrics): the engine is not running the acceptance the job asked for"
        )
    return check


def apply_readback(job: Job, summary: Summary, settings: ReadbackSettings) -> Summary:
    """Set the summary's `readback` block and turn its verdict invalid when a check failed."""
    checks = [c for c in (acceptance_check(job, summary, settings),) if c is not None]
    summary.readback = Readback(checks=checks, ok=all(c.ok is not False for c in checks))
    failed = [c.reason or c.check for c in checks if c.ok is False]
    inconclusive = [c.reason or c.check for c in checks if c.ok is None]
    summary.validity.warnings.extend(inconclusive)
    if failed:
        summary.validity.verdict = "invalid"
        summary.validity.reasons.extend(failed)
    return summary


def summarise_job(job_dir: Path | str, *, settings: ReadbackSettings | None = None, write: bool = True) -> Summary:
    """The one home of a job's verdict: re-summarise its folder and apply every gate from what it recorded.

    The client's gates come from `run.json` (gates, client figures, provenance, as `summarise_dir` reads them); the
    read-back checks from `job.json` (the job's pinned settings), with the tolerances the run recorded in `run.json`
    (`readback`). `llmsweep run` calls this with its settings (and records them); `llmsweep summarize` calls it on the
    folder afterwards and reaches the same verdict. A folder without `job.json` (a `llmsweep bench` run) pins nothing.
    """
    from llmsweep.client import summarise_dir

    job_dir = Path(job_dir)
    run_path = job_dir / RUN_FILE
    run_info = _read_object(run_path)
    if settings is not None:
        run_info["readback"] = settings.model_dump(mode="json")
        write_json(run_path, run_info)
    else:
        settings = ReadbackSettings.model_validate(run_info.get("readback") or {})
    job_path = job_dir / JOB_FILE
    job: Job | None = None
    if job_path.is_file():
        try:
            job = Job.model_validate(_read_object(job_path))
        except ValidationError as exc:
            raise ResultError(f"{job_path} is not a job this llmsweep reads ({exc.error_count()} problem(s): "
                              f"{exc.errors()[0]['msg']})",
                              fix="summarize it with the llmsweep release that ran it, or re-run the job") from exc
    if job is not None and job.eval_only:
        from llmsweep.evals.results import eval_only_summary

        summary = eval_only_summary(run_info)  # no throughput point: the eval is the result
    else:
        summary = summarise_dir(job_dir, write=False)
    if job is not None:
        from llmsweep.evals.results import attach

        summary = attach(apply_readback(job, summary, settings), job, job_dir)
    if write:
        write_json(job_dir / SUMMARY_FILE, summary.dump())
    return summary


def _read_object(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ResultError(f"cannot read {path}: {exc}", fix="restore the file or re-run the job") from exc
    if not isinstance(doc, dict):
        raise ResultError(f"{path} is not a JSON object", fix="restore the file or re-run the job")
    return doc
