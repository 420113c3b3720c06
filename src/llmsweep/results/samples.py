"""Per-request samples from raw records, and the statistics the noise bands resample.

Only successful profiling requests count (AgentX §3.1). The definitions are the metrics room's (`metrics.summary`):
TPOT = (E2EL − TTFT)/(OSL − 1) for OSL ≥ 2; interactivity_q = 1/percentile_q(TPOT) ("slow-tail inversion");
E2E-normalised interactivity_q = 1/percentile_q(E2EL/OSL). Which statistic of which column each hot metric is comes
from the metric table (`metrics.registry`: a metric's `Sample` and stored `stats`). The statistics take index arrays
so a bootstrap can resample requests without copying.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llmsweep.metrics.registry import HOT_COLUMNS, HotColumn, SampleColumn
from llmsweep.metrics.stats import clean
from llmsweep.results.order_stats import percentile_bootstrap_sd
from llmsweep.results.rundir import iter_jsonl


@dataclass(frozen=True, slots=True)
class Samples:
    """Column arrays over successful profiling requests (NaN where a value is undefined, e.g. TPOT for OSL 1)."""

    start: np.ndarray
    first_token: np.ndarray
    end: np.ndarray
    ttft: np.ndarray
    e2el: np.ndarray
    tpot: np.ndarray
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

    @property
    def window(self) -> float:
        """The measurement window a rate divides by, as the summary's throughput does: the first send to the last end
        of the successful requests, s (0 with none)."""
        return float(np.nanmax(self.end) - np.nanmin(self.start)) if self.n else 0.0

    def column(self, name: SampleColumn) -> np.ndarray:
        """A sample column of the metric table by name."""
        if name == "input_tokens":
            return self.prompt_tokens
        if name == "output_tokens":
            return self.completion_tokens
        if name == "total_tokens":
            both: np.ndarray = self.prompt_tokens + self.completion_tokens
            return both
        if name == "ttft":
            return self.ttft
        if name == "tpot":
            return self.tpot
        if name == "e2el":
            return self.e2el
        return self.e2el_per_token


def is_success(record: Mapping[str, Any]) -> bool:
    """The client marks every failure with an `error_class`; HTTP status alone decides nothing."""
    return record.get("error_class") is None and not record.get("error")


def _num(value: Any) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")


def samples_from_records(records: Iterable[Mapping[str, Any]]) -> Samples:
    """Turn record dicts into Samples with the metrics room's definitions (llmsweep.metrics.summary).

    E2EL runs to the last content chunk (else `end_at`); OSL is `completion_tokens` (else the sum of chunk tokens);
    ISL is `prompt_tokens` (else the workload's intended `input_tokens_expected`, else 0); throughput uses `end_at`.
    """
    from llmsweep.metrics.accumulate import implausible_times

    rows: list[tuple[float, float, float, float, float, float]] = []
    total = 0
    for rec in records:
        if rec.get("phase", "profiling") != "profiling" or rec.get("error_class") == "cancelled":
            continue
        chunks = rec.get("chunk_times") or ()
        if implausible_times(rec.get("sent_at"), rec.get("first_token_at"), rec.get("end_at"),
                             chunks[-1] if chunks else None):
            continue  # left out of every figure, as the summary leaves it (`requests.implausible`)
        total += 1
        if not is_success(rec):
            continue
        osl = rec.get("completion_tokens")
        if osl is None:
            osl = sum(rec.get("chunk_tokens") or ())
        isl = rec.get("prompt_tokens")
        if isl is None:
            isl = rec.get("input_tokens_expected") or 0
        last = chunks[-1] if chunks else rec.get("end_at")
        rows.append((_num(rec.get("sent_at")), _num(rec.get("first_token_at")), _num(last),
                     _num(rec.get("end_at")), _num(isl), _num(osl)))
    arr = np.array(rows, dtype=float).reshape(-1, 6)
    start, first, last, end, ptok, ctok = arr.T
    with np.errstate(invalid="ignore", divide="ignore"):
        ttft = first - start
        e2el = last - start
        tpot = np.where(ctok >= 2, (e2el - ttft) / (ctok - 1), np.nan)
        per_tok = np.where((ctok > 0) & (e2el > 0), e2el / ctok, np.nan)
    return Samples(start=start, first_token=first, end=end, ttft=ttft, e2el=e2el, tpot=tpot, e2el_per_token=per_tok,
                   prompt_tokens=ptok, completion_tokens=ctok, total=total)


def load_samples(records_path: Path) -> Samples | None:
    """Samples of a job's records.jsonl, or None when the file is missing or holds no successful request."""
    if not records_path.is_file():
        return None
    samples = samples_from_records(iter_jsonl(records_path))
    return samples if samples.n else None


def _pct(values: np.ndarray, q: float) -> float:
    finite = clean(values)  # the values the summary's percentiles take (`metrics.stats.clean`): finite, positive
    return float(np.percentile(finite, q)) if finite.size else float("nan")


def _inv(x: float) -> float:
    return 1.0 / x if x > 0 and np.isfinite(x) else float("nan")


# A statistic maps (samples, request index array, gpus) to one number.
Statistic = Callable[[Samples, np.ndarray, int], float]


def _percentile(stat: str) -> float:
    return float(stat.removeprefix("p"))


def statistic(column: HotColumn) -> Statistic | None:
    """How a hot column is recomputed from per-request samples (its metric's `Sample`), or None when it has none."""
    sample = column.metric.sample
    if sample is None:
        return None
    name = sample.column
    if sample.kind == "tokens_per_second_per_gpu":
        def rate(s: Samples, idx: np.ndarray, gpus: int) -> float:
            duration = s.window
            if duration <= 0:
                return float("nan")
            # A resample keeps the request count and the measurement window; only which requests it holds varies.
            return float(np.nansum(s.column(name)[idx]) / duration / max(gpus, 1))
        return rate
    if column.stat is None:
        return None
    q = _percentile(column.stat)
    if sample.kind == "inverse_percentile":
        return lambda s, i, g: _inv(_pct(s.column(name)[i], q))
    return lambda s, i, g: _pct(s.column(name)[i], q)


STATISTICS: dict[str, Statistic] = {c.name: stat for c in HOT_COLUMNS if (stat := statistic(c)) is not None}
"""Every hot column the noise bands can resample, by column name (derived from the metric table)."""

# A spread maps (samples, gpus) to the standard deviation of a statistic over every resample of the requests.
Spread = Callable[[Samples, int], float]


def spread(column: HotColumn) -> Spread | None:
    """The exact bootstrap standard deviation of a hot column's statistic (`statistic`) over every resample of the
    requests with replacement — what a Monte Carlo bootstrap estimates with infinitely many resamples, without its
    seed: a rate's is the sum's, √(n·var) / window / GPUs (the window is fixed); a percentile's comes from the exact
    distribution of the resampled order statistics (`order_stats`), over the finite positive values as `_pct` takes
    them (`metrics.stats.clean`; their count held at this run's). None where the column has no statistic."""
    sample = column.metric.sample
    if sample is None or statistic(column) is None:
        return None
    name = sample.column
    if sample.kind == "tokens_per_second_per_gpu":
        def rate_sd(s: Samples, gpus: int) -> float:
            duration = s.window
            if duration <= 0 or s.n < 2:
                return float("nan")
            values = np.nan_to_num(s.column(name), nan=0.0)  # nansum: an undefined value adds nothing
            return math.sqrt(s.n * float(values.var())) / duration / max(gpus, 1)
        return rate_sd
    assert column.stat is not None  # `statistic` has one
    q, inverse = _percentile(column.stat), sample.kind == "inverse_percentile"

    def percentile_sd(s: Samples, gpus: int) -> float:
        return percentile_bootstrap_sd(clean(s.column(name)), q, inverse=inverse)
    return percentile_sd


SPREADS: dict[str, Spread] = {c.name: sd for c in HOT_COLUMNS if (sd := spread(c)) is not None}
"""Every hot column's exact bootstrap spread (`spread`), by column name: the same columns as `STATISTICS`."""


def point_estimate(samples: Samples, metric: str, gpus: int) -> float:
    """The statistic over every request (what a summary should report, recomputed from raw records)."""
    return STATISTICS[metric](samples, np.arange(samples.n), gpus)
