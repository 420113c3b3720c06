"""Validity gates: the checks that decide whether a result may be published, and why not.

A verdict is `invalid` when any gate fails, else `smoke` when the profiling window is shorter than a submission
needs (900 s), else `valid`. Reasons name the measured value and the threshold, so a reader can act on them.

**Coverage of the profile window** (AgentX §3.9: at least 95 % of the window must be observed) is there to catch a
client that stopped sending, a server that stalled, and a window much shorter than planned. It must not count the
think time an agentic replay is obliged to keep: at low concurrency every lane may sit in a recorded end-to-start
delay at once, so the server legitimately sees nothing for a while. The records do not carry sleeps, so coverage is
measured from what they do carry (`window_coverage`):

* the window runs from the first profiling send to that send + the planned duration (duration runs), else to the
  last profiling end;
* a request counts as *in flight* from its send to the last thing the server sent it: its end when the server
  answered (success, HTTP, protocol or context-overflow error), its last streamed chunk (or nothing) when it timed
  out, lost its connection or was cancelled — so a stalled server leaves the window uncovered;
* a stretch of the window with nothing in flight is scheduled think time when it is no longer than the workload's
  idle allowance: its whole-system idle cap (AgentX: 10 s; the replay brings every sleeper forward so that nothing
  idles longer), else its per-trace delay cap (300 s), plus `IDLE_SLACK_S` for the client's polling. Such stretches
  count as covered. A longer one — the client stopped sending, the server stopped answering, or the run ended
  before the planned window did — counts as uncovered in full;
* without a known idle cap (fixed-length and rate runs schedule no think time the records could bound) only the
  tail counts: the share of the window after the last observation is uncovered (AgentX's original rule).

coverage = 1 − uncovered / window, compared with `min_coverage`; the summary's `validity.coverage` holds the figures
and the reason names the longest uncovered stretch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from llmsweep.words import count_of, noun

AGENTIC_MAX_ERROR_RATIO = 0.10
FIXED_MAX_ERROR_RATIO = 0.05
WARMUP_MAX_FAILURE_RATIO = 0.5
IDLE_SLACK_S = 1.0
"""Added to the workload's idle cap: the client checks the cap every 50 ms per worker and a send takes a moment."""


WARMUP_NOT_DRAINED = "the warm-up did not drain"


def warmup_not_drained(grace_s: float) -> str:
    """The stop reason of a run whose lanes' warm-up did not drain within its grace (`workload.base.Drain`): the
    client and the predictor say it alike, and it invalidates the run."""
    return (f"{WARMUP_NOT_DRAINED} within {grace_s:g} s (warmup_grace_s): a lane's warm-up requests were still "
            "running, so no profiling request was sent")


ROOT_PRIMER_FAILED = "a root primer failed"


def root_primer_failed(lane: int, trace: str, error: str | None) -> str:
    """The stop reason of a run whose root-stream warm-start primer failed (`RequestIdentity.primer`): AIPerf aborts
    such a run (one attempt, no retries), and so do the client and the predictor; it invalidates the run. A subagent's
    primer failing does not."""
    said = " ".join((error or "failed").split())
    said = said if len(said) <= 240 else said[:239] + "…"  # an HTTP error's whole body is in records.jsonl
    return (f"{ROOT_PRIMER_FAILED} (lane {lane}, trace {trace}: {said}): AgentX aborts a run whose root "
            "primer fails, so no profiling was measured; the primer carries the trace's whole prefix up to t*, so a "
            "context overflow here means the server's context or KV cache is too small for the corpus")


CLIENT_WORKER_DIED = "the client lost "
"""The opening of the stop reason of a run one of whose client worker processes exited before it ended
(:func:`client_workers_died`): their lanes stopped with them, so the load was not the one planned (`client.runner`)."""
_LEGACY_CLIENT_WORKER_DIED = "client worker(s) died"
"""How runs recorded before the count was said in words (2026-12-07) open that stop reason."""


def client_workers_died(died: Sequence[str]) -> str:
    """The stop reason of a run whose client workers `died` (each `NAME exited with CODE`): `the client lost 1 worker:
    …`, `the client lost 2 workers: …`."""
    return f"{CLIENT_WORKER_DIED}{count_of(len(died), 'worker')}: {', '.join(died)}"
OUTPUT_NOT_WRITTEN = "the client could not write"
"""The opening of the stop reason of a run whose own output (`records.jsonl`, `server_metrics.jsonl`) could not be
written (`client.records.OutputWriteError.reason`): the load stopped at once, in-flight requests cancelled, so the
records that were kept are a run cut short, not the one planned."""
EARLY_STOPS = ("failure ratio", "interrupted", WARMUP_NOT_DRAINED, CLIENT_WORKER_DIED, _LEGACY_CLIENT_WORKER_DIED,
               ROOT_PRIMER_FAILED, OUTPUT_NOT_WRITTEN)
"""Stop reasons (their openings) that make a run invalid: it did not end on its own."""


class GateConfig(BaseModel):
    """Thresholds of the validity gates (AgentX defaults; fixed-length runs use a 0.05 error ratio)."""

    model_config = ConfigDict(extra="forbid")

    max_error_ratio: float = Field(default=FIXED_MAX_ERROR_RATIO, ge=0, le=1,
                                   description="failed / finished, inclusive.")
    max_context_overflow_ratio: float = Field(default=0.01, ge=0, le=1, description="context overflows / finished.")
    min_coverage: float = Field(
        default=0.95, ge=0, le=1,
        description="Share of the profile window with a request in flight or in scheduled think time (see module doc).",
    )
    max_idle_gap_s: float | None = Field(
        default=None, gt=0,
        description="Workload idle cap: the longest stretch with nothing in flight that is scheduled think time;"
        " None = the run's provenance (options/workload `system_idle_gap_cap_s`, else `trace_idle_gap_cap_s`).",
    )
    max_short_output_ratio: float | None = Field(
        default=None, ge=0, le=1,
        description="Short outputs / successful requests (answers that stopped before max_tokens on their own), and"
        " long outputs / successful requests (more output than max_tokens), each; None = not gated. The scenario's"
        " gate profile sets it.",
    )
    max_warmup_failure_ratio: float = Field(
        default=WARMUP_MAX_FAILURE_RATIO, ge=0, le=1,
        description="Failed / sent warm-up requests above this (or every warm-up failed) invalidates the run: the"
        " server was not ready or not serving what the profile then measured. Any warm-up failure is a warning.",
    )
    min_submission_s: float = Field(default=900.0, ge=0, description="Shorter profiling windows are marked smoke.")
    planned_duration_s: float | None = Field(default=None, description="Nominal profile window (duration runs).")
    planned_requests: int | None = Field(
        default=None, ge=1,
        description="The prompts a run bounded by count alone plans (a fixed-length point: InferenceX's num-prompts);"
        " one that finished fewer (a window or request cap cut it short) is a smoke run, not a result.")
    require_metrics_prefix: str | None = Field(default=None, description="A server metric must start with this.")
    fail_on_saturated_client: bool = Field(default=False, description="Saturated client → invalid (else warning).")
    min_cache_ratio: float = Field(
        default=0.5, ge=0, le=1,
        description="Warn when the server's observed prefix-cache hit rate is below this share of the hit rate the"
        " workload makes possible (a reusable share of at least 20 %): prefix caching off or evicting.",
    )

    @classmethod
    def for_kind(cls, kind: Literal["fixed", "agentic", "replay"], **kw: Any) -> GateConfig:
        ratio = AGENTIC_MAX_ERROR_RATIO if kind == "agentic" else FIXED_MAX_ERROR_RATIO
        return cls(max_error_ratio=kw.pop("max_error_ratio", ratio), **kw)


def idle_cap_from(provenance: dict[str, Any] | None) -> float | None:
    """The idle cap the run's client applied: its option, else the workload's system cap, else its per-trace cap."""
    prov = provenance or {}
    options = prov.get("options") or {}
    workload = prov.get("workload") or {}
    for value in (
        options.get("system_idle_gap_cap_s"),
        workload.get("system_idle_gap_cap_s"),
        workload.get("trace_idle_gap_cap_s"),
    ):
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
    return None


def window_coverage(
    starts: np.ndarray, ends: np.ndarray, *, window_start: float, window_end: float, idle_cap_s: float | None
) -> dict[str, Any]:
    """Coverage of [window_start, window_end] by in-flight spans [starts[i], ends[i]] and scheduled think time.

    Returns `coverage` (0–1), `window_s`, `uncovered_s`, `idle_allowance_s` (None without a cap), the longest
    stretch with nothing in flight (`longest_idle_s`, `longest_idle_from_s`, `longest_idle_to_s`), the longest one
    counted as uncovered (`uncovered_from_s`, `uncovered_to_s`; both 0 when none) and `last_in_flight_s`; times are
    offsets from the window start. See the module doc.
    """
    w0, w1 = float(window_start), float(window_end)
    span = w1 - w0
    allowance = idle_cap_s + IDLE_SLACK_S if idle_cap_s is not None else None
    out: dict[str, Any] = {"coverage": 1.0, "window_s": span, "uncovered_s": 0.0, "idle_allowance_s": allowance,
                           "longest_idle_s": 0.0, "longest_idle_from_s": 0.0, "longest_idle_to_s": 0.0,
                           "uncovered_from_s": 0.0, "uncovered_to_s": 0.0, "last_in_flight_s": 0.0}
    if span <= 0:
        return out
    s = np.clip(np.asarray(starts, dtype=np.float64), w0, w1)
    e = np.clip(np.maximum(np.asarray(ends, dtype=np.float64), s), w0, w1)
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    # idle stretch before span i: from the furthest end of the spans before it (or the window start) to its start
    reach = np.concatenate(([w0], np.maximum.accumulate(e))) if e.size else np.array([w0])
    gap_from = reach  # the stretch before span i starts at reach[i]; the tail starts at reach[-1]
    gap_to = np.concatenate((s, [w1]))
    gaps = np.maximum(gap_to - gap_from, 0.0)
    if allowance is not None:
        counted = np.where(gaps > allowance, gaps, 0.0)
    else:
        counted = np.zeros_like(gaps)
        counted[-1] = gaps[-1]  # the tail after the last observation
    uncovered = float(counted.sum())
    k = int(np.argmax(gaps))
    u = int(np.argmax(counted))
    if counted[u] > 0:
        out.update({"uncovered_from_s": float(gap_from[u] - w0), "uncovered_to_s": float(gap_to[u] - w0)})
    out.update({
        "coverage": min(max(1.0 - uncovered / span, 0.0), 1.0),
        "uncovered_s": uncovered,
        "longest_idle_s": float(gaps[k]),
        "longest_idle_from_s": float(gap_from[k] - w0),
        "longest_idle_to_s": float(gap_to[k] - w0),
        "last_in_flight_s": float(reach[-1] - w0),
    })
    return out


def _coverage_reason(coverage: float, gates: GateConfig, detail: dict[str, Any] | None) -> str:
    head = (f"requests in flight and scheduled think time cover {coverage:.1%} of the profile window, below "
            f"{gates.min_coverage:.0%}")
    if not detail:
        return head
    window = detail["window_s"]
    allowance = detail.get("idle_allowance_s")
    start, end = detail["uncovered_from_s"], detail["uncovered_to_s"]
    if end >= window:
        why = (f"nothing was in flight after {start:.1f} s of the {window:.1f} s window (the client stopped sending, "
               f"the server stopped answering, or the run ended before the planned window)")
    else:
        why = f"nothing was in flight for {end - start:.1f} s ({start:.1f}–{end:.1f} s into the window)"
    if allowance is not None:
        why += f"; idle stretches up to {allowance:.1f} s (the workload's idle cap + slack) count as think time"
    else:
        why += "; the workload has no idle cap, so the tail after the last observation counts as uncovered"
    return f"{head}: {why}"


def _cache_warning(cache: dict[str, Any], gates: GateConfig) -> str | None:
    """The engine reused far less of the prompts than the workload makes reusable: the result measures another
    setting than planned (seen on the H200: vLLM turns prefix caching off for a hybrid Qwen3-Next, 0.00 observed
    where an agentic replay makes 0.91-0.95 reusable). Not invalid: a run without reuse is still a measurement."""
    theoretical, observed = cache.get("theoretical_hit_rate"), cache.get("observed_hit_rate")
    if theoretical is None or observed is None or theoretical < 0.2:
        return None
    if observed >= gates.min_cache_ratio * theoretical:
        return None
    return (f"the server read {observed:.0%} of the prompt tokens from its prefix cache where the workload makes "
            f"{theoretical:.0%} reusable: prefix caching off (vLLM disables it for hybrid models unless asked), "
            f"a cache too small for the working set, or a server that does not report cached tokens per request")


def error_ratio_over(ratio: float, limit: float, detail: str) -> str | None:
    """Why a result whose error ratio (failed over finished profiling requests) exceeds its gate's `limit` is invalid,
    `detail` in brackets after it (`3/40`); None within it."""
    return f"error ratio {ratio:.4f} exceeds {limit} ({detail})" if ratio > limit else None


def evaluate(
    gates: GateConfig,
    *,
    requests: dict[str, Any],
    coverage: float | None,
    profile_duration_s: float,
    server_metrics: dict[str, Any],
    client_health: dict[str, Any],
    stop_reason: str | None,
    coverage_detail: dict[str, Any] | None = None,
    cache: dict[str, Any] | None = None,
    latency_samples: int | None = None,
) -> dict[str, Any]:
    """Apply the gates; returns `{verdict, reasons, warnings, gates, coverage}` (coverage: `window_coverage`'s
    figures, or None). `latency_samples`: the TTFT sample's size (None: not known to the caller)."""
    reasons: list[str] = []
    warnings: list[str] = []
    finished = requests["successful"] + requests["failed"]
    if requests["successful"] == 0:
        # what they failed with, most first: the cause was only in summary.json's error_categories
        classes = sorted(((name, n) for name, n in (requests.get("error_categories") or {}).items()
                          if name != "cancelled"), key=lambda kv: (-kv[1], kv[0]))
        said = ", ".join(f"{n} {name}" for name, n in classes)
        if requests["failed"]:
            reasons.append("no successful profiling request" + (
                f": all {requests['failed']} failed ({said}; each request's error is in records.jsonl)"
                if said else ""))
        else:  # none finished: no error ratio either (undefined, not the 0 that read as "no errors")
            cancelled = requests.get("cancelled", 0)
            reasons.append("no successful profiling request: none finished"
                           + (f" ({cancelled} cancelled)" if cancelled else "")
                           + ", so the error ratio is undefined")
    if finished > 0:
        ratio = requests["failed"] / finished
        if (over := error_ratio_over(ratio, gates.max_error_ratio, f"{requests['failed']}/{finished}")) is not None:
            reasons.append(over)
        overflow = requests["context_overflow"] / finished
        if overflow > gates.max_context_overflow_ratio:
            reasons.append(f"context-overflow ratio {overflow:.4f} exceeds {gates.max_context_overflow_ratio}")
    if unreadable := requests.get("unreadable", 0):
        reasons.append(f"{count_of(unreadable, 'line')} of records.jsonl "
                       f"{noun(unreadable, 'is not a readable record', 'are not readable records')}: the figures miss "
                       f"{noun(unreadable, 'its request', 'those requests')} (the client writes whole records: the "
                       "file was damaged after it was written)")
    if implausible := requests.get("implausible") or 0:
        reasons.append(f"{count_of(implausible, 'profiling record')} of records.jsonl "
                       f"{noun(implausible, 'has', 'have')} times no request can have (not finite, or the first token "
                       "or end before the send, the end before the first token): the figures leave "
                       f"{noun(implausible, 'that request', 'those requests')} out")
    successful, short = requests["successful"], requests.get("short_outputs", 0)
    if successful > 0 and latency_samples == 0:
        # a point without a latency has no figure to publish, whatever its token counts say
        reasons.append(f"no latency sample: {count_of(successful, 'successful profiling request')} but no first "
                       "token's time among them, so TTFT, TPOT, ITL and E2EL have no figure")
    short_max = gates.max_short_output_ratio
    if short_max is not None and successful > 0 and short / successful > short_max:
        reasons.append(f"short-output ratio {short / successful:.4f} exceeds {short_max} "
                       f"({short}/{successful} successful requests stopped before max_tokens: the server ended them "
                       f"early, e.g. at an end-of-sequence token it was not told to ignore: "
                       f"provenance.workload.ignore_eos says whether it was)")
    long = requests.get("long_outputs") or 0
    if short_max is not None and successful > 0 and long / successful > short_max:
        reasons.append(f"long-output ratio {long / successful:.4f} exceeds {short_max} "
                       f"({long}/{successful} successful requests brought more output than their max_tokens, by "
                       "their chunks or their usage count: the server ignored the limit or miscounts its tokens, "
                       "so the point did not serve the output length it names; each record's "
                       "usage_over_max_tokens says what the server counted)")
    # the warm-ups the server answered or failed: one a stop cancelled says nothing of it either way
    warmup = requests.get("warmup", 0) - requests.get("warmup_cancelled", 0)
    warmup_failed = requests.get("warmup_failed", 0)
    if warmup_failed:
        ratio = warmup_failed / warmup
        if warmup_failed == warmup or ratio > gates.max_warmup_failure_ratio:
            reasons.append(f"warm-up failure ratio {ratio:.4f} exceeds {gates.max_warmup_failure_ratio} "
                           f"({warmup_failed}/{warmup} warm-up requests failed)")
        else:
            warnings.append(f"{warmup_failed}/{warmup} warm-up requests failed")
    if stop_reason and stop_reason.startswith(EARLY_STOPS):
        reasons.append(f"run stopped early: {stop_reason}")
    if coverage is not None and coverage < gates.min_coverage:
        reasons.append(_coverage_reason(coverage, gates, coverage_detail))
    req = server_metrics.get("required_prefix")
    if req and not req["found"]:
        reasons.append(f"no server metric starts with required prefix {req['prefix']!r}")
    if client_health.get("saturated"):
        msg = "client saturated: " + "; ".join(client_health.get("saturation_reasons", []))
        (reasons if gates.fail_on_saturated_client else warnings).append(msg)
    if (note := _cache_warning(cache or {}, gates)) is not None:
        warnings.append(note)
    if client_health.get("fd_limit", {}).get("capped"):
        warnings.append("open-file limit below the connections the run needed (see client_health.fd_limit)")
    window = gates.planned_duration_s if gates.planned_duration_s is not None else profile_duration_s
    cut_short = gates.planned_requests is not None and finished < gates.planned_requests
    smoke = window < gates.min_submission_s or cut_short
    if reasons:
        verdict = "invalid"
    elif smoke:
        verdict = "smoke"
    else:
        verdict = "valid"
    if window < gates.min_submission_s:
        # whole seconds from 10 s; under that its figure (a 0.45 s window read `0 s`)
        shown = f"{window:.0f}" if window >= 10 else f"{window:.3g}"
        reasons.append(f"smoke run: profile window {shown} s is shorter than {gates.min_submission_s:.0f} s")
    if cut_short:
        reasons.append(f"smoke run: {finished} of the {gates.planned_requests} planned prompts finished (the window "
                       "or a request cap ended it first)")
    return {
        "verdict": verdict,
        "reasons": reasons,
        "warnings": warnings,
        "gates": gates.model_dump(mode="json"),
        "coverage": coverage_detail,
    }
