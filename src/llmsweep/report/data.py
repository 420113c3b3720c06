"""The dashboard's data: one JSON document embedded in the page, built from a run directory.

Only artifacts are read, and only named fields are copied (run.json and provenance through allow/deny lists), so an
environment dump that slipped into an artifact never reaches the page.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from llmsweep.metrics.registry import HOT_BY_NAME, HOT_COLUMNS
from llmsweep.report.timeseries import MAX_REQUESTS, load_request_series, load_server_series
from llmsweep.results.frontier import X_AXES, Y_METRIC, compute_frontiers, series_key, series_label
from llmsweep.results.point import ResultPoint
from llmsweep.results.rundir import RunDir

PAYLOAD_VERSION = 1
Y_METRICS = ("tput_per_gpu", "output_tput_per_gpu", "input_tput_per_gpu")
"""Y choices (InferenceX: token throughput per chip, total/output/input); each gets its own north-star frontiers."""
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#393b79", "#ad494a")
RUN_FIELDS = ("run_id", "started", "finished", "recipe_files", "llmsweep_version", "executor", "seed", "host")
_SECRETISH = re.compile(r"(env|secret|token|passw|credential|auth|cookie|api[_-]?key|hf_)", re.I)
_SAFE = frozenset({"recipe_key", "recipe_fingerprint", "client_version", "llmsweep_version", "engine_version"})


def scrub(doc: Any) -> Any:
    """Drop keys that look like secrets or environment dumps, recursively (values are never inspected)."""
    if isinstance(doc, Mapping):
        return {k: scrub(v) for k, v in doc.items() if str(k) in _SAFE or not _SECRETISH.search(str(k))}
    if isinstance(doc, list):
        return [scrub(v) for v in doc]
    return doc


def _round(v: float | None) -> float | None:
    return None if v is None else float(f"{v:.6g}")


def point_payload(p: ResultPoint, sk: str, frontiers: Mapping[str, Mapping[str, Sequence[str]]]) -> dict[str, Any]:
    return {
        "id": p.result_id, "job_id": p.job_id, "run_id": p.run_id, "series": sk, "source": p.source, "origin": p.origin,
        "verdict": p.verdict, "valid": p.valid, "reasons": list(p.reasons), "gpus": p.gpus,
        "identity": p.identity.as_dict(), "topology": p.identity.topology(),
        "metrics": {**{c.name: _round(p.metric(c.name)) for c in HOT_COLUMNS}, "conc": p.identity.conc},
        "requests": {"finished": p.num_requests, "successful": p.num_successful},
        "frontier": {axis: p.result_id in by_series.get(sk, ()) for axis, by_series in frontiers.items()},
    }


PAGE_REQUEST_BUDGET = 60_000
"""Timeline rows across the whole page (~25 bytes each): a 200-point sweep still opens quickly."""


def request_budget(n_points: int) -> int:
    """Per-point request budget: 1500 for small runs, shrinking with the point count, never below 200."""
    return max(200, min(MAX_REQUESTS, PAGE_REQUEST_BUDGET // max(n_points, 1)))


def detail_payload(p: ResultPoint, *, max_requests: int = MAX_REQUESTS) -> dict[str, Any]:
    """Drill-down data of one point: raw-derived series, exact server command, validity and provenance."""
    out: dict[str, Any] = {
        "server_command": None,
        "validity": scrub(p.summary.validity.model_dump(mode="json") if p.summary is not None
                          else {"verdict": p.verdict, "reasons": list(p.reasons)}),
        "provenance": scrub(p.provenance),
        "client_health": scrub(p.summary.client_health.model_dump(mode="json") if p.summary is not None else {}),
        "job": scrub(p.job), "timeline": [], "ttft": [], "throughput": [], "inflight": [], "kv_usage": [],
        "cache_hit": [], "requests_total": 0, "requests_shown": 0,
    }
    if p.artifact_dir is None:
        return out
    cmd = p.artifact_dir / "server_command.txt"
    if cmd.is_file():
        out["server_command"] = cmd.read_text(encoding="utf-8", errors="replace")[:20000]
    req = load_request_series(p.artifact_dir / "records.jsonl", max_requests=max_requests)
    t0 = req.t0 if req else 0.0
    if req:
        out.update(timeline=req.timeline, ttft=req.ttft, throughput=req.throughput, inflight=req.inflight,
                   requests_total=req.total, requests_shown=req.shown)
    srv = load_server_series(p.artifact_dir / "server_metrics.jsonl", t0)
    out.update(kv_usage=srv.kv_usage, cache_hit=srv.cache_hit)
    return out


def build_payload(run: RunDir, points: Sequence[ResultPoint], *, overlay: Sequence[ResultPoint] = (),
                  mix_sources: bool = False, details: bool = True) -> dict[str, Any]:
    """Everything the page shows, as plain JSON-able data.

    `overlay` holds points of other runs (e.g. imported published InferenceX rows) drawn as their own series, tagged
    with their run id, so they are compared by eye but never merged into this run's frontiers.
    """
    tagged = [(p, "") for p in points] + [(p, p.run_id) for p in overlay if p.run_id != run.run_id]
    keys = {p.result_id: series_key(p, mix_sources=mix_sources, tag=tag) for p, tag in tagged}
    everything = [p for p, _ in tagged]
    frontiers_by_y = {y: compute_frontiers(everything, y_metric=y, series_of=keys) for y in Y_METRICS}
    frontiers = frontiers_by_y[Y_METRIC]
    series: dict[str, dict[str, Any]] = {}
    for p, tag in tagged:
        sk = keys[p.result_id]
        if sk not in series:
            i = p.identity
            series[sk] = {"key": sk, "label": series_label(p, mix_sources=mix_sources, tag=tag),
                          "color": PALETTE[len(series) % len(PALETTE)], "source": p.source,
                          "run": tag or run.run_id, "overlay": bool(tag),
                          "attrs": {"model": i.model, "hardware": i.hardware, "engine": i.engine,
                                    "precision": i.precision, "scenario": i.scenario, "spec": i.spec,
                                    "offload": i.offload}}
    have = {p.job_id for p in points}
    no_result = [{"job_id": j.job_id, "reason": j.why_no_result()} for j in run.jobs if j.job_id not in have]
    never_ran = [{"job_id": jid, "reason": "expected by run.json, no job folder"}
                 for jid in run.missing_job_ids if jid not in {j.job_id for j in run.jobs}]
    return {
        "version": PAYLOAD_VERSION,
        "run": {**{k: scrub(run.meta[k]) for k in RUN_FIELDS if k in run.meta}, "run_id": run.run_id},
        "axes": [asdict(a) for a in X_AXES],
        "y": {"key": Y_METRIC, "label": HOT_BY_NAME[Y_METRIC].label, "unit": HOT_BY_NAME[Y_METRIC].unit},
        "y_axes": [{"key": y, "label": HOT_BY_NAME[y].label, "unit": HOT_BY_NAME[y].unit} for y in Y_METRICS],
        "metrics": [{"key": m.name, "label": m.label, "unit": m.unit, "polarity": m.polarity}
                    for m in HOT_COLUMNS],
        "series": list(series.values()),
        "points": [point_payload(p, keys[p.result_id], frontiers) for p in everything],
        "frontiers": frontiers,
        "frontiers_by_y": frontiers_by_y,
        "missing": no_result + never_ran,
        "sources": sorted({p.source for p in everything}),
        "mix_sources": mix_sources,
        "overlays": sorted({tag for _, tag in tagged if tag}),
        "details": ({p.result_id: detail_payload(p, max_requests=request_budget(len(everything))) for p in everything}
                    if details else {}),
    }
