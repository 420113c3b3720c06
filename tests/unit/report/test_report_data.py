"""The dashboard payload: every point and series present, invalid ones flagged, secrets never embedded."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from support.synthetic import (
    SyntheticPoint,
    run_of_failures,
    synthetic_job,
    write_coinciding_run,
    write_repeated_run,
    write_smoke_series_run,
    write_synthetic_run,
)

from llmsweep.metrics.model import DeploymentBlock, Summary, Verdict
from llmsweep.report.data import build_payload, scrub
from llmsweep.results.frontier import X_AXES
from llmsweep.results.point import points_from_run
from llmsweep.results.rundir import RunDir, load_run


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
    assert p.records_path is not None
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


SECRET_KEYS = ("env", "ENV", "environment", "extra_env", "HF_TOKEN", "hf_token", "token", "HUGGING_FACE_HUB_TOKEN",
               "auth_token", "access_token", "accessToken", "github_token", "NGC_API_TOKEN", "refresh_token",
               "hftoken", "api_key", "apiKey", "x-api-key", "OPENAI_API_KEY", "aws_secret_access_key",
               "AWS_ACCESS_KEY_ID", "private_key", "password", "db_password", "passwd", "passphrase", "secret",
               "client_secret", "authorization", "Authorization", "auth", "cookie", "cookies", "credentials",
               "bearer_token")
TEXT_KEYS = ("tokenizer", "tokenizer_name", "num-draft-tokens", "num_draft_tokens", "cpu_us_per_output_token",
             "time_to_first_token", "inter_token_latency", "max_tokens", "prompt_tokens", "tokens_per_joule",
             "token_usage", "recipe_key", "reuse_key", "recipe_fingerprint", "engine_version", "author", "image",
             "hf_revision")


def test_scrub_hides_secrets_by_whole_words_not_tokenizer_or_token_counts() -> None:
    """`token` matched anywhere in a key, so the drill-down hid `provenance.workload.tokenizer`, `tokenizer_name`,
    `num-draft-tokens` and `cpu_us_per_output_token`: a key is a secret by its whole words. Both directions: every
    secret key still goes, every key about text (a tokenizer, a count or rate of tokens) stays."""
    doc = {"provenance": {"workload": {k: f"value-of-{k}" for k in (*SECRET_KEYS, *TEXT_KEYS)}}}
    kept = scrub(doc)["provenance"]["workload"]
    assert sorted(kept) == sorted(TEXT_KEYS), sorted(set(kept) ^ set(TEXT_KEYS))
    assert set(kept.values()) == {f"value-of-{k}" for k in TEXT_KEYS}  # no secret's value, under any key


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
    assert payload["missing"] == [{"job_id": run.jobs[0].job_id, "status": "launch_failed", "kind": "failed",
                                   "reason": "server exited 1"}]


def _set_verdict(run: RunDir, job_id: str, verdict: Verdict, reasons: list[str]) -> None:
    """Rewrite one job's summary with another verdict, as the gates would have written it."""
    from llmsweep.metrics.model import Summary

    path = run.path / "jobs" / job_id / "summary.json"
    summary = Summary.load(path)
    summary.validity.verdict = verdict
    summary.validity.reasons = reasons
    path.write_text(json.dumps(summary.dump()), encoding="utf-8")


def test_points_come_sorted_by_series_then_concurrency_as_a_number(tmp_path) -> None:
    concs = (16, 1, 12, 4)  # as job folders these sort by string: conc1, conc12, conc16, conc4
    pts = [SyntheticPoint(synthetic_job(conc=c, framework=fw, job_id=f"{fw}-conc{c}"), requests=10)
           for fw in ("vllm", "sglang") for c in concs]
    run = write_synthetic_run(tmp_path / "r", pts)
    assert [j.job_id for j in run.jobs][:4] == ["sglang-conc1", "sglang-conc12", "sglang-conc16", "sglang-conc4"]
    payload = build_payload(run, points_from_run(run), details=False)
    labels = {s["key"]: s["label"] for s in payload["series"]}
    rows = [(labels[p["series"]], p["metrics"]["conc"]) for p in payload["points"]]
    assert rows == sorted(rows) and [c for _, c in rows] == [1, 4, 12, 16, 1, 4, 12, 16]
    assert [s["label"] for s in payload["series"]] == sorted(labels.values())  # the legend follows the table
    assert len({s["color"] for s in payload["series"]}) == 2


def test_every_point_carries_its_verdict_reason_and_request_count(report_run) -> None:
    points = {p.result_id: p for p in points_from_run(report_run)}
    payload = build_payload(report_run, list(points.values()), details=False)
    for p in payload["points"]:
        assert p["reason"] == "; ".join(p["reasons"]) if p["reasons"] else p["reason"] == ""
        summary = points[p["id"]].summary
        assert summary is not None
        req = summary.requests
        assert p["requests"] == {"finished": req.successful + req.failed, "successful": req.successful}
        assert req.successful > 0
    (bad,) = [p for p in payload["points"] if not p["valid"]]
    assert "realised TP 4 differs from the job's tp 8" in bad["reason"]


def test_a_policy_refused_job_is_listed_with_the_reason_run_json_recorded(tmp_path) -> None:
    run = write_synthetic_run(tmp_path / "r", [SyntheticPoint(synthetic_job(conc=2), requests=10)],
                              expected_extra=("refused-conc4", "not-reached"))
    meta = json.loads((run.path / "run.json").read_text())
    reason = "policy error [grid.max-conc] conc [4] above policy.max-conc 2 (fix: drop the points above it)"
    meta["outcomes"] = [{"job_id": "refused-conc4", "exp_name": "x", "status": "refused", "reasons": [reason],
                         "summary_path": None, "seconds": None}]
    (run.path / "run.json").write_text(json.dumps(meta))
    run = load_run(run.path)
    payload = build_payload(run, points_from_run(run), details=False)
    by_id = {m["job_id"]: m for m in payload["missing"]}
    assert by_id["refused-conc4"] == {"job_id": "refused-conc4", "status": "refused", "kind": "refused",
                                      "reason": reason}
    assert by_id["not-reached"]["status"] == "missing" and "no job folder" in by_id["not-reached"]["reason"]
    assert payload["verdicts"]["refused"] == {"count": 1, "reasons": [{"reason": reason, "count": 1,
                                                                       "ids": ["refused-conc4"]}]}
    assert payload["empty"] is None


def test_identical_failures_make_one_banner_line_and_an_empty_run_says_so(failed_run, tmp_path) -> None:
    run = failed_run
    ids = list(run.expected_job_ids)
    (error,) = {r for j in run.jobs for r in j.outcome["reasons"]}
    payload = build_payload(run, points_from_run(run), details=False)
    assert payload["points"] == [] and len(payload["missing"]) == 9
    assert payload["verdicts"] == {"failed": {"count": 9, "reasons": [{"reason": error, "count": 9, "ids": ids}]}}
    assert payload["empty"] == "No result in this run: 9 expected jobs, 9 without a result."

    nothing = tmp_path / "nothing"
    (nothing / "jobs").mkdir(parents=True)
    empty = build_payload(load_run(nothing), [], details=False)
    assert empty["missing"] == [] and empty["verdicts"] == {} and "no result and no recorded job" in empty["empty"]


def test_smoke_reasons_that_differ_only_in_numbers_are_grouped_with_their_range(tmp_path) -> None:
    pts = [SyntheticPoint(synthetic_job(conc=c, job_id=f"j{c}"), requests=10) for c in (1, 2, 4)]
    run = write_synthetic_run(tmp_path / "r", pts)
    _set_verdict(run, "j1", "smoke", ["smoke run: profile window 1 s is shorter than 900 s"])
    _set_verdict(run, "j2", "smoke", ["smoke run: profile window 2.5 s is shorter than 900 s"])
    _set_verdict(run, "j4", "invalid", ["error ratio 0.30 above 0.05", "fp8 model served as bf16"])
    run = load_run(run.path)
    payload = build_payload(run, points_from_run(run), details=False)
    smoke = payload["verdicts"]["smoke"]
    assert smoke["count"] == 2
    assert [(g["reason"], g["count"]) for g in smoke["reasons"]] == [
        ("smoke run: profile window 1–2.5 s is shorter than 900 s", 2)]
    invalid = payload["verdicts"]["invalid"]
    assert invalid["count"] == 1 and {g["reason"] for g in invalid["reasons"]} == {
        "error ratio 0.30 above 0.05", "fp8 model served as bf16"}
    assert [p["verdict"] for p in payload["points"]] == ["smoke", "smoke", "invalid"]
    assert payload["points"][2]["reason"] == "error ratio 0.30 above 0.05; fp8 model served as bf16"


def test_group_reasons_keeps_distinct_reasons_apart_most_frequent_first() -> None:
    from llmsweep.report.data import group_reasons

    groups = group_reasons([("server exited 1", "a"), ("out of memory on GPU 3", "b"), ("server exited 1", "c"),
                            ("server exited 137", "d"), ("model qwen3.5 not found", "e")])
    assert groups[0] == {"reason": "server exited 1–137", "count": 3, "ids": ["a", "c", "d"]}
    assert {g["reason"] for g in groups[1:]} == {"out of memory on GPU 3", "model qwen3.5 not found"}


def test_a_reused_job_is_said_as_reused_not_as_a_job_without_a_result(tmp_path: Path) -> None:
    """A fully reused `run --reuse` said "No result in this run … 2 missing" and listed its jobs as failed."""
    from llmsweep.report.data import empty_message, no_result_entries, verdict_groups

    ids = ["job-a_conc2", "job-a_conc4"]
    meta = {"run_id": "run-b", "expected_job_ids": ids,
            "reused": {i: {"run_id": "run-a", "job_id": i, "result_id": f"r-{i}", "verdict": "valid"} for i in ids}}
    run = RunDir(path=tmp_path, run_id="run-b", meta=meta)
    missing = no_result_entries(run, set())
    assert [(m["job_id"], m["kind"]) for m in missing] == [(i, "reused") for i in ids]
    # not drawn (no store read): the reason says which result it stands on, why it is not drawn and how to draw it
    assert all("reused the valid result of run run-a" in m["reason"] and "not drawn: no results store was read"
               in m["reason"] and "--store STORE` draws it" in m["reason"] for m in missing)
    assert verdict_groups([], missing).keys() == {"reused"}
    assert empty_message(0, missing) == "No result in this run: 2 expected jobs, 2 reused from earlier runs."


def test_overlaying_the_run_a_reused_point_came_from_draws_that_point_once(tmp_path: Path) -> None:
    """`report RUN --with EARLIER` of a `run --reuse` run: the reused points are drawn in the run's series, marked
    reused; the overlay adds the earlier run's other points, never a second copy under the same id."""
    from support.synthetic import write_reusing_run

    from llmsweep.results.store import Store

    store = tmp_path / "store.sqlite"
    run = write_reusing_run(tmp_path, store)
    with Store(store, readonly=True) as opened:
        earlier = opened.results("earlier-run")
        reused = opened.reused_points(run.reused, by=run.run_id)
    kept, stood = earlier[0], dict(list(reused.items())[1:])  # one earlier point not reused: only the overlay has it
    payload = build_payload(run, points_from_run(run), overlay=earlier, reused=stood, details=False)
    ids = [p["id"] for p in payload["points"]]
    assert len(ids) == len(set(ids)) == 1 + len(earlier)
    by_id = {p["id"]: p for p in payload["points"]}
    assert all(by_id[p.result_id]["reused"] and not _overlay(payload, by_id[p.result_id]) for p in stood.values())
    assert by_id[kept.result_id]["reused"] is None and _overlay(payload, by_id[kept.result_id])
    # the earlier run's points the run stood on whole are drawn once, as the run's; the page says so
    notes = payload["overlay_notes"]
    assert len(notes) == len(stood) and all("is not drawn again" in n and "as run reusing-run's point" in n
                                            for n in notes), notes
    from llmsweep.report.markdown import run_summary_markdown

    assert all(f"> note: {n}" in run_summary_markdown(payload) for n in notes)


def _overlay(payload: dict, point: dict) -> bool:
    return bool(next(s for s in payload["series"] if s["key"] == point["series"])["overlay"])


def test_what_the_simulator_does_not_model_has_its_own_banner_not_the_engine_refusal_one() -> None:
    """A disaggregated DP-attention job was said under `a real engine would refuse them`: it would run there, the
    simulator merely does not model DP attention."""
    from llmsweep.report.data import verdict_groups
    from llmsweep.sim_warnings import engine_refuses, not_modelled

    refuses, missed = engine_refuses("engine.known-incompatibility", "HiCache with direct I/O"), \
        not_modelled(["DP attention"])
    points = [{"id": f"r{n}", "job_id": f"j{n}", "verdict": "valid", "valid": True, "reasons": [], "reason": ""}
              for n in range(3)]
    groups = verdict_groups(points, [], {"r0": [missed], "r1": [missed, refuses], "r2": [
        "it does not model DP attention: their points predict them as if off"]})  # as runs recorded it before
    assert groups["not-modelled"]["count"] == 3 and groups["simulated-only"]["count"] == 1
    assert [g["ids"] for g in groups["simulated-only"]["reasons"]] == [["r1"]]
    assert {r["reason"] for r in groups["not-modelled"]["reasons"]} == {
        missed, "it does not model DP attention: their points predict them as if off"}


def _eval_only_run(root: Path) -> RunDir:
    """One eval-only job whose eval did not pass: the run's only result is an eval."""
    from llmsweep.metrics.model import EvalBlock, EvalMetric, EvalRun, Summary

    point = SyntheticPoint(synthetic_job(conc=16, job_id="eval-only-conc16"), speed=1.0, requests=8)
    run = write_synthetic_run(root, [point], run_id="evals-run")
    path = run.path / "jobs" / point.job["id"] / "summary.json"
    summary = Summary.load(path)
    why = "eval gsm8k: exact_match,strict-match = 0.0000 is below the threshold 0.90 (default.gsm8k.exact_match)"
    summary.validity.verdict, summary.validity.reasons = "invalid", [why]
    summary.eval = EvalBlock(
        mode="eval-only", task="gsm8k", dataset="arith.jsonl", context_length=9472, max_tokens=5376, score=0.0,
        score_name="exact_match,strict-match", score_stderr=0.0, verdict="invalid", reasons=[why],
        harness_version="0.4.13",
        runs=[EvalRun(conc=16, status="completed", n_samples=4, command=["lm_eval"],
                      metrics=[EvalMetric(name="exact_match,strict-match", value=0.0, stderr=0.0)])])
    path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    return load_run(run.path)


def test_a_run_of_evals_only_says_its_results_are_evals_and_which_did_not_pass(tmp_path: Path) -> None:
    """The page said `no result to plot: the run has no job` with no banner, summary.md `0 points in 0 series ·
    source: – · 0 invalid`, while `report --json` counted 1 point, 1 invalid."""
    from llmsweep.report import write_report

    run = _eval_only_run(tmp_path / "run")
    payload = build_payload(run, points_from_run(run))
    assert payload["points"] == [] and len(payload["evals"]) == 1
    assert (payload["counts"]["points"], payload["counts"]["evals"], payload["counts"]["evals_failed"]) == (0, 1, 1)
    banner = payload["verdicts"]["eval-failed"]
    assert banner["count"] == 1 and banner["reasons"][0]["ids"] == ["eval-only-conc16"]
    assert "below the threshold 0.90" in banner["reasons"][0]["reason"]
    assert payload["headline"].startswith("1 eval, 1 did not pass (no throughput point: the run's results are evals)")
    assert "source: simulated" in payload["headline"]
    files = write_report(run, tmp_path / "report", png=False)
    md = files.markdown.read_text()
    assert "0 points" not in md and "1 eval, 1 did not pass" in md and "source: simulated" in md
    assert "### Frontier" not in md and "| eval-only | gsm8k |" in md
    assert (files.points, files.invalid, files.evals, files.evals_failed) == (0, 0, 1, 1)


def _warned_run(root: Path) -> tuple[RunDir, str, str]:
    """Two series that share concurrencies 4 and 8; the vllm jobs ran on the simulator with an engine rule broken and
    the sglang conc-8 one with DP attention, which the simulator does not model."""
    from llmsweep.sim_warnings import engine_refuses, not_modelled

    points = [SyntheticPoint(synthetic_job(conc=c, framework=fw), speed=s, requests=20)
              for fw, s in (("sglang", 1.0), ("vllm", 0.8)) for c in (4, 8)]
    run = write_synthetic_run(root, points, run_id="warned-run")
    refuses = engine_refuses("engine.known-incompatibility", "HiCache with the direct I/O backend")
    missed = not_modelled(["DP attention"])
    meta = json.loads((run.path / "run.json").read_text())
    said = {points[1].job["id"]: [missed], points[2].job["id"]: [refuses], points[3].job["id"]: [refuses]}
    meta["outcomes"] = [{"job_id": jid, "exp_name": "x", "status": "valid", "warnings": w} for jid, w in said.items()]
    (run.path / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    return load_run(run.path), refuses, missed


def test_a_warned_point_carries_its_warnings_and_summary_md_says_them_with_series_and_conc(tmp_path: Path) -> None:
    """summary.md showed a warned frontier point as plain `valid` and said no warning at all; a PR comment read the
    simulator's prediction of a job a real engine would refuse as a valid result."""
    from llmsweep.report.markdown import run_summary_markdown

    run, refuses, missed = _warned_run(tmp_path / "run")
    payload = build_payload(run, points_from_run(run))
    by_conc = {(p["identity"]["engine"], p["metrics"]["conc"]): p for p in payload["points"]}
    assert by_conc[("vllm", 4)]["warnings"] == [refuses] and by_conc[("sglang", 4)]["warnings"] == []
    assert by_conc[("sglang", 8)]["warnings"] == [missed]
    md = run_summary_markdown(payload)
    rows = [line for line in md.splitlines() if line.startswith("| Qwen")]
    vllm = [r for r in rows if "vllm" in r.split("|")[1]]
    (note,) = [line.split()[0] for line in md.splitlines() if line.startswith("⚠") and refuses in line]
    assert vllm and all(r.rstrip(" |").endswith(f"valid {note}") for r in vllm), rows
    labels = {s["key"]: s["label"] for s in payload["series"]}
    vllm_label = labels[by_conc[("vllm", 4)]["series"]]
    sglang_label = labels[by_conc[("sglang", 8)]["series"]]
    assert "### Simulated although a real engine would refuse them (2 points)" in md
    assert f"- ×2 {refuses} — {vllm_label} · conc 4, 8" in md  # both series have a conc 4 and 8: named
    assert "### Predicted without modelling all their jobs set (1 point)" in md
    assert f"- ×1 {missed} — {sglang_label} · conc 8" in md


def test_an_interrupted_runs_points_carry_the_warnings_their_job_folders_recorded(tmp_path: Path) -> None:
    """A sweep stopped with Ctrl-C writes no outcomes into run.json: its finished jobs' warnings (a real engine would
    refuse them) are only in each job folder's outcome.json. The page and summary.md read run.json alone and showed
    those points as plain `valid`, with no banner; they now read the job folders' outcome.json too."""
    from llmsweep.report.markdown import run_summary_markdown

    run, refuses, missed = _warned_run(tmp_path / "run")
    meta = json.loads((run.path / "run.json").read_text())
    for o in meta.pop("outcomes"):  # what an interrupted run leaves: each job's own outcome.json, none in run.json
        (run.path / "jobs" / o["job_id"] / "outcome.json").write_text(json.dumps(o), encoding="utf-8")
    (run.path / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    run = load_run(run.path)
    payload = build_payload(run, points_from_run(run))
    by_conc = {(p["identity"]["engine"], p["metrics"]["conc"]): p for p in payload["points"]}
    assert by_conc[("vllm", 4)]["warnings"] == [refuses] and by_conc[("vllm", 8)]["warnings"] == [refuses]
    assert by_conc[("sglang", 8)]["warnings"] == [missed] and by_conc[("sglang", 4)]["warnings"] == []
    assert payload["verdicts"]["simulated-only"]["count"] == 2 and payload["verdicts"]["not-modelled"]["count"] == 1
    assert "### Simulated although a real engine would refuse them (2 points)" in run_summary_markdown(payload)


def test_an_interrupted_runs_jobs_stored_as_they_finished_keep_their_warnings_in_the_store(tmp_path: Path) -> None:
    """`run` stores each job as it finishes; a run stopped with Ctrl-C never writes its outcomes into run.json, and
    the store's copy of the run (read by `report RUN_ID`, `results export`) lost the jobs' warnings: a simulated point
    a real engine would refuse was exported as a plain valid one."""
    from llmsweep.results.store import Store

    run, refuses, missed = _warned_run(tmp_path / "run")
    meta = json.loads((run.path / "run.json").read_text())
    for o in meta.pop("outcomes"):  # what an interrupted run leaves: each job's own outcome.json, none in run.json
        (run.path / "jobs" / o["job_id"] / "outcome.json").write_text(json.dumps(o), encoding="utf-8")
    (run.path / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    with Store(tmp_path / "store.sqlite") as store:
        for art in load_run(run.path).jobs:
            assert store.ingest_job(run.path, art.dir)
        warned = store.job_warnings([run.run_id])
        assert sorted(warned.values()) == sorted([[missed], [refuses], [refuses]])
        moved = next(art for art in run.jobs if warned.get((run.run_id, art.job_id)) == [missed])
        shutil.rmtree(moved.dir)  # a rerun moved that attempt aside: neither its result nor its warnings stay
        moved.dir.mkdir()
        assert not store.ingest_job(run.path, moved.dir)
        assert sorted(store.job_warnings([run.run_id]).values()) == [[refuses], [refuses]]


def _failed_to_launch_run(root: Path) -> RunDir:
    """`run --live` where the sim server cannot start: the first job's launch and a relaunch fail (server.log,
    server.2.log, two ports), the rest say the group's server never came up; the log has lines that read as
    Markdown headings and table rows."""
    from llmsweep.execute.failure_text import log_tail, never_came_up

    log = "# simulator\n| not a table |\nerror: simulator: the model does not fit 4 x mi300x\n  fix: raise --tp"
    first = "sim server exited with status 2 while starting (health http://127.0.0.1:34745/health)" + log_tail(
        40, root / "servers/sim-g/server.log", log)
    second = "sim server exited with status 2 while starting (health http://127.0.0.1:46881/health)" + log_tail(
        40, root / "servers/sim-g/server.2.log", log) + " (it exited while starting on 2 launches in a row)"
    reasons = [first, second, never_came_up("sim", "sim-g", second), never_came_up("sim", "sim-g", second)]
    ids = [f"job-conc{c}" for c in (1, 2, 4, 8)]
    return run_of_failures(root, "no-server", dict(zip(ids, reasons, strict=True)))


def test_jobs_whose_server_never_started_are_one_banner_line_and_one_summary_line_each(tmp_path: Path) -> None:
    """The banner said ×2, ×1, ×1 for one cause (the log's name, the never-came-up preamble and the fix's launch
    count differ), and summary.md pasted the 40-line log tail into each list item, where a log line starting with
    `#` or `|` broke the Markdown."""
    from llmsweep.report.markdown import run_summary_markdown

    run = _failed_to_launch_run(tmp_path / "run")
    payload = build_payload(run, points_from_run(run))
    (group,) = payload["verdicts"]["failed"]["reasons"]
    assert group["count"] == 4 and group["reason"] == (
        "sim server exited with status 2 while starting (health http://127.0.0.1:34745–46881/health): "
        "error: simulator: the model does not fit 4 x mi300x")
    assert "--- last 40 lines of" in group["detail"] and "# simulator" in group["detail"]
    md = run_summary_markdown(payload)
    items = [line for line in md.splitlines() if line.startswith("- `job-conc")]
    assert len(items) == 4 and all("does not fit 4 x mi300x" in line for line in items), md
    assert not any(line.startswith(("#", "|")) and "simulator" in line and "###" not in line
                   for line in md.splitlines()), md
    assert "--- last 40 lines" not in md


def test_the_header_says_whether_the_figures_are_virtual_or_wall_clock_time(tmp_path: Path) -> None:
    """The page and summary.md said `source: simulated` alone: a virtual-time prediction and a `--live` run on the
    simulator's HTTP server (wall-clock time) read the same."""
    from llmsweep.metrics.model import Summary
    from llmsweep.report import write_report

    points = [SyntheticPoint(synthetic_job(conc=c), speed=1.0, requests=20) for c in (1, 4)]
    run = write_synthetic_run(tmp_path / "run", points, run_id="clocked")
    for point in points:
        path = run.path / "jobs" / point.job["id"] / "summary.json"
        summary = Summary.load(path)
        summary.provenance.clock = "virtual"
        path.write_text(json.dumps(summary.dump()), encoding="utf-8")
    files = write_report(load_run(run.path), tmp_path / "report", png=False)
    payload = json.loads(files.data.read_text())
    assert payload["headline"] == "2 points in 1 series · source: simulated, virtual time"
    assert {p["clock"] for p in payload["points"]} == {"virtual"}
    assert payload["headline"] in files.markdown.read_text()


def test_a_reused_point_carries_the_warnings_of_the_job_that_stood_on_it(tmp_path: Path) -> None:
    """`run --reuse` of a job the simulator does not fully model: its outcome keeps the warning (run.json, the end
    table), but the page looked the warning up under the earlier run's ids and showed none, and no banner."""
    from support.synthetic import write_reusing_run

    from llmsweep.results.store import Store
    from llmsweep.sim_warnings import not_modelled

    store = tmp_path / "store.sqlite"
    run = write_reusing_run(tmp_path, store)
    with Store(store, readonly=True) as opened:
        stood = opened.reused_points(run.reused, by=run.run_id)
    job, point = next(iter(stood.items()))
    warning = not_modelled(["DP attention"])
    run.meta["outcomes"] = [{"job_id": job, "exp_name": "x", "status": "skipped", "reused": True,
                             "warnings": [warning]}]
    payload = build_payload(run, points_from_run(run), reused=stood, details=False)
    by_id = {p["id"]: p for p in payload["points"]}
    assert by_id[point.result_id]["warnings"] == [warning]
    assert all(p["warnings"] == [] for p in payload["points"] if p["id"] != point.result_id)


def test_a_run_eval_rows_failed_eval_is_one_banner_line_naming_its_drawn_point() -> None:
    """The eval-failed banner gave one line per missed metric (strict, flexible) and named the job by id, though its
    throughput point is drawn: the page could not say which series and concurrency the failed eval belongs to."""
    from llmsweep.report.data import verdict_groups

    point = {"id": "r-16", "job_id": "job-conc16", "verdict": "valid", "valid": True, "reasons": [], "reason": ""}
    reasons = ["eval gsm8k: exact_match,strict-match = 0.0000 is below the threshold 0.90",
               "eval gsm8k: exact_match,flexible-extract = 0.0000 is below the threshold 0.90"]
    evals = [{"job_id": "job-conc16", "verdict": "invalid", "reasons": reasons},
             {"job_id": "eval-only-conc8", "verdict": "invalid", "reasons": []}]
    banner = verdict_groups([point], [], evals=evals)["eval-failed"]
    assert banner["count"] == 2
    lines = {g["reason"]: g["ids"] for g in banner["reasons"]}
    assert lines == {"; ".join(reasons): ["r-16"], "no reason recorded": ["eval-only-conc8"]}, lines


def test_an_eval_that_passed_on_too_few_samples_is_said_as_smoke_not_as_failed() -> None:
    """A `smoke` eval (`--eval-limit`, or a local file's score within its error of the threshold) missed no
    threshold: it was listed under "did not pass" and counted in `evals_failed`. It is a smoke result, with its
    reason, beside the evals that did fail."""
    from llmsweep.report.data import verdict_groups

    smoke = "smoke eval: gsm8k scored 6 of 1319 samples (--eval-limit 6); a pass on part of the task is not a result"
    evals = [{"job_id": "eval-conc8", "verdict": "smoke", "reasons": [smoke]},
             {"job_id": "eval-conc16", "verdict": "invalid", "reasons": ["eval gsm8k: below the threshold"]}]
    groups = verdict_groups([], [], evals=evals)
    assert groups["smoke"]["count"] == 1 and groups["smoke"]["reasons"][0]["reason"] == smoke
    assert groups["eval-failed"]["count"] == 1 and groups["eval-failed"]["reasons"][0]["ids"] == ["eval-conc16"]


def test_a_summary_without_job_json_is_a_job_without_a_result_never_a_point_with_made_up_labels(
        tmp_path: Path) -> None:
    """A job folder missing its job.json was read as a valid point labelled conc 0, tp1, no model or hardware,
    scenario unknown, 1 GPU; it is listed without a result, saying job.json is missing and how to mend it."""
    from llmsweep.report.data import no_result_entries

    run = write_synthetic_run(tmp_path / "r", [SyntheticPoint(synthetic_job(conc=c), requests=20) for c in (1, 4)])
    lost = run.jobs[0]
    (lost.dir / "job.json").unlink()
    (lost.dir / "outcome.json").write_text(json.dumps({"job_id": lost.job_id, "status": "valid", "reasons": []}))
    run = load_run(run.path)
    points = points_from_run(run)
    assert [p.job_id for p in points] == [run.jobs[1].job_id]
    (entry,) = no_result_entries(run, {p.job_id for p in points})
    assert entry["job_id"] == lost.job_id and entry["kind"] == "failed"
    assert entry["reason"].startswith(f"job.json missing in {lost.dir}") and "fix: restore job.json" in entry["reason"]
    payload = build_payload(run, points)
    assert len(payload["points"]) == 1 and payload["missing"][0]["reason"] == entry["reason"]


def test_a_job_whose_outcome_is_valid_but_whose_summary_is_gone_says_so_and_how_to_rebuild_it(
        tmp_path: Path) -> None:
    """The page said "valid: no reason recorded" (its banner "×1 no reason recorded") for a job whose summary.json
    was lost after its outcome.json said valid; it says the summary is missing and how to rebuild it, one banner line
    for every job of that cause."""
    from llmsweep.report.data import no_result_entries, verdict_groups

    run = write_synthetic_run(tmp_path / "r", [SyntheticPoint(synthetic_job(conc=c), requests=20) for c in (1, 4, 8)])
    for job in run.jobs[:2]:
        (job.dir / "summary.json").unlink()
        (job.dir / "outcome.json").write_text(json.dumps({"job_id": job.job_id, "status": "valid", "reasons": []}))
    (run.jobs[1].dir / "records.jsonl").unlink()
    run = load_run(run.path)
    first, second = no_result_entries(run, {run.jobs[2].job_id})
    assert first["reason"] == (f"outcome.json says valid but summary.json is missing (fix: `llmsweep summarize "
                               f"{run.jobs[0].dir}` rebuilds it from records.jsonl)")
    assert first["gist"] == ("outcome.json says valid but summary.json is missing (fix: `llmsweep summarize JOBDIR` "
                             "rebuilds it from records.jsonl)")
    assert second["reason"].startswith("outcome.json says valid but summary.json is missing (fix: records.jsonl is "
                                       f"gone too: `llmsweep run RECIPE --out {run.path} --resume`")
    groups = verdict_groups([], [first, first | {"job_id": "other"}])
    assert [(g["reason"], g["count"]) for g in groups["failed"]["reasons"]] == [(first["gist"], 2)]
    assert "no reason recorded" not in json.dumps([first, second])


def test_a_job_run_json_calls_valid_whose_folder_is_gone_says_so_never_valid_without_a_result(tmp_path: Path) -> None:
    """A run folder whose jobs/ was lost (a copy of run.json alone, a pruned artifact) listed each job under "jobs
    without a result" as `valid: no reason recorded` (banner: "×2 no reason recorded"): a verdict that contradicts
    having no result, and no reason. It says run.json's verdict, that the job folder is missing and the fix, as one
    banner line for every job of that cause."""
    from llmsweep.report.data import no_result_entries
    from llmsweep.report.markdown import run_summary_markdown

    run = write_synthetic_run(tmp_path / "r", [SyntheticPoint(synthetic_job(conc=c), requests=20) for c in (1, 4)])
    meta = json.loads((run.path / "run.json").read_text())
    meta["outcomes"] = [{"job_id": j.job_id, "exp_name": "x", "status": "valid", "reasons": []} for j in run.jobs]
    (run.path / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    for job in run.jobs:
        shutil.rmtree(job.dir)
    run = load_run(run.path)
    entries = no_result_entries(run, set())
    assert [e["status"] for e in entries] == ["no job folder"] * 2
    folder = run.path / "jobs" / entries[0]["job_id"]
    assert entries[0]["reason"] == (f"run.json says valid but its job folder {folder} is missing (fix: restore the "
                                    f"folder from a copy of the run, or `llmsweep run RECIPE --out {run.path} "
                                    "--resume` runs the job again)")
    payload = build_payload(run, points_from_run(run))
    (group,) = payload["verdicts"]["failed"]["reasons"]
    assert group["count"] == 2 and "job folder JOBDIR is missing" in group["reason"]
    assert "no reason recorded" not in json.dumps(payload) + run_summary_markdown(payload)


def test_a_disaggregated_points_identity_says_its_roles_never_a_single_servers_default_tp1(tmp_path: Path) -> None:
    """The drill-down's Identity of a disaggregated job (prefill 2x TP8 EP8 DP-attention, decode 1x TP8) said
    `tp 1 · ep 1 · dp_attn false`: the single-server fields' defaults, which nothing ran. It shows the roles
    (`workers`) and leaves those fields out; an aggregated point keeps them."""
    disagg = synthetic_job(conc=4, framework="sglang-disagg", hardware="mi355x", job_id="disagg-conc4")
    run = write_synthetic_run(tmp_path / "r", [SyntheticPoint(disagg, requests=20),
                                               SyntheticPoint(synthetic_job(conc=4, tp=8), requests=20)])
    for key in ("tp", "pp", "dcp-size", "pcp-size", "ep", "dp-attn"):  # as `plan` writes a disaggregated job.json
        del disagg[key]
    roles = {"pp": 1, "dcp-size": 1, "pcp-size": 1}
    disagg.update(multinode=True, disagg=True, gpus=24,
                  prefill={"num-worker": 2, "tp": 8, "ep": 8, "dp-attn": True, **roles},
                  decode={"num-worker": 1, "tp": 8, "ep": 1, "dp-attn": False, **roles})
    folder = run.path / "jobs" / "disagg-conc4"
    (folder / "job.json").write_text(json.dumps(disagg), encoding="utf-8")
    summary = Summary.load(folder / "summary.json")  # the deployment that served it, as the simulator records it
    summary.deployment = DeploymentBlock(nodes=3, gpus=24, gpus_per_node=8, kv_transfer="mori")
    (folder / "summary.json").write_text(json.dumps(summary.dump()), encoding="utf-8")
    run = load_run(run.path)
    payload = build_payload(run, points_from_run(run))
    shown = {p["job_id"]: p for p in payload["points"]}
    ident = shown["disagg-conc4"]["identity"]
    assert ident["disagg"] is True and ident["workers"] == shown["disagg-conc4"]["topology"]
    assert ident["workers"] == "P2x(tp8 ep8 dpa) D1x(tp8 ep1)"
    assert not {"tp", "pp", "dcp", "pcp", "ep", "dp_attn"} & set(ident), ident
    (agg,) = (p for job, p in shown.items() if job != "disagg-conc4")
    assert agg["identity"]["tp"] == 8 and agg["identity"]["dp_attn"] is False and agg["topology"] == "tp8 ep1"


def test_a_records_file_cut_mid_line_is_warned_and_the_drill_down_knows_it_is_incomplete(
        tmp_path: Path, caplog) -> None:
    """A records.jsonl cut mid-line was read in silence (its bad line skipped at debug level): the drill-down drew
    fewer requests than the point's n without a word. The read warns naming the file and the count, and the
    point's drill-down data carries the count so the page says the records are incomplete."""
    import logging

    from llmsweep.report.data import detail_payload

    run = write_synthetic_run(tmp_path / "r", [SyntheticPoint(synthetic_job(conc=c), requests=20) for c in (1, 4)])
    records = run.jobs[0].records_path
    lines = records.read_text().splitlines(keepends=True)
    records.write_text("".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    points = {p.job_id: p for p in points_from_run(load_run(run.path))}
    with caplog.at_level(logging.WARNING):
        cut = detail_payload(points[run.jobs[0].job_id])
        whole = detail_payload(points[run.jobs[1].job_id])
    assert cut["records_skipped"] == 1 and cut["requests_total"] == len(lines) - 1
    assert whole["records_skipped"] == 0
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert said == [f"{records}: 1 line not JSON (cut short?) skipped: what is drawn from it is incomplete"]

def test_a_series_label_says_only_what_every_point_of_it_earned(tmp_path) -> None:
    """Two configurations of one series (MTP K=3 and K=1 on the simulator, each at its estimated acceptance length):
    the label names both lengths, never the first point's as the whole series'."""
    from llmsweep.metrics.model import AcceptanceProvenance

    run = write_synthetic_run(tmp_path / "r", [SyntheticPoint(synthetic_job(conc=c, spec="mtp"), requests=10)
                                               for c in (4, 8)])

    def at(p, value: float):
        prov = p.summary.provenance.model_copy(
            update={"acceptance": AcceptanceProvenance(value=value, source="estimate")})
        return dataclasses.replace(p, summary=p.summary.model_copy(update={"provenance": prov}))

    four, eight = points_from_run(run)
    (series,) = build_payload(run, [at(four, 1.93), at(eight, 3.39)], details=False)["series"]
    assert series["label"].endswith(" · AL 1.93 / 3.39 est.")
    (series,) = build_payload(run, [at(four, 3.39), at(eight, 3.39)], details=False)["series"]
    assert series["label"].endswith(" · AL 3.39 est.")
    (series,) = build_payload(run, [at(four, 3.39), eight], details=False)["series"]
    assert series["label"].endswith(" · AL 3.39 est. (1 of 2 points)")


def test_the_headline_counts_one_point_in_the_singular() -> None:
    from llmsweep.report.data import headline

    counts = {"points": 1, "series": 1, "reused_drawn": 0, "evals": 0, "evals_failed": 0, "source_words": ["measured"],
              "overlaid": 0}
    assert headline(counts).startswith("1 point in 1 series")  # it read "1 points"
    assert headline({**counts, "points": 3}).startswith("3 points in 1 series")


def test_two_configurations_of_one_point_are_two_series_named_by_recipe_key(tmp_path: Path) -> None:
    """mixk: a run measured conc 8 under two recipe keys (MTP K=3 and K=1). The dashboard had drawn one series
    through all four points, its frontier choosing between configurations at conc 8 (`compare` refuses to pool
    them). It draws two, each labelled by its recipe key, each point on its own configuration's frontier."""
    from support.synthetic import write_two_configurations_run

    run = write_two_configurations_run(tmp_path / "mixk")
    payload = build_payload(run, points_from_run(run))
    labels = sorted(s["label"] for s in payload["series"])
    assert len(labels) == 2 and [label.split(" · ")[-1] for label in labels] == [
        "recipe key dsr1-mtp1 [simulated]", "recipe key dsr1-mtp3 [simulated]"], labels
    key_of = {p["job_id"]: p["series"] for p in payload["points"]}
    assert key_of["dsr1-mtp3-conc1"] == key_of["dsr1-mtp3-conc8"] != key_of["dsr1-mtp1-conc8"] \
        == key_of["dsr1-mtp1-conc16"]
    by_id = {p["id"]: p["job_id"] for p in payload["points"]}
    for series, ids in payload["frontiers"]["conc"].items():
        assert len({by_id[i].rsplit("-", 1)[0] for i in ids}) == 1, (series, ids)


def _repeats_runs(tmp_path: Path) -> tuple[RunDir, RunDir]:
    """`run` of one point (`earlier-run`, job J, conc 4) and `run --reuse --repeats 3` over it (`later-run`): its
    first repeat stood on the earlier run's result, its second and third measured (one configuration: repeats)."""
    prov = {"launch": {"fingerprint": "launch-a"}, "clock": "virtual",
            "options": {"concurrency": 4, "duration_s": 60.0}}

    def job(suffix: str = "") -> SyntheticPoint:
        return SyntheticPoint(synthetic_job(conc=4, scenario="fixed-seq-len", job_id=f"J{suffix}"), requests=40,
                              provenance=prov)

    earlier = write_synthetic_run(tmp_path / "earlier", [job()], run_id="earlier-run", seed=1)
    later = write_synthetic_run(tmp_path / "later", [job("-repeat2"), job("-repeat3")], run_id="later-run", seed=2,
                                expected_extra=["J"])
    (first,) = points_from_run(earlier)
    meta = json.loads((later.path / "run.json").read_text(encoding="utf-8"))
    meta["reused"] = {"J": {"run_id": "earlier-run", "job_id": "J", "result_id": first.result_id,
                            "verdict": first.verdict}}
    (later.path / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    return earlier, load_run(later.path)


def _mean(points: list, metric: str = "tput_per_gpu") -> float:
    return sum(p.metric(metric) for p in points) / len(points)


def test_an_overlay_is_drawn_as_its_own_dashboard_draws_it_repeats_it_shares_with_the_run_included(
        tmp_path: Path) -> None:
    """`report EARLIER --with LATER`: LATER's point is the mean of its 3 repeats, one of them EARLIER's result it
    stood on; that result was dropped from the overlay as drawn already, so LATER's point was drawn as the mean of 2
    (214.1 where LATER's own dashboard says 210.3, mean of 3)."""
    earlier, later = _repeats_runs(tmp_path)
    (first,) = points_from_run(earlier)
    measured = points_from_run(later)
    overlay = [*measured, first.stood_on_by("later-run", "J")]  # LATER as `--with` reads it from the store
    own = build_payload(later, measured, reused={"J": first}, details=False)
    (published,) = own["points"]  # LATER's own dashboard
    assert published["repeats"]["n"] == 3
    payload = build_payload(earlier, points_from_run(earlier), overlay=overlay, details=False)
    drawn = [p for p in payload["points"] if p["run_id"] == "later-run"]
    assert len(drawn) == 1 and drawn[0]["repeats"]["n"] == 3
    assert drawn[0]["metrics"]["tput_per_gpu"] == pytest.approx(published["metrics"]["tput_per_gpu"])
    assert drawn[0]["metrics"]["tput_per_gpu"] == pytest.approx(_mean([first, *measured]))
    assert payload["overlay_notes"] == []


def test_an_overlay_whose_result_a_run_stood_a_repeat_on_keeps_its_series(tmp_path: Path) -> None:
    """`report LATER --with EARLIER`: EARLIER's point is one result, a repeat of LATER's point; it is not LATER's
    point, so EARLIER's series is drawn (it vanished, unsaid)."""
    earlier, later = _repeats_runs(tmp_path)
    (first,) = points_from_run(earlier)
    payload = build_payload(later, points_from_run(later), reused={"J": first}, overlay=[first], details=False)
    theirs = [p for p in payload["points"] if _overlay(payload, p)]
    assert [(p["id"], p["repeats"]) for p in theirs] == [(first.result_id, None)]
    assert theirs[0]["metrics"]["tput_per_gpu"] == pytest.approx(first.metric("tput_per_gpu"))
    assert payload["overlays"] == ["earlier-run"] and payload["counts"]["overlaid"] == 1


def test_overlaid_smoke_and_invalid_points_are_the_overlays_not_the_runs(report_run, tmp_path: Path) -> None:
    """`report RUN --with X`: X's smoke points were said as RUN's (its Smoke section, its banner) while the header
    said `0 smoke`. The run's own banners, counts and sections are its points'; X's are said apart, as X's."""
    from llmsweep.report.markdown import run_summary_markdown

    run = write_synthetic_run(tmp_path / "own", [SyntheticPoint(synthetic_job(conc=c), requests=40) for c in (1, 4)],
                              run_id="own-run")
    first, second = points_from_run(run)
    mine = [first, dataclasses.replace(second, verdict="smoke", reasons=("smoke run: profile window 8 s",))]
    theirs = points_from_run(report_run)
    theirs = [dataclasses.replace(theirs[0], verdict="smoke", reasons=("smoke run: profile window 3 s",)),
              *theirs[1:]]
    payload = build_payload(run, mine, overlay=theirs, details=False)
    verdicts, counts = payload["verdicts"], payload["counts"]
    assert verdicts["smoke"]["count"] == counts["smoke"] == 1 and "invalid" not in verdicts
    assert counts["invalid"] == 0 and counts["overlaid"] == len(theirs)
    said = {pid for g in verdicts["smoke"]["reasons"] for pid in g["ids"]}
    assert said == {second.result_id}
    overlaid = payload["overlay_verdicts"]
    assert overlaid["smoke"]["count"] == 1 and overlaid["invalid"]["count"] == 1
    md = run_summary_markdown(payload)
    assert "· 0 invalid · 1 smoke ·" in md
    assert "### Invalid points (shown" not in md
    assert "realised TP 4" in md.split("### Invalid points of the overlaid runs")[1].split("###")[0]
    own_smoke = md.split("### Smoke points (1:")[1].split("###")[0]
    assert "profile window 8 s" in own_smoke and "profile window 3 s" not in own_smoke
    assert "### Smoke points of the overlaid runs (1: their results, not this run's)" in md
    assert "### Invalid points of the overlaid runs (1: their results, not this run's)" in md


def test_a_records_file_with_no_readable_line_is_said_unreadable_not_empty(tmp_path: Path) -> None:
    """A records.jsonl none of whose lines is JSON lost its skipped count (the series was None), so the drill-down
    said `no data` as for a point without records; it now says the file is unreadable, and a file cut short still
    says incomplete."""
    from llmsweep.report.data import detail_payload

    run = write_synthetic_run(tmp_path / "r", [SyntheticPoint(synthetic_job(conc=c), requests=20) for c in (1, 4)])
    garbled, cut = (art.records_path for art in run.jobs)
    garbled.write_text("\x00\x01 not json\n{oops\n\n[1, 2\n", encoding="utf-8")
    text = cut.read_text()
    cut.write_text(text[: len(text) - 40])
    points = {p.job_id: p for p in points_from_run(load_run(run.path))}
    unread, short = (detail_payload(points[art.job_id]) for art in run.jobs)
    assert unread["records_skipped"] == 3 and unread["requests_total"] == 0 and unread["timeline"] == []
    assert unread["records_note"].startswith("records.jsonl is unreadable: none of its 3 lines is JSON"), unread
    assert short["records_skipped"] == 1 and short["requests_total"] > 0
    assert short["records_note"].startswith("records.jsonl is incomplete: 1 line not JSON")
    whole = detail_payload(dataclasses.replace(points[run.jobs[0].job_id], artifact_dir=tmp_path / "gone"))
    assert whole["records_skipped"] == 0 and whole["records_note"] is None  # no file: nothing to say of it


def test_the_reason_of_a_mean_of_repeats_says_each_cause_once_with_a_count(tmp_path: Path) -> None:
    """The Reason cell of a point that is the mean of its repeats restated every repeat's reason with its repeat
    number and 90-character job id (`repeat 1 of 2 (J…) is smoke: …; repeat 2 of 2 (J…-repeat2) is smoke: …`): twelve
    lines a row. It says each cause once with how many repeats it holds for; every repeat's own stays in `reasons`."""
    run = write_repeated_run(tmp_path / "r", repeats=3)
    why = "smoke run: profile window 200 s is shorter than 900 s"
    for job in ("J-conc1", "J-conc1-repeat2", "J-conc1-repeat3", "J-conc4", "J-conc4-repeat3"):
        _set_verdict(run, job, "smoke", [why])
    _set_verdict(run, "J-conc4-repeat2", "invalid", ["realised TP 4 differs from the job's tp 8"])
    payload = build_payload(run, points_from_run(load_run(run.path)), details=False)
    one, four = payload["points"]
    assert one["verdict"] == "smoke" and one["reason"] == f"3 of 3 repeats: {why}", one["reason"]
    assert len(one["reasons"]) == 3 and all("J-conc1" in r for r in one["reasons"])  # the detail, kept
    # an invalid point: its own verdict's cause unprefixed, another verdict's named, most frequent first
    assert four["verdict"] == "invalid"
    assert four["reason"] == (f"2 of 3 repeats smoke: {why}; 1 of 3 repeats: realised TP 4 differs from the job's "
                              "tp 8"), four["reason"]
    assert "J-conc4" not in four["reason"] and len(four["reasons"]) == 3
    # summary.md lists the invalid point with that reason too, not each repeat's joined with its job id
    from llmsweep.report.markdown import run_summary_markdown

    listed = run_summary_markdown(payload).split("### Invalid points (shown")[1].split("###")[0]
    assert f"conc 4): {four['reason']}" in listed and "J-conc4-repeat2" not in listed, listed
    # reasons that differ only in their numbers are one cause, the numbers as their range
    _set_verdict(run, "J-conc1-repeat3", "smoke", ["smoke run: profile window 120 s is shorter than 900 s"])
    payload = build_payload(run, points_from_run(load_run(run.path)), details=False)
    assert payload["points"][0]["reason"] == "3 of 3 repeats: smoke run: profile window 120–200 s is shorter than 900 s"
    # a valid mean of repeats has no reason; a single result keeps its reasons as they are
    valid = build_payload(write_repeated_run(tmp_path / "v"), points_from_run(load_run(tmp_path / "v")), details=False)
    assert [p["reason"] for p in valid["points"]] == ["", ""] and all(p["repeats"] for p in valid["points"])


def test_series_whose_points_coincide_say_so_in_the_legend(tmp_path: Path) -> None:
    """Two series with identical points: the one drawn second hid the other completely (its points and frontier), and
    nothing said it was there. Each series' legend entry says which series it coincides with, at how many of its
    points, and which is drawn under which; the points stay at their values."""
    run = write_coinciding_run(tmp_path / "r")
    payload = build_payload(run, points_from_run(run), details=False)
    none, dram = payload["series"]  # drawn in this order: the offload arm over the GPU-resident one
    assert "offload" not in none["label"] and "offload=dram" in dram["label"], payload["series"]
    said = payload["coincident"]["tput_per_gpu"]
    assert set(said) == {a.key for a in X_AXES}  # identical on every metric: on every axis
    assert said["p90_e2e_norm_intvty"] == {
        none["key"]: f"coincides with {dram['label']} at 2 of its 3 points (identical values; drawn under it)",
        dram["key"]: f"coincides with {none['label']} at all 2 of its points (identical values; drawn over it)"}
    # series that share no point say nothing
    apart = build_payload(write_repeated_run(tmp_path / "apart"), points_from_run(load_run(tmp_path / "apart")),
                          details=False)
    assert apart["coincident"] == {}
    three = build_payload(load_run(tmp_path / "r"), [p for p in points_from_run(run) if p.job_id != "dram-conc16"],
                          details=False)["coincident"]["tput_per_gpu"]["conc"]
    assert three[dram["key"]] == f"coincides with {none['label']} at its point (identical values; drawn over it)"


def test_a_series_of_smoke_points_has_no_frontier_and_says_why(tmp_path: Path) -> None:
    """A series whose points were all smoke had a frontier drawn through them on the page and in the PNGs, as if it
    were a result. A frontier is drawn from valid points only: that series has none, the payload says why for every
    pair of axes (its legend entry and summary.md show it), and a smoke point beside valid ones is left off."""
    from llmsweep.report.markdown import run_summary_markdown

    run = write_smoke_series_run(tmp_path / "r")
    payload = build_payload(run, points_from_run(run), details=False)
    sglang, vllm = payload["series"]
    assert "sglang" in sglang["label"] and "vllm" in vllm["label"]
    for y, by_axis in payload["frontiers_by_y"].items():
        for axis, fronts in by_axis.items():
            assert fronts[sglang["key"]] == [], (y, axis)
            assert payload["no_frontier"][y][axis][sglang["key"]] == ("none of its 3 points is valid (3 smoke); a "
                                                                       "frontier is drawn from valid points only")
    assert all(list(gaps) == [sglang["key"]] for gaps in payload["no_frontier"]["tput_per_gpu"].values())
    # vllm's conc 16 (smoke) is on no frontier, its valid points are
    by_job = {p["job_id"]: p for p in payload["points"]}
    assert not any(by_job["vllm-conc16"]["frontier"].values())
    assert all(by_job["vllm-conc1"]["frontier"].values()) and all(by_job["vllm-conc4"]["frontier"].values())
    md = run_summary_markdown(payload)
    row = next(line for line in md.splitlines() if line.startswith(f"| {sglang['label']} | – | – |"))
    assert row.endswith("| no frontier: none of its 3 points is valid (3 smoke); a frontier is drawn from valid points "
                        "only |"), row


def test_a_means_drill_down_counts_the_requests_of_the_result_it_draws(tmp_path: Path) -> None:
    """The drill-down of a mean of repeats draws its first repeat's records; its payload counts that result's
    requests as its summary does (measured apart from warm-ups), so the page says how many of the mean's requests the
    timeline holds (its badge had counted every repeat's, its timeline one repeat's records with their warm-ups)."""
    run = write_repeated_run(tmp_path / "run", concs=(4,), repeats=3)
    payload = build_payload(run, points_from_run(run))
    (point,) = payload["points"]
    first = Summary.load(run.path / "jobs" / point["job_id"] / "summary.json").requests
    counted = payload["details"][point["id"]]["counted"]
    assert counted == {"measured": first.successful, "failed": first.failed, "cancelled": first.cancelled,
                       "warmup": first.warmup}
    assert point["requests"]["successful"] == 3 * counted["measured"]  # the badge's and the label's n: every repeat's
    assert counted["measured"] + counted["failed"] + counted["cancelled"] + counted["warmup"] == \
        payload["details"][point["id"]]["requests_total"]  # every record the timeline draws, counted once


def test_each_point_says_whether_its_power_figures_were_measured_or_modelled(tmp_path: Path) -> None:
    """The page marks a modelled power figure wherever it shows one: each point carries its power block's source,
    and the metric table says which of its figures come from the power samples (cost, from an assumed price and the
    throughput, is not one of them)."""
    from llmsweep.metrics.model import PowerBlock

    run = write_synthetic_run(tmp_path / "run", [SyntheticPoint(synthetic_job(conc=c), requests=20) for c in (1, 4)])
    for job, source in (("conc1", "simulated"), ("conc4", None)):
        (folder,) = (d for d in (run.path / "jobs").iterdir() if f"_{job}_" in d.name)
        summary = Summary.load(folder / "summary.json")
        summary.power = PowerBlock(source=source, backend="sim" if source else None, power_valid=bool(source),
                                   tokens_per_joule=2.5 if source else None)
        (folder / "summary.json").write_text(json.dumps(summary.dump()), encoding="utf-8")
    payload = build_payload(load_run(run.path), points_from_run(load_run(run.path)), details=False)
    assert sorted((p["metrics"]["conc"], p["power_source"]) for p in payload["points"]) == [(1, "simulated"), (4, None)]
    assert {m["key"] for m in payload["metrics"] if m["power"]} == {"tokens_per_joule", "joules_per_output_token",
                                                                    "avg_power_w"}
    # the mark the page puts after a modelled figure is the one `results show` puts there (`MODELLED_MARK`)
    from llmsweep.metrics.registry import MODELLED_MARK

    assert payload["modelled_mark"] == MODELLED_MARK == "(modelled)"


def test_a_point_says_what_served_it_cpu_for_no_gpu_and_gpu_in_the_singular(tmp_path: Path) -> None:
    """A CPU rehearsal of a real engine records `hardware.gpus: 0`: its drill-down said `1 GPU(s)` (the job's planned
    count, which its per-GPU figures still divide by), a GPU that never served it. It says `CPU` now, and a point on
    GPUs says `1 GPU` or `2 GPUs`, the GPUs it recorded; a result that records no hardware, the count it divides by."""
    def hardware(gpus: int | None) -> dict[str, object]:
        return {"hardware": {"sku": "mi300x", "runner": "cluster:mi300x-synthetic", "gpus": gpus}}

    points = [SyntheticPoint(synthetic_job(conc=1, tp=1), requests=20, provenance=hardware(0)),
              SyntheticPoint(synthetic_job(conc=2, tp=1), requests=20, provenance=hardware(1)),
              SyntheticPoint(synthetic_job(conc=4, tp=2), requests=20, provenance=hardware(2)),
              SyntheticPoint(synthetic_job(conc=8, tp=2), requests=20)]  # provenance.hardware: a SKU name only
    run = load_run(write_synthetic_run(tmp_path / "run", points).path)
    payload = build_payload(run, points_from_run(run), details=False)
    said = {p["metrics"]["conc"]: (p["served_on"], p["gpus"]) for p in payload["points"]}
    assert said == {1: ("CPU", 1), 2: ("1 GPU", 1), 4: ("2 GPUs", 2), 8: ("2 GPUs", 2)}
    # the drill-down's badge shows it as the payload says it: no hand-made `GPU(s)` beside the count
    from importlib.resources import files

    script = files("llmsweep.report").joinpath("assets/dashboard.js").read_text(encoding="utf-8")
    assert "p.served_on" in script and "GPU(s)" not in script


def test_a_series_label_names_its_configuration_never_a_warning_of_its_points(tmp_path: Path) -> None:
    """The seed recipe's HiCache arm on the simulator (`--page-size 1`, which it does not model) was labelled
    `… offload=dram [simulated] · not modelled: \\`--page-size\\` \\`1\\` (its KV …)`: the warning, in a spelling of
    its own, repeated in the legend, every banner line that names the series and every summary.md row. The label
    names the series; the warning is said as a warning (its banner, the points' ⚠), in the words stderr uses."""
    from llmsweep.engines.sim import setting_said
    from llmsweep.report.markdown import run_summary_markdown
    from llmsweep.sim_warnings import catalog_estimates, not_modelled

    unmodelled = [f"{setting_said('--page-size', 1)} (its KV and prefix-hash blocks are 64 tokens)"]
    assert unmodelled[0].startswith("`--page-size 1` (")  # as `validate --simulate` and stderr spell it
    points = [SyntheticPoint(synthetic_job(conc=c, offload=offload), requests=10,
                             provenance={"unmodelled": unmodelled} if offload == "dram" else None)
              for offload in ("none", "dram") for c in (4, 8)]
    run = write_synthetic_run(tmp_path / "r", points, run_id="seed-sim")
    missed, estimates = not_modelled(unmodelled), catalog_estimates(["mi300x hbm_gb"])
    meta = json.loads((run.path / "run.json").read_text())
    meta["outcomes"] = [{"job_id": p.job["id"], "exp_name": "x", "status": "valid",
                         "warnings": [missed, estimates] if "unmodelled" in (p.provenance or {}) else [estimates]}
                        for p in points]
    (run.path / "run.json").write_text(json.dumps(meta), encoding="utf-8")
    run = load_run(run.path)
    payload = build_payload(run, points_from_run(run), details=False)
    labels = {s["key"]: s["label"] for s in payload["series"]}
    assert len(labels) == 2 and not any("modelled" in label or "page-size" in label for label in labels.values())
    hicache = next(label for label in labels.values() if "offload=dram" in label)
    assert hicache.endswith("offload=dram [simulated]"), hicache
    banner = payload["verdicts"]["not-modelled"]  # said once, as a warning, naming the series by its name
    assert banner["count"] == 2 and [g["reason"] for g in banner["reasons"]] == [missed]
    md = run_summary_markdown(payload)
    assert f"- ×2 {missed} — {hicache} · conc 4, 8" in md, md
    rows = [line for line in md.splitlines() if line.startswith("| Qwen")]
    assert rows and not any("page-size" in row for row in rows), rows
    # each row's marks in order, as the notes under the table read (the resident rows numbered the estimates 1)
    assert sorted(row.rstrip(" |").rsplit(" ", 1)[1] for row in rows) == ["⚠1"] * 2 + ["⚠1,2"] * 2, rows
    assert f"⚠1 {estimates}" in md and f"⚠2 {missed}" in md


def test_one_job_without_a_result_names_its_own_folder_in_its_fix(tmp_path: Path) -> None:
    """summary.md's list of jobs without a result, and a banner line of one job, said `llmsweep summarize JOBDIR`:
    the group's placeholder, where the job's own folder is known. Only a line that stands for several jobs keeps it."""
    from llmsweep.report.markdown import run_summary_markdown

    run = write_synthetic_run(tmp_path / "r", [SyntheticPoint(synthetic_job(conc=c), requests=20) for c in (1, 4)])
    lost = run.jobs[0]
    (lost.dir / "summary.json").unlink()
    (lost.dir / "outcome.json").write_text(json.dumps({"job_id": lost.job_id, "status": "valid", "reasons": []}))
    run = load_run(run.path)
    payload = build_payload(run, points_from_run(run))
    said = f"(fix: `llmsweep summarize {lost.dir}` rebuilds it from records.jsonl)"
    (group,) = payload["verdicts"]["failed"]["reasons"]
    assert group["ids"] == [lost.job_id] and said in group["reason"], group
    md = run_summary_markdown(payload)
    assert f"- `{lost.job_id}`: no summary: outcome.json says valid but summary.json is missing {said}" in md, md
    assert "JOBDIR" not in md and "JOBDIR" not in json.dumps(payload["verdicts"])
