"""Concurrency grids: InferenceX's geometric ranges (end always included) and lists (verbatim)."""

from __future__ import annotations

DEFAULT_STEP = 2


def expand_range(start: int, end: int, step: int = DEFAULT_STEP) -> list[int]:
    """`start, start·step, …`, clamping an overshoot to `end` so `end` is always a point (4..48 → 4 8 16 32 48)."""
    values: list[int] = []
    conc = start
    while conc <= end:
        values.append(conc)
        if conc == end:
            break
        conc *= step
        if conc > end:
            conc = end
    return values


def filter_list_min_max(values: list[int], min_conc: int | None, max_conc: int | None) -> list[int] | None:
    """Single-node list form under full-sweep filters; None = skip the entry.

    Filter by min (nothing left → skip), then by max; nothing ≤ max left → the synthesised point `[max]`.
    """
    out = list(values)
    if min_conc is not None:
        if min_conc <= 0:
            return None
        out = [c for c in out if c >= min_conc]
        if not out:
            return None
    if max_conc is not None:
        if max_conc <= 0:
            return None
        kept = [c for c in out if c <= max_conc]
        out = kept if kept else [max_conc]
    return out


def filter_range_min_max(
    start: int, end: int, step: int, min_conc: int | None, max_conc: int | None
) -> list[int] | None:
    """Single-node range form under full-sweep filters; None = skip the entry.

    `end < min` skips; else start := max(start, min) (which can create non-power-of-two points). `start > max`
    emits exactly `[max]`; else end := min(end, max).
    """
    if min_conc is not None:
        if min_conc <= 0 or end < min_conc:
            return None
        start = max(start, min_conc)
    if max_conc is not None:
        if max_conc <= 0:
            return None
        if start > max_conc:
            start = end = max_conc
        else:
            end = min(end, max_conc)
    return expand_range(start, end, step)


def filter_multinode_min_max(values: list[int], min_conc: int | None, max_conc: int | None) -> list[int] | None:
    """Multinode fixed-seq-len: expand first, then min (empty → skip), then max (empty → `[max]` if max > 0)."""
    out = list(values)
    if min_conc is not None:
        if min_conc <= 0:
            return None
        out = [c for c in out if c >= min_conc]
        if not out:
            return None
    if max_conc is not None:
        kept = [c for c in out if c <= max_conc]
        if kept:
            out = kept
        elif max_conc > 0:
            out = [max_conc]
        else:
            return None
    return out


def filter_agentic_min_max(values: list[int], min_conc: int | None, max_conc: int | None) -> list[int]:
    """Agentic: plain filtering, no synthesised points (an empty result skips the entry)."""
    out = list(values)
    if min_conc is not None:
        out = [c for c in out if c >= min_conc]
    if max_conc is not None:
        out = [c for c in out if c <= max_conc]
    return out
