"""Noise bands: how much a metric moves by chance, within one run and between runs.

Within-run: the spread of the statistic over every resample of a result's requests with replacement — the bootstrap,
computed exactly (`samples.spread`), not drawn: no seed, no Monte Carlo error (200 seeded resamples had swung a P90
band over 64 requests by 2.5x between seeds, and the verdict with it). It says how precisely one run pins its own
value, not whether a second run would agree.

Between-run: the pooled variance of the per-run values of the same point across repeat groups (A's repeats, B's
repeats, earlier stored runs of A's point). Pooling within groups keeps the A→B change itself out of the noise
estimate. Only a between-run band is strong enough to call a change a regression or an improvement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from llmsweep.results.samples import SPREADS, Samples

BandKind = Literal["within-run", "between-run"]

# Two-sided 95 % Student-t quantiles by degrees of freedom (1..30), as the tables print them.
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042)
Z975 = 1.959964


def t975(dof: int) -> float:
    """The two-sided 95 % Student-t quantile at `dof` degrees of freedom: the table to 30, beyond it the Cornish-Fisher
    expansion about the normal quantile (Abramowitz & Stegun 26.7.5; within 1e-5 of the exact quantile from 30 on:
    2.021 at 40, 2.000 at 60, 1.980 at 120). It had dropped to the normal 1.96 past 30 — a band 3 % narrower than
    the t quantile at 31 to 40 degrees of freedom, which a long history of earlier runs reaches."""
    if dof < 1:
        return Z975  # no degrees of freedom: callers give no t band then; the normal quantile as a defined value
    if dof <= len(_T975):
        return _T975[dof - 1]
    z = Z975
    terms = ((z ** 3 + z) / 4,
             (5 * z ** 5 + 16 * z ** 3 + 3 * z) / 96,
             (3 * z ** 7 + 19 * z ** 5 + 17 * z ** 3 - 15 * z) / 384,
             (79 * z ** 9 + 776 * z ** 7 + 1482 * z ** 5 - 1920 * z ** 3 - 945 * z) / 92160)
    return z + sum(g / float(dof) ** k for k, g in enumerate(terms, 1))


@dataclass(frozen=True, slots=True)
class Band:
    """A symmetric 95 % band on a delta: the delta is noise when |delta| ≤ half_width."""

    half_width: float
    kind: BandKind
    runs: int
    """Runs that informed it (1 per side for within-run)."""


def bootstrap_sd(samples: Samples, metric: str, gpus: int) -> float:
    """Standard deviation of `metric` over every resample of the requests (the exact bootstrap, `samples.SPREADS`);
    NaN when the statistic is undefined."""
    if samples.n < 2 or metric not in SPREADS:
        return float("nan")
    sd = SPREADS[metric](samples, gpus)
    return sd if math.isfinite(sd) else float("nan")


def error_ratio_sd(samples: Samples) -> float:
    """Standard error of a run's error ratio (failed / finished profiling requests) as a binomial proportion; NaN
    without a finished request. The error ratio has no per-request statistic to resample, and without this floor a
    baseline whose repeats all failed nothing (a between-run variance of 0) called one failed request a regression."""
    if samples.total <= 0:
        return float("nan")
    p = samples.errors / samples.total
    return math.sqrt(p * (1 - p) / samples.total)


def within_run_band(sd_a: float, sd_b: float, n_a: int = 1, n_b: int = 1) -> Band | None:
    """95 % band on mean(B) − mean(A) from the two independent bootstrap spreads of one run each, the sides the means
    of `n_a` and `n_b` runs: a mean of n runs, each its own sample of requests, has 1/√n of one run's sampling noise."""
    if not (math.isfinite(sd_a) and math.isfinite(sd_b)):
        return None
    return Band(Z975 * math.sqrt(sd_a ** 2 / max(n_a, 1) + sd_b ** 2 / max(n_b, 1)), "within-run", 2)


@dataclass(frozen=True, slots=True)
class RunValue:
    """A metric's value in one result, as a sample of run-to-run variance: the mean of `n` runs (an imported row of
    a point measured n times, `results.repeats.mean_of`; 1 for one run's result) and those runs' sample standard
    deviation where it is known (`sd`)."""

    value: float
    n: int = 1
    sd: float | None = None


def _runs(values: Sequence[float | RunValue]) -> list[RunValue]:
    """The finite values, each as a `RunValue` (a plain number is one run's)."""
    runs = [v if isinstance(v, RunValue) else RunValue(v) for v in values if v is not None]
    return [r for r in runs if math.isfinite(r.value) and r.n >= 1]


def pooled_variance(groups: Sequence[Sequence[float | RunValue]]) -> tuple[float, int]:
    """(pooled within-group variance, degrees of freedom); dof 0 means no group had a repeat.

    The one-way analysis of variance of the runs behind the values: a value that is the mean of n runs weighs n
    around its group's mean, and where their sd is known it adds (n − 1)·sd² and n − 1 degrees of freedom — the
    spread of the repeats it averages, which a mean counted as one run would have thrown away."""
    ss, dof = 0.0, 0
    for g in groups:
        vals = _runs(g)
        for r in vals:
            if r.n > 1 and r.sd is not None and math.isfinite(r.sd):
                ss += (r.n - 1) * r.sd ** 2
                dof += r.n - 1
        if len(vals) >= 2:
            mean = sum(r.n * r.value for r in vals) / sum(r.n for r in vals)
            ss += sum(r.n * (r.value - mean) ** 2 for r in vals)
            dof += len(vals) - 1
    return (ss / dof if dof else float("nan")), dof


def runs_mean(values: Sequence[float | RunValue]) -> float | None:
    """The mean of every run behind the values (a mean of n runs weighs n); None without a finite value."""
    runs = _runs(values)
    return sum(r.n * r.value for r in runs) / sum(r.n for r in runs) if runs else None


def runs_count(values: Sequence[float | RunValue]) -> int:
    """How many runs the finite values are the means of."""
    return sum(r.n for r in _runs(values))


def between_run_band(runs_a: Sequence[float | RunValue], runs_b: Sequence[float | RunValue],
                     history: Sequence[float | RunValue] = (), within: Band | None = None) -> Band | None:
    """95 % band on mean(B) − mean(A) from run-to-run variance; None without any repeat.

    A side's mean is of every run behind its values (`runs_mean`: a value that is the mean of n runs counts n). The
    t band is on the difference of the two means, t × √(pooled variance × (1/n_A + 1/n_B)).
    `history` holds earlier runs of A's point (same identity): they join A's group for the variance estimate but not
    A's mean. Never narrower than `within`, the sampling noise of the two means (`within_run_band` of the sides' run
    counts): a few lucky repeats must not shrink it below that. A floor at one run's sampling noise would be √n too
    wide for means of n runs, and more repeats could never narrow the band below it.
    """
    var, dof = pooled_variance([[*runs_a, *history], runs_b])
    n_a, n_b = runs_count(runs_a), runs_count(runs_b)
    if not dof or not n_a or not n_b:
        return None
    half = t975(dof) * math.sqrt(var * (1 / n_a + 1 / n_b))
    if within is not None:
        half = max(half, within.half_width)
    return Band(half, "between-run", n_a + n_b + runs_count(history))
