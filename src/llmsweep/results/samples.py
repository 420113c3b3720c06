"""Per-request samples from raw records, and the statistics the noise bands resample.

Only successful profiling requests count (AgentX §3.1). Definitions follow AgentX §3.3: ITL = (E2EL − TTFT)/(OSL − 1)
for OSL ≥ 2; interactivity_q = 1/percentile_q(ITL) ("slow-tail inversion"); E2E-normalised interactivity_q =
1/percentile_q(E2EL/OSL). The statistics take index arrays so a bootstrap can resample requests without copying.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llmsweep.results.rundir import iter_jsonl

@dataclass(frozen=True, slots=True)
class Samples:
    """Column arrays over successful profiling requests (NaN where a value is undefined, e.g. TPOT for OSL 1)."""

    start: np.ndarray
    first_token: np.ndarray
    end: np.ndarray
    ttft: np.ndarray
    e2el: np.ndarray
    itl: np.ndarray
    e2el_per_token: np.ndarray
    prompt_tokens: np.ndarray
    completion_tokens: np.ndarray
    total: int
    """Finished profiling records (successful + failed; cancelled ones are not finished)."""

    @property
    def n(self) -> int:
        return int(self.start.size)

    @property
    def errors(self) -> int:
        return self.total - self.n


def is_success(record: Mapping[str, Any]) -> bool:
    """The client marks every failure with an `error_class`; HTTP status alone decides nothing."""
    return record.get("error_class") is None and not record.get("error")


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")


def samples_from_records(records: Iterable[Mapping[str, Any]]) -> Samples:
    """Turn record dicts into Samples with the metrics room's definitions (llmsweep.metrics.summary).

    E2EL runs to the last content chunk (else `end_at`); OSL is `completion_tokens` (else the sum of chunk tokens);
    throughput uses `end_at`.
    """
    rows: list[tuple[float, float, float, float, float, float]] = []
    total = 0
    for rec in records:
        if rec.get("phase", "profiling") != "profiling" or rec.get("error_class") == "cancelled":
            continue
        total += 1
        if not is_success(rec):
            continue
        chunks = rec.get("chunk_times") or ()
        osl = rec.get("completion_tokens")
        if osl is None:
            osl = sum(rec.get("chunk_tokens") or ())
        last = chunks[-1] if chunks else rec.get("end_at")
        rows.append((_num(rec.get("sent_at")), _num(rec.get("first_token_at")), _num(last),
                     _num(rec.get("end_at")), _num(rec.get("prompt_tokens") or 0), _num(osl)))
    arr = np.array(rows, dtype=float).reshape(-1, 6)
    start, first, last, end, ptok, ctok = arr.T
    with np.errstate(invalid="ignore", divide="ignore"):
        ttft = first - start
        e2el = last - start
        itl = np.where(ctok >= 2, (e2el - ttft) / (ctok - 1), np.nan)
        per_tok = np.where((ctok > 0) & (e2el > 0), e2el / ctok, np.nan)
    return Samples(start=start, first_token=first, end=end, ttft=ttft, e2el=e2el, itl=itl, e2el_per_token=per_tok,
                   prompt_tokens=ptok, completion_tokens=ctok, total=total)


def load_samples(records_path: Path) -> Samples | None:
    """Samples of a job's records.jsonl, or None when the file is missing or holds no successful request."""
    if not records_path.is_file():
        return None
    samples = samples_from_records(iter_jsonl(records_path))
    return samples if samples.n else None


def _pct(values: np.ndarray, q: float) -> float:
    finite = values[np.isfinite(values) & (values > 0)]
    return float(np.percentile(finite, q)) if finite.size else float("nan")


def _inv(x: float) -> float:
    return 1.0 / x if x > 0 and np.isfinite(x) else float("nan")


# A statistic maps (samples, request index array, gpus) to one number; the names match extract.HOT_METRICS.
Statistic = Callable[[Samples, np.ndarray, int], float]


def _tput(kind: str) -> Statistic:
    def stat(s: Samples, idx: np.ndarray, gpus: int) -> float:
        duration = float(np.nanmax(s.end) - np.nanmin(s.start)) if s.n else 0.0
        if duration <= 0:
            return float("nan")
        tokens = {"total": s.prompt_tokens + s.completion_tokens, "output": s.completion_tokens,
                  "input": s.prompt_tokens}[kind]
        # A resample keeps the request count and the measurement window; only which requests it holds varies.
        return float(np.nansum(tokens[idx]) / duration / max(gpus, 1))
    return stat


STATISTICS: dict[str, Statistic] = {
    "tput_per_gpu": _tput("total"),
    "output_tput_per_gpu": _tput("output"),
    "input_tput_per_gpu": _tput("input"),
    "p50_ttft": lambda s, i, g: _pct(s.ttft[i], 50),
    "p90_ttft": lambda s, i, g: _pct(s.ttft[i], 90),
    "p99_ttft": lambda s, i, g: _pct(s.ttft[i], 99),
    "p50_tpot": lambda s, i, g: _pct(s.itl[i], 50),
    "p90_tpot": lambda s, i, g: _pct(s.itl[i], 90),
    "p50_e2el": lambda s, i, g: _pct(s.e2el[i], 50),
    "p90_e2el": lambda s, i, g: _pct(s.e2el[i], 90),
    "p50_intvty": lambda s, i, g: _inv(_pct(s.itl[i], 50)),
    "p90_intvty": lambda s, i, g: _inv(_pct(s.itl[i], 90)),
    "p90_e2e_norm_intvty": lambda s, i, g: _inv(_pct(s.e2el_per_token[i], 90)),
    "p75_e2e_norm_intvty": lambda s, i, g: _inv(_pct(s.e2el_per_token[i], 75)),
}


def point_estimate(samples: Samples, metric: str, gpus: int) -> float:
    """The statistic over every request (what a summary should report, recomputed from raw records)."""
    return STATISTICS[metric](samples, np.arange(samples.n), gpus)
