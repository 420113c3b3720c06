"""Records → `summary.json`: one streaming pass over `records.jsonl`, numpy columns built incrementally.

Follows AgentX §3 where it defines something: only successful profiling records feed latency, token, throughput and
QPS figures; warmup and failed records are counted in `requests`; QPS windows are 1 s wide from the first completion;
throughput divides by (last end − first send) of those records. Coverage of the profile window is measured from
each profiling request's in-flight span, the workload's scheduled think time excused (see the `gates` module doc).
A 1 M-record file is summarised in one pass: per record we append a handful of floats, and inter-chunk gaps are
computed in vectorised batches.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from llmsweep import __version__
from llmsweep.errors import ResultError
from llmsweep.metrics import registry
from llmsweep.metrics.gates import GateConfig, evaluate, idle_cap_from, window_coverage
from llmsweep.metrics.server import summarise_server
from llmsweep.metrics.stats import Column, clean, inverted_block, stat_block

SCHEMA_VERSION = 1
_GAP_BATCH = 200_000
_PART_BYTES = 64 * 2**20
"""Files above this size are parsed by several processes (JSON decoding dominates the cost)."""
_MAX_PARTS = 8
_UNANSWERED = frozenset({"timeout", "connection", "cancelled"})
"""Error classes where the server's last word is the last streamed chunk, not the record's end."""


def iter_records(source: Iterable[dict[str, Any]] | Path | str) -> Iterator[dict[str, Any]]:
    """Records from a `records.jsonl` path (a torn last line is skipped) or any iterable of dicts/records."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise ResultError(f"summarise: {path} does not exist", fix="point at a run directory's records.jsonl")
        with path.open("rb") as fh:
            for line in fh:
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError:
                    continue
        return
    for rec in source:
        yield rec if isinstance(rec, dict) else rec.to_dict()  # type: ignore[attr-defined]


class _Accumulator:
    """Everything summarise needs, gathered in one pass."""

    def __init__(self) -> None:
        self.total = 0
        self.successful = 0
        self.failed = 0
        self.warmup = 0
        self.warmup_failed = 0
        self.cancelled = 0
        self.context_overflow = 0
        self.categories: Counter[str] = Counter()
        self.ttft = Column()
        self.e2el = Column()
        self.tpot = Column()
        self.e2e_norm = Column()
        self.isl = Column()
        self.osl = Column()
        self.ends = Column()
        self.lag = Column()
        self.itl = Column("f")
        self.span_start = Column()
        self.span_end = Column()
        self.first_send = float("inf")
        self.last_end = float("-inf")
        self.profile_first_send = float("inf")
        self.input_sum = 0
        self.output_sum = 0
        self.theo_cached = 0
        self.theo_input = 0
        self.cached = 0
        self.cached_prompt = 0
        self.osl_mismatch = 0
        self.workers: set[int] = set()
        self._ct: list[float] = []
        self._ct_starts: list[int] = []

    def add(self, r: dict[str, Any]) -> None:
        self.total += 1
        err = r.get("error_class")
        sent = r.get("sent_at")
        if r.get("phase") == "warmup":
            self.warmup += 1
            if err is not None:
                self.warmup_failed += 1
            return
        self.workers.add(int(r.get("worker") or 0))
        if sent is not None:
            self.profile_first_send = min(self.profile_first_send, sent)
            self._span(r, sent, err)
            sched = r.get("scheduled_at")
            if sched is not None and err != "cancelled":
                self.lag.append(max(sent - sched, 0.0))
        if err is not None:
            if err == "cancelled":
                self.cancelled += 1
                self.categories["cancelled"] += 1
                return
            self.failed += 1
            self.categories[err] += 1
            if err == "context_overflow":
                self.context_overflow += 1
            return
        self.successful += 1
        chunks = r.get("chunk_times") or []
        end = r.get("end_at")
        first = r.get("first_token_at")
        osl = r.get("completion_tokens")
        if osl is None:
            osl = sum(r.get("chunk_tokens") or ())
        isl = r.get("prompt_tokens")
        if isl is None:
            isl = r.get("input_tokens_expected") or 0
        self.isl.append(isl)
        self.osl.append(osl)
        self.input_sum += isl
        self.output_sum += osl
        if sent is not None:
            self.first_send = min(self.first_send, sent)
        if end is not None:
            self.last_end = max(self.last_end, end)
            self.ends.append(end)
        last_chunk = chunks[-1] if chunks else end
        if sent is not None and first is not None:
            ttft = first - sent
            self.ttft.append(ttft)
            if last_chunk is not None:
                e2el = last_chunk - sent
                self.e2el.append(e2el)
                if osl >= 2:
                    self.tpot.append((e2el - ttft) / (osl - 1))
                if osl > 0 and e2el > 0:
                    self.e2e_norm.append(e2el / osl)
        if len(chunks) > 1:
            self._ct_starts.append(len(self._ct))
            self._ct.extend(chunks)
            if len(self._ct) >= _GAP_BATCH:
                self._flush_gaps()
        theo = r.get("theoretical_cached_tokens")
        if theo is not None:
            self.theo_cached += theo
            self.theo_input += r.get("input_tokens_expected") or isl
        cached = r.get("cached_tokens")
        if cached is not None and r.get("prompt_tokens"):
            self.cached += cached
            self.cached_prompt += r["prompt_tokens"]
        max_tokens = r.get("max_tokens")
        if max_tokens is not None and osl != max_tokens:
            self.osl_mismatch += 1

    def _span(self, r: dict[str, Any], sent: float, err: str | None) -> None:
        """In flight from the send to the last thing the server sent: its end when it answered, its last chunk (or
        the send) when it timed out, lost the connection or was cancelled — a stalled server leaves a gap."""
        if err in _UNANSWERED:
            chunks = r.get("chunk_times")
            last = chunks[-1] if chunks else sent
        else:
            last = r.get("end_at")
            if last is None:
                chunks = r.get("chunk_times")
                last = chunks[-1] if chunks else sent
        self.span_start.append(sent)
        self.span_end.append(max(last, sent))

    def _flush_gaps(self) -> None:
        if not self._ct:
            return
        times = np.asarray(self._ct, dtype=np.float64)
        gaps = np.diff(times)
        starts = np.asarray(self._ct_starts[1:], dtype=np.int64)
        keep = np.ones(gaps.size, dtype=bool)
        keep[starts - 1] = False  # the gap across two records is not a gap
        self.itl.extend(gaps[keep].astype(np.float32))
        self._ct.clear()
        self._ct_starts.clear()

    def finish(self) -> None:
        self._flush_gaps()

    def merge(self, other: _Accumulator) -> None:
        """Append `other` (the accumulator of the following part of the file): columns keep file order, so the
        merged result is identical to one sequential pass."""
        for name in ("total", "successful", "failed", "warmup", "warmup_failed", "cancelled", "context_overflow",
                     "input_sum", "output_sum", "theo_cached", "theo_input", "cached", "cached_prompt",
                     "osl_mismatch"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.categories.update(other.categories)
        for name in ("ttft", "e2el", "tpot", "e2e_norm", "isl", "osl", "ends", "lag", "itl", "span_start",
                     "span_end"):
            getattr(self, name).concat(getattr(other, name))
        self.first_send = min(self.first_send, other.first_send)
        self.profile_first_send = min(self.profile_first_send, other.profile_first_send)
        self.last_end = max(self.last_end, other.last_end)
        self.workers |= other.workers


def _accumulate_range(path: str, start: int, end: int) -> _Accumulator:
    """Accumulate the lines that start in bytes [start, end) of a records file."""
    acc = _Accumulator()
    with open(path, "rb") as fh:
        pos = start
        if start > 0:
            fh.seek(start - 1)
            pos = start - 1 + len(fh.readline())
        loads = json.loads
        add = acc.add
        while pos < end:
            line = fh.readline()
            if not line:
                break
            pos += len(line)
            if line.strip():
                try:
                    rec = loads(line)
                except ValueError:
                    continue  # a torn last line after a SIGKILL
                add(rec)
    acc.finish()
    return acc


def _accumulate(records: Iterable[dict[str, Any]] | Path | str) -> _Accumulator:
    """One pass over the records; a big file is split into byte ranges parsed by parallel processes."""
    if isinstance(records, (str, Path)):
        path = Path(records)
        if not path.exists():
            raise ResultError(f"summarise: {path} does not exist", fix="point at a run directory's records.jsonl")
        size = path.stat().st_size
        parts = min(os.cpu_count() or 1, _MAX_PARTS, max(size // _PART_BYTES, 1))
        if parts <= 1 or "fork" not in mp.get_all_start_methods():
            return _accumulate_range(str(path), 0, size)
        bounds = [size * k // parts for k in range(parts + 1)]
        ctx = mp.get_context("fork")  # no re-import of the caller's __main__, no start-up cost
        with ctx.Pool(parts) as pool:
            accs = pool.starmap(_accumulate_range, [(str(path), bounds[k], bounds[k + 1]) for k in range(parts)])
        acc = accs[0]
        for other in accs[1:]:
            acc.merge(other)
        return acc
    acc = _Accumulator()
    for rec in iter_records(records):
        acc.add(rec)
    acc.finish()
    return acc


def _qps(ends: np.ndarray) -> dict[str, Any]:
    """Completions per 1-s window from the first completion, while the window end ≤ the last completion."""
    n = int(ends.size)
    if n < 2:
        return {"window_seconds": 1, "samples": 0}
    t0, t1 = float(ends.min()), float(ends.max())
    windows = int(np.floor(t1 - t0))
    if windows < 1:
        return {"window_seconds": 1, "samples": 0, "mean": n / (t1 - t0) if t1 > t0 else 0.0}
    idx = np.floor(ends - t0).astype(np.int64)
    counts = np.bincount(idx[idx < windows], minlength=windows).astype(np.float64)
    block = stat_block(counts)
    block.pop("count")
    return {"window_seconds": 1, "samples": windows, **block}


def _rate(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def summarise(
    records: Iterable[dict[str, Any]] | Path | str,
    *,
    gpus: int,
    server_metrics: Path | str | Iterable[dict[str, Any]] | None = None,
    source: str = "measured",
    provenance: dict[str, Any] | None = None,
    gates: GateConfig | None = None,
    client: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Aggregate raw request records into the versioned summary (see `docs/contracts.md`).

    `client` is what only the live run knows (worker CPU, connection waits, open-file limit, stop reason); the run
    writes it to `run.json` so `llmsweep summarize` reproduces the same summary from the directory.
    """
    if gpus < 1:
        raise ResultError(f"summarise: gpus={gpus}", fix="pass the number of GPUs serving the endpoint (>= 1)")
    gates = gates or GateConfig()
    client = client or {}
    acc = _accumulate(records)

    duration = acc.last_end - acc.first_send if acc.successful and acc.last_end > acc.first_send else 0.0
    tpot = clean(acc.tpot.numpy())
    e2e_norm = clean(acc.e2e_norm.numpy())
    requests = {
        "total": acc.total,
        "successful": acc.successful,
        "failed": acc.failed,
        "cancelled": acc.cancelled,
        "warmup": acc.warmup,
        "warmup_failed": acc.warmup_failed,
        "context_overflow": acc.context_overflow,
        "error_categories": dict(sorted(acc.categories.items())),
        "error_ratio": acc.failed / (acc.successful + acc.failed) if acc.successful + acc.failed else 0.0,
        "output_length_mismatch": acc.osl_mismatch,
    }
    tput = {
        "duration_s": duration,
        "request_rps": _rate(acc.successful, duration) or 0.0,
        "input_tps": _rate(acc.input_sum, duration) or 0.0,
        "output_tps": _rate(acc.output_sum, duration) or 0.0,
        "total_tps": _rate(acc.input_sum + acc.output_sum, duration) or 0.0,
        "gpus": gpus,
    }
    tput["per_gpu"] = {k: tput[k] / gpus for k in ("input_tps", "output_tps", "total_tps")}

    window_start = acc.profile_first_send if acc.profile_first_send != float("inf") else None
    window_end = acc.last_end if acc.last_end != float("-inf") else None
    if window_start is not None and gates.planned_duration_s is not None:
        planned_end = window_start + gates.planned_duration_s
        coverage_end = planned_end
    else:
        coverage_end = window_end
    coverage: float | None = None
    coverage_detail: dict[str, Any] | None = None
    if window_start is not None and coverage_end is not None and coverage_end > window_start:
        idle_cap = gates.max_idle_gap_s if gates.max_idle_gap_s is not None else idle_cap_from(provenance)
        coverage_detail = window_coverage(
            acc.span_start.numpy(), acc.span_end.numpy(),
            window_start=window_start, window_end=coverage_end, idle_cap_s=idle_cap,
        )
        coverage = coverage_detail["coverage"]

    server = summarise_server(
        server_metrics, start=window_start, end=window_end, require_prefix=gates.require_metrics_prefix
    )
    health = _client_health(acc, client)
    cache = {
        "theoretical_hit_rate": _rate(acc.theo_cached, acc.theo_input),
        "observed_hit_rate": _rate(acc.cached, acc.cached_prompt),
        "theoretical_cached_tokens": acc.theo_cached,
        "observed_cached_tokens": acc.cached,
    }
    validity = evaluate(
        gates,
        cache=cache,
        requests=requests,
        coverage=coverage,
        profile_duration_s=duration,
        server_metrics=server,
        client_health=health,
        stop_reason=client.get("stop_reason"),
        coverage_detail=coverage_detail,
    )
    return {
        "schema_version": SCHEMA_VERSION,
        "source": source,
        "requests": requests,
        "latency": {
            "ttft": stat_block(clean(acc.ttft.numpy())),
            "tpot": stat_block(tpot),
            "itl": stat_block(clean(acc.itl.numpy())),
            "e2el": stat_block(clean(acc.e2el.numpy())),
        },
        "interactivity": inverted_block(tpot),
        "e2e_norm_interactivity": inverted_block(e2e_norm),
        "tokens": {
            "input": stat_block(clean(acc.isl.numpy(), positive=False)),
            "output": stat_block(clean(acc.osl.numpy(), positive=False)),
            "input_total": acc.input_sum,
            "output_total": acc.output_sum,
        },
        "throughput": tput,
        "qps": _qps(acc.ends.numpy()),
        "cache": cache,
        "server_metrics": server,
        "client_health": health,
        "coverage": coverage,
        "validity": validity,
        "units": registry.units(),
        "provenance": {"client_version": __version__, **(provenance or {})},
    }


def _client_health(acc: _Accumulator, client: dict[str, Any]) -> dict[str, Any]:
    """Schedule lag from the records, worker CPU and connection waits from the live run; flags saturation."""
    lag = acc.lag.numpy()
    lag_block = {
        "count": int(lag.size),
        "p50": float(np.percentile(lag, 50)) if lag.size else 0.0,
        "p99": float(np.percentile(lag, 99)) if lag.size else 0.0,
        "max": float(lag.max()) if lag.size else 0.0,
    }
    workers = [dict(w) for w in client.get("workers", [])]
    cpu_limit = float(client.get("saturation_cpu_ratio", 0.9))
    lag_limit = float(client.get("saturation_lag_p99_s", 0.05))
    reasons = []
    for w in workers:
        share_ = w.get("cpu_s", 0.0) / w["wall_s"] if w.get("wall_s") else 0.0
        w["cpu_share"] = share_
        if share_ >= cpu_limit:
            reasons.append(f"worker {w.get('worker')} used {share_:.0%} CPU (limit {cpu_limit:.0%})")
    if lag_block["p99"] > lag_limit:
        reasons.append(f"p99 schedule lag {lag_block['p99'] * 1e3:.1f} ms above {lag_limit * 1e3:.0f} ms")
    tokens = acc.output_sum
    cpu_total = sum(w.get("cpu_s", 0.0) for w in workers)
    return {
        "workers": workers,
        "cpu_s_total": cpu_total,
        "cpu_us_per_output_token": cpu_total / tokens * 1e6 if tokens and workers else None,
        "schedule_lag_s": lag_block,
        "connection_queue_wait_s": sum(w.get("conn_queue_wait_s", 0.0) for w in workers),
        "connect_s": sum(w.get("connect_s", 0.0) for w in workers),
        "connections_opened": sum(w.get("connects", 0) for w in workers),
        "max_inflight": sum(w.get("max_inflight", 0) for w in workers),
        "fd_limit": client.get("fd_limit", {}),
        "stop_reason": client.get("stop_reason"),
        "saturated": bool(reasons),
        "saturation_reasons": reasons,
    }
