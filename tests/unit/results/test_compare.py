"""Comparison: full-identity matching, source separation, and verdicts that only between-run bands may make."""

from __future__ import annotations

import dataclasses
from typing import Literal

import pytest

from llmsweep.results.bands import between_run_band, pooled_variance, t975, within_run_band
from llmsweep.results.compare import compare_points
from llmsweep.results.point import ResultPoint, configurations, points_from_run, telling_apart


def _scaled(p: ResultPoint, run_id: str, factor: float, metric: str = "tput_per_gpu") -> ResultPoint:
    """The same point in another run, with one metric scaled (records stay those of the original run)."""
    metrics = dict(p.metrics)
    value = p.metrics[metric]
    assert value is not None
    metrics[metric] = value * factor
    return dataclasses.replace(p, run_id=run_id, result_id=f"{p.result_id}-{run_id}", metrics=metrics)


def test_points_match_on_full_identity_and_ignored_fields_are_named(make_run) -> None:
    a = points_from_run(make_run("a", concs=(1, 4)))
    b = points_from_run(make_run("b", concs=(4, 8), image="lmsysorg/sglang-rocm:v0.5.17"))
    comp = compare_points(a, b)
    assert comp.matched == ()  # a different image is a different experiment
    assert len(comp.only_a) == 2 and len(comp.only_b) == 2
    relaxed = compare_points(a, b, ignore=["image"])
    assert [m.a[0].identity.conc for m in relaxed.matched] == [4]
    assert relaxed.ignored_fields == ("image",)
    assert any("ignoring: image" in n for n in relaxed.notes)


def test_pp_and_offload_take_part_in_matching(make_run) -> None:
    a = points_from_run(make_run("a", concs=(4,)))
    b = [dataclasses.replace(p, identity=dataclasses.replace(p.identity, pp=2)) for p in a]
    c = [dataclasses.replace(p, identity=dataclasses.replace(p.identity, offload="cpu")) for p in a]
    assert compare_points(a, b).matched == ()
    assert compare_points(a, c).matched == ()


def test_sources_are_not_mixed_unless_asked(make_run) -> None:
    a = points_from_run(make_run("a", concs=(4,), source="measured"))
    b = points_from_run(make_run("b", concs=(4,), source="simulated", seed=1))
    comp = compare_points(a, b)
    assert comp.matched == () and comp.skipped and "sources differ" in comp.skipped[0].reason
    assert len(compare_points(a, b, mix_sources=True).matched) == 1


def test_single_runs_never_claim_a_regression(make_run) -> None:
    a = points_from_run(make_run("a", concs=(4,), requests=120))
    b = [_scaled(p, "b", 0.5) for p in a]  # half the throughput: far outside sampling noise
    comp = compare_points(a, b)
    d = {x.metric: x for x in comp.matched[0].deltas}["tput_per_gpu"]
    assert d.band is not None and d.band.kind == "within-run" and d.band.half_width > 0
    assert d.delta is not None and abs(d.delta) > d.band.half_width
    assert d.verdict == "unverified"
    assert not comp.regressions
    assert any("no repeats" in n for n in comp.notes)


def test_repeats_turn_a_large_change_into_a_regression_and_a_small_one_into_noise(make_run) -> None:
    a = points_from_run(make_run("a", concs=(4,), requests=120))
    repeats = [_scaled(p, f"a{i}", f) for i, f in enumerate((1.01, 0.99, 1.02)) for p in a]
    worse = [_scaled(p, "b", 0.6) for p in a]
    comp = compare_points(a, worse, repeats_a=repeats)
    d = {x.metric: x for x in comp.matched[0].deltas}["tput_per_gpu"]
    assert d.band is not None and d.band.kind == "between-run"
    assert d.verdict == "regression"
    assert comp.regressions and comp.matched[0].a[0].run_id == "a" and len(comp.matched[0].a) == 4
    better = [_scaled(p, "b", 1.6) for p in a]
    assert {x.metric: x for x in compare_points(a, better, repeats_a=repeats).matched[0].deltas}[
        "tput_per_gpu"].verdict == "improvement"
    same = [_scaled(p, "b", 1.0) for p in a]
    d_same = {x.metric: x for x in compare_points(a, same, repeats_a=repeats).matched[0].deltas}
    assert d_same["tput_per_gpu"].verdict == "within noise"


def _launched(p: ResultPoint, fingerprint: str = "launch-a", clock: str = "wall", **options: object) -> ResultPoint:
    """The point as a run records it: its provenance names the launch that earned it and its summary the load the
    client drove (its configuration); `options` change that load. In wall-clock time (default) every run is a sample
    of its own; in virtual time one configuration, seed and job are one sample (the simulator's core is
    deterministic), so a fabricated virtual-time repeat needs its own seed."""
    assert p.summary is not None
    prov = p.summary.provenance
    recorded = {"concurrency": p.identity.conc, "duration_s": 1800.0, **options}
    summary = p.summary.model_copy(update={"provenance": prov.model_copy(update={"options": recorded})})
    return dataclasses.replace(p, summary=summary, provenance={**p.provenance, "launch": {"fingerprint": fingerprint},
                                                               "clock": clock})


def test_lower_is_better_metrics_flip_the_verdict(make_run) -> None:
    a = [_launched(p) for p in points_from_run(make_run("a", concs=(4,), requests=120))]
    history = [_scaled(p, f"h{i}", f, "p90_ttft") for i, f in enumerate((1.01, 0.99)) for p in a]
    slower = [_scaled(p, "b", 3.0, "p90_ttft") for p in a]
    comp = compare_points(a, slower, history=history)
    d = {x.metric: x for x in comp.matched[0].deltas}["p90_ttft"]
    assert d.delta is not None and d.delta > 0 and d.verdict == "regression"
    assert comp.matched[0].history == 2


def test_history_of_another_configuration_or_an_invalid_run_is_not_a_repeat(make_run) -> None:
    a = [_launched(p) for p in points_from_run(make_run("a", concs=(4,), requests=120))]
    slower = [_scaled(p, "b", 3.0, "p90_ttft") for p in a]
    other = [_launched(_scaled(p, "pr-earlier", 3.0, "p90_ttft"), "launch-pr") for p in a]  # the PR's config
    invalid = [dataclasses.replace(_scaled(p, "bad", 0.2, "p90_ttft"), verdict="invalid") for p in a]
    unlaunched = [dataclasses.replace(_scaled(p, "old", 1.0, "p90_ttft"), provenance={}) for p in a]
    shorter = [_launched(_scaled(p, "short", 3.0, "p90_ttft"), duration_s=900.0) for p in a]  # another window
    unrecorded = [_launched(_scaled(p, "no-options", 3.0, "p90_ttft")) for p in a]
    unrecorded = [dataclasses.replace(p, summary=p.summary.model_copy(update={  # type: ignore[union-attr]
        "provenance": p.summary.provenance.model_copy(update={"options": None})})) for p in unrecorded]  # type: ignore[union-attr]
    same = [_scaled(p, "a2", 1.01, "p90_ttft") for p in a]
    # a moving tag (a nightly): the same rendered launch, another engine build read back from the server
    nightly = [dataclasses.replace(q, provenance={**q.provenance, "launch": {
        **q.provenance["launch"], "engine_version_reported": "0.27.0.dev1"}})
        for q in (_scaled(p, "nightly", 3.0, "p90_ttft") for p in a)]
    comp = compare_points(a, slower, history=[*other, *invalid, *unlaunched, *shorter, *unrecorded, *same, *nightly])
    (m,) = comp.matched
    assert [p.run_id for p in m.past] == ["a2"] and m.history == 1
    assert comp.as_dict()["matched"][0]["history"][0]["run_id"] == "a2"
    assert {x.metric: x for x in m.deltas}["p90_ttft"].verdict == "regression"


def test_a_within_run_band_is_the_exact_bootstrap_and_draws_nothing_at_random() -> None:
    """A P90 band over 64 requests from 200 seeded resamples swung 2.5x between seeds, and the verdict of a delta near
    it flipped with the seed. The band is the bootstrap's own spread, over every resample of the requests: what
    enumerating all nⁿ resamples gives (checked to 1e-9 on four and five requests, every kind of statistic), and
    what the Monte Carlo bootstrap tends to with many draws."""
    import itertools

    import numpy as np

    from llmsweep.results.bands import bootstrap_sd
    from llmsweep.results.samples import STATISTICS, Samples

    rng = np.random.default_rng(4)
    for n in (4, 5):
        start = rng.uniform(0, 1, n)
        ttft = rng.lognormal(-2, 1, n)
        osl = rng.integers(2, 300, n).astype(float)
        e2el = ttft + osl * rng.lognormal(-4, 0.3, n)
        tpot = (e2el - ttft) / (osl - 1)
        s = Samples(start=start, first_token=start + ttft, end=start + e2el, ttft=ttft, e2el=e2el, tpot=tpot,
                    e2el_per_token=e2el / osl, prompt_tokens=rng.integers(100, 2000, n).astype(float),
                    completion_tokens=osl, total=n)
        every = [np.array(i) for i in itertools.product(range(n), repeat=n)]
        for metric, stat in STATISTICS.items():
            draws = np.array([stat(s, i, 8) for i in every])
            assert abs(bootstrap_sd(s, metric, 8) - float(draws.std())) < 1e-9, (n, metric)


def test_band_arithmetic() -> None:
    assert pooled_variance([[1.0, 3.0], [10.0, 12.0]]) == (2.0, 2)
    assert pooled_variance([[1.0], [5.0]])[1] == 0
    assert between_run_band([1.0], [5.0]) is None  # no repeat anywhere: no between-run band
    band = between_run_band([1.0, 3.0], [10.0, 12.0])
    assert band is not None and band.kind == "between-run"
    assert abs(band.half_width - 4.303 * (2.0 * (1 / 2 + 1 / 2)) ** 0.5) < 1e-9
    floor = within_run_band(10.0, 10.0)
    widened = between_run_band([1.0, 3.0], [10.0, 12.0], within=floor)
    assert floor is not None and widened is not None and widened.half_width == floor.half_width
    assert within_run_band(float("nan"), 1.0) is None


def test_the_t_quantile_past_the_table_is_the_t_quantile_not_the_normal() -> None:
    """A band of 31 to 120 degrees of freedom (a long history of earlier runs) is t's, as a hand computation with a
    t table gives it; it had dropped to the normal 1.96 past 30, up to 4 % narrower."""
    exact = {30: 2.0423, 31: 2.0395, 35: 2.0301, 40: 2.0211, 60: 2.0003, 120: 1.9799, 1000: 1.9623}
    for dof, t in exact.items():
        assert abs(t975(dof) - t) < 5e-4, (dof, t975(dof))
    assert all(t975(d) > t975(d + 1) for d in range(1, 200))  # narrower with every degree of freedom, no step
    band = between_run_band([float(v) for v in range(20)], [float(v) for v in range(1, 21)])
    assert band is not None
    var, dof = pooled_variance([[float(v) for v in range(20)], [float(v) for v in range(1, 21)]])
    assert dof == 38 and abs(band.half_width - 2.0244 * (var * (1 / 20 + 1 / 20)) ** 0.5) < 1e-3


def test_invalid_measurements_are_called_out(make_run) -> None:
    a = points_from_run(make_run("a", concs=(4,)))
    b = [dataclasses.replace(p, run_id="b", result_id="rb", verdict="invalid", reasons=("error ratio 0.2 > 0.05",))
         for p in a]
    comp = compare_points(a, b)
    assert len(comp.matched) == 1
    assert any("B " in n and "invalid" in n and "error ratio 0.2" in n for n in comp.notes)


def test_power_metrics_are_compared_when_a_side_sampled_power(make_run) -> None:
    a = points_from_run(make_run("a", concs=(4,)))
    b = points_from_run(make_run("b", concs=(4,), speed=1.2))
    plain = compare_points(a, b)
    assert "tokens_per_joule" not in {d.metric for d in plain.matched[0].deltas}  # no power: the old table
    b[0].metrics["tokens_per_joule"], a[0].metrics["tokens_per_joule"] = 1.2, 1.0
    comp = compare_points(a, b)
    delta = next(d for d in comp.matched[0].deltas if d.metric == "tokens_per_joule")
    assert delta.a == 1.0 and delta.b == 1.2 and delta.verdict == "unverified"  # one run: no between-run band


def test_points_are_listed_by_concurrency_as_a_number_and_a_run_against_itself_is_said(make_run) -> None:
    a = points_from_run(make_run("a", concs=(12, 16, 4, 8)))
    b = [_scaled(p, "b", 1.0) for p in reversed(a)]
    comp = compare_points(a, b)
    assert [m.a[0].identity.conc for m in comp.matched] == [4, 8, 12, 16]
    assert not any("same results" in n for n in comp.notes)
    itself = compare_points(a, a)
    assert itself.notes[0].startswith("A and B are the same results (run a)")


def test_a_virtual_time_side_against_a_wall_clock_side_is_said(make_run) -> None:
    """The live simulator's HTTP path adds the client and transport to what the core models in virtual time: a walk-
    through compared a virtual-time disaggregated run with the live one (TTFT +105 %) and nothing said so."""
    a = points_from_run(make_run("a", concs=(4,), source="simulated"))
    b = points_from_run(make_run("b", concs=(4,), source="simulated", seed=1))

    def on(points: list[ResultPoint], clock: str) -> list[ResultPoint]:
        return [dataclasses.replace(p, provenance={**p.provenance, "clock": clock}) for p in points]

    mixed = compare_points(on(a, "virtual"), on(b, "wall"))
    assert len(mixed.matched) == 1
    assert any("A ran in virtual time, B in wall-clock time" in n for n in mixed.notes), mixed.notes
    same = compare_points(on(a, "virtual"), on(b, "virtual"))
    assert not any(" time, B in " in n for n in same.notes)


def test_two_simulated_sides_say_they_are_not_measurements(make_run) -> None:
    """Two simulator runs compared (a pull request's verdict) printed and wrote nothing that said `simulated`: the
    side headings name a kind only where the sides differ in it. A note says it, in the table, JSON and markdown."""
    from llmsweep.report.markdown import comparison_markdown
    from llmsweep.report.verdict import verdict_markdown
    from llmsweep.results.verdict import SuccessRate

    def on(points: list[ResultPoint]) -> list[ResultPoint]:
        return [dataclasses.replace(p, provenance={**p.provenance, "clock": "virtual"}) for p in points]

    sim = compare_points(on(points_from_run(make_run("a", concs=(4,), source="simulated"))),
                         on(points_from_run(make_run("b", concs=(4,), source="simulated", seed=1))))
    said = "A and B are both simulated, virtual time: the simulator's figures, not measurements"
    assert sim.sides == ("", "") and said in sim.notes
    assert said in comparison_markdown(sim) and said in verdict_markdown(sim, SuccessRate(1, 1))
    measured = compare_points(points_from_run(make_run("c", concs=(4,), source="measured")),
                              points_from_run(make_run("d", concs=(4,), source="measured", seed=1)))
    assert not any("simulator's figures" in n for n in measured.notes)
    # each side holding a measured point and a simulated one (--mix-sources): both kinds named, not "the
    # simulator's figures" (the note had gone into a pull request's comment about measurements)
    mixed_a = points_from_run(make_run("e", concs=(4,), source="measured")) + on(
        points_from_run(make_run("f", concs=(8,), source="simulated")))
    mixed_b = points_from_run(make_run("g", concs=(4,), source="measured", seed=1)) + on(
        points_from_run(make_run("h", concs=(8,), source="simulated", seed=1)))
    mixed = compare_points(mixed_a, mixed_b, mix_sources=True)
    assert len(mixed.matched) == 2 and mixed.sides == ("", "")
    assert not any(n.startswith("A and B are both") for n in mixed.notes), mixed.notes
    # ... but which points are the simulator's is said (no heading does: the sides hold the same kinds)
    (said_mixed,) = [n for n in mixed.notes if n.startswith("A and B each hold measured and simulated")]
    assert "1 of 2 compared points is the simulator's figures" in said_mixed and "conc 8" in said_mixed
    assert "conc 4" not in said_mixed
    assert said_mixed in comparison_markdown(mixed)


def test_a_disaggregated_point_names_its_topology_once(make_run) -> None:
    a = points_from_run(make_run("a", concs=(4,)))
    pd = [dataclasses.replace(p, identity=dataclasses.replace(p.identity, disagg=True,
                                                               workers="P2x(tp8 ep8 dpa) D1x(tp8 ep1)")) for p in a]
    (matched,) = compare_points(pd, pd).matched
    assert matched.label.count("P2x(tp8 ep8 dpa) D1x(tp8 ep1)") == 1, matched.label
    (plain,) = compare_points(a, a).matched
    assert " · tp" in plain.label  # an aggregated point still names its parallelism


def test_a_side_holding_two_configurations_of_a_point_pools_neither(make_run) -> None:
    """mixk: B ran one point (conc 8) under two recipe keys (MTP K=3 and K=1): their mean is neither configuration's
    and the gap between them is no run-to-run noise, so the point is not compared and the reason names both."""
    a = [_launched(p, "launch-k3") for p in points_from_run(make_run("a", concs=(8,), requests=120))]
    k3 = [_launched(_scaled(p, "b", 1.0), "launch-k3") for p in a]
    k1 = [dataclasses.replace(_launched(_scaled(p, "b", 0.7), "launch-k1"), job_id=f"{p.job_id}-k1",
                              result_id=f"{p.result_id}-k1") for p in a]
    comp = compare_points(a, [*k3, *k1])
    assert comp.matched == ()
    assert {s.point.result_id for s in comp.skipped} == {p.result_id for p in (*a, *k3, *k1)}
    assert "B holds 2 configurations of this point" in comp.skipped[0].reason
    # named by what tells them apart, as a frontier names the series it splits them into (was: their job ids)
    assert "(launch fingerprints launch-k3, launch-k1)" in comp.skipped[0].reason, comp.skipped[0].reason
    (m,) = compare_points(a, k3).matched  # one configuration a side: compared
    assert len(m.b) == 1
    other = [_launched(_scaled(p, "a2", 1.0), "launch-k1") for p in a]  # --repeats-from of another configuration
    same = [_launched(_scaled(p, "a3", 1.01), "launch-k3") for p in a]
    comp = compare_points(a, k3, repeats_a=[*other, *same])
    assert [p.run_id for p in comp.matched[0].a] == ["a", "a3"]
    assert any("ran another configuration" in n and "a2/" in n for n in comp.notes)


def test_virtual_time_reruns_of_one_configuration_and_seed_are_one_sample(make_run) -> None:
    """`compare fx3 live`: the store's earlier virtual-time runs of A's recipe with A's seed are A's numbers again
    (byte for byte): pooled as N samples they shrank the band with N-1 degrees of freedom that were never measured."""
    a = [_launched(p, clock="virtual") for p in points_from_run(make_run("a", concs=(4,), requests=120))]
    b = [_scaled(_launched(p), "b", 1.0) for p in a]

    def rerun(run_id: str, seed: object) -> list[ResultPoint]:  # the same job of A's configuration in another run
        return [dataclasses.replace(p, run_id=run_id, result_id=f"{p.result_id}-{run_id}",
                                    provenance={**p.provenance, "seed": seed}) for p in a]

    seed = a[0].provenance.get("seed")
    same_seed = [*rerun("fx1", seed), *rerun("fx2", seed)]
    comp = compare_points(a, b, history=same_seed)
    (m,) = comp.matched
    assert m.history == 0 and any("counted once" in n for n in comp.notes)
    other_seed = rerun("seed7", 7)
    (m,) = compare_points(a, b, history=[*same_seed, *other_seed]).matched
    assert [p.run_id for p in m.past] == ["seed7"]
    # the seed the workload sampled with, as provenance records it, decides (the run's seed with the job id if not)
    def sampled(points: list[ResultPoint], run_id: str, seed: int) -> list[ResultPoint]:
        return [dataclasses.replace(p, run_id=run_id, result_id=f"{p.result_id}-{run_id}",
                                    provenance={**p.provenance, "workload": {"seed": seed}}) for p in points]

    recorded = sampled(a, "a", 5)
    (m,) = compare_points(recorded, b, history=[*sampled(a, "h5", 5), *sampled(a, "h6", 6)]).matched
    assert [p.run_id for p in m.past] == ["h6"]
    wall = [_launched(p) for p in a]  # in wall-clock time every run is a sample of its own
    (m,) = compare_points(wall, b, history=[_scaled(p, "w2", 1.0) for p in wall]).matched
    assert m.history == 1


def test_virtual_time_results_of_another_simulator_release_are_neither_one_sample_nor_a_repeat(make_run) -> None:
    """Two stores' virtual-time results of one configuration and seed, computed by two llmsweep releases' simulators:
    not the same numbers (another step-time model, another catalog), so not one sample counted once with a note that
    they are (`counted once`), nor a repeat of A's run in its noise band: another configuration, as a live
    simulator's other release is (its `/version`, the engine build)."""
    a = [_launched(p, clock="virtual") for p in points_from_run(make_run("a", concs=(4,), requests=120))]
    b = [_scaled(_launched(p), "b", 1.0) for p in a]

    def released(points: list[ResultPoint], run_id: str, version: str, seed: int | None = None) -> list[ResultPoint]:
        return [dataclasses.replace(p, run_id=run_id, result_id=f"{p.result_id}-{run_id}",
                                    provenance={**p.provenance, "llmsweep_version": version,
                                                **({} if seed is None else {"seed": seed})}) for p in points]

    ours = released(a, "a", "0.6.0")
    comp = compare_points(ours, b, history=released(a, "old", "0.5.0"))
    (m,) = comp.matched
    assert m.history == 0 and not any("counted once" in n for n in comp.notes), comp.notes
    # --repeats-from a run of the other release: named as another configuration, not pooled
    comp = compare_points(ours, b, repeats_a=released(a, "old", "0.5.0", seed=7))
    assert comp.matched[0].runs("a") == 1 and any("ran another configuration" in n for n in comp.notes), comp.notes
    # the same release, another seed: a repeat as before
    (m,) = compare_points(ours, b, history=released(a, "h7", "0.6.0", seed=7)).matched
    assert [p.run_id for p in m.past] == ["h7"]


def test_virtual_time_results_of_two_simulator_builds_of_one_release_are_two_configurations(make_run) -> None:
    """A dev tree keeps one `llmsweep_version` across simulator edits: two virtual-time results of one launch, seed
    and release, computed by two builds of the simulator (`provenance.simulator.digest`), are not the same numbers,
    so neither one sample counted once nor a repeat pooled into A's band; one build's rerun at another seed is a
    repeat. A result recorded before the digest was kept is its release's, never a digest's build."""
    a = [_launched(p, clock="virtual") for p in points_from_run(make_run("a", concs=(4,), requests=120))]
    b = [_scaled(_launched(p), "b", 1.0) for p in a]

    def built(points: list[ResultPoint], run_id: str, digest: str | None, seed: int | None = None) -> list[ResultPoint]:
        simulator = {} if digest is None else {"simulator": {"calibration": "uncalibrated", "digest": digest}}
        return [dataclasses.replace(p, run_id=run_id, result_id=f"{p.result_id}-{run_id}",
                                    provenance={**p.provenance, "llmsweep_version": "0.6.0", **simulator,
                                                **({} if seed is None else {"seed": seed})}) for p in points]

    ours = built(a, "a", "1111aaaa2222bbbb")
    assert ours[0].simulator_build == "1111aaaa2222bbbb"
    comp = compare_points(ours, b, history=built(a, "edited", "3333cccc4444dddd"))
    (m,) = comp.matched
    assert m.history == 0 and not any("counted once" in n for n in comp.notes), comp.notes
    # --repeats-from a run of the other build: another configuration, named by its build, not pooled
    other = built(a, "a", "3333cccc4444dddd", seed=7)
    comp = compare_points(ours, b, repeats_a=other)
    assert comp.matched[0].runs("a") == 1 and any("ran another configuration" in n for n in comp.notes), comp.notes
    facet = telling_apart([ours, other])  # one run id: what tells them apart is the build
    assert facet is not None and facet.plural == "simulator builds"
    # the same build, another seed: a repeat
    (m,) = compare_points(ours, b, history=built(a, "h7", "1111aaaa2222bbbb", seed=7)).matched
    assert [p.run_id for p in m.past] == ["h7"]
    # recorded before the digest was kept: its release stands for its build, which no digest's build is
    before = built(a, "old", None)
    assert before[0].simulator_build == "0.6.0"
    (m,) = compare_points(ours, b, history=before).matched
    assert m.history == 0


def test_a_result_given_twice_is_one_run_not_two_repeats(make_run) -> None:
    """`compare A B --repeats-from A`: A's own result came back as its repeat, agreeing with itself exactly; counted
    as two runs it made a between-run band from nothing and called a 10 % slowdown of single runs a regression
    (`--fail-on-regression` failed)."""
    a = points_from_run(make_run("a", concs=(4,), requests=120))
    b = [_scaled(p, "b", 0.9) for p in a]
    comp = compare_points(a, b, repeats_a=a, repeats_b=[*b, *b])
    (m,) = comp.matched
    assert (len(m.a), len(m.b)) == (1, 1)
    assert all(d.band is None or d.band.kind == "within-run" for d in m.deltas)
    assert not comp.regressions
    assert any("given more than once" in n and "counted once" in n for n in comp.notes)
    assert any("no repeats" in n for n in comp.notes)


def test_a_smoke_measurement_is_said(make_run) -> None:
    """A smoke result (a profiling window below the scenario's minimum) compared with a full one: nothing said so,
    though its figures differ by the window too."""
    a = points_from_run(make_run("a", concs=(4,)))
    b = [dataclasses.replace(p, run_id="b", result_id="rb", verdict="smoke",
                             reasons=("smoke run: profile window 120 s is shorter than 900 s",)) for p in a]
    comp = compare_points(a, b)
    assert len(comp.matched) == 1
    assert any("B " in n and "is smoke (smoke run: profile window 120 s" in n and "too short" in n
               for n in comp.notes), comp.notes
    assert not any("smoke" in n for n in compare_points(a, a).notes)


def test_one_failed_request_is_no_regression_beside_repeats_that_failed_none(tmp_path) -> None:
    """A's repeats all failed no request (their error ratios agree exactly: a between-run variance of 0) and B failed
    one of 200: the error ratio has no per-request statistic, so its band was ±0 and that one request was called a
    regression. Its band is now floored at the binomial standard error of each run's ratio; a real rise still is one."""
    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    def run(name: str, seed: int, error_rate: float = 0.0) -> list[ResultPoint]:
        point = SyntheticPoint(synthetic_job(conc=4), requests=200, error_rate=error_rate)
        return points_from_run(write_synthetic_run(tmp_path / name, [point], run_id=name, seed=seed))

    a, repeats = run("a", 0), [*run("a1", 1), *run("a2", 2)]

    def errors(b: list[ResultPoint]) -> tuple[float | None, str]:
        d = {x.metric: x for x in compare_points(a, b, repeats_a=repeats).matched[0].deltas}
        assert d["error_ratio"].band is not None and d["error_ratio"].band.kind == "between-run"
        return d["error_ratio"].b, d["error_ratio"].verdict

    assert errors(run("one", 9, 0.01)) == (0.005, "within noise")  # 1 of 200
    ratio, verdict = errors(run("many", 9, 0.03))  # 6 of 200, still a valid run
    assert ratio == 0.03 and verdict == "regression"


ENGINE_BUILDS = "engine build 0.5.16 vs 0.5.17.dev3 (as the servers reported it; rerun B on A's engine build " \
                "0.5.16: an image pinned by its @sha256 digest, not a moving tag, or that version installed), under " \
                "one image tag"
IMAGE_DIGESTS = "image digest aaaaaaaaaaaa vs bbbbbbbbbbbb (the registry's build of the tag; rerun B with its image " \
                "pinned to A's digest, `IMAGE@sha256:…`), under one image tag"


def _served(points: list[ResultPoint], version: str | None, limit_w: float | None,
            digest: str | None = None, image: str | None = None) -> list[ResultPoint]:
    """The points as a measured run records what served them: the engine version its server reported (`launch`), the
    image it ran in (None: on the host) and that image's registry digest, and the GPUs' enforced power limit read when
    the server was ready (`hardware`); None: not read."""
    from llmsweep.metrics.model import GpuState, Hardware

    out = []
    for p in points:
        assert p.summary is not None
        hardware = Hardware(sku="h100", gpus=2, gpu_state=None if limit_w is None else [
            GpuState(index=i, power_limit_w=limit_w) for i in range(2)])
        summary = p.summary.model_copy(update={"provenance": p.summary.provenance.model_copy(
            update={"hardware": hardware})})
        launch = {"fingerprint": "launch-a", "engine_version_reported": version, "image": image,
                  "image_digest": digest}
        out.append(dataclasses.replace(p, summary=summary, provenance={**p.provenance, "launch": launch}))
    return out


def test_another_engine_build_or_power_limit_under_one_image_tag_is_said_beside_the_verdict(make_run) -> None:
    """A and B ran one image tag (a nightly) but their servers reported other engine builds, or their GPUs ran under
    other power limits: nothing said so, and the verdict read as a change of the compared configuration alone. It is
    said beside each point's verdict (table, Markdown verdict, --json), where both sides record it; what a measured
    side does not record is named, never taken for "the same"."""
    from llmsweep.report.markdown import comparison_markdown
    from llmsweep.report.verdict import verdict_markdown
    from llmsweep.results.verdict import SuccessRate, verdict_as_dict

    a = points_from_run(make_run("a", concs=(4,), source="measured", requests=120))
    b = [_scaled(p, "b", 0.5) for p in a]
    builds = compare_points(_served(a, "0.5.16", 700.0), _served(b, "0.5.17.dev3", 700.0))
    (m,) = builds.matched
    said = "not the same configuration: " + ENGINE_BUILDS
    assert m.served_apart == (ENGINE_BUILDS,)
    assert "; rerun B on A's engine build 0.5.16: an image pinned by its @sha256 digest" in m.served_apart[0]
    (row,) = [line for line in verdict_markdown(builds, SuccessRate(1, 1)).splitlines() if line.startswith("| Qwen")]
    assert f"❔ unverified (no between-run band; {said})" in row, row  # in the verdict's cell
    assert verdict_as_dict(builds, SuccessRate(1, 1))["points"][0]["served_apart"] == list(m.served_apart)
    assert builds.as_dict()["matched"][0]["served_apart"] == list(m.served_apart)
    # said once, beside the point: not again in a note above the table (each page and --json list the notes)
    assert not any(said in n for n in builds.notes), builds.notes
    assert verdict_markdown(builds, SuccessRate(1, 1)).count(said) == 1
    (cell,) = [line for line in comparison_markdown(builds).splitlines() if line.startswith("| Qwen")]
    assert cell.startswith(f"| {m.label} ({said}) |"), cell  # the --markdown table: in the point's cell
    assert comparison_markdown(builds).count(said) == 1
    digests = compare_points(_served(a, "0.5.16", 700.0, "sha256:" + "a" * 64),
                             _served(b, "0.5.16", 700.0, "sha256:" + "b" * 64))
    assert digests.matched[0].served_apart == (IMAGE_DIGESTS,)
    assert "; rerun B with its image pinned to A's digest, `IMAGE@sha256:…`)" in IMAGE_DIGESTS
    power = compare_points(_served(a, "0.5.16", 700.0), _served(b, "0.5.16", 500.0))
    assert power.matched[0].served_apart == (
        "GPU power limit 700 W vs 500 W (set B's GPUs to A's power limit, `nvidia-smi -pl 700` or `amd-smi set "
        "--power-cap 700`, or rerun B on A's GPUs)",)
    (cell,) = [line for line in comparison_markdown(power).splitlines() if line.startswith("| Qwen")]
    assert "`nvidia-smi -pl 700` or `amd-smi set --power-cap 700`, or rerun B on A's GPUs)) |" in cell, cell
    same = compare_points(_served(a, "0.5.16", 700.0), _served(b, "0.5.16", 700.0))
    assert same.matched[0].served_apart == ()
    assert not any("not the same configuration" in n or "not recorded" in n for n in same.notes), same.notes
    # a measured side that does not record it: not told apart, and said so
    unread = compare_points(_served(a, "0.5.16", 700.0), _served(b, None, None))
    assert unread.matched[0].served_apart == ()
    (note,) = [n for n in unread.notes if "not recorded" in n]
    assert "B's engine build as its server reported it" in note and "B's GPU power limit" in note, note


def _clocked(points: list[ResultPoint], max_mhz: float | None, ready_mhz: float | None = 1000.0,
             domain: Literal["sm", "gfx"] | None = None, client: str | None = None) -> list[ResultPoint]:
    """The points with their GPUs' clocks as the driver said them when the server was ready (`hardware.gpu_state`:
    the maximum SM clock, GFX on AMD, and the idle clock then; None: not read) and, where given, the release of the
    client that measured them (`client_version`), edited into their summaries' typed provenance: a synthetic run
    reads no GPU, and every run of this checkout is one release."""
    from llmsweep.metrics.model import GpuState, Hardware

    out = []
    for p in points:
        assert p.summary is not None
        state = [GpuState(index=i, power_limit_w=700.0, sm_clock_max_mhz=max_mhz, sm_clock_mhz=ready_mhz,
                          clock_domain=domain) for i in range(2)]
        prov = p.summary.provenance.model_copy(update={"hardware": Hardware(sku="h100", gpus=2, gpu_state=state),
                                                       **({"client_version": client} if client else {})})
        out.append(dataclasses.replace(p, summary=p.summary.model_copy(update={"provenance": prov})))
    return out


def test_another_gpu_max_clock_or_client_release_is_said_beside_the_verdict(make_run) -> None:
    """The GPUs' maximum SM clock (read with their power limit when the server was ready) and the release of
    llmsweep's client are recorded by every measured run, yet A and B differing in either said nothing: the verdict
    read as a change of the compared configuration alone. Each is said beside the point's verdict where both sides
    record it (a GPU's idle clock at that moment is a reading, not a setting: not compared); a side whose GPUs' clocks
    were read without the maximum one is named as not recorded, one whose clocks were never read is not."""
    a = points_from_run(make_run("a", concs=(4,), source="measured", requests=120))
    b = [_scaled(p, "b", 0.5) for p in a]
    clocks = compare_points(_clocked(a, 1980.0), _clocked(b, 1755.0, ready_mhz=345.0))
    (m,) = clocks.matched
    assert m.served_apart == ("GPU max clock 1980 MHz vs 1755 MHz (the driver's maximum SM clock, GFX on AMD; rerun "
                              "B on A's GPUs, or on GPUs whose maximum clock is 1980 MHz: another model or board "
                              "firmware sets another)",)
    assert clocks.as_dict()["matched"][0]["served_apart"] == list(m.served_apart)
    amd = compare_points(_clocked(a, 2100.0, domain="gfx"), _clocked(b, 1900.0, domain="gfx"))
    assert amd.matched[0].served_apart == (
        "GPU max clock 2100 MHz GFX vs 1900 MHz GFX (the driver's maximum SM clock, GFX on AMD; rerun B on A's "
        "GPUs, or on GPUs whose maximum clock is 2100 MHz GFX: another model or board firmware sets another)",)
    idle = compare_points(_clocked(a, 1980.0), _clocked(b, 1980.0, ready_mhz=345.0))
    assert idle.matched[0].served_apart == ()  # only the idle clock differs
    unread = compare_points(_clocked(a, 1980.0), _clocked(b, None))
    assert unread.matched[0].served_apart == ()
    (note,) = [n for n in unread.notes if "not recorded" in n]
    assert note.endswith("; B's GPU max clock (1 of 1 point)") and "A's GPU max clock" not in note, note
    never = compare_points(_clocked(a, 1980.0), _clocked(b, None, ready_mhz=None))  # no clock read at all
    assert never.matched[0].served_apart == () and not any("GPU max clock" in n for n in never.notes), never.notes
    client = compare_points(_clocked(a, 1980.0, client="0.1.0"), _clocked(b, 1980.0, client="0.2.0"))
    assert client.matched[0].served_apart == (
        "client version 0.1.0 vs 0.2.0 (the llmsweep release that produced it: measured, or predicted in virtual "
        "time; rerun B with llmsweep 0.1.0, A's release, or A with B's)",)
    assert client.as_dict()["matched"][0]["served_apart"][0].endswith("; rerun B with llmsweep 0.1.0, A's release, "
                                                                      "or A with B's)")


MEASURED_UNDER = "(llmsweep's measurement definitions, `metrics.version` and the metric table's digest, as each " \
                 "result's run.json records them; rerun B with A's llmsweep release, or A with B's, to compare one " \
                 "measurement)"


def test_another_measurement_version_is_said_beside_the_verdict_and_an_unrecorded_one_named(make_run) -> None:
    """`MEASUREMENT_VERSION` changes when llmsweep changes how a figure is measured or computed; a run records the
    definitions its jobs were measured under in its run.json (`measurement`, beside its reuse keys), not in their
    summaries, and compare never read it: A and B measured by other definitions read as a change of the compared
    configuration. Said beside the point's verdict with both values and what to do; a side whose run records none is
    named as not recorded (not a difference), and a result whose run was not read is not named."""
    a = points_from_run(make_run("a", concs=(4,), source="measured", requests=120))
    b = [_scaled(p, "b", 0.5) for p in a]
    old, new = "m5-0123456789abcdef", "m6-fedcba9876543210"
    measured = {**{p.result_id: old for p in a}, **{p.result_id: new for p in b}}
    comp = compare_points(a, b, measurements=measured)
    (m,) = comp.matched
    assert m.served_apart == (f"measurement version {old} vs {new} {MEASURED_UNDER}",)
    assert comp.as_dict()["matched"][0]["served_apart"] == list(m.served_apart)
    assert not any("measurement version" in n for n in comp.notes), comp.notes  # said once, beside the point
    same = compare_points(a, b, measurements=dict.fromkeys(measured, new))
    assert same.matched[0].served_apart == ()
    unrecorded = compare_points(a, b, measurements={**measured, b[0].result_id: ""})  # B's run.json records none
    assert unrecorded.matched[0].served_apart == ()
    (note,) = [n for n in unrecorded.notes if "not recorded" in n]
    assert note.endswith("; B's measurement version as its run.json records it (1 of 1 point)"), note
    assert "A's measurement version" not in note, note
    unread = compare_points(a, b)  # no run record read (an in-memory comparison): nothing claimed either way
    assert unread.matched[0].served_apart == () and not any("measurement version" in n for n in unread.notes)


def _installed(points: list[ResultPoint], installed: str | None, reported: str | None = None) -> list[ResultPoint]:
    """The points as a run on the host records its engine: the version the python that ran the server had installed
    (`Launch.engine_version_installed`) and the version the server reported (None: `transformers serve` reports
    none), in its summary's typed provenance and its launch as the point reads it."""
    from llmsweep.metrics.model import Launch

    out = []
    for p in points:
        assert p.summary is not None
        launch = Launch(engine="transformers", engine_version_installed=installed, engine_version_reported=reported)
        summary = p.summary.model_copy(update={"provenance": p.summary.provenance.model_copy(
            update={"launch": launch})})
        out.append(dataclasses.replace(p, summary=summary, provenance={
            **p.provenance, "launch": {"fingerprint": "launch-a", **launch.model_dump(exclude_none=True)}}))
    return out


def test_another_installed_engine_version_is_said_where_no_server_reports_one(make_run) -> None:
    """`transformers serve` reports no version, so the engine build compare told apart was never read for it, and B
    served by another transformers release than A's said nothing (only that the build was not recorded). Where
    neither side's server reported a version, the version the python that ran it had installed is compared, named as
    the installed package's (not the server's word), with what to do; it stands for the unrecorded build."""
    a = points_from_run(make_run("a", concs=(4,), source="measured", requests=120))
    b = [_scaled(p, "b", 0.5) for p in a]
    comp = compare_points(_installed(a, "4.57.0"), _installed(b, "4.58.1"))
    (m,) = comp.matched
    assert m.served_apart == (
        "installed engine version 4.57.0 vs 4.58.1 (the engine package the python that ran each server had installed; "
        "the servers report no version; rerun B where 4.57.0 is installed)",)
    assert comp.as_dict()["matched"][0]["served_apart"] == list(m.served_apart)
    assert not any("engine build" in n for n in comp.notes), comp.notes  # the installed version stands for it
    same = compare_points(_installed(a, "4.57.0"), _installed(b, "4.57.0"))
    assert same.matched[0].served_apart == () and not any("engine" in n for n in same.notes), same.notes
    # a server that reports its version: that is compared, never the installed package beside it
    reported = compare_points(_installed(a, "4.57.0", "0.9.1"), _installed(b, "4.58.1", "0.9.1"))
    assert reported.matched[0].served_apart == ()


def _sampled(points: list[ResultPoint], backend: str, figures: bool = True) -> list[ResultPoint]:
    """The points with their power block as `backend` sampled it (`PowerBlock.backend`) and, with `figures`, a power
    figure (tokens per joule)."""
    from llmsweep.metrics.model import PowerBlock

    out = []
    for p in points:
        assert p.summary is not None
        summary = p.summary.model_copy(update={"power": PowerBlock(backend=backend, power_valid=figures)})
        metrics = {**p.metrics, "tokens_per_joule": 1.0 if figures else None}
        out.append(dataclasses.replace(p, summary=summary, metrics=metrics))
    return out


def test_power_sampled_by_another_backend_is_said_beside_the_verdict(make_run) -> None:
    """NVML, DCGM and amd-smi read the GPUs' power beside an energy counter, nvidia-smi samples power.draw without
    one: A's power figures by one and B's by another compared as if only the configuration had changed them. Where
    both sides have power figures, the backends are said beside the point's verdict, with the flag to rerun B with."""
    a = points_from_run(make_run("a", concs=(4,), source="measured", requests=120))
    b = [_scaled(p, "b", 0.5) for p in a]
    comp = compare_points(_sampled(a, "nvml"), _sampled(b, "nvidia-smi"))
    (m,) = comp.matched
    assert "tokens_per_joule" in {d.metric for d in m.deltas}
    assert m.served_apart == (
        "power backend nvml vs nvidia-smi (the sampler that read the GPUs' power: nvml, dcgm and amd-smi read it "
        "beside an energy counter, nvidia-smi samples power.draw without one, sim is the simulator's model; rerun B "
        "with --power-backend nvml)",)
    assert comp.as_dict()["matched"][0]["served_apart"] == list(m.served_apart)
    assert compare_points(_sampled(a, "nvml"), _sampled(b, "nvml")).matched[0].served_apart == ()
    # a side without power figures (its sampler answered, nothing valid): no backend of figures to tell apart
    none = compare_points(_sampled(a, "nvml"), _sampled(b, "nvidia-smi", figures=False))
    assert none.matched[0].served_apart == () and not any("power backend" in n for n in none.notes)


def test_an_image_digest_a_side_did_not_read_is_named_as_the_other_unrecorded_facts_are(make_run) -> None:
    """A measured side whose server ran in an image but read no registry digest of it (a Slurm/pyxis launch, a
    locally built image) cannot be told apart from A's build under one tag: the note names it, as it names a missing
    engine build or power limit; a server on the host has no image digest to miss."""
    a = points_from_run(make_run("a", concs=(4,), source="measured", requests=120))
    b = [_scaled(p, "b", 0.5) for p in a]
    image = "lmsysorg/sglang:nightly"
    digest = "sha256:" + "a" * 64
    unread = compare_points(_served(a, "0.5.16", 700.0, digest, image), _served(b, "0.5.16", 700.0, None, image))
    assert unread.matched[0].served_apart == ()
    (note,) = [n for n in unread.notes if "not recorded" in n]
    assert note == "not recorded, so not checked for a difference between A and B: B's image digest (1 of 1 point)"
    on_host = compare_points(_served(a, "0.5.16", 700.0), _served(b, "0.5.16", 700.0))
    assert not any("not recorded" in n for n in on_host.notes), on_host.notes


def test_same_inputs_are_told_only_in_virtual_time_and_only_from_keys_both_sides_record(make_run) -> None:
    """Two results of one reuse key are one result's figures again only on the simulator's deterministic core: a
    wall-clock result of that key is a sample of its own, and a result without a recorded key is never taken for the
    same. A delta identical inputs cannot explain calls nothing, and is named."""
    a = [_launched(p, clock="virtual") for p in points_from_run(make_run("a", concs=(4,), requests=120))]
    b = [_scaled(p, "b", 1.0) for p in a]
    keys = {p.result_id: "k1/simulated/virtual/-" for p in (*a, *b)}
    (m,) = compare_points(a, b, inputs=keys).matched
    assert m.same_inputs and {d.verdict for d in m.deltas} == {"same inputs"} and all(d.band is None for d in m.deltas)
    assert not compare_points(a, b).matched[0].same_inputs  # no key recorded
    other = {**keys, b[0].result_id: "k2/simulated/virtual/-"}
    assert not compare_points(a, b, inputs=other).matched[0].same_inputs
    wall_a, wall_b = ([dataclasses.replace(p, provenance={**p.provenance, "clock": "wall"}) for p in s] for s in (a, b))
    assert not compare_points(wall_a, wall_b, inputs=keys).matched[0].same_inputs
    slower = [_scaled(p, "b", 0.5) for p in a]
    comp = compare_points(a, slower, inputs={**keys, slower[0].result_id: keys[a[0].result_id]})
    d = {x.metric: x for x in comp.matched[0].deltas}["tput_per_gpu"]
    assert d.verdict == "unverified" and d.band is None
    assert any("yet these figures differ" in n and "tput_per_gpu" in n for n in comp.notes), comp.notes


def test_a_result_of_one_release_without_its_image_digest_is_that_release_build_unknown(make_run) -> None:
    """One engine release served A twice under one image tag: one run read the image's registry digest, the other
    (a Slurm/pyxis launch, a locally built image) read only the engine's version. Nothing tells the second apart
    from the first's build, yet compare counted them as two configurations: the point was not compared at all ("A
    holds 2 configurations"), and an earlier such run never joined A's history. It is the same release, its build
    unknown, and a note says so; beside two digests of the release it is of neither. Only under a reference that
    names one release: under a moving tag the digest is what tells its builds apart."""
    image, version = "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730", "0.5.16"
    x, y = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    base = [_launched(p) for p in points_from_run(make_run("a", concs=(4,), source="measured", requests=120))]
    a = _served(base, version, 700.0, x, image)
    a2 = _served([_scaled(p, "a2", 1.01) for p in base], version, 700.0, None, image)  # read no digest
    b = _served([_scaled(p, "b", 0.5) for p in base], version, 700.0, x, image)
    # within a side: one configuration, compared, and said
    comp = compare_points([*a, *a2], b)
    assert not comp.skipped, [s.reason for s in comp.skipped]
    (m,) = comp.matched
    assert {p.run_id for p in m.a} == {"a", "a2"}
    (note,) = [n for n in comp.notes if "without an image digest" in n]
    assert f"a2/{a2[0].job_id} recorded engine 0.5.16 without an image digest, in {image} (a reference that names " \
           "one release, not a moving tag)" in note and "aaaaaaaaaaaa" in note
    assert "build that served it unknown" in note
    # as A's history, and as --repeats-from: a repeat of A's configuration
    hist = compare_points(a, b, history=a2)
    assert [p.run_id for p in hist.matched[0].past] == ["a2"]
    assert any("a2/" in n and "without an image digest" in n for n in hist.notes), hist.notes
    assert [p.run_id for p in compare_points(a, b, repeats_a=a2).matched[0].a] == ["a", "a2"]
    # beside two digests of its release: which build served it is not known, so it is a repeat of neither
    other = _served([_scaled(p, "a3", 1.0) for p in base], version, 700.0, y, image)
    split = compare_points([*a, *a2, *other], b)
    assert not split.matched and "3 configurations" in split.skipped[0].reason, split.skipped
    assert compare_points(a, b, history=[*a2, *other]).matched[0].past == ()
    # another release without a digest is still another configuration
    newer = _served([_scaled(p, "a4", 1.0) for p in base], "0.5.17", 700.0, None, image)
    assert compare_points(a, b, history=newer).matched[0].past == ()
    assert not any("without an image digest" in n for n in compare_points(a, b).notes)


def test_a_side_holding_a_result_without_its_digest_still_says_the_other_side_ran_another_build(make_run) -> None:
    """A ran one release tag twice, one run reading the image's registry digest and one not (a Slurm/pyxis launch):
    one configuration, A's build. B ran the tag's other build. The digest-less result hid B's build change: a side
    holding a result that recorded none compared nothing, though A's other result recorded the digest B differs
    from. What a tag names is compared by the values each side read."""
    image, version = "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730", "0.5.16"
    x, y = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    base = [_launched(p) for p in points_from_run(make_run("a", concs=(4,), source="measured", requests=120))]
    a = _served(base, version, 700.0, x, image)
    a2 = _served([_scaled(p, "a2", 1.01) for p in base], version, 700.0, None, image)  # read no digest
    b = _served([_scaled(p, "b", 0.5) for p in base], version, 700.0, y, image)
    said = IMAGE_DIGESTS
    assert compare_points(a, b).matched[0].served_apart == (said,)
    (m,) = compare_points([*a, *a2], b).matched
    assert {p.run_id for p in m.a} == {"a", "a2"} and m.served_apart == (said,)
    # the same build on B: nothing apart, the missing digest named as not recorded
    same = compare_points([*a, *a2], _served([_scaled(p, "b", 0.5) for p in base], version, 700.0, x, image))
    assert same.matched[0].served_apart == ()
    assert any("not recorded" in n and "A's image digest" in n for n in same.notes), same.notes
    # a side that read no digest at all tells nothing of it
    assert compare_points(a2, b).matched[0].served_apart == ()


def test_a_result_without_its_image_digest_under_a_moving_tag_stays_a_configuration_of_its_own(make_run) -> None:
    """A nightly tag serves another build each night while the server reports one version for days (SGLang's
    nightlies): the digest is what tells those builds apart, so a result of the tag that read none (a Slurm/pyxis
    launch) cannot be counted as the build of another result's digest. It was (one release, its build unknown), and
    joined that build's pool, history and repeats; it is a configuration of its own, as before digests were merged.
    A pinned reference (a dated nightly, `@sha256:`) names one build, and merges."""
    version, x = "0.5.16", "sha256:" + "a" * 64
    base = [_launched(p) for p in points_from_run(make_run("a", concs=(4,), source="measured", requests=120))]
    for moving in ("lmsysorg/sglang:nightly", "lmsysorg/sglang:latest", "lmsysorg/sglang:dev-cu13"):
        a = _served(base, version, 700.0, x, moving)
        a2 = _served([_scaled(p, "a2", 1.01) for p in base], version, 700.0, None, moving)
        b = _served([_scaled(p, "b", 0.5) for p in base], version, 700.0, x, moving)
        comp = compare_points([*a, *a2], b)
        assert not comp.matched and "A holds 2 configurations" in comp.skipped[0].reason, moving
        assert not any("without an image digest" in n for n in comp.notes), comp.notes
        assert compare_points(a, b, history=a2).matched[0].past == (), moving
        assert [p.run_id for p in compare_points(a, b, repeats_a=a2).matched[0].a] == ["a"], moving
        assert len(configurations([*a, *a2])) == 2, moving
    on_host = _served([_scaled(p, "a2", 1.01) for p in base], version, 700.0, None, None)
    assert len(configurations([*_served(base, version, 700.0, x, "lmsysorg/sglang:nightly"), *on_host])) == 2
    for pinned in ("lmsysorg/sglang:nightly-20260105", "lmsysorg/sglang@" + "sha256:" + "c" * 64):
        a = _served(base, version, 700.0, x, pinned)
        a2 = _served([_scaled(p, "a2", 1.01) for p in base], version, 700.0, None, pinned)
        assert len(configurations([*a, *a2])) == 1, pinned


def _priced(points: list[ResultPoint], run_id: str, price: float, source: str, factor: float = 1.0
            ) -> list[ResultPoint]:
    """The points as another run figured their cost: at `price` US$ per GPU-hour from `source` (`power.cost`), the cost
    per million output tokens that price over the points' output throughput, scaled by `factor` (the run's noise)."""
    from llmsweep.metrics.model import PowerBlock, PowerCost

    out = []
    for p in points:
        assert p.summary is not None and p.metrics["output_tput_per_gpu"]
        cost = price / (p.metrics["output_tput_per_gpu"] * 3600) * 1e6 * factor
        block = PowerBlock(source=None, reasons=["not_sampled"], cost=PowerCost(
            sku="mi300x", usd_per_gpu_hour=price, source=source, date="2026-12-07", usd_per_mtok_output=cost))
        out.append(dataclasses.replace(p, run_id=run_id, result_id=f"{p.result_id}-{run_id}",
                                       summary=p.summary.model_copy(update={"power": block}),
                                       metrics={**p.metrics, "usd_per_mtok_output": cost}))
    return out


def test_a_cost_figured_at_another_assumed_price_is_not_judged_and_the_prices_are_said(make_run) -> None:
    """Two runs of one recipe, one with a user's price of a GPU-hour ($1.00, `our contract`), one with the catalog's
    ($2.20): every measured figure agreed, yet the cost per million output tokens was called a regression and
    `--fail-on-regression` failed the pull request. A price is an assumption, not a measurement: a cost figured at
    another price is `n/a`, and a note names both prices and whose they are. Priced alike, the cost is judged: it is
    what the throughput's change costs at the one price."""
    from llmsweep.results.verdict import point_verdict

    base = points_from_run(make_run("a", concs=(4,), requests=120))
    a = _priced(base, "a", 2.2, "llmsweep assumption")
    repeats = [p for i, f in enumerate((1.01, 0.99, 1.02)) for p in _priced(base, f"a{i}", 2.2, "llmsweep assumption",
                                                                             f)]
    cheaper = _priced(base, "b", 1.0, "our contract")
    comp = compare_points(a, cheaper, repeats_a=repeats)
    (m,) = comp.matched
    d = {x.metric: x for x in m.deltas}
    assert d["tput_per_gpu"].verdict == "within noise"
    cost = d["usd_per_mtok_output"]
    assert cost.a is not None and cost.b is not None and cost.b == pytest.approx(cost.a / 2.2, rel=0.02)
    assert cost.verdict == "n/a" and cost.band is None
    assert not comp.regressions and point_verdict(m) == "no change"
    assert m.priced_apart == ("A at $2.20/GPU-h for mi300x (llmsweep assumption, 2026-12-07), "
                              "B at $1.00/GPU-h for mi300x (our contract, 2026-12-07)")
    (note,) = [n for n in comp.notes if "assumed price" in n]
    assert m.priced_apart in note and "usd_per_mtok_output is not judged there (n/a)" in note, note
    assert comp.as_dict()["matched"][0]["priced_apart"] == m.priced_apart
    # the other way round: the dearer price is no regression either
    assert not compare_points(cheaper, a, repeats_b=repeats).regressions

    # priced alike, a cost beyond the repeats' band is judged, as the throughput it follows
    dearer = _priced(base, "b", 2.2, "llmsweep assumption", 1.6)
    alike = compare_points(a, dearer, repeats_a=repeats)
    assert {x.metric: x for x in alike.matched[0].deltas}["usd_per_mtok_output"].verdict == "regression"
    assert alike.matched[0].priced_apart == "" and not any("assumed price" in n for n in alike.notes)
    # a row imported from our export says its price as the export wrote it (`llmsweep.power.cost`); a row that
    # records none is not taken for priced alike
    exported = [dataclasses.replace(p, summary=None, imported={"llmsweep": {"power": {
        "cost": p.summary.power.cost.model_dump(mode="json")}}}) for p in cheaper
        if p.summary is not None and p.summary.power is not None and p.summary.power.cost is not None]
    assert compare_points(a, exported, repeats_a=repeats).matched[0].priced_apart == m.priced_apart
    foreign = [dataclasses.replace(p, summary=None) for p in dearer]
    assert compare_points(a, foreign, repeats_a=repeats).matched[0].priced_apart == (
        "A at $2.20/GPU-h for mi300x (llmsweep assumption, 2026-12-07), B at a price it does not record")
