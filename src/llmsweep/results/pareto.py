"""Pareto frontiers, with the AgentX north-star rule. Pure functions over (id, x, y) points.

Throughput per GPU (maximise) is plotted against an x metric whose direction comes from its polarity: interactivity
is maximised, TTFT and E2E latency minimised, concurrency has no direction. The north-star rule (AgentX §4.2): the
canonical frontier is the one against P90 E2E-normalised interactivity; on any other x-axis a point is on the
frontier only if it is non-dominated in the displayed coordinates AND a north-star winner — Pareto of all eligible
points intersected with the winners, never Pareto of the winners only. A point without the north-star metric can
never be a winner. On an axis without a direction the frontier is the winners themselves.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

Direction = Literal["max", "min", "none"]
NORTH_STAR_X = "p90_e2e_norm_intvty"
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class XY:
    """A point in chart coordinates; `None`/NaN coordinates make it ineligible for any frontier."""

    id: str
    x: float | None
    y: float | None

    @property
    def finite(self) -> bool:
        return all(v is not None and math.isfinite(v) for v in (self.x, self.y))


def _sign(direction: Direction) -> float:
    return -1.0 if direction == "min" else 1.0


def dominates(a: XY, b: XY, x_dir: Direction = "max", y_dir: Direction = "max") -> bool:
    """True when `a` is at least as good as `b` on both axes and strictly better on one."""
    sx, sy = _sign(x_dir), _sign(y_dir)
    ax, ay, bx, by = sx * a.x, sy * a.y, sx * b.x, sy * b.y  # type: ignore[operator]
    return ax >= bx and ay >= by and (ax > bx or ay > by)


def pareto_front(points: Iterable[XY], x_dir: Direction = "max", y_dir: Direction = "max") -> list[str]:
    """Ids of the non-dominated points, sorted by x (ascending). Exact ties are all kept: neither dominates.

    O(n log n): sort by x best-first (ties broken by y best-first) and sweep, keeping every point whose y is at least
    the best y seen among points with strictly better x.
    """
    pts = [p for p in points if p.finite]
    if x_dir == "none":
        raise ValueError("pareto_front needs a direction on x; use agentx_frontier for direction-less axes")
    sx, sy = _sign(x_dir), _sign(y_dir)
    pts.sort(key=lambda p: (-sx * p.x, -sy * p.y))  # type: ignore[operator]
    front: list[XY] = []
    best_y = -math.inf  # best y among points with strictly better x
    i = 0
    while i < len(pts):
        j = i
        while j < len(pts) and pts[j].x == pts[i].x:
            j += 1
        group = pts[i:j]  # same x; best y first
        top = sy * group[0].y  # type: ignore[operator]
        if top > best_y:
            front.extend(p for p in group if sy * p.y == top)  # type: ignore[operator]
        best_y = max(best_y, top)
        i = j
    return [p.id for p in sorted(front, key=lambda p: (p.x, p.y))]


def agentx_frontier(on_axis: Sequence[XY], north_star: Sequence[XY], x_dir: Direction, y_dir: Direction = "max",
                    *, north_star_dir: Direction = "max") -> list[str]:
    """Frontier ids on a displayed axis under the north-star rule, sorted by displayed x.

    `on_axis` holds the points in displayed coordinates, `north_star` the same points against P90 E2E-normalised
    interactivity. Passing the north-star coordinates as `on_axis` yields the canonical frontier itself.
    """
    winners = set(pareto_front(north_star, north_star_dir, y_dir))
    by_id = {p.id: p for p in on_axis if p.finite}
    if x_dir == "none":
        chosen = [by_id[i] for i in winners if i in by_id]
    else:
        chosen = [by_id[i] for i in pareto_front(by_id.values(), x_dir, y_dir) if i in winners]
    return [p.id for p in sorted(chosen, key=lambda p: (p.x, p.y))]


T = TypeVar("T")


def group_by(items: Iterable[T], key: Callable[[T], K]) -> dict[K, list[T]]:
    """Stable grouping (insertion order of first appearance)."""
    groups: dict[K, list[T]] = defaultdict(list)
    for item in items:
        groups[key(item)].append(item)
    return dict(groups)


def frontiers_by_series(
    series_of: Mapping[str, str],
    values: Mapping[str, Mapping[str, float | None]],
    x_metric: str,
    x_dir: Direction,
    y_metric: str = "tput_per_gpu",
    *,
    north_star_metric: str = NORTH_STAR_X,
    north_star_dir: Direction = "max",
    eligible: Callable[[str], bool] = lambda _id: True,
    y_dir: Direction = "max",
) -> dict[str, list[str]]:
    """Per-series AgentX frontiers on one x metric; `y_dir` "min" for a lower-is-better y ($/Mtok, J/token);
    `north_star_dir` the direction in which `north_star_metric` is better (a latency's is "min").

    `series_of` maps point id → series key; `values` maps point id → metric name → value. Points for which
    `eligible` is False (results that did not earn a frontier: `frontier.earns_frontier`) are never on a frontier but
    stay in the data for the scatter.
    """
    out: dict[str, list[str]] = {}
    for series, ids in group_by(series_of, lambda i: series_of[i]).items():
        ok = [i for i in ids if eligible(i)]
        shown = [XY(i, values[i].get(x_metric), values[i].get(y_metric)) for i in ok]
        star = [XY(i, values[i].get(north_star_metric), values[i].get(y_metric)) for i in ok]
        out[series] = agentx_frontier(shown, star, x_dir, y_dir, north_star_dir=north_star_dir)
    return out
