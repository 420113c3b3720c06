"""Summary → hot metric columns, source, validity and provenance: what the store and the report need of a result.

The columns themselves (names, labels, units, polarity, how each is read from a `Summary`) are the metric table's
(`llmsweep.metrics.registry`); nothing here knows where a figure sits in the summary.

Units: latencies in seconds, throughput in tokens/s (per GPU where named), interactivity in tokens/s/user.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from llmsweep.metrics.model import Summary
from llmsweep.metrics.registry import HOT_COLUMNS, HotColumn

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

