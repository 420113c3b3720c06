"""Frontiers of result points: which x axes exist, how points form series, and who is on which frontier.

Series = (model, hardware, engine, precision, scenario, spec decoding, offload), image **and source**: measured,
simulated and predicted points never share a series, and unless `mix_sources` is set (`--mix-sources`) frontiers are
computed within one source only. A series one point of which was measured under two configurations (two recipe keys
of one point identity: `results.point.configurations`) is as many series, each named by what tells them apart
(`configurations_apart`), as `compare` refuses to pool them. Only a valid point stands on a frontier
(`earns_frontier`): smoke and invalid points stay in the data, drawn and marked, and a series without a valid point
has no frontier, which `no_frontier_why` says.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from llmsweep.metrics.model import MEASURED
from llmsweep.metrics.registry import HOT_BY_NAME
from llmsweep.results.identity import agentic_scenario
from llmsweep.results.pareto import NORTH_STAR_X, Direction, frontiers_by_series
from llmsweep.results.point import ResultPoint, configurations, telling_apart
from llmsweep.results.repeats import repeat_keys

K = TypeVar("K", bound=Hashable)

Y_METRIC = "tput_per_gpu"
FIXED_WINNER_X = "p90_intvty"
"""Winners shown on the concurrency axis for non-agentic series (the InferenceX fixed-length x metric)."""


@dataclass(frozen=True, slots=True)
class Axis:
    key: str
    label: str
    unit: str
    direction: Direction


def _axis(column: str, note: str = "") -> Axis:
    """An x axis over a hot column: label, unit and direction from the metric table."""
    c = HOT_BY_NAME[column]
    return Axis(c.name, c.label + note, c.unit, c.polarity)


X_AXES: tuple[Axis, ...] = (
    _axis(NORTH_STAR_X),
    _axis("p75_e2e_norm_intvty"),
    _axis("p90_intvty", " (1/P90 TPOT)"),
    _axis("p50_intvty", " (1/P50 TPOT)"),
    _axis("p90_ttft"),
    _axis("p90_e2el"),
    Axis("conc", "Concurrency", "users", "none"),
)
AXIS_BY_KEY = {a.key: a for a in X_AXES}


def y_direction(metric: str) -> Direction:
    """Which way a y metric is better, from the metric table (a metric it does not list: higher)."""
    column = HOT_BY_NAME.get(metric)
    return column.polarity if column is not None else "max"


def series_key(point: ResultPoint, *, mix_sources: bool = False, tag: str = "", variant: str = "") -> str:
    """Series of a point; `tag` separates overlaid runs (e.g. imported published points) from the main run. Points
    of two images are two series (an engine upgrade measured beside the old one is never one curve); `variant` (from
    `configurations_apart`) splits a series holding two configurations of one point."""
    key = _base_key(point, mix_sources, image=True) + (f"|{variant}" if variant else "")
    return f"{key}|{tag}" if tag else key


def _base_key(point: ResultPoint, mix_sources: bool, *, image: bool = False) -> str:
    return point.identity.series_key() + (f"|{point.identity.image}" if image else "") \
        + ("" if mix_sources else f"|{point.source}")


def images_apart(points: Iterable[ResultPoint], *, mix_sources: bool = False) -> set[str]:
    """The result ids whose series label must name its image: those of a series that another image's points share
    every other field with (`series_label(..., image=True)`)."""
    images: dict[str, set[str]] = {}
    points = list(points)
    for p in points:
        images.setdefault(_base_key(p, mix_sources), set()).add(p.identity.image)
    return {p.result_id for p in points if len(images[_base_key(p, mix_sources)]) > 1}


def configurations_apart(points: Iterable[ResultPoint], series_of: Mapping[str, str] | None = None, *,
                         mix_sources: bool = False) -> dict[str, str]:
    """Result id -> the variant (`recipe key dsr1-mtp3`) that splits its series (`series_of`, result id -> series
    key; by default `series_key`), for the series one point identity of which holds results of two configurations
    (`results.point.configurations`; a result that records none splits nothing, an eval-only one draws no point):
    one curve through both would let its frontier choose between them. The series' points go apart by the first
    facet that tells the configurations apart at every such point (`results.point.telling_apart`, as `compare` names
    them), each named by its own value; a point without one stays in the series as it was."""
    points = [p for p in points if not p.eval_only]
    keys = series_of if series_of is not None else {p.result_id: series_key(p, mix_sources=mix_sources)
                                                   for p in points}
    by_series: dict[str, list[ResultPoint]] = {}
    for p in points:
        by_series.setdefault(keys[p.result_id], []).append(p)
    out: dict[str, str] = {}
    for members in by_series.values():
        at: dict[str, list[ResultPoint]] = {}
        for p in members:
            at.setdefault(p.identity.key(), []).append(p)
        mixed = [groups for pts in at.values() if len(pts) > 1
                 and len(groups := [g for c, g in configurations(pts, sources_apart=not mix_sources).items() if c]) > 1]
        if not mixed:
            continue
        facet = telling_apart(*mixed)
        if facet is None:  # (the job id tells any two single results apart: only groups of repeats reach here)
            continue
        out.update({p.result_id: f"{facet.name} {value}" for p in members if (value := facet.of(p))})
    return out


@dataclass(frozen=True, slots=True)
class SeriesNames:
    """Each point's series among a set of points: its key and its label (result id -> each)."""

    keys: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)


def name_series(points: Iterable[ResultPoint], *, mix_sources: bool = False,
                tags: Mapping[str, str] | None = None) -> SeriesNames:
    """The series of every point (`tags`: result id -> the overlaid run it is drawn as, `series_key`'s `tag`), as
    every frontier and page draws them: points of two images or two configurations of one point apart, and a label
    that names the image where another image's series would read the same (`images_apart`) and the configuration
    where a series was split (`configurations_apart`)."""
    points = list(points)
    tags = tags or {}
    tagged = {p.result_id: series_key(p, mix_sources=mix_sources, tag=tags.get(p.result_id, "")) for p in points}
    variants = configurations_apart(points, tagged, mix_sources=mix_sources)
    image = images_apart(points, mix_sources=mix_sources)
    names = SeriesNames()
    for p in points:
        i, tag, variant = p.result_id, tags.get(p.result_id, ""), variants.get(p.result_id, "")
        names.keys[i] = series_key(p, mix_sources=mix_sources, tag=tag, variant=variant)
        names.labels[i] = series_label(p, mix_sources=mix_sources, tag=tag, image=i in image, variant=variant)
    return names


def listed_series(points: Sequence[ResultPoint]) -> dict[str, str]:
    """Each point's series label as `results list` and the CSV export name it (result id -> label): a run's series,
    its source a column of its own (so not in the label), the image and the configuration named where a run's
    series holds two, as its frontiers draw them apart (`name_series`)."""
    apart = images_apart(points, mix_sources=True)
    variants = configurations_apart(points, {p.result_id: f"{p.run_id}|{series_key(p)}" for p in points})
    return {p.result_id: series_label(p, mix_sources=True, image=p.result_id in apart,
                                      variant=variants.get(p.result_id, "")) for p in points}


def _estimated_acceptance(p: ResultPoint) -> float | None:
    """The acceptance length a simulated speculative point ran at when it is the simulator's estimate (the job would
    measure real acceptance on an engine), else None."""
    acceptance = p.summary.provenance.acceptance if p.summary is not None else None
    return acceptance.value if acceptance is not None and acceptance.estimated else None


def _shared(values: Sequence[str | None], what: str) -> str:
    """` · <what>` of a series' points: said as one value when every point has it, else as the values its points
    have and how many of them have one — never one point's value as the whole series'."""
    said = sorted({v for v in values if v is not None})
    if not said:
        return ""
    text = what.format(" / ".join(said))
    have = sum(v is not None for v in values)
    return f" · {text}" + ("" if have == len(values) else f" ({have} of {len(values)} points)")


def series_notes(points: Sequence[ResultPoint]) -> str:
    """What a series' label adds to its identity, from every point drawn in it (a run may hold several
    configurations of one series, e.g. two MTP step counts): the acceptance length the simulator estimated
    (`AL 3.39 est.`, its stand-in, not a measurement), a figure of the configuration it served. A warning of its
    points — what the simulator did not model of their jobs, the catalog estimates it modelled them with — is no
    part of the series' name: it is said once, as a warning (`sim_warnings`: the dashboard's banner and `⚠` mark,
    the tables' `⚠N`), where the label had repeated it in the legend, every banner line and summary.md row."""
    accepted = [f"{a:g}" if (a := _estimated_acceptance(p)) is not None else None for p in points]
    return _shared(accepted, "AL {} est.")


def series_labels(points: Iterable[ResultPoint], keys: Mapping[str, K],
                  labels: Mapping[str, str]) -> dict[K, str]:
    """Each series' label (series key -> label) as the dashboard, `results frontier` and `results list` title it:
    the name its points are given (`keys`, `labels`: result id -> series key and name, from
    `name_series` or `listed_series`) and what every point drawn in it adds (`series_notes`:
    `AL 3.39 est.` where the simulator estimated the acceptance length)."""
    members: dict[K, list[ResultPoint]] = {}
    for p in points:
        members.setdefault(keys[p.result_id], []).append(p)
    return {key: labels[mine[0].result_id] + series_notes(mine) for key, mine in members.items()}


ListedKey = tuple[str, str, str]
"""A listed series: (run id, its name as `listed_series` gives it, source)."""


def listed_series_labels(points: Sequence[ResultPoint]) -> tuple[dict[str, ListedKey], dict[ListedKey, str]]:
    """`results list`'s series: each result's (result id -> (run id, :func:`listed_series`' name, source): its source
    a column of its own) and each series' label with what its points add (:func:`series_labels`: `AL 3.39 est.`),
    as `results frontier` and the dashboard title it."""
    names = listed_series(points)
    keys = {p.result_id: (p.run_id, names[p.result_id], p.source) for p in points}
    return keys, series_labels(points, keys, names)


def labelled_listed_series(points: Sequence[ResultPoint]) -> dict[str, str]:
    """:func:`listed_series_labels` by result id (the CSV export's `series` column, as `results list --json`'s)."""
    keys, labels = listed_series_labels(points)
    return {rid: labels[key] for rid, key in keys.items()}


def series_label(point: ResultPoint, *, mix_sources: bool = False, tag: str = "", image: bool = False,
                 variant: str = "") -> str:
    """A series' label; `image`: name the image too (its last path part), where another image's series would read
    the same (`images_apart`); `variant`: the configuration a split series is named by (`configurations_apart`)."""
    label = point.identity.series_label()
    if image:
        label += f" · {point.identity.image_short}"
    if variant:
        label += f" · {variant}"
    if not mix_sources and point.source != MEASURED:
        label += f" [{point.source}]"
    return f"{label} ({tag})" if tag else label


def axis_value(point: ResultPoint, key: str) -> float | None:
    """A point's value on an x axis; concurrency comes from the identity, the rest from hot metrics."""
    return float(point.identity.conc) if key == "conc" else point.metric(key)


def is_agentic(point: ResultPoint) -> bool:
    return agentic_scenario(point.identity.scenario)


def earns_frontier(point: ResultPoint) -> bool:
    """Whether a result may stand on a frontier: a valid throughput point. A smoke result (sound, but a window too
    short to publish) and an invalid one (a gate failed) are drawn, marked, and never on a frontier: a frontier drawn
    through smoke points, where a series had nothing else, showed as a result what ran as a smoke test. An eval-only
    result has no throughput."""
    return point.verdict == "valid" and not point.eval_only


def no_frontier_why(points: Sequence[ResultPoint], axis: Axis, y_metric: str = Y_METRIC) -> str:
    """Why a series (its `points`) has no frontier on `axis` against `y_metric`: its results are evals; none of its
    points is valid while some are smoke (`earns_frontier`: `none of its 5 points is valid (5 smoke; …)`); none valid
    has the axis's value or the y metric; or — valid points with both — none has the metric that picks the winners
    (`compute_frontiers`): an agentic series' P90 E2E-normalised interactivity on every axis (the north-star rule), a
    fixed-length series' P90 interactivity on the concurrency axis. Saying "no valid point with Concurrency" of
    points that all have one sent the reader after the wrong metric."""
    drawn = [p for p in points if not p.eval_only]
    if not drawn:
        return "its results are evals"
    valid = [p for p in drawn if earns_frontier(p)]
    if not valid and any(p.verdict == "smoke" for p in drawn):
        rule = "a frontier is drawn from valid points only"
        if len(drawn) == 1:
            return f"its only point is {drawn[0].verdict}; {rule}"
        said = ", ".join(f"{n} {verdict}" for verdict, n in sorted(Counter(p.verdict for p in drawn).items()))
        return f"none of its {len(drawn)} points is valid ({said}); {rule}"
    with_x = [p for p in valid if axis_value(p, axis.key) is not None]
    if not with_x:
        return f"no valid point with {axis.label}"
    have = [p for p in with_x if p.metric(y_metric) is not None]
    if not have:
        column = HOT_BY_NAME.get(y_metric)
        return f"no valid point with {column.label if column is not None else y_metric}"
    agentic = is_agentic(have[0])
    star = NORTH_STAR_X if agentic else FIXED_WINNER_X if axis.direction == "none" else axis.key
    rule = ("which the north-star rule ranks an agentic series by on every x axis" if agentic
            else "which picks a fixed-length series' winners on the concurrency axis")
    return f"no valid point with {HOT_BY_NAME[star].label}, {rule}"


def compute_frontiers(points: Sequence[ResultPoint], axes: Sequence[Axis] = X_AXES, y_metric: str = Y_METRIC, *,
                      series_of: Mapping[str, str] | None = None,
                      mix_sources: bool = False) -> dict[str, dict[str, list[str]]]:
    """axis key → series key → frontier result ids (sorted by x).

    Agentic series follow the AgentX north-star rule. Other scenarios (fixed sequence length, where InferenceX has no
    such rule and published rows carry no E2E-normalised metric) use the plain Pareto frontier of the displayed axis;
    on the direction-less concurrency axis they show the P90-interactivity winners.
    `series_of` (result id → series key) overrides the default grouping, e.g. to keep overlaid runs apart.
    Whether a lower or a higher `y_metric` is better comes from the metric table (cost and energy per token: lower).
    Each point is one point: repeats of one (`run --repeats`) are combined first (`results.repeats.combine_repeats`),
    or the frontier would keep the luckiest repeat; a ValueError says so when they were not.
    """
    keys = [k for k in repeat_keys(points) if k is not None]
    if len(keys) != len(set(keys)):
        raise ValueError("compute_frontiers got repeats of one point as separate points: pass "
                         "`[r.point for r in combine_repeats(points)]`")
    series_of = dict(series_of) if series_of is not None else name_series(points, mix_sources=mix_sources).keys
    metrics = {a.key for a in axes} | {NORTH_STAR_X, FIXED_WINNER_X}
    values = {p.result_id: {**{m: axis_value(p, m) for m in metrics}, y_metric: p.metric(y_metric)} for p in points}
    valid = {p.result_id for p in points if earns_frontier(p)}
    agentic = {p.result_id for p in points if is_agentic(p)}
    y_dir = y_direction(y_metric)
    out: dict[str, dict[str, list[str]]] = {}
    for a in axes:
        star = frontiers_by_series({i: s for i, s in series_of.items() if i in agentic}, values, a.key, a.direction,
                                   y_metric, eligible=valid.__contains__, y_dir=y_dir)
        # a fixed-length series' winners are those of the axis itself, in its own direction (lower TTFT is
        # better); on the concurrency axis, those of InferenceX's fixed-length x metric (interactivity, higher)
        plain_star, plain_dir = (a.key, a.direction) if a.direction != "none" else (FIXED_WINNER_X, "max")
        plain = frontiers_by_series({i: s for i, s in series_of.items() if i not in agentic}, values, a.key,
                                    a.direction, y_metric, north_star_metric=plain_star, north_star_dir=plain_dir,
                                    eligible=valid.__contains__, y_dir=y_dir)
        out[a.key] = {**star, **plain}
    return out
