"""Pareto frontiers and the AgentX north-star rule on hand-made points."""

from __future__ import annotations

import math

import pytest

from llmsweep.results.pareto import XY, agentx_frontier, dominates, frontiers_by_series, pareto_front
from llmsweep.results.point import ResultPoint


def test_dominated_points_are_excluded_and_front_is_sorted_by_x() -> None:
    pts = [XY("a", 10, 100), XY("b", 20, 80), XY("c", 15, 70), XY("d", 30, 10), XY("e", 5, 90)]
    # c is dominated by b (more x, more y); e by a.
    assert pareto_front(pts) == ["a", "b", "d"]


def test_exact_ties_are_all_kept_and_equal_x_keeps_only_best_y() -> None:
    pts = [XY("a", 10, 100), XY("twin", 10, 100), XY("lower", 10, 50), XY("b", 20, 100)]
    # b has more x and the same y: it dominates a and twin.
    assert pareto_front(pts) == ["b"]
    assert sorted(pareto_front([XY("a", 10, 100), XY("twin", 10, 100), XY("lower", 10, 50)])) == ["a", "twin"]


def test_single_point_and_empty_input() -> None:
    assert pareto_front([XY("only", 1, 1)]) == ["only"]
    assert pareto_front([]) == []


def test_points_without_coordinates_are_never_on_a_front() -> None:
    pts = [XY("a", None, 100), XY("b", math.nan, 5), XY("c", 1, 1)]
    assert pareto_front(pts) == ["c"]


def test_minimised_axis_prefers_lower_x() -> None:
    # x = TTFT (lower is better): the fast-but-low-throughput point and the slow-high one are both optimal.
    pts = [XY("fast", 0.2, 100), XY("slow", 1.0, 500), XY("bad", 1.2, 400)]
    assert pareto_front(pts, "min", "max") == ["fast", "slow"]
    assert dominates(XY("x", 0.1, 10), XY("y", 0.2, 10), "min", "max")
    assert not dominates(XY("x", 0.1, 10), XY("y", 0.1, 10), "min", "max")


def test_north_star_rule_excludes_points_that_only_win_on_the_displayed_axis() -> None:
    # On conventional interactivity, "z" is non-dominated; on E2E-normalised interactivity it is dominated by "a"
    # (its TTFT is terrible), so it must not be on the published frontier.
    shown = [XY("a", 50, 100), XY("z", 60, 90), XY("b", 30, 200)]
    star = [XY("a", 40, 100), XY("z", 20, 90), XY("b", 25, 200)]
    assert pareto_front(shown) == ["b", "a", "z"]
    assert agentx_frontier(shown, star, "max") == ["b", "a"]


def test_north_star_rule_is_intersection_not_pareto_of_winners() -> None:
    # a and b are north-star winners, but on the displayed axis a is dominated by the non-winner c:
    # Pareto(all) ∩ winners = {b}; Pareto(winners) would wrongly keep a.
    shown = [XY("a", 10, 100), XY("b", 5, 300), XY("c", 20, 150)]
    star = [XY("a", 10, 100), XY("b", 5, 300), XY("c", 1, 10)]
    assert agentx_frontier(shown, star, "max") == ["b"]


def test_point_without_north_star_metric_cannot_be_a_winner() -> None:
    shown = [XY("a", 10, 100), XY("no-trace", 50, 50)]
    star = [XY("a", 10, 100), XY("no-trace", None, 50)]
    assert pareto_front(shown) == ["a", "no-trace"]
    assert agentx_frontier(shown, star, "max") == ["a"]


def test_axis_without_direction_shows_the_winners() -> None:
    shown = [XY("a", 1, 100), XY("b", 8, 300), XY("c", 4, 50)]
    star = [XY("a", 40, 100), XY("b", 20, 300), XY("c", 10, 50)]
    assert agentx_frontier(shown, star, "none") == ["a", "b"]
    with pytest.raises(ValueError):
        pareto_front(shown, "none")


def test_frontiers_by_series_keeps_series_apart_and_skips_ineligible_points() -> None:
    series = {"a1": "A", "a2": "A", "b1": "B", "bad": "B"}
    values = {
        "a1": {"x": 10.0, "y": 100.0}, "a2": {"x": 5.0, "y": 50.0},
        "b1": {"x": 1.0, "y": 10.0}, "bad": {"x": 100.0, "y": 1000.0},
    }
    fronts = frontiers_by_series(series, values, "x", "max", "y", north_star_metric="x",
                                 eligible=lambda i: i != "bad")
    assert fronts == {"A": ["a1"], "B": ["b1"]}


def test_fixed_length_series_use_plain_pareto_and_agentic_ones_the_north_star(make_run) -> None:
    import dataclasses

    from llmsweep.results.frontier import AXIS_BY_KEY, compute_frontiers
    from llmsweep.results.point import points_from_run

    agentic = points_from_run(make_run("ag", concs=(1, 4, 16)))
    # Published fixed-length rows carry no E2E-normalised interactivity.
    fixed = [dataclasses.replace(p, result_id=p.result_id + "f",
                                 identity=dataclasses.replace(p.identity, scenario="fixed-1k1k"),
                                 metrics={**p.metrics, "p90_e2e_norm_intvty": None}) for p in agentic]
    no_trace = [dataclasses.replace(p, result_id=p.result_id + "n", metrics={**p.metrics, "p90_e2e_norm_intvty": None})
                for p in agentic]
    axes = [AXIS_BY_KEY["p90_intvty"], AXIS_BY_KEY["conc"]]
    fronts = compute_frontiers(fixed, axes)
    (ids,) = fronts["p90_intvty"].values()
    assert ids  # plain Pareto: a frontier without the AgentX metric
    assert next(iter(fronts["conc"].values()))
    agentic_fronts = compute_frontiers(no_trace, axes)["p90_intvty"]
    assert agentic_fronts and all(v == [] for v in agentic_fronts.values())  # agentic, no north-star metric: no winner


def test_cost_and_energy_per_token_frontiers_prefer_the_lower_value(make_run) -> None:
    """$/Mtok and J/token on y: the metric table says lower is better, so the frontier keeps the cheapest points,
    never the most expensive ones (which a higher-is-better frontier would pick)."""
    import dataclasses

    from llmsweep.results.frontier import AXIS_BY_KEY, compute_frontiers, y_direction
    from llmsweep.results.point import points_from_run

    assert y_direction("usd_per_mtok_output") == y_direction("joules_per_output_token") == "min"
    assert y_direction("tokens_per_joule") == y_direction("tput_per_gpu") == "max"
    base = points_from_run(make_run("cost", concs=(1, 4)))[0]
    # Same interactivity; the cheap point costs 1 $/Mtok, the dear one 5: only the cheap one is on the frontier.
    cheap, dear = (dataclasses.replace(base, result_id=rid, metrics={
        **base.metrics, "usd_per_mtok_output": usd, "joules_per_output_token": usd / 10})
        for rid, usd in (("cheap", 1.0), ("dear", 5.0)))
    for y in ("usd_per_mtok_output", "joules_per_output_token"):
        fronts = compute_frontiers([cheap, dear], [AXIS_BY_KEY["p90_intvty"]], y_metric=y)
        assert list(fronts["p90_intvty"].values()) == [["cheap"]], (y, fronts)


def test_a_fixed_length_series_keeps_its_fastest_points_on_a_latency_axis(make_run) -> None:
    """Lower TTFT/E2E latency is better: on those axes a fixed-length series whose latency and throughput both rise
    with concurrency is all frontier. Its winners were picked as if higher latency were better, so only the slowest
    point survived."""
    import dataclasses

    from llmsweep.results.frontier import AXIS_BY_KEY, compute_frontiers
    from llmsweep.results.point import points_from_run

    base = points_from_run(make_run("fx", concs=(1, 4, 16)))
    rising = [dataclasses.replace(p, result_id=f"c{p.identity.conc}",
                                  identity=dataclasses.replace(p.identity, scenario="fixed-1k1k"),
                                  metrics={**p.metrics, "p90_ttft": 0.1 * p.identity.conc,
                                           "p90_e2el": 1.0 + p.identity.conc,
                                           "tput_per_gpu": 100.0 * p.identity.conc})
              for p in base]
    for axis in ("p90_ttft", "p90_e2el"):
        assert AXIS_BY_KEY[axis].direction == "min"
        (ids,) = compute_frontiers(rising, [AXIS_BY_KEY[axis]])[axis].values()
        assert ids == ["c1", "c4", "c16"], (axis, ids)


def test_two_images_of_one_configuration_are_two_series_each_named_by_its_image(make_run) -> None:
    """An engine upgrade measured beside the old image (two recipe keys that differ only in image) had been one
    series with one label, its frontier choosing between images; they are two, and only where they would read the
    same does a label name its image."""
    from llmsweep.results.frontier import AXIS_BY_KEY, compute_frontiers, images_apart, series_key, series_label
    from llmsweep.results.point import points_from_run

    old = points_from_run(make_run("old", concs=(1, 4)))
    new = points_from_run(make_run("new", concs=(1, 4), image="lmsysorg/sglang-rocm:v0.5.17-rocm720-mi30x-20260901"))
    other = points_from_run(make_run("other", concs=(1,), model="deepseek-ai/DeepSeek-R1-0528"))
    points = old + new + other
    fronts = compute_frontiers(points, [AXIS_BY_KEY["conc"]])["conc"]
    assert len(fronts) == 3
    for series, ids in fronts.items():
        runs = {p.run_id for p in points if p.result_id in ids}
        assert len(runs) <= 1, (series, runs)  # no frontier mixes the two images
    apart = images_apart(points)
    assert apart == {p.result_id for p in old + new}
    labels = {series_label(p, image=p.result_id in apart) for p in points}
    assert len(labels) == 3 and any("v0.5.17" in label for label in labels)
    assert not any("sglang-rocm" in series_label(p, image=p.result_id in apart) for p in other)
    assert series_key(old[0]) != series_key(new[0])


def _configured(p: ResultPoint, run_id: str, recipe_key: str, launch: str, source: str | None = None) -> ResultPoint:
    """`p` as run `run_id` measured it under recipe key `recipe_key` (its launch fingerprint `launch`, the load its
    summary records): a result that records its configuration (`ResultPoint.configuration`)."""
    import dataclasses

    from llmsweep.results.point import result_id_for

    assert p.summary is not None
    prov = p.summary.provenance
    options = {"concurrency": p.identity.conc, "duration_s": 600.0}
    summary = p.summary.model_copy(update={"provenance": prov.model_copy(update={"options": options})})
    job_id = f"{p.job_id}-{recipe_key}"
    return dataclasses.replace(p, run_id=run_id, job_id=job_id, result_id=result_id_for(run_id, job_id),
                               summary=summary, source=source or p.source,
                               provenance={**p.provenance, "recipe_key": recipe_key, "clock": "wall",
                                           "launch": {"fingerprint": f"{launch}-conc{p.identity.conc}"}})


def test_two_configurations_of_one_point_are_two_series_each_named_by_what_differs(make_run) -> None:
    """mixk: a run measured conc 8 under two recipe keys (MTP K=3 and K=1, the same point identity): one curve
    through both let its frontier choose between configurations, as `compare` refuses to pool them. They are two
    series, each named by its recipe key; a series without two configurations of one point is as it was."""
    from llmsweep.results.frontier import AXIS_BY_KEY, compute_frontiers, series_key
    from llmsweep.results.point import points_from_run

    base = points_from_run(make_run("mixk", concs=(1, 8, 16), scenario="fixed-seq-len"))
    k3 = [_configured(p, "mixk", "dsr1-mtp3", "k3") for p in base if p.identity.conc in (1, 8)]
    k1 = [_configured(p, "mixk", "dsr1-mtp1", "k1") for p in base if p.identity.conc in (8, 16)]
    points = k3 + k1
    assert len({series_key(p) for p in points}) == 1  # one series key: the split is the set's, not the point's
    fronts = compute_frontiers(points, [AXIS_BY_KEY["conc"]])["conc"]
    assert len(fronts) == 2, fronts
    for ids in fronts.values():  # no frontier mixes the two configurations
        assert len({p.provenance["recipe_key"] for p in points if p.result_id in ids}) == 1
    from llmsweep.results.frontier import configurations_apart, name_series

    names = name_series(points)
    assert {names.labels[p.result_id].rsplit(" · ", 1)[1] for p in k3} == {"recipe key dsr1-mtp3 [simulated]"}
    assert {names.labels[p.result_id].rsplit(" · ", 1)[1] for p in k1} == {"recipe key dsr1-mtp1 [simulated]"}
    # two configurations at different points only (no point measured twice): one series, labelled as before
    apart = [_configured(p, "r", "dsr1-mtp3" if p.identity.conc == 1 else "dsr1-mtp1", "x") for p in base]
    assert configurations_apart(apart) == {} and len(compute_frontiers(apart, [AXIS_BY_KEY["conc"]])["conc"]) == 1
    # a point measured and simulated under one launch, drawn together as --mix-sources asks: not split
    both = [_configured(p, "r", "k", "x", source=s) for p in base[:1] for s in ("measured", "simulated")]
    assert configurations_apart(both, mix_sources=True) == {}
    assert len(compute_frontiers(both, [AXIS_BY_KEY["conc"]], mix_sources=True)["conc"]) == 1


def test_only_valid_points_stand_on_a_frontier_smoke_ones_never(make_run) -> None:
    """A smoke point (a window too short to publish) stood on a frontier, and a series of nothing else had one drawn
    through its smoke points. A frontier is drawn from valid points only; a series without one says why."""
    import dataclasses

    from llmsweep.results.frontier import X_AXES, compute_frontiers, earns_frontier, no_frontier_why
    from llmsweep.results.point import points_from_run

    points = points_from_run(make_run("short", concs=(1, 4, 16)))
    fronts = compute_frontiers(points)
    assert all(len(ids) == 3 for by in fronts.values() for ids in by.values())  # all valid: each on every frontier
    smoke = [dataclasses.replace(p, verdict="smoke", reasons=("smoke run: profile window 120 s is shorter than 900 s",))
             for p in points]
    assert [earns_frontier(p) for p in (points[0], smoke[0])] == [True, False]
    # one smoke point beside valid ones: left off every frontier, whatever it out-ran
    mixed = compute_frontiers([smoke[2], *points[:2]])
    assert all(smoke[2].result_id not in ids and ids for by in mixed.values() for ids in by.values()), mixed
    # every point smoke: no frontier at all, and why
    assert all(ids == [] for by in compute_frontiers(smoke).values() for ids in by.values())
    for axis in X_AXES:
        assert no_frontier_why(smoke, axis) == ("none of its 3 points is valid (3 smoke); a frontier is drawn from "
                                                "valid points only")
    assert no_frontier_why(smoke[:1], X_AXES[0]) == ("its only point is smoke; a frontier is drawn from valid points "
                                                     "only")
    invalid = [dataclasses.replace(p, verdict="invalid") for p in points]
    assert no_frontier_why([*invalid[:2], smoke[2]], X_AXES[0]) == (
        "none of its 3 points is valid (2 invalid, 1 smoke); a frontier is drawn from valid points only")
    # a series of invalid points says what it said before
    assert no_frontier_why(invalid, X_AXES[0]) == "no valid point with P90 E2E-normalised interactivity"
