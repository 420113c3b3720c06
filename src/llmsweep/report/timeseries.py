"""Per-point time series for the drill-down: request timeline, TTFT, throughput, in-flight, KV usage, cache hits.

Everything is downsampled to a fixed budget so a run with a million requests still yields a page of a few MB:
requests by an even stride (deterministic), rates on a fixed grid of bins. Times are seconds from the first
profiling send so charts of different points line up.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from llmsweep.metrics.server import ServerWindow, hit_rate, reader_for
from llmsweep.results.rundir import JsonLines, iter_jsonl

MAX_REQUESTS = 1500
BINS = 120
MAX_SCRAPES = 400

KV_USAGE = re.compile(r"(kv_cache_usage|gpu_cache_usage|token_usage|kv_usage)", re.I)


@dataclass(frozen=True, slots=True)
class RequestSeries:
    t0: float
    timeline: list[list[float | int | None]]
    """[sent, first token, end, ok(1/0), phase(1 = profiling)] per request, seconds from t0; downsampled."""
    ttft: list[list[float | None]]
    """[sent, ttft] per successful profiling request; downsampled."""
    throughput: list[list[float | None]]
    """[bin centre, output tokens/s] over the run."""
    inflight: list[list[float | None]]
    """[bin centre, requests in flight]."""
    total: int
    shown: int
    skipped: int = 0
    """Lines of records.jsonl that were not JSON (a file cut short): the series miss those requests."""


def _stride(n: int, budget: int) -> np.ndarray:
    return np.arange(n) if n <= budget else np.unique(np.linspace(0, n - 1, budget).astype(int))


def _r(x: float, digits: int = 4) -> float | None:
    return round(float(x), digits) if math.isfinite(x) else None


def request_series(records: Iterable[Mapping[str, Any]], *, max_requests: int = MAX_REQUESTS,
                   bins: int = BINS) -> RequestSeries | None:
    """Timeline and rate series from raw records; None when there are no records."""
    rows: list[tuple[float, float, float, float, float, float]] = []
    for r in records:
        sent = r.get("sent_at")
        if not isinstance(sent, (int, float)):
            continue
        first = r.get("first_token_at")
        end = r.get("end_at")
        succeeded = r.get("error_class") is None
        tokens = r.get("completion_tokens") or sum(r.get("chunk_tokens") or ()) or 0
        rows.append((float(sent), float(first) if isinstance(first, (int, float)) else math.nan,
                     float(end) if isinstance(end, (int, float)) else math.nan, 1.0 if succeeded else 0.0,
                     1.0 if r.get("phase", "profiling") == "profiling" else 0.0, float(tokens) if succeeded else 0.0))
    if not rows:
        return None
    a = np.array(rows)
    order = np.argsort(a[:, 0], kind="stable")
    a = a[order]
    prof = a[a[:, 4] == 1]
    t0 = float((prof if prof.size else a)[:, 0].min())
    sent, first, end, ok, phase, tok = (a[:, i] for i in range(6))
    idx = _stride(len(a), max_requests)
    timeline = [[_r(sent[i] - t0), _r(first[i] - t0), _r(end[i] - t0), int(ok[i]), int(phase[i])] for i in idx]
    good = np.flatnonzero((ok == 1) & (phase == 1) & np.isfinite(first))
    gidx = good[_stride(good.size, max_requests)]
    ttft = [[_r(sent[i] - t0), _r(first[i] - sent[i])] for i in gidx]
    t_end = float(np.nanmax(end)) if np.isfinite(end).any() else float(sent.max())
    grid = np.linspace(t0, max(t_end, t0 + 1e-3), bins + 1)
    centres = (grid[:-1] + grid[1:]) / 2
    throughput = _spread_rate(first, end, tok, grid)
    inflight = _level(sent, np.where(np.isfinite(end), end, t_end), centres)
    return RequestSeries(
        t0=t0, timeline=timeline, ttft=ttft,
        throughput=[[_r(c - t0), _r(v, 2)] for c, v in zip(centres, throughput, strict=True)],
        inflight=[[_r(c - t0), float(v)] for c, v in zip(centres, inflight, strict=True)],
        total=len(a), shown=len(idx),
    )


def _spread_rate(first: np.ndarray, end: np.ndarray, tokens: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Output tokens/s per bin, each request's tokens spread evenly over its decode interval [first, end]."""
    m = np.isfinite(first) & np.isfinite(end) & (end > first) & (tokens > 0)
    f, e, rate = first[m], end[m], tokens[m] / (end[m] - first[m])
    lo, hi = grid[:-1][:, None], grid[1:][:, None]
    overlap = np.clip(np.minimum(hi, e[None, :]) - np.maximum(lo, f[None, :]), 0, None) if f.size < 20000 else None
    if overlap is not None:
        rates: np.ndarray = (overlap * rate[None, :]).sum(axis=1) / (grid[1:] - grid[:-1])
        return rates
    # Large runs: sample the rate level at bin centres instead of integrating (O(n log n), no n×bins matrix).
    return _level(f, e, (grid[:-1] + grid[1:]) / 2, weights=rate)


def _level(starts: np.ndarray, ends: np.ndarray, at: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
    """Σ weights of intervals [start, end) containing each time in `at` (in-flight count when unweighted)."""
    w = np.ones(starts.size) if weights is None else weights
    s_order, e_order = np.argsort(starts), np.argsort(ends)
    cum_s = np.concatenate([[0.0], np.cumsum(w[s_order])])
    cum_e = np.concatenate([[0.0], np.cumsum(w[e_order])])
    started = cum_s[np.searchsorted(starts[s_order], at, side="right")]
    ended = cum_e[np.searchsorted(ends[e_order], at, side="right")]
    level: np.ndarray = started - ended
    return level


@dataclass(frozen=True, slots=True)
class ServerSeries:
    kv_usage: list[list[float]]
    """[t, fraction 0..1], max over series at each scrape."""
    cache_hit: list[list[float]]
    """[t, fraction] per scrape interval from counter deltas (or a hit-rate gauge)."""
    names: list[str]


def server_series(scrapes: Iterable[Mapping[str, Any]], t0: float, *, budget: int = MAX_SCRAPES,
                  count: int | None = None) -> ServerSeries:
    """KV usage and prefix-cache hit rate over time from `server_metrics.jsonl` scrapes.

    Scrape lines are `{"t": unix, "samples": [[name, labels, value], …]}` (llmsweep.client.scrape); a mapping
    `{"metrics": {name: value}}` is accepted too. The hit rate is the engine's own, as the summary reads it
    (`metrics.server`'s reader for the engine the names belong to: its counters' increase between two scrapes, or its
    hit-rate gauge), over at most `budget` intervals: closed at every `count / budget`-th line (`count`: how many
    lines `scrapes` yields; a list's own length when not given). Streamed: one interval's scrapes in memory at a time.
    """
    if count is None:
        scrapes = list(scrapes)
        count = len(scrapes)
    marks = set(_stride(count, budget).tolist())
    kv: list[list[float]] = []
    hit: list[list[float]] = []
    names: set[str] = set()
    window: ServerWindow | None = None
    base: dict[str, Any] | None = None  # the scrape that closed the previous interval: the next one's base
    due = False  # a mark fell on a line that is no scrape: the next one closes the interval
    last_t: float | None = None
    for index, scrape in enumerate(scrapes):
        due = due or index in marks
        t = scrape.get("t", scrape.get("ts", scrape.get("timestamp")))
        if not isinstance(t, (int, float)):
            continue
        samples = scrape.get("samples")
        if samples is None and isinstance(scrape.get("metrics"), Mapping):
            samples = [[k, {}, v] for k, v in scrape["metrics"].items()]
        kept: list[tuple[str, Mapping[str, str], float]] = []
        usage: float | None = None
        for s in samples or ():
            if not isinstance(s, (list, tuple)) or len(s) < 3 or not isinstance(s[2], (int, float)):
                continue
            name, value = str(s[0]), float(s[2])
            names.add(name)
            kept.append((name, s[1] if isinstance(s[1], Mapping) else {}, value))
            if KV_USAGE.search(name) and "cpu" not in name:
                usage = max(usage or 0.0, value / 100 if value > 1.5 else value)
        if usage is not None:
            kv.append([round(float(t) - t0, 3), round(usage, 4)])
        if "error" in scrape:
            continue
        readable = {"t": float(t), "answered": float(scrape.get("answered", t)), "samples": kept}
        if window is None:  # an interval from the scrape that closed the last one (the first: its gauges alone)
            window = ServerWindow(None if base is None else base["answered"], None)
            if base is not None:
                window.add(base)
        window.add(readable)
        last_t = float(t)
        if due:
            rate = _hit_rate(window, names)
            if rate is not None:
                hit.append([round(float(t) - t0, 3), round(max(0.0, min(1.0, rate)), 4)])
            base, window, due = readable, None, False
    if window is not None and last_t is not None:  # scrapes past the last mark (a count short of the lines)
        rate = _hit_rate(window, names)
        if rate is not None:
            hit.append([round(last_t - t0, 3), round(max(0.0, min(1.0, rate)), 4)])
    return ServerSeries(kv_usage=_thin(kv, budget), cache_hit=hit, names=sorted(names))


def _hit_rate(window: ServerWindow, names: set[str]) -> float | None:
    """The engine's hit rate over `window`, read by the reader its metric names call for (None: no reader)."""
    found = reader_for(names)
    return hit_rate(found[1](window)) if found is not None else None


def _thin(series: list[list[float]], budget: int) -> list[list[float]]:
    return series if len(series) <= budget else [series[i] for i in _stride(len(series), budget)]


def load_request_series(path: Path, *, max_requests: int = MAX_REQUESTS) -> RequestSeries | None:
    """The request series of a records.jsonl; None when there is no such file or it holds no request. A file whose
    every line is not JSON (corrupt) is an empty series that keeps the count of lines skipped (`skipped`), so the
    drill-down says the file is unreadable rather than that the point has no data."""
    if not path.is_file():
        return None
    lines = JsonLines(path)
    series = request_series(lines, max_requests=max_requests)
    if series is None:
        return RequestSeries(0.0, [], [], [], [], total=0, shown=0, skipped=lines.skipped) if lines.skipped else None
    return replace(series, skipped=lines.skipped)


def load_server_series(path: Path, t0: float) -> ServerSeries:
    if not path.is_file():
        return ServerSeries([], [], [])
    with path.open("rb") as fh:  # its lines, counted without parsing them: the intervals' stride
        lines = sum(chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
    return server_series(iter_jsonl(path), t0, count=lines)
