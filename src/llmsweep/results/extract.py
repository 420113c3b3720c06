"""Summary → hot metric columns, source, validity and provenance: what the store and the report need of a result.

The columns themselves (names, labels, units, polarity, how each is read from a `Summary`) are the metric table's
(`llmsweep.metrics.registry`); nothing here knows where a figure sits in the summary.

Units: latencies in seconds, throughput in tokens/s (per GPU where named), interactivity in tokens/s/user.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llmsweep.metrics.model import Summary
from llmsweep.metrics.registry import HOT_COLUMNS, HOT_NAMES, HotColumn

HOT_METRICS: tuple[HotColumn, ...] = HOT_COLUMNS
"""The stored columns of the metric table (name, label, unit, polarity, how each is read from a Summary)."""

INVALID_VERDICTS = frozenset({"invalid", "failed", "fail", "error"})
"""Everything else (`valid`, `smoke` — too short to publish but a sound measurement —) is a usable result; only a
`valid` one stands on a frontier (`results.frontier.earns_frontier`), and the verdict is always shown next to the
point."""


@dataclass(frozen=True, slots=True)
class Extracted:
    """What the store and report need from one summary."""

    metrics: dict[str, float | None]
    source: str
    verdict: str
    reasons: tuple[str, ...]
    num_requests: int | None
    num_successful: int | None
    provenance: dict[str, Any]

    @property
    def valid(self) -> bool:
        return self.verdict not in INVALID_VERDICTS


def _finite(value: float | None) -> float | None:
    return float(value) if value is not None and math.isfinite(value) else None


def hot_values(summary: Summary) -> dict[str, float | None]:
    """Every hot column of a summary, by column name (None where it has no finite value; all None for an eval-only
    result, which measured an accuracy score and no throughput)."""
    if summary.eval is not None and summary.eval.mode == "eval-only":
        return {c.name: None for c in HOT_COLUMNS}
    return {c.name: _finite(c.read(summary)) for c in HOT_COLUMNS}


def point_row(job: str, conc: int | None, verdict: str, reason: str | None, warnings: Sequence[str],
              summary: Summary | None) -> dict[str, Any]:
    """A point of a sweep as a command's --json gives it: the one row `run --json`'s jobs and `predict --json`'s points
    are built from (each adds only what is its own alone), so a script reads either with the same keys.

    The point's job and concurrency, its verdict and the first reason for it, the warnings its run said of it; where
    its figures come from (`source`: measured, simulated or predicted, and the `clock`, virtual or wall, as its
    summary says; None without a summary); its request counts; every metric of the metric table (`hot_values`: keyed
    and in the unit `results list --json` gives it, latencies in seconds; a statistic without a sample, None, not 0;
    a power figure None unless power is valid); whether its power figures were measured on its GPUs or are the
    simulator's model's (`power_source`, the power block's `source`, under the key the dashboard's data.json gives it)
    and why none was recorded (`power_error`, the block's `error`); and the accuracy eval it ran (`eval_task`,
    `eval_score`, `eval_verdict`: None where it ran none, as a prediction never does). An eval-only point measured no
    throughput: its requests, metrics and power are None, not 0."""
    block = summary.eval if summary is not None else None
    measured = None if summary is None or (block is not None and block.mode == "eval-only") else summary
    power = measured.power if measured is not None else None
    return {
        "job": job,
        "conc": conc,
        "verdict": verdict,
        "reason": reason,
        "warnings": list(warnings),
        "source": summary.source if summary is not None else None,
        "clock": summary.provenance.clock if summary is not None else None,
        "requests_ok": measured.requests.successful if measured is not None else None,
        "requests_failed": measured.requests.failed if measured is not None else None,
        **(hot_values(measured) if measured is not None else dict.fromkeys(HOT_NAMES)),
        "power_source": power.source if power is not None else None,
        "power_error": power.error if power is not None else None,
        "eval_task": block.task if block is not None else None,
        "eval_score": block.score if block is not None else None,
        "eval_verdict": block.verdict if block is not None else None,
    }


def extract_hot(summary: Summary) -> Extracted:
    """Read the hot metrics, source, validity and provenance of one summary."""
    req = summary.requests
    return Extracted(
        metrics=hot_values(summary),
        source=summary.source,
        verdict=summary.validity.verdict,
        reasons=tuple(summary.validity.reasons),
        num_requests=req.successful + req.failed,
        num_successful=req.successful,
        provenance=summary.provenance.model_dump(mode="json"),
    )

