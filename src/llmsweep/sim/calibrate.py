"""Fit the roofline's efficiency factors from measured request records (`records.jsonl`).

Decode steps are the cleanest signal a client sees: between two streamed chunks of one request, exactly one engine
step ran. For each successful request we take its mean step time (decode span / (chunks − 1)), the mean number of
requests decoding alongside it, and their mean context; the roofline says

    step = (weight_bytes / TP + running x context x KV bytes per GPU) / (HBM bandwidth x mem)
           + step_s + per_layer_s x layers + per_seq_s x running

plus the prefills of other requests that completed inside this request's decode span (their FLOPs over peak x
compute, spread over its steps). That is linear in (fixed, per_seq_s, 1/mem, 1/compute), so ordinary least squares
recovers them — provided the records vary concurrency *and* context length (with one prompt length the KV term and
the per-sequence term are collinear). The weight read is taken from the roofline at the fitted `mem` and the rest of
the fixed part becomes `step_s`. The frontend latency is the median of TTFT minus the predicted prefill step over
requests that arrived at an idle engine; when those span several prompt lengths, a line through (prefill FLOPs,
TTFT) gives `compute` (slope) and the frontend latency (intercept) directly. Communication efficiency keeps its
default (single-GPU records do not constrain it); mixed prefill/decode steps are approximated additively, which
biases the decode-fit `compute` low (the idle-TTFT line replaces it when available).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llmsweep.errors import DatasetError, ResultError
from llmsweep.sim.engine import EngineConfig
from llmsweep.sim.perf import Batch, Efficiency, RooflineTimer


@dataclass(frozen=True)
class Calibration:
    """Fitted efficiencies and how well the fit explains the measured decode steps."""

    efficiency: Efficiency
    samples: int
    r2: float
    mean_abs_pct_error: float

    def overrides(self) -> dict[str, float]:
        """Every factor, ready for `EngineConfig(efficiency=...)`."""
        return dict(asdict(self.efficiency))


def load_records(source: Path | str | Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(source, (str, Path)):
        path = Path(source)
        try:
            return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        except (OSError, ValueError) as exc:
            raise DatasetError(f"sim calibrate: cannot read records from {path}: {exc}",
                               fix="pass the records.jsonl a benchmark run wrote") from exc
    return list(source)


class _Intervals:
    """Intervals sorted by start; answers "how many were active, on average, over [a, b]"."""

    def __init__(self, intervals: Iterable[tuple[float, float]]) -> None:
        self.items = sorted(intervals)
        self.starts = [s for s, _ in self.items]
        self.longest = max((e - s for s, e in self.items), default=0.0)

    def mean_active(self, a: float, b: float) -> float:
        if b <= a:
            return 0.0
        # only intervals starting at most `longest` before `a` can reach into [a, b]
        lo = bisect.bisect_left(self.starts, a - self.longest)
        hi = bisect.bisect_right(self.starts, b)
        total = 0.0
        for s, e in self.items[lo:hi]:
            lo_, hi_ = max(s, a), min(e, b)
            if hi_ > lo_:
                total += hi_ - lo_
        return total / (b - a)


def calibrate(records: Iterable[dict[str, Any]] | Path | str, config: EngineConfig) -> Calibration:
    """Fit `mem`, `step_s`, `per_seq_s` and `frontend_s` for `config`'s model and hardware from measured records."""
    rows = [r for r in load_records(records) if r.get("error_class") is None and r.get("first_token_at") is not None
            and r.get("end_at") is not None and len(r.get("chunk_times") or []) >= 3]
    if len(rows) < 5:
        raise ResultError(f"sim calibrate: need at least 5 successful streamed requests with 3+ chunks, got "
                          f"{len(rows)}",
                          fix="calibrate from a streaming run with max_tokens >= 8 and a few dozen requests")
    inputs = config.perf_inputs()
    base = config.efficiency_factors()
    tp = config.tp
    rows.sort(key=lambda r: r["first_token_at"])
    decode = [(r["first_token_at"], r["end_at"]) for r in rows]
    starts = [s for s, _ in decode]
    decoding = _Intervals(decode)
    ctx_of = [(r.get("prompt_tokens") or 0) + (r.get("completion_tokens") or 0) / 2 for r in rows]
    kv_gpu = inputs.kv_bytes_per_token_per_gpu(tp)
    timer = RooflineTimer(inputs, tp=tp, ep=config.ep, efficiency=base)
    firsts = [r["first_token_at"] for r in rows]
    computed = [max(0, (r.get("prompt_tokens") or 0) - (r.get("cached_tokens") or 0)) for r in rows]
    flop_s = 2.0 * inputs.params_active / (tp * inputs.flops)
    x, y = [], []
    for i, r in enumerate(rows):
        a, b = r["first_token_at"], r["end_at"]
        steps = len(r["chunk_times"]) - 1
        running = max(decoding.mean_active(a, b), 1.0)
        lo, hi = bisect.bisect_left(starts, a - decoding.longest), bisect.bisect_right(starts, b)
        ctx = [c for (s, e), c in zip(decode[lo:hi], ctx_of[lo:hi]) if e > a]
        ctx_mean = sum(ctx) / len(ctx) if ctx else ctx_of[i]
        # prefills of other requests that finished inside this request's decode span stalled its steps
        lo_i, hi_i = bisect.bisect_right(firsts, a), bisect.bisect_right(firsts, b)
        prefill = sum(computed[lo_i:hi_i]) * flop_s / steps
        x.append([1.0, running, running * ctx_mean * kv_gpu / inputs.hbm_bw, prefill])
        y.append((b - a) / steps)
    X, Y = np.asarray(x), np.asarray(y)
    coef, *_ = np.linalg.lstsq(X, Y, rcond=None)
    fixed, per_seq, inv_mem, inv_compute = (float(v) for v in coef)
    mem = min(1.0, max(0.05, 1.0 / inv_mem)) if inv_mem > 0 else base.mem
    compute = min(1.0, max(0.05, 1.0 / inv_compute)) if inv_compute > 0 else base.compute
    per_seq = max(0.0, per_seq)
    tokens = max(1, round(float(np.median(X[:, 1]))))
    weights_s = timer.weight_bytes_read(tokens) / tp / (inputs.hbm_bw * mem)
    step_s = max(0.0, fixed - weights_s - base.per_layer_s * inputs.n_layers)
    fitted = X @ np.array([weights_s + step_s + base.per_layer_s * inputs.n_layers, per_seq, 1.0 / mem,
                           1.0 / compute])
    ss_res = float(((Y - fitted) ** 2).sum())
    ss_tot = float(((Y - Y.mean()) ** 2).sum())
    r2 = 1.0 - ss_res / ss_tot if ss_tot > 0 else 1.0
    mape = float(np.mean(np.abs(fitted - Y) / Y))
    eff = base.with_(mem=mem, compute=compute, step_s=step_s, per_seq_s=per_seq)
    flights = _Intervals((r["sent_at"], r["end_at"]) for r in rows if r.get("sent_at") is not None)
    idle: list[tuple[int, float]] = []
    for r in rows:
        if r.get("sent_at") is None or r["first_token_at"] <= r["sent_at"]:
            continue
        # itself covers the whole span (1.0); anything more means another request was in flight
        if flights.mean_active(r["sent_at"], r["first_token_at"]) - 1.0 < 0.05:
            prompt = max(1, (r.get("prompt_tokens") or 0) - (r.get("cached_tokens") or 0))
            idle.append((prompt, r["first_token_at"] - r["sent_at"]))
    overhead = eff.step_s + eff.per_layer_s * inputs.n_layers + eff.per_seq_s
    sizes = [p for p, _ in idle]
    if len(idle) >= 4 and max(sizes) >= 1.5 * min(sizes):
        # TTFT at an idle engine = frontend + overhead + prefill FLOPs / (peak x compute): intercept and slope
        flops = [(2.0 * inputs.params_active * p + 4.0 * inputs.n_layers * inputs.hidden * p * (p + 1) / 2)
                 / (tp * inputs.flops) for p in sizes]
        A = np.column_stack([np.ones(len(idle)), flops])
        (intercept, slope), *_ = np.linalg.lstsq(A, np.array([t for _, t in idle]), rcond=None)
        if slope > 0:
            eff = eff.with_(compute=min(1.0, max(0.05, 1.0 / float(slope))),
                            frontend_s=max(0.0, float(intercept) - overhead))
    elif idle:
        timer = RooflineTimer(inputs, tp=tp, ep=config.ep, efficiency=eff)
        rest = [t - timer.step_time(Batch(prefill_tokens=p, prefill_attn=p * (p + 1) / 2, new_seqs=1)) for p, t in idle]
        eff = eff.with_(frontend_s=max(0.0, float(np.median(rest))))
    return Calibration(efficiency=eff, samples=len(rows), r2=r2, mean_abs_pct_error=mape)
