"""Repeats of one point (`run --repeats`) combine into one point before any frontier or published row."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from llmsweep.results.frontier import compute_frontiers, name_series
from llmsweep.results.point import ResultPoint, points_from_run
from llmsweep.results.repeats import combine_repeats


def _repeat(p: ResultPoint, k: int, factor: float, configuration: str = "launch-a", **changes: Any) -> ResultPoint:
    """Repeat k of `p` as `run --repeats` names it, its throughput scaled; `configuration` its launch fingerprint."""
    assert p.summary is not None
    prov = p.summary.provenance
    summary = p.summary.model_copy(update={"provenance": prov.model_copy(
        update={"options": {"concurrency": p.identity.conc, "duration_s": 60.0}})})
    job_id = p.job_id if k == 1 else f"{p.job_id}-repeat{k}"
    metrics = {**p.metrics, "tput_per_gpu": (p.metrics["tput_per_gpu"] or 0) * factor}
    return dataclasses.replace(p, job_id=job_id, result_id=f"{p.result_id}-{k}", metrics=metrics, summary=summary,
                               provenance={**p.provenance, "launch": {"fingerprint": configuration}}, **changes)


def test_repeats_are_one_point_with_their_mean_and_spread(make_run) -> None:
    (p,) = points_from_run(make_run("r", concs=(4,), scenario="fixed-seq-len"))
    one, two = _repeat(p, 1, 1.0), _repeat(p, 2, 1.1)
    with pytest.raises(ValueError, match="combine_repeats"):
        compute_frontiers([one, two])  # the luckier repeat would be the frontier
    (r,) = combine_repeats([two, one])
    assert r.n == 2 and r.members == (one, two) and r.point.result_id == one.result_id
    assert r.point.metric("tput_per_gpu") == pytest.approx(1.05 * (p.metric("tput_per_gpu") or 0))
    assert r.spread("tput_per_gpu") is not None and r.describe() == "mean of 2 repeats"
    assert r.point.num_requests == 2 * (p.num_requests or 0)
    other = _repeat(p, 2, 0.5, configuration="launch-b")  # another configuration of the point: not a repeat of it
    assert [g.n for g in combine_repeats([one, other])] == [1, 1]


def test_a_point_is_valid_only_when_every_repeat_is(make_run) -> None:
    (p,) = points_from_run(make_run("r", concs=(4,), scenario="fixed-seq-len"))
    bad = _repeat(p, 2, 1.5, verdict="invalid", reasons=("error ratio 0.4 > 0.05",))
    (r,) = combine_repeats([_repeat(p, 1, 1.0), bad])
    assert r.point.verdict == "invalid" and not r.point.valid
    assert r.point.reasons == (f"repeat 2 of 2 ({bad.job_id}) is invalid: error ratio 0.4 > 0.05",)
    assert all(ids == [] for ids in compute_frontiers([r.point])["p90_intvty"].values())  # never on a frontier


def test_an_exported_mean_of_repeats_imports_as_one_and_says_so(make_run, tmp_path) -> None:
    """A point measured twice exports as one InferenceX row, their mean; it imported under the first repeat's ids as
    if that repeat had measured it, and a re-export dropped the repeats block."""
    import json

    from llmsweep.results.interchange import export_points, import_file

    (p,) = points_from_run(make_run("r", concs=(4,), scenario="fixed-seq-len"))
    path = tmp_path / "ix.json"
    path.write_text(export_points([_repeat(p, 1, 1.0), _repeat(p, 2, 1.2)], "inferencex", include_unpublished=True))
    (row,) = json.loads(path.read_text())
    assert row["llmsweep"]["repeats"]["n"] == 2
    _, _, (back,) = import_file(path)
    assert any("the mean of 2 repeats" in r for r in back.reasons), back.reasons
    again = json.loads(export_points([back], "inferencex", include_unpublished=True))[0]
    assert again["llmsweep"]["repeats"]["n"] == 2


def test_repeats_a_run_stood_on_another_runs_results_are_repeats_of_its_own_point(make_run) -> None:
    """`run --reuse --repeats 3` over a run of two repeats: the two it stood on keep the earlier run's ids, the third
    is its own. Read as the reusing run's points (`stood_on_by`), all three are one point, the run's own (it measured
    one of them), each saying where it came from; read as the earlier run's, the reused ones stay that run's."""
    (p,) = points_from_run(make_run("earlier", concs=(4,), scenario="fixed-seq-len"))
    one, two = _repeat(p, 1, 1.0), _repeat(p, 2, 1.2)
    third = dataclasses.replace(_repeat(p, 3, 1.1), run_id="later", result_id="r-later-3")
    stood = [one.stood_on_by("later", one.job_id), two.stood_on_by("later", two.job_id)]
    (r,) = combine_repeats([third, *stood])
    assert r.n == 3 and [m.job_id for m in r.members] == [one.job_id, two.job_id, third.job_id]
    assert r.point.result_id == third.result_id and r.point.reused_by is None  # the run's own point
    assert r.point.metric("tput_per_gpu") == pytest.approx(1.1 * (p.metric("tput_per_gpu") or 0))
    assert r.describe() == "mean of 3 repeats, 2 reused from run earlier"
    said = r.as_dict()
    assert said is not None and said["runs"] == ["earlier", "earlier", "later"]
    assert [(s["as"], s["run_id"]) for s in said["reused"]] == [(one.job_id, "earlier"), (two.job_id, "earlier")]
    compute_frontiers([r.point])  # one point, not repeats of one
    with pytest.raises(ValueError, match="combine_repeats"):
        compute_frontiers(stood)  # the reused repeats are repeats of the reusing run's point too
    assert [g.n for g in combine_repeats([third, one, two])] == [1, 2]  # the earlier run's own, as that run's


def test_a_point_every_repeat_of_which_was_reused_stays_the_reused_one(make_run) -> None:
    (p,) = points_from_run(make_run("earlier", concs=(4,), scenario="fixed-seq-len"))
    stood = [_repeat(p, k, 1.0 + k / 10).stood_on_by("later", _repeat(p, k, 1).job_id) for k in (2, 1)]
    (r,) = combine_repeats(stood)
    assert r.point.result_id == stood[1].result_id and r.point.reused_by is not None
    assert r.describe() == "mean of 2 repeats, 2 reused from run earlier"


def test_an_invalid_reused_repeat_is_named_with_the_run_that_measured_it(make_run) -> None:
    (p,) = points_from_run(make_run("earlier", concs=(4,), scenario="fixed-seq-len"))
    bad = _repeat(p, 1, 1.0, verdict="invalid", reasons=("error ratio 0.4 > 0.05",)).stood_on_by("later", p.job_id)
    own = dataclasses.replace(_repeat(p, 2, 1.0), run_id="later", result_id="r-later-2")
    (r,) = combine_repeats([own, bad])
    assert r.point.verdict == "invalid"
    assert r.point.reasons == (f"repeat 1 of 2 ({p.job_id}, reused from run earlier) is invalid: error ratio 0.4 > "
                               "0.05",)


def _built(p: ResultPoint, digest: str | None, image: str, version: str = "0.5.16") -> ResultPoint:
    """`p` as a measured run records what served it: the engine version its server reported, the image it ran in,
    that image's registry digest (None: not read, as a Slurm/pyxis launch)."""
    launch = {**p.provenance["launch"], "engine_version_reported": version, "image": image, "image_digest": digest}
    return dataclasses.replace(p, source="measured", provenance={**p.provenance, "launch": launch})


def test_a_repeat_without_its_image_digest_is_a_repeat_of_its_release_build_as_the_frontier_draws_it(make_run) -> None:
    """`run --reuse --repeats 2` stood repeat 1 on a docker result (image digest read) and measured repeat 2 on
    Slurm (none read) under one release tag. The frontier drew them as one series (one configuration,
    `results.point.configurations`) while combine_repeats kept them apart by the strict configuration: the series
    held two results of one point, and the frontier kept the luckier. They are one point, the mean of both."""
    image = "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730"
    (p,) = points_from_run(make_run("earlier", concs=(4,), scenario="fixed-seq-len"))
    one = _built(_repeat(p, 1, 1.0), "sha256:" + "a" * 64, image).stood_on_by("later", p.job_id)
    two = dataclasses.replace(_built(_repeat(p, 2, 1.2), None, image), run_id="later", result_id="r-later-2")
    series = name_series([one, two]).keys
    assert series[one.result_id] == series[two.result_id]  # one series ...
    with pytest.raises(ValueError, match="combine_repeats"):
        compute_frontiers([one, two])  # ... so the luckier repeat would be its frontier
    (r,) = combine_repeats([two, one])
    assert r.n == 2 and r.point.result_id == two.result_id  # the run's own point
    assert r.point.metric("tput_per_gpu") == pytest.approx(1.1 * (p.metric("tput_per_gpu") or 0))
    # beside two digests of its release it is a repeat of neither; another release is another point
    other = _built(_repeat(p, 3, 0.9), "sha256:" + "b" * 64, image).stood_on_by("later", f"{p.job_id}-repeat3")
    assert sorted(g.n for g in combine_repeats([one, two, other])) == [1, 1, 1]
    newer = dataclasses.replace(_built(_repeat(p, 2, 1.2), None, image, "0.5.17"), run_id="later", result_id="r-l2")
    assert [g.n for g in combine_repeats([one, newer])] == [1, 1]
    # under a moving tag (one reported version over many nightly builds) the digest tells builds apart: not merged
    nightly = [_built(q, d, "lmsysorg/sglang:nightly") for q, d in ((one, "sha256:" + "a" * 64), (two, None))]
    assert [g.n for g in combine_repeats(nightly)] == [1, 1]


def test_an_exported_mean_of_repeats_carries_the_frontiers_figures_when_a_repeat_lacks_one(make_run) -> None:
    """The `llmsweep` block's figures of a row of repeats are the point the frontier draws (`combined_point`: the
    mean of the repeats that have the figure). A second averaging of the members' blocks made a figure one repeat
    lacked None there, while the frontier and the dashboard showed the other repeats' mean."""
    import json

    from llmsweep.results.interchange import export_points

    (p,) = points_from_run(make_run("r", concs=(4,), scenario="fixed-seq-len"))
    one, two = _repeat(p, 1, 1.0), _repeat(p, 2, 1.0)
    two = dataclasses.replace(two, metrics={**two.metrics, "p50_ttft": None})
    assert one.metric("p50_ttft") is not None
    (r,) = combine_repeats([one, two])
    (row,) = json.loads(export_points([one, two], "inferencex", include_unpublished=True))
    assert row["llmsweep"]["metrics"]["p50_ttft"] == pytest.approx(r.point.metric("p50_ttft"))
