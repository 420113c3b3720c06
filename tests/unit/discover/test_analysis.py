"""Discovery's noise, knee, cliff and grid logic on constructed runs: what the user reads in the proposal."""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence

import pytest

from llmsweep.discover import analysis
from llmsweep.discover.analysis import INTERACTIVITY, THROUGHPUT
from llmsweep.discover.model import Run


def _run(conc: int, tput: float, intvty: float, seed: int = 42, kv: float | None = None,
         preemptions: float | None = None) -> Run:
    return Run(arm="a", conc=conc, stage="ladder", seed=seed, job_id=f"j{conc}-{seed}", verdict="valid",
               source="simulated", metrics={THROUGHPUT: tput, INTERACTIVITY: intvty}, kv_usage_max=kv,
               preemptions=preemptions)


def _repeats(conc: int, tput: float, intvty: float, spread: float = 0.02, **kw: float | None) -> list[Run]:
    """Three repeats at ±spread around the values (relative cv = spread exactly)."""
    return [_run(conc, tput * (1 + d * spread), intvty * (1 - d * spread), seed=42 + i, **kw)
            for i, d in enumerate((-1.0, 0.0, 1.0))]


def test_noise_is_the_spread_between_repeats_per_concurrency_and_pooled() -> None:
    runs = [*_repeats(1, 100, 50, spread=0.10), *_repeats(8, 800, 40, spread=0.02), _run(16, 900, 30)]
    n = analysis.noise(runs, THROUGHPUT)
    assert n.by_conc[1] == pytest.approx(0.10) and n.by_conc[8] == pytest.approx(0.02)
    assert 16 not in n.by_conc  # one run: no spread to measure
    assert n.dof == 4 and n.cv == pytest.approx(math.sqrt((0.10**2 * 2 + 0.02**2 * 2) / 4))
    # Separations use each concurrency's variance pooled with its repeated neighbours' (two of them here), between
    # repeated concurrencies interpolated in log concurrency, beyond them held flat.
    both = math.sqrt((0.10**2 + 0.02**2) / 2)
    assert n.smoothed == {1: pytest.approx(both), 8: pytest.approx(both)}
    assert analysis.cv_at(n, 1) == analysis.cv_at(n, 3) == analysis.cv_at(n, 64) == pytest.approx(both)
    wide = analysis.noise([*runs, *_repeats(64, 900, 20, spread=0.01), *_repeats(128, 950, 10, spread=0.01)],
                          THROUGHPUT)
    assert wide.smoothed[1] > wide.smoothed[8] > wide.smoothed[64] >= wide.smoothed[128]
    assert wide.smoothed[128] < analysis.cv_at(wide, 100) < wide.smoothed[64]  # type: ignore[operator]


def test_no_repeat_means_no_noise_estimate() -> None:
    n = analysis.noise([_run(1, 100, 50), _run(2, 190, 48)], THROUGHPUT)
    assert n.cv is None and n.dof == 0 and analysis.separation(n, 1, 2) == 0.0


def _ladder(points: Sequence[tuple[int, float, float, float | None, float | None]], spread: float = 0.02
            ) -> list[Run]:
    return [r for c, t, i, kv, pre in points for r in _repeats(c, t, i, spread, kv=kv, preemptions=pre)]


def test_the_knee_is_where_throughput_per_gpu_stops_rising_beyond_noise() -> None:
    runs = _ladder([(1, 100, 60, 0.1, 0), (2, 195, 58, 0.2, 0), (4, 380, 55, 0.4, 0), (8, 700, 50, 0.7, 0),
                    (16, 710, 30, 0.9, 0), (32, 715, 15, 0.92, 0)])
    knee = analysis.find_knee(analysis.curve(runs), analysis.noise(runs, THROUGHPUT),
                              analysis.noise(runs, INTERACTIVITY))
    assert knee is not None and knee.conc == 8 and knee.next_conc == 16
    assert "beyond noise" in knee.reason and knee.cliff_conc is None


def test_one_noisy_flat_pair_does_not_end_the_curve_early() -> None:
    # 2 -> 4 is flat, but 8 beats 2 far beyond noise: the curve goes on.
    runs = _ladder([(1, 100, 60, None, None), (2, 200, 58, None, None), (4, 201, 55, None, None),
                    (8, 700, 50, None, None), (16, 705, 30, None, None)])
    knee = analysis.find_knee(analysis.curve(runs), analysis.noise(runs, THROUGHPUT))
    assert knee is not None and knee.conc == 8


def test_the_kv_cliff_stops_the_grid_where_interactivity_collapses_although_throughput_still_rises() -> None:
    runs = _ladder([(4, 400, 60, 0.3, 0), (8, 780, 55, 0.6, 0), (16, 1400, 45, 0.97, 3), (32, 1600, 8, 1.0, 400)])
    curve = analysis.curve(runs)
    knee = analysis.find_knee(curve, analysis.noise(runs, THROUGHPUT), analysis.noise(runs, INTERACTIVITY))
    assert knee is not None and knee.conc == 16 and knee.next_conc == 32
    assert "collapses" in knee.reason and "400 preemptions" in knee.reason
    # The cliff (KV saturated, first preemptions) is read from the server's figures and reported with the knee.
    assert knee.cliff_conc == 16 and "KV cache peaks at 97%" in (knee.cliff or "")
    # Refinement bisects the knee's interval (16, 32) and the cliff's onset (8, 16).
    assert analysis.refine_targets(curve, knee, resolution=1) == [12, 24]
    assert analysis.refine_targets(curve, knee, resolution=16) == []


def test_a_curve_still_rising_at_the_top_says_so() -> None:
    runs = _ladder([(1, 100, 60, None, None), (2, 200, 58, None, None), (4, 400, 55, None, None)])
    knee = analysis.find_knee(analysis.curve(runs), analysis.noise(runs, THROUGHPUT))
    # not a knee at the top of the ladder: not reached, above it (what the table and discovery.json say)
    assert knee is not None and not knee.found and knee.conc is None and knee.above == 4
    assert knee.next_conc is None and "--ladder-top" in knee.reason
    assert knee.describe() == "not reached (above 4)"
    assert knee.model_dump()["conc"] is None and knee.model_dump()["above"] == 4


def test_a_curve_cut_by_an_interrupt_blames_the_interrupt_not_the_ladder_top() -> None:
    """After a Ctrl-C the top of what was measured is where the signal came, not the ladder's top: raising
    --ladder-top (already 64) would not measure more."""
    runs = _ladder([(1, 100, 60, None, None), (2, 200, 58, None, None), (4, 400, 55, None, None)])
    curve = analysis.curve(runs)
    noise = {m: analysis.noise(runs, m) for m in analysis.SEPARATION_METRICS}
    cut = "was interrupted during stage ladder"
    knee = analysis.find_knee(curve, noise[THROUGHPUT], noise[INTERACTIVITY], cut=cut)
    assert knee is not None and not knee.found and knee.above == 4
    assert "--ladder-top" not in knee.reason and "interrupted during stage ladder" in knee.reason
    grid = analysis.propose_grid(curve, 1, knee, noise, recipe=[1, 2, 4, 8, 16], cut=cut)
    kept = [g for g in grid if g.conc > 4]
    assert [g.conc for g in kept] == [8, 16]
    assert all("--ladder-top" not in g.why and "interrupted during stage ladder" in g.why for g in kept)


def test_one_measured_point_claims_no_rise() -> None:
    """A ladder cut to one concurrency measured no rise: its reason says so instead of "still rises beyond noise"."""
    runs = _ladder([(4, 400, 55, None, None)])
    knee = analysis.find_knee(analysis.curve(runs), analysis.noise(runs, THROUGHPUT))
    assert knee is not None and knee.conc is None and knee.above == 4
    assert "rises" not in knee.reason and "only conc 4 was measured" in knee.reason


def test_a_knee_above_the_ladder_cuts_nothing_of_the_recipe_above_it() -> None:
    # the ladder measured 1, 2, 4 and throughput still doubled at 4; the recipe goes on to 32
    runs = _ladder([(1, 100, 60, None, None), (2, 200, 58, None, None), (4, 400, 55, None, None)])
    curve = analysis.curve(runs)
    noise = {m: analysis.noise(runs, m) for m in analysis.SEPARATION_METRICS}
    knee = analysis.find_knee(curve, noise[THROUGHPUT], noise[INTERACTIVITY])
    assert knee is not None
    grid = analysis.propose_grid(curve, 1, knee, noise, recipe=(1, 16, 20, 24, 32))
    concs = [g.conc for g in grid]
    assert concs[0] == 1 and concs[-4:] == [16, 20, 24, 32] and concs == sorted(set(concs))
    measured_part = [g for g in grid if g.conc <= 4]
    assert measured_part[-1].conc == 4 and "the knee was not reached" in measured_part[-1].why
    assert all("the recipe's, kept" in g.why and "above conc 4" in g.why for g in grid if g.conc > 4)
    assert not any("where the grid stops" in g.why for g in grid)  # the top of the ladder is not called the knee
    assert analysis.refine_targets(curve, knee, resolution=1) == []  # nothing to bisect: measure higher instead


def test_a_failed_concurrency_above_a_rising_top_is_where_the_knee_lies_not_above_the_ladder() -> None:
    """The ladder measured 1, 2, 4 valid and 8 failed (its server ran out of memory): only valid runs reach the curve,
    so throughput still rising at 4 read as a knee "above the ladder — raise --ladder-top", and the recipe's
    concurrencies above were kept as they were. Conc 8 was measured, and did not serve: the knee lies between 4 and
    8, which the refinement bisects and the grid ends at."""
    runs = _ladder([(1, 100, 60, None, None), (2, 200, 58, None, None), (4, 400, 55, None, None)])
    curve = analysis.curve(runs)
    noise = {m: analysis.noise(runs, m) for m in analysis.SEPARATION_METRICS}
    failed = {8: "failed: server exited with status 1 (out of memory)", 2: "invalid: a flaky one, valid elsewhere"}
    knee = analysis.find_knee(curve, noise[THROUGHPUT], noise[INTERACTIVITY], failed=failed)
    assert knee is not None and knee.found and (knee.conc, knee.next_conc) == (4, 8)
    assert "conc 8 did not serve (failed: server exited with status 1 (out of memory))" in knee.reason
    assert "raise --ladder-top" not in knee.reason
    assert analysis.refine_targets(curve, knee, resolution=1) == [6]
    grid = analysis.propose_grid(curve, 1, knee, noise, recipe=(1, 16, 32))
    assert max(g.conc for g in grid) == 4 and "where the grid stops" in grid[-1].why
    # a failure below the top valid point says nothing of the top: the knee is still above the ladder
    above = analysis.find_knee(curve, noise[THROUGHPUT], noise[INTERACTIVITY], failed={2: "invalid: flaky"})
    assert above is not None and not above.found


def test_the_grid_steps_only_as_far_as_noise_needs_and_stops_at_the_knee() -> None:
    # Throughput linear in log2(conc): +100 tok/s/GPU per doubling from 100 at conc 1; noise 2 % everywhere.
    pts = [(c, 100 + 100 * math.log2(c), 50.0, None, None) for c in (1, 2, 4, 8, 16, 32, 64)]
    runs = _ladder(pts)
    curve = analysis.curve(runs)
    noise = {m: analysis.noise(runs, m) for m in analysis.SEPARATION_METRICS}
    knee = analysis.find_knee(curve, noise[THROUGHPUT], noise[INTERACTIVITY])
    assert knee is not None and knee.above == 64  # still rising at 64: the grid stops at the top measured
    grid = analysis.propose_grid(curve, 1, knee, noise)
    concs = [g.conc for g in grid]
    assert concs[0] == 1 and concs[-1] == 64 and concs == sorted(set(concs))
    need = analysis.separation(noise[THROUGHPUT], 1, 2)
    for a, b in itertools.pairwise(concs[:-1]):
        # every step separates beyond noise and is half an octave or more; the step one smaller would not have been
        # both (a finer step that separates is no point of the grid: `STEP_RATIO`)
        ta, tb, tb1 = (100 + 100 * math.log2(c) for c in (a, b, b - 1))
        assert (tb - ta) / ta > need and b >= a * analysis.STEP_RATIO
        assert b - 1 == a or (tb1 - ta) / ta <= need or b - 1 < a * analysis.STEP_RATIO
    assert "the knee was not reached" in grid[-1].why and "first concurrency" in grid[0].why
    # Noisier measurements need wider steps: fewer points for the same curve.
    noisy = _ladder(pts, spread=0.06)
    wide = analysis.propose_grid(analysis.curve(noisy), 1, knee,
                                 {m: analysis.noise(noisy, m) for m in analysis.SEPARATION_METRICS})
    assert len(wide) < len(grid)


def test_quiet_noise_does_not_put_a_point_at_every_concurrency() -> None:
    """Repeats a fraction of a per cent apart (the simulator's fixed-length runs) make nearly every step "beyond
    noise" on a curve interpolated between octaves: the rising fixed-length arm's 4 concurrencies had become 68
    (1, 2, 3, …, 23, 25, …, 122, 128), most of them points no run measured. Each step is at least half an octave, so
    the grid holds at most two points per doubling of the users, and says which steps the floor set."""
    pts = [(c, 100 * c ** 0.8, 60 / c ** 0.1, None, None) for c in (1, 2, 4, 8, 16, 32, 64, 128)]
    runs = _ladder(pts, spread=0.002)
    curve = analysis.curve(runs)
    noise = {m: analysis.noise(runs, m) for m in analysis.SEPARATION_METRICS}
    knee = analysis.find_knee(curve, noise[THROUGHPUT], noise[INTERACTIVITY])
    assert knee is not None and knee.above == 128
    grid = analysis.propose_grid(curve, 1, knee, noise)
    concs = [g.conc for g in grid]
    assert concs[0] == 1 and concs[-1] == 128 and concs == sorted(set(concs))
    assert all(b >= a * math.sqrt(2) for a, b in itertools.pairwise(concs)), concs
    assert all(len([c for c in concs if lo <= c < 2 * lo]) <= 2 for lo in range(1, 129)), concs
    assert len(concs) <= 2 * 7 + 1, concs  # (it was every concurrency up to 23, then every second or third)
    assert any("half an octave from conc" in g.why for g in grid)


def test_ladder_and_min_step() -> None:
    assert analysis.ladder(1, 64) == [1, 2, 4, 8, 16, 32, 64]
    assert analysis.ladder(4, 48) == [4, 8, 16, 32, 48]
    assert analysis.ladder(3, 3) == [3]
    with pytest.raises(ValueError):
        analysis.ladder(8, 4)
    assert analysis.min_step([1, 4, 6, 16]) == 2 and analysis.min_step([8]) is None


def test_a_rise_the_noise_hides_places_no_knee_and_proposes_no_cap() -> None:
    """Throughput per GPU 2507 -> 3451 -> 4199 at conc 4/8/16, every gain inside a ±100 % noise band: the knee had
    been declared at conc 4 (nothing rose 'beyond noise') and enforced as `max-conc: 4`. A mean gain above
    UNDECIDED_GAIN that the noise hides is no flat curve: the knee is undecided, and the grid keeps what the recipe
    asked above the measured top, with no cap."""
    runs = _ladder([(4, 2507, 50, 0.1, 0), (8, 3451, 45, 0.2, 0), (16, 4199, 40, 0.3, 0)], spread=0.8)
    knee = analysis.find_knee(analysis.curve(runs), analysis.noise(runs, THROUGHPUT),
                              analysis.noise(runs, INTERACTIVITY))
    assert knee is not None and knee.undecided and knee.conc is None and knee.above == 16
    assert "too noisy to place a knee" in knee.reason and knee.describe().startswith("cannot tell")
    # the same curve measured tightly is a rise, not a knee; a flat one tightly measured is a knee
    tight = _ladder([(4, 2507, 50, 0.1, 0), (8, 3451, 45, 0.2, 0), (16, 4199, 40, 0.3, 0)], spread=0.01)
    rising = analysis.find_knee(analysis.curve(tight), analysis.noise(tight, THROUGHPUT),
                                analysis.noise(tight, INTERACTIVITY))
    assert rising is not None and not rising.undecided and rising.conc is None
    flat = _ladder([(4, 2507, 50, 0.1, 0), (8, 2550, 45, 0.2, 0), (16, 2560, 40, 0.3, 0)], spread=0.8)
    settled = analysis.find_knee(analysis.curve(flat), analysis.noise(flat, THROUGHPUT),
                                 analysis.noise(flat, INTERACTIVITY))
    assert settled is not None and settled.conc == 4 and not settled.undecided


def test_repeats_that_did_not_vary_measured_no_noise_and_a_real_spread_did() -> None:
    """Identical repeats (a deterministic replay in virtual time) are no sample of run-to-run noise: their zero band
    had called every step real and spaced the grid at every concurrency (4, 5, 6, … 64)."""
    same = _ladder([(4, 1000.0, 160.0, None, None), (8, 2000.0, 130.0, None, None)], spread=0.0)
    noise_by = {m: analysis.noise(same, m) for m in (THROUGHPUT, INTERACTIVITY)}
    assert noise_by[THROUGHPUT].cv == 0.0 and noise_by[THROUGHPUT].dof == 4
    why = analysis.identical_repeats(noise_by)
    assert why is not None and "did not vary" in why and noise_by[THROUGHPUT].label in why
    varied = _ladder([(4, 1000.0, 160.0, None, None), (8, 2000.0, 130.0, None, None)], spread=0.001)
    assert analysis.identical_repeats({m: analysis.noise(varied, m) for m in (THROUGHPUT, INTERACTIVITY)}) is None
    # no repeat at all is the other error (noise unknown), not this one
    single = [_run(4, 1000, 160), _run(8, 2000, 130)]
    assert analysis.identical_repeats({m: analysis.noise(single, m) for m in (THROUGHPUT, INTERACTIVITY)}) is None


_FIGURE = re.compile(r"Throughput per GPU ([+-]\d+\.\d)% \(noise ±(\d+\.\d)% between (single runs|means of \d runs "
                     r"each)\)")


def test_each_verdict_prints_the_noise_band_it_was_judged_by() -> None:
    """Throughput per GPU +25 % from conc 4 to 8 (3 repeats each, cv 10 %): beyond the noise of the two means the knee
    judges (±18.8 %), inside that of two single runs (±32.6 %, √3 wider). The top row read "still rises beyond noise
    ... vs conc 4: +25.0% (noise ±32.6%)": the rise shown inside the band shown, the band the verdict used nowhere.
    The knee's reason now prints the figure and the band its verdict used, saying whose noise it is, and the grid's
    figures say theirs is the band of single runs (each point of the official grid is one)."""
    runs = _ladder([(1, 100, 60, None, None), (2, 200, 50, None, None), (4, 400, 40, None, None),
                    (8, 500, 30, None, None)], spread=0.10)
    curve = analysis.curve(runs)
    noise = {m: analysis.noise(runs, m) for m in analysis.SEPARATION_METRICS}
    means, single = (analysis.separation(noise[THROUGHPUT], 4, 8, n, n) for n in (3, 1))
    assert means < 0.25 < single  # the case: the verdict's band and the single runs' band disagree on this rise
    knee = analysis.find_knee(curve, noise[THROUGHPUT], noise[INTERACTIVITY])
    assert knee is not None and knee.above == 8 and "still rises beyond noise" in knee.reason
    assert f"conc 8 over conc 4: Throughput per GPU +25.0% (noise ±{means:.1%} between means of 3 runs each)" \
        in knee.reason
    (shown,) = _FIGURE.findall(knee.reason)
    assert shown == ("+25.0", f"{means * 100:.1f}", "means of 3 runs each") and means * 100 < 25.0
    grid = analysis.propose_grid(curve, 1, knee, noise)
    assert grid[-1].conc == 8 and knee.reason in grid[-1].why  # the table's and --json's row: the knee line's words
    # the grid's own figures (each step against the one before) are single runs', and say so
    steps = [f for g in grid for f in _FIGURE.findall(g.why.replace(knee.reason, ""))]
    assert steps and all(whose == "single runs" for _, _, whose in steps)
    assert f"(noise ±{analysis.separation(noise[THROUGHPUT], 1, 2):.1%} between single runs)" in grid[1].why
    # a knee found says the best rise over it against the band it was judged by, and says whose it is
    flat = _ladder([(1, 100, 60, None, None), (2, 200, 50, None, None), (4, 400, 40, None, None),
                    (8, 410, 30, None, None)], spread=0.10)
    found = analysis.find_knee(analysis.curve(flat), analysis.noise(flat, THROUGHPUT))
    assert found is not None and found.conc == 4
    band = analysis.separation(analysis.noise(flat, THROUGHPUT), 4, 8, 3, 3)
    assert f"the best, conc 8: Throughput per GPU +2.5% (noise ±{band:.1%} between means of 3 runs each)" \
        in found.reason
    assert analysis.band_words(0.2, 1, 2) == "noise ±20.0% between a single run and the mean of 2 runs"
