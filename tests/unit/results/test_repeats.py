"""Repeats of one point (`run --repeats`) combine into one point before any frontier or published row."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from llmsweep.results.frontier import compute_frontiers
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
