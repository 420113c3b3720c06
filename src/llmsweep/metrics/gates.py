"""Validity gates: the checks that decide whether a result may be published, and why not.

A verdict is `invalid` when any gate fails, else `smoke` when the profiling window is shorter than a submission
needs (900 s), else `valid`. Reasons name the measured value and the threshold, so a reader can act on them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

AGENTIC_MAX_ERROR_RATIO = 0.10
FIXED_MAX_ERROR_RATIO = 0.05


class GateConfig(BaseModel):
    """Thresholds of the validity gates (AgentX defaults; fixed-length runs use a 0.05 error ratio)."""

    model_config = ConfigDict(extra="forbid")

    max_error_ratio: float = Field(default=FIXED_MAX_ERROR_RATIO, ge=0, le=1, description="failed / finished, inclusive.")
    max_context_overflow_ratio: float = Field(default=0.01, ge=0, le=1, description="context overflows / finished.")
    min_coverage: float = Field(default=0.95, ge=0, le=1, description="Share of the profile window with observations.")
    min_submission_s: float = Field(default=900.0, ge=0, description="Shorter profiling windows are marked smoke.")
    planned_duration_s: float | None = Field(default=None, description="Nominal profile window (duration runs).")
    require_metrics_prefix: str | None = Field(default=None, description="A server metric must start with this.")
    fail_on_saturated_client: bool = Field(default=False, description="Saturated client → invalid (else warning).")

    @classmethod
    def for_kind(cls, kind: Literal["fixed", "agentic", "replay"], **kw: Any) -> GateConfig:
        ratio = AGENTIC_MAX_ERROR_RATIO if kind == "agentic" else FIXED_MAX_ERROR_RATIO
        return cls(max_error_ratio=kw.pop("max_error_ratio", ratio), **kw)


def evaluate(
    gates: GateConfig,
    *,
    requests: dict[str, Any],
    coverage: float | None,
    profile_duration_s: float,
    server_metrics: dict[str, Any],
    client_health: dict[str, Any],
    stop_reason: str | None,
) -> dict[str, Any]:
    """Apply the gates; returns `{verdict, reasons, warnings, gates}`."""
    reasons: list[str] = []
    warnings: list[str] = []
    finished = requests["successful"] + requests["failed"]
    if requests["successful"] == 0:
        reasons.append("no successful profiling request")
    if finished > 0:
        ratio = requests["failed"] / finished
        if ratio > gates.max_error_ratio:
            reasons.append(f"error ratio {ratio:.4f} exceeds {gates.max_error_ratio} ({requests['failed']}/{finished})")
        overflow = requests["context_overflow"] / finished
        if overflow > gates.max_context_overflow_ratio:
            reasons.append(f"context-overflow ratio {overflow:.4f} exceeds {gates.max_context_overflow_ratio}")
    if stop_reason and stop_reason.startswith("failure ratio"):
        reasons.append(f"run stopped early: {stop_reason}")
    if coverage is not None and coverage < gates.min_coverage:
        reasons.append(f"observations cover {coverage:.1%} of the profile window, below {gates.min_coverage:.0%}")
    req = server_metrics.get("required_prefix")
    if req and not req["found"]:
        reasons.append(f"no server metric starts with required prefix {req['prefix']!r}")
    if client_health.get("saturated"):
        msg = "client saturated: " + "; ".join(client_health.get("saturation_reasons", []))
        (reasons if gates.fail_on_saturated_client else warnings).append(msg)
    if client_health.get("fd_limit", {}).get("capped"):
        warnings.append("open-file limit below the connections the run needed (see client_health.fd_limit)")
    window = gates.planned_duration_s if gates.planned_duration_s is not None else profile_duration_s
    smoke = window < gates.min_submission_s
    if reasons:
        verdict = "invalid"
    elif smoke:
        verdict = "smoke"
    else:
        verdict = "valid"
    if smoke:
        reasons.append(f"smoke run: profile window {window:.0f} s is shorter than {gates.min_submission_s:.0f} s")
    return {"verdict": verdict, "reasons": reasons, "warnings": warnings, "gates": gates.model_dump(mode="json")}
