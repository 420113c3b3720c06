"""Statistic blocks: one definition of mean, percentiles and spread for every metric.

Percentiles use linear interpolation between closest ranks (numpy "linear"), as AgentX does; std is the population
standard deviation. An empty sample gives count 0 and zeros (AgentX convention), never an exception.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

import numpy as np

PERCENTILES: tuple[float, ...] = (50, 75, 90, 95, 99, 99.9)


def pkey(p: float) -> str:
    """`p50`, `p99.9`: the key a percentile is stored under."""
    return f"p{p:g}"


def clean(values: np.ndarray, *, positive: bool = True) -> np.ndarray:
    """Drop non-finite values (and non-positive ones for latencies)."""
    values = np.asarray(values, dtype=np.float64) if values.dtype != np.float32 else values
    mask = np.isfinite(values)
    if positive:
        mask &= values > 0
    return values if mask.all() else values[mask]


def stat_block(values: np.ndarray) -> dict[str, float | int]:
    """count, mean, p50…p99.9, std, min, max of `values` (already cleaned)."""
    n = int(values.size)
    if n == 0:
        out: dict[str, float | int] = {"count": 0, "mean": 0.0}
        out.update({pkey(p): 0.0 for p in PERCENTILES})
        out.update({"std": 0.0, "min": 0.0, "max": 0.0})
        return out
    pct = np.percentile(values, PERCENTILES, method="linear")
    out = {"count": n, "mean": float(np.mean(values, dtype=np.float64))}
    out.update({pkey(p): float(v) for p, v in zip(PERCENTILES, pct, strict=True)})
    out["std"] = float(np.std(values, dtype=np.float64)) if n > 1 else 0.0
    out["min"] = float(np.min(values))
    out["max"] = float(np.max(values))
    return out


def inverted_block(values: np.ndarray) -> dict[str, float | int]:
    """Slow-tail inversion: pXX = 1/pXX(values), mean = 1/mean(values), std = pstdev(1/values).

    So "p90 interactivity" is the speed of the user at the slow p90 of time per token, not p90 of speeds.
    """
    base = stat_block(values)
    n = int(base["count"])
    out: dict[str, float | int] = {"count": n}
    for key in ("mean", *(pkey(p) for p in PERCENTILES)):
        v = float(base[key])
        out[key] = 1.0 / v if v > 0 else 0.0
    out["std"] = float(np.std(1.0 / values, dtype=np.float64)) if n > 1 else 0.0
    return out


class Column:
    """A growable float column built incrementally (compact `array`), viewed as numpy at the end."""

    def __init__(self, typecode: str = "d") -> None:
        self._data: array[float] = array(typecode)
        self.append: Callable[[float], None] = self._data.append
        """Append one value (the array's own method: this is the per-record hot path)."""

    def extend(self, values: np.ndarray | list[float]) -> None:
        if isinstance(values, np.ndarray):
            dtype = np.float32 if self._data.typecode == "f" else np.float64
            self._data.frombytes(np.ascontiguousarray(values, dtype=dtype).tobytes())
        else:
            self._data.extend(values)

    def concat(self, other: Column) -> None:
        self._data.extend(other._data)

    def __len__(self) -> int:
        return len(self._data)

    def numpy(self) -> np.ndarray:
        dtype = np.float32 if self._data.typecode == "f" else np.float64
        return np.frombuffer(self._data, dtype=dtype) if len(self._data) else np.zeros(0, dtype=dtype)


class SketchColumn:
    """A positive-latency column in bounded memory: exact while small, a log histogram beyond `exact_max` values.

    Count, mean, std, min and max stay exact (mean and std up to floating-point summation order); percentiles come
    from a histogram whose bins are 0.05 % wide, so they are within 0.025 % (relative) of numpy's linear ones — and
    equal to them while the column holds at most `exact_max` values, which it then keeps as float32 like `Column("f")`.
    Only positive finite values are kept (`clean`; with `keep_zero`, zeros too). Merging two sketches in file order
    gives the sketch of one pass.
    """

    RATIO = 1.0005
    LOW = 1e-9
    HIGH = 1e6
    BINS = int(np.ceil(np.log(HIGH / LOW) / np.log(RATIO))) + 2
    """Bin 0 holds values below LOW (1 ns), the last one values from HIGH on; percentiles there clamp to min/max."""

    def __init__(self, exact_max: int = 2_000_000, *, keep_zero: bool = False) -> None:
        self.exact_max = exact_max
        self.keep_zero = keep_zero
        """Keep zeros too (ITL: chunks that arrived in one read are 0 s apart, as the client saw them)."""
        self.count = 0
        self._mean = 0.0
        self._m2 = 0.0
        self.min = float("inf")
        self.max = float("-inf")
        self._raw: Column | None = Column("f")
        self._hist: np.ndarray | None = None

    def __len__(self) -> int:
        return self.count

    @property
    def exact(self) -> bool:
        """Whether every value is still held (percentiles exact)."""
        return self._raw is not None

    def extend(self, values: np.ndarray) -> None:
        v = np.asarray(values).astype(np.float32)
        keep = np.isfinite(v) & ((v >= 0) if self.keep_zero else (v > 0))
        if not keep.all():
            v = v[keep]
        if not v.size:
            return
        v64 = v.astype(np.float64)
        mean = float(v64.mean())
        self._moments(int(v.size), mean, float(np.square(v64 - mean).sum()))
        self.min = min(self.min, float(v.min()))
        self.max = max(self.max, float(v.max()))
        if self._raw is not None:
            self._raw.extend(v)
            if len(self._raw) > self.exact_max:
                self._fold()
        else:
            self._bin(v)

    def _moments(self, n: int, mean: float, m2: float) -> None:
        """Chan et al.'s pairwise update of count, mean and sum of squared deviations."""
        total = self.count + n
        delta = mean - self._mean
        self._mean += delta * n / total
        self._m2 += m2 + delta * delta * self.count * n / total
        self.count = total

    def _bin(self, v: np.ndarray) -> None:
        assert self._hist is not None
        low = np.maximum(v.astype(np.float64), self.LOW / 2)  # a kept zero goes to bin 0 (below LOW), not log(0)
        idx = np.floor(np.log(low / self.LOW) / np.log(self.RATIO)).astype(np.int64) + 1
        np.clip(idx, 0, self.BINS - 1, out=idx)
        self._hist += np.bincount(idx, minlength=self.BINS)

    def _fold(self) -> None:
        """Switch from the held values to the histogram."""
        assert self._raw is not None
        raw, self._raw = self._raw, None
        self._hist = np.zeros(self.BINS, dtype=np.int64)
        self._bin(raw.numpy())

    def merge(self, other: SketchColumn) -> None:
        """Append `other` (the sketch of the following part of the file)."""
        if not other.count:
            return
        self._moments(other.count, other._mean, other._m2)
        self.min = min(self.min, other.min)
        self.max = max(self.max, other.max)
        if self._raw is not None and other._raw is not None and self.count <= self.exact_max:
            self._raw.concat(other._raw)
            return
        if self._raw is not None:
            self._fold()
        assert self._hist is not None
        if other._raw is not None:
            self._bin(other._raw.numpy())
        else:
            assert other._hist is not None
            self._hist += other._hist

    def quantiles(self, ranks: np.ndarray) -> np.ndarray:
        """Values at 0-based fractional ranks (numpy's "linear" method between closest ranks)."""
        ranks = np.asarray(ranks, dtype=np.float64)
        if self._raw is not None:
            return np.asarray(np.percentile(self._raw.numpy(), ranks / max(self.count - 1, 1) * 100.0, method="linear"))
        assert self._hist is not None
        cum = np.cumsum(self._hist)
        lo = np.floor(ranks).astype(np.int64)
        frac = ranks - lo

        def at(rank: np.ndarray) -> np.ndarray:
            b = np.searchsorted(cum, rank, side="right")
            mid = self.LOW * self.RATIO ** (b - 0.5)  # geometric centre of the bin
            value = np.clip(mid, self.min, self.max)
            value = np.where(rank <= 0, self.min, value)
            return np.asarray(np.where(rank >= self.count - 1, self.max, value), dtype=np.float64)

        low = at(lo)
        return np.asarray(low + frac * (at(np.minimum(lo + 1, self.count - 1)) - low), dtype=np.float64)

    def stat_block(self) -> dict[str, float | int]:
        """The column's `stat_block`: identical to `stat_block(clean(values))` while exact; count, mean, std, min and
        max exact and percentiles within half a bin (0.025 %) beyond."""
        if self._raw is not None:
            return stat_block(self._raw.numpy())
        out: dict[str, float | int] = {"count": self.count, "mean": self._mean}
        pct = self.quantiles(np.array(PERCENTILES) / 100.0 * (self.count - 1))
        out.update({pkey(p): float(v) for p, v in zip(PERCENTILES, pct, strict=True)})
        out["std"] = float(np.sqrt(self._m2 / self.count)) if self.count > 1 else 0.0
        out["min"] = self.min
        out["max"] = self.max
        return out

    def numpy(self) -> np.ndarray:
        """The values while exact; beyond, `exact_max` values at evenly spaced ranks of the histogram (min and max
        included), so `stat_block(numpy())` has the sketch's percentiles and min/max but not its count — use
        `stat_block()` for that."""
        if self._raw is not None:
            return self._raw.numpy()
        size = min(self.count, self.exact_max)
        return self.quantiles(np.linspace(0.0, self.count - 1, size)).astype(np.float32)
