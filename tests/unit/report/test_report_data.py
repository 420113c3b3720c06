"""The dashboard payload: every point and series present, invalid ones flagged, secrets never embedded."""

from __future__ import annotations

import json

from llmsweep.report.data import build_payload, scrub
from llmsweep.results.frontier import X_AXES
from llmsweep.results.point import points_from_run


def test_every_point_series_and_missing_job_is_in_the_payload(report_run) -> None:
    points = points_from_run(report_run)
    payload = build_payload(report_run, points)
    assert len(payload["points"]) == 10
    assert len(payload["series"]) == 3
    assert [m["job_id"] for m in payload["missing"]] == ["never-ran"]
    assert payload["sources"] == ["simulated"]
    assert {a["key"] for a in payload["axes"]} == {a.key for a in X_AXES}
    invalid = [p for p in payload["points"] if not p["valid"]]
    assert len(invalid) == 1 and "realised TP 4" in invalid[0]["reasons"][-1]
    assert not any(invalid[0]["frontier"].values())  # shown, never on a frontier
    for axis, by_series in payload["frontiers"].items():
        for ids in by_series.values():
            assert all(pid in {p["id"] for p in payload["points"]} for pid in ids), axis
    assert all(payload["frontiers"]["p90_e2e_norm_intvty"].values())  # every series has a north-star frontier


def test_details_come_from_raw_artifacts(report_run) -> None:
    points = points_from_run(report_run)
    payload = build_payload(report_run, points)
    p = points[0]
    d = payload["details"][p.result_id]
    assert d["server_command"].startswith("python -m sglang.launch_server")
    with open(p.records_path) as records:
        assert d["requests_total"] == sum(1 for _ in records)
    assert len(d["timeline"]) == d["requests_shown"] <= 1500
    assert d["ttft"] and d["throughput"] and d["inflight"] and d["kv_usage"] and d["cache_hit"]
    assert all(0 <= v <= 1 for _, v in d["kv_usage"]) and all(0 <= v <= 1 for _, v in d["cache_hit"])
    assert d["validity"]["verdict"] == "valid"


def test_scrub_drops_environment_and_secret_keys() -> None:
    doc = {"image": "x", "env": {"HF_TOKEN": "hf_abc"}, "nested": {"api_key": "k", "ok": 1, "HF_TOKEN": "t"},
           "recipe_key": "keep", "password": "p", "environment": {"A": "b"}}
    clean = scrub(doc)
    assert clean == {"image": "x", "nested": {"ok": 1}, "recipe_key": "keep"}
    assert "hf_abc" not in json.dumps(clean)


def test_overlaid_and_mixed_source_points_stay_in_their_own_series(report_run, tmp_path) -> None:
    import dataclasses

    points = points_from_run(report_run)
    published = [dataclasses.replace(p, run_id="import:agg_bmk-1", result_id=p.result_id + "x", source="measured",
                                     origin="inferencex", artifact_dir=None) for p in points[:3]]
    payload = build_payload(report_run, points, overlay=published)
    assert len(payload["points"]) == 13 and payload["overlays"] == ["import:agg_bmk-1"]
    overlay_series = [s for s in payload["series"] if s["overlay"]]
    assert overlay_series and all(s["run"] == "import:agg_bmk-1" for s in overlay_series)
    ours = {p["series"] for p in payload["points"] if p["run_id"] == "report-run"}
    theirs = {p["series"] for p in payload["points"] if p["run_id"] != "report-run"}
    assert not ours & theirs
    assert payload["details"][published[0].result_id]["timeline"] == []  # imported rows have no raw records

    one = [p for p in points if p.identity.series_key() == points[0].identity.series_key()][:2]
    measured = [dataclasses.replace(p, source="measured", result_id=p.result_id + "m") for p in one]
    apart = build_payload(report_run, one + measured)
    assert len(apart["series"]) == 2 and apart["sources"] == ["measured", "simulated"]
    mixed = build_payload(report_run, one + measured, mix_sources=True)
    assert len(mixed["series"]) == 1 and mixed["mix_sources"] is True


def test_request_budget_shrinks_with_the_number_of_points() -> None:
    from llmsweep.report.data import request_budget

    assert request_budget(1) == 1500
    assert request_budget(200) == 300
    assert request_budget(10_000) == 200


def test_a_job_that_failed_is_listed_with_the_executors_reason(tmp_path) -> None:
    import json as _json

    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    from llmsweep.results.rundir import load_run

    run = write_synthetic_run(tmp_path / "r", [SyntheticPoint(synthetic_job(conc=c), requests=20) for c in (1, 4)])
    failed = run.jobs[0].dir
    (failed / "summary.json").unlink()
    (failed / "outcome.json").write_text(_json.dumps({"job_id": run.jobs[0].job_id, "exp_name": "x",
                                                     "status": "launch_failed", "reasons": ["server exited 1"]}))
    run = load_run(run.path)
    payload = build_payload(run, points_from_run(run))
    assert len(payload["points"]) == 1
    assert payload["missing"] == [{"job_id": run.jobs[0].job_id, "reason": "launch_failed: server exited 1"}]
