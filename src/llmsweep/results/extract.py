"""summary.json → hot metric columns: the ONE place that knows the summary's nesting.

`llmsweep.metrics` owns `summary.json` and may still move fields around; every other module of results/ and report/
reads metrics through :func:`extract_hot`, so adapting to a new layout means editing the candidate paths below and
nothing else. Each metric lists dotted paths tried in order; the first finite number wins.

Units: latencies in seconds, throughput in tokens/s (per GPU where named), interactivity in tokens/s/user.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Polarity = Literal["max", "min"]


@dataclass(frozen=True, slots=True)
class HotMetric:
    """One hot column: where to find it in a summary, how to label it, and which direction is better."""

    name: str
    label: str
    unit: str
    polarity: Polarity
    paths: tuple[str, ...]


def _stat(block: str, *stats: str) -> tuple[str, ...]:
    """Candidate paths for one statistic of a stat block, tolerant of `latency.` nesting and p50/median naming."""
    out: list[str] = []
    for stat in stats:
        out += [f"latency.{block}.{stat}", f"{block}.{stat}", f"request_metrics.latency.{block}.{stat}"]
    return tuple(out)


HOT_METRICS: tuple[HotMetric, ...] = (
    HotMetric("tput_per_gpu", "Throughput per GPU", "tok/s/GPU", "max", (
        "throughput.per_gpu.total_tps", "throughput.per_gpu.total", "throughput.per_gpu.total_tput_tps",
        "throughput.tput_per_gpu", "throughput.total_per_gpu", "request_metrics.throughput.per_gpu.total_tput_tps")),
    HotMetric("output_tput_per_gpu", "Output throughput per GPU", "tok/s/GPU", "max", (
        "throughput.per_gpu.output_tps", "throughput.per_gpu.output", "throughput.per_gpu.output_tput_tps",
        "throughput.output_tput_per_gpu", "request_metrics.throughput.per_gpu.output_tput_tps")),
    HotMetric("input_tput_per_gpu", "Input throughput per GPU", "tok/s/GPU", "max", (
        "throughput.per_gpu.input_tps", "throughput.per_gpu.input", "throughput.per_gpu.input_tput_tps",
        "throughput.input_tput_per_gpu", "request_metrics.throughput.per_gpu.input_tput_tps")),
    HotMetric("p50_ttft", "P50 TTFT", "s", "min", _stat("ttft", "p50", "median")),
    HotMetric("p90_ttft", "P90 TTFT", "s", "min", _stat("ttft", "p90")),
    HotMetric("p99_ttft", "P99 TTFT", "s", "min", _stat("ttft", "p99")),
    HotMetric("p50_tpot", "P50 TPOT", "s", "min", _stat("tpot", "p50", "median")),
    HotMetric("p90_tpot", "P90 TPOT", "s", "min", _stat("tpot", "p90")),
    HotMetric("p50_e2el", "P50 E2E latency", "s", "min", _stat("e2el", "p50", "median")),
    HotMetric("p90_e2el", "P90 E2E latency", "s", "min", _stat("e2el", "p90")),
    HotMetric("p50_intvty", "P50 interactivity", "tok/s/user", "max", (
        "interactivity.p50", "interactivity.median", "latency.intvty.p50", "request_metrics.latency.intvty.p50")),
    HotMetric("p90_intvty", "P90 interactivity", "tok/s/user", "max", (
        "interactivity.p90", "latency.intvty.p90", "request_metrics.latency.intvty.p90")),
    HotMetric("p90_e2e_norm_intvty", "P90 E2E-normalised interactivity", "tok/s/user", "max", (
        "e2e_norm_interactivity.p90", "latency.e2e_norm_intvty.p90", "request_metrics.latency.e2e_norm_intvty.p90")),
    HotMetric("p75_e2e_norm_intvty", "P75 E2E-normalised interactivity", "tok/s/user", "max", (
        "e2e_norm_interactivity.p75", "latency.e2e_norm_intvty.p75", "request_metrics.latency.e2e_norm_intvty.p75")),
    HotMetric("request_qps", "Requests per second", "req/s", "max", ("qps.mean", "request_metrics.qps.mean")),
    HotMetric("error_ratio", "Error ratio", "", "min", ("requests.error_ratio", "requests.error_rate")),
    HotMetric("gpu_cache_hit_rate", "GPU prefix-cache hit rate", "", "max", (
        "server_metrics.cache.gpu_hit_rate", "server_metrics.cache.overall_hit_rate",
        "server_metrics.cache.gpu_cache_hit_rate", "cache.observed_hit_rate")),
    HotMetric("gpu_kv_usage_max", "Peak GPU KV-cache usage", "", "min", (
        "server_metrics.kv_cache.gpu_usage_max", "server_metrics.kv_cache.gpu_usage")),
)
HOT_BY_NAME: dict[str, HotMetric] = {m.name: m for m in HOT_METRICS}
HOT_COLUMNS: tuple[str, ...] = tuple(m.name for m in HOT_METRICS)

INVALID_VERDICTS = frozenset({"invalid", "failed", "fail", "error"})
"""Everything else (`valid`, `smoke` — too short to publish but a sound measurement —, `unknown`) may sit on a
frontier; the verdict is always shown next to the point."""
SOURCES = ("measured", "simulated", "predicted")


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


def dig(doc: Mapping[str, Any], path: str) -> Any:
    """Follow a dotted path through nested mappings; None where any step is missing."""
    node: Any = doc
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def first_number(doc: Mapping[str, Any], paths: tuple[str, ...]) -> float | None:
    """The first finite number among `paths` (bools are not numbers here)."""
    for path in paths:
        value = dig(doc, path)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


def _requests(summary: Mapping[str, Any]) -> tuple[int | None, int | None, float | None]:
    """(finished profiling requests, successful, error ratio) from the `requests` block, whatever its spelling."""
    block = summary.get("requests")
    if not isinstance(block, Mapping):
        return None, None, None
    ok = first_number(block, ("successful", "succeeded", "ok", "success"))
    errors = first_number(block, ("failed", "errors", "error", "records_error_dropped"))
    total = ok + errors if ok is not None and errors is not None else first_number(block, ("completed", "profiled", "total"))
    if ok is None and total is not None and errors is not None:
        ok = total - errors
    if errors is None and total is not None and ok is not None:
        errors = total - ok
    ratio = errors / total if (errors is not None and total) else None
    return (int(total) if total is not None else None, int(ok) if ok is not None else None, ratio)


def _validity(summary: Mapping[str, Any]) -> tuple[str, tuple[str, ...]]:
    block = summary.get("validity")
    if isinstance(block, Mapping):
        verdict = str(block.get("verdict", "unknown")).lower()
        reasons = block.get("reasons") or ()
        return verdict, tuple(str(r if not isinstance(r, Mapping) else r.get("message", r)) for r in reasons)
    if isinstance(block, bool):
        return ("valid" if block else "invalid"), ()
    return "unknown", ("summary has no validity block",)


def extract_hot(summary: Mapping[str, Any]) -> Extracted:
    """Read the hot metrics, source, validity and provenance of one summary.json document."""
    metrics = {m.name: first_number(summary, m.paths) for m in HOT_METRICS}
    total, ok, ratio = _requests(summary)
    if metrics["error_ratio"] is None:
        metrics["error_ratio"] = ratio
    source = str(summary.get("source") or "measured").lower()
    verdict, reasons = _validity(summary)
    provenance = summary.get("provenance")
    return Extracted(
        metrics=metrics,
        source=source,
        verdict=verdict,
        reasons=reasons,
        num_requests=total,
        num_successful=ok,
        provenance=dict(provenance) if isinstance(provenance, Mapping) else {},
    )
