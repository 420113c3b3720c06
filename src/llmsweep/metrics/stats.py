"""Statistic blocks: one definition of mean, percentiles and spread for every metric.

Percentiles use linear interpolation between closest ranks (numpy "linear"), as AgentX does; std is the population
standard deviation. An empty sample gives count 0 and zeros (AgentX convention), never an exception.
"""

from __future__ import annotations

from array import array

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
        self._data = array(typecode)

    def append(self, value: float) -> None:
        self._data.append(value)

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
