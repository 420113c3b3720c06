"""Trust, then verify: compare what the engine reports it did with what the job asked for.

Values come only from the server's `/metrics` scrapes (already folded into the summary's `server_metrics` block by
the metrics room), never from the job itself. A disagreement marks the result invalid with a reason a reader can act
on; a check whose value the engine does not expose fails (unchecked is not passed), and one with too little evidence
in the window (a smoke run) is recorded as inconclusive: a warning, never a pass that would look like proof.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

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


def _dig(doc: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def acceptance_check(job: Job, summary: dict[str, Any], settings: ReadbackSettings) -> dict[str, Any] | None:
    """Realised vs pinned acceptance length, or None when the job pins none (non-spec or eval jobs)."""
    if job.acceptance is None:
        return None
    pinned = job.acceptance.value
    realised = _dig(summary, "server_metrics", "spec_decode", "acceptance_length")
    steps = _dig(summary, "server_metrics", "spec_decode", "verify_steps")
    check: dict[str, Any] = {
        "check": "acceptance_length",
        "pinned": pinned,
        "realised": realised,
        "tolerance": settings.al_tolerance,
        "verify_steps": steps,
        "source": "server /metrics: " + str(_dig(summary, "server_metrics", "spec_decode", "method") or "n/a"),
    }
    if realised is None:
        check["ok"] = False
        check["reason"] = (
            f"realised acceptance length could not be read back from the server's /metrics (pinned {pinned:.2f}); "
            "the engine may have ignored the synthetic-acceptance setting or exposes no speculative counters"
        )
    elif steps is not None and steps < settings.min_verify_steps:
        check["ok"] = None
        check["reason"] = (
            f"realised acceptance length {float(realised):.3f} (pinned {pinned:.2f}) rests on {steps:.0f} verify "
            f"steps, fewer than {settings.min_verify_steps}: too few to judge; run longer for a read-back verdict"
        )
    elif abs(float(realised) - pinned) > settings.al_tolerance:
        check["ok"] = False
        check["reason"] = (
            f"realised acceptance length {float(realised):.3f} differs from the pinned {pinned:.2f} by more than "
            f"{settings.al_tolerance} (read from /metrics): the engine is not running the acceptance the job asked for"
        )
    else:
        check["ok"] = True
    return check


def apply_readback(job: Job, summary: dict[str, Any], settings: ReadbackSettings) -> dict[str, Any]:
    """Add a `readback` block to the summary and turn its verdict invalid when a check failed."""
    checks = [c for c in (acceptance_check(job, summary, settings),) if c is not None]
    summary["readback"] = {"checks": checks, "ok": all(c["ok"] is not False for c in checks)}
    failed = [c["reason"] for c in checks if c["ok"] is False]
    inconclusive = [c["reason"] for c in checks if c["ok"] is None]
    if inconclusive:
        summary.setdefault("validity", {}).setdefault("warnings", []).extend(inconclusive)
    if failed:
        validity = summary.setdefault("validity", {})
        validity["verdict"] = "invalid"
        validity.setdefault("reasons", []).extend(failed)
    return summary
