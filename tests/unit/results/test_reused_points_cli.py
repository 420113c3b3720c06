"""A run that `run --reuse` stood jobs on stored results: `results frontier` draws those points in the run's series
and frontiers, as its dashboard does; `results list` and `export` of the run say where they are; a reused result its
run has since measured again under another configuration is no longer drawn as the reusing run's."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from support.synthetic import write_reusing_run

from llmsweep.cli.main import cli
from llmsweep.results.rundir import load_run
from llmsweep.results.store import Store


def test_frontier_of_a_reusing_run_stands_on_its_reused_points_and_listings_say_where_they_are(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    run = write_reusing_run(tmp_path, store)
    with Store(store) as opened:
        opened.ingest_run(run.path)
        reused_ids = {p.result_id for p in opened.results("earlier-run")}
    res = CliRunner().invoke(cli, ["results", "frontier", "reusing-run", "--x", "conc", "--json", "--store",
                                   str(store)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    on_front = {p["result_id"] for pts in doc.values() for p in pts}
    assert on_front & reused_ids, doc  # the reused points are in the run's series (they had been left out)
    for cmd in (["results", "list", "--run", "reusing-run"], ["results", "export", "--run", "reusing-run"]):
        res = CliRunner().invoke(cli, [*cmd, "--store", str(store)], catch_exceptions=False)
        assert res.exit_code == 0, res.output
        assert "3 jobs stood on stored results of run earlier-run (`run --reuse`)" in res.stderr, res.stderr


def test_a_reused_result_measured_again_under_another_configuration_is_not_the_reusing_runs(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    run = write_reusing_run(tmp_path, store)
    earlier = tmp_path / "earlier" / "run.json"
    meta = json.loads(earlier.read_text())
    reused = run.meta["reused"]
    jobs = sorted(reused)
    # the earlier run measured two jobs under the keys reused and, rerun with --force since, one under another
    meta["reuse_keys"] = {j: f"key-{j}" for j in jobs[:2]} | {jobs[2]: "another-configuration"}
    earlier.write_text(json.dumps(meta))
    with Store(store) as opened:
        opened.ingest_run(load_run(earlier.parent), replace=True)
        points = opened.reused_points(reused, by=run.run_id)
    assert sorted(points) == jobs[:2]
    # `results frontier` of the reusing run says which job's point it does not draw, and why (the dashboard does;
    # the frontier had drawn two of three points in silence)
    with Store(store) as opened:
        opened.ingest_run(run.path)
    res = CliRunner().invoke(cli, ["results", "frontier", "reusing-run", "--x", "conc", "--json", "--store",
                                   str(store)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert "1 job stood on a stored result not drawn: the results store does not hold it as it was reused" \
        in res.stderr and jobs[2] in res.stderr, res.stderr


def test_report_with_a_reusing_run_draws_the_points_it_stood_on(tmp_path: Path) -> None:
    """`report RUN --with X` drew only X's own results: a run --reuse had stood wholly on stored results added
    nothing, in silence, where X's own dashboard draws them all."""
    store = tmp_path / "store.sqlite"
    reusing = write_reusing_run(tmp_path, store)
    with Store(store) as opened:
        opened.ingest_run(reusing.path)
    other = tmp_path / "other"
    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    base = write_synthetic_run(other, [SyntheticPoint(synthetic_job(conc=2, model="deepseek-ai/DeepSeek-R1-0528"),
                                                     requests=40)], run_id="base-run")
    res = CliRunner().invoke(cli, ["report", str(base.path), "--out", str(tmp_path / "rep"), "--no-png", "--with",
                                   "reusing-run", "--store", str(store), "--json"], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["overlaid"] == 4  # its own measured point and the three it stood on
    # drawn as that run's (its series, its label), as its own dashboard draws them: not as the earlier run's
    data = json.loads((tmp_path / "rep" / "data.json").read_text())
    assert data["overlays"] == ["reusing-run"], data["overlays"]


def test_a_retired_result_is_read_for_the_runs_that_stood_on_it_under_the_key_it_was_measured_with(
        tmp_path: Path) -> None:
    """A job its run retired (run.json's `retired`: moved to `retired/<id>`) is none of the run's results, and the
    store keeps it for the runs that stood on it, read under the key its retirement recorded: where that is not the
    key the reusing run stood on (the job measured again under another configuration, then retired again), it is not
    drawn as the reusing run's."""
    import shutil

    store = tmp_path / "store.sqlite"
    run = write_reusing_run(tmp_path, store)
    earlier = tmp_path / "earlier"
    jobs = sorted(run.meta["reused"])
    (earlier / "retired").mkdir()
    for job in jobs[1:]:
        shutil.move(earlier / "jobs" / job, earlier / "retired" / job)
    meta = json.loads((earlier / "run.json").read_text())
    meta["reuse_keys"] = {jobs[0]: f"key-{jobs[0]}"}
    meta["retired"] = {jobs[1]: {"dir": f"retired/{jobs[1]}", "reuse_key": f"key-{jobs[1]}"},
                       jobs[2]: {"dir": f"retired/{jobs[2]}", "reuse_key": "another-configuration"}}
    (earlier / "run.json").write_text(json.dumps(meta))
    with Store(store) as opened:
        opened.ingest_run(load_run(earlier), replace=True)
        assert [p.job_id for p in opened.results("earlier-run")] == jobs[:1]  # the run's own
        assert [r.results for r in opened.runs() if r.run_id == "earlier-run"] == [1]
        assert opened.result_job_ids("earlier-run") == jobs[:1]
        points = opened.reused_points(run.meta["reused"], by=run.run_id)
    assert sorted(points) == jobs[:2], sorted(points)
    assert points[jobs[1]].artifact_dir == (earlier / "retired" / jobs[1]).resolve()
    # `run` names the runs that stand on a result it retires: not one that stood on it under another key
    with Store(store) as opened:
        opened.ingest_run(run.path)
        assert opened.retire_job(earlier, jobs[1]) == ["reusing-run"]
        assert opened.retire_job(earlier, jobs[2]) == []
        assert [p.job_id for p in opened.results("earlier-run")] == jobs[:1]
        assert sorted(opened.reused_points(run.meta["reused"], by=run.run_id)) == jobs[:2]
    # planned again since: the job's folder in `jobs/` is its run's job again, and its retired entry is passed over
    shutil.copytree(earlier / "retired" / jobs[1], earlier / "jobs" / jobs[1])
    with Store(store) as opened:
        opened.ingest_run(load_run(earlier), replace=True)
        assert [p.job_id for p in opened.results("earlier-run")] == jobs[:2]


def test_retiring_a_job_names_the_runs_that_stood_on_the_measurement_it_retires(tmp_path: Path) -> None:
    """`run` names the runs that stand on a result it retires as it names those of a result it measures again
    (`Store.standing_on`): by the measurement each reusing run's record names. Asked without it, retiring named a run
    that had stood on an earlier measurement of the job (one the store never kept for it) as standing on this one, and
    left out a run that stood anew (`--reuse --force`) on this one after standing on an attempt kept for it."""
    import shutil

    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    store = tmp_path / "store.sqlite"
    earlier = tmp_path / "earlier"
    job = synthetic_job(conc=4)
    job_id = str(job["id"])
    write_synthetic_run(earlier, [SyntheticPoint(job, requests=40, provenance={"started_at": 100.0,
                                                                                "finished_at": 200.0})],
                        run_id="earlier-run")
    meta = json.loads((earlier / "run.json").read_text())
    meta["reuse_keys"] = {job_id: f"key-{job_id}"}
    # the job measured again once before: the attempt (10.0..20.0) kept for `anew-run`, which stood on it then
    meta["kept_attempts"] = {f"jobs/{job_id}/attempts/1": {"job_id": job_id, "reuse_key": f"key-{job_id}",
                                                            "runs": ["anew-run"], "measured_at": "10.0..20.0"}}
    (earlier / "run.json").write_text(json.dumps(meta))
    with Store(store) as opened:
        opened.ingest_run(load_run(earlier))
        held = opened.results("earlier-run")[0]
    stood = {"run_id": "earlier-run", "job_id": job_id, "result_id": held.result_id, "verdict": held.verdict,
             "reuse_key": f"key-{job_id}"}
    for k, (run_id, measured) in enumerate([("current-run", "100.0..200.0"), ("anew-run", "100.0..200.0"),
                                            ("late-run", "50.0..60.0")]):
        other = write_synthetic_run(tmp_path / run_id, [SyntheticPoint(synthetic_job(conc=8 + k), requests=40)],
                                    run_id=run_id, expected_extra=[job_id])
        doc = json.loads((other.path / "run.json").read_text())
        doc["reused"] = {job_id: {**stood, "measured_at": measured}}
        (other.path / "run.json").write_text(json.dumps(doc))
        with Store(store) as opened:
            opened.ingest_run(load_run(other.path))
    # the recipe no longer plans the job: `run` retires it
    (earlier / "retired").mkdir()
    shutil.move(earlier / "jobs" / job_id, earlier / "retired" / job_id)
    meta["reuse_keys"] = {}
    meta["retired"] = {job_id: {"dir": f"retired/{job_id}", "reuse_key": f"key-{job_id}"}}
    (earlier / "run.json").write_text(json.dumps(meta))
    with Store(store) as opened:
        assert sorted(opened.retire_job(earlier, job_id)) == ["anew-run", "current-run"]
        # and each of them still draws the retired measurement as the one it stood on; the late run, whose record
        # names another measurement, does not
        assert list(opened.reused_points({job_id: {**stood, "measured_at": "100.0..200.0"}}, by="anew-run")) == [
            job_id]
        assert opened.reused_points({job_id: {**stood, "measured_at": "50.0..60.0"}}, by="late-run") == {}


def test_retiring_a_job_whose_result_the_store_cannot_keep_names_no_run_as_standing_on_it(tmp_path: Path) -> None:
    """`run` says the runs standing on a result it retires have it kept for them; where the retired folder holds no
    result the store can keep (its summary gone), none is kept, and none is named (as `Store.standing_on` names none
    of a job measured again whose result the store does not hold) — it named the runs that had stood on it."""
    import shutil

    from support.synthetic import SyntheticPoint, synthetic_job, write_synthetic_run

    store = tmp_path / "store.sqlite"
    earlier = tmp_path / "earlier"
    job = synthetic_job(conc=4)
    job_id = str(job["id"])
    write_synthetic_run(earlier, [SyntheticPoint(job, requests=40)], run_id="earlier-run")
    meta = json.loads((earlier / "run.json").read_text())
    meta["reuse_keys"] = {job_id: f"key-{job_id}"}
    (earlier / "run.json").write_text(json.dumps(meta))
    with Store(store) as opened:
        opened.ingest_run(load_run(earlier))
        held = opened.results("earlier-run")[0]
    other = write_synthetic_run(tmp_path / "current", [SyntheticPoint(synthetic_job(conc=8), requests=40)],
                                run_id="current-run", expected_extra=[job_id])
    doc = json.loads((other.path / "run.json").read_text())
    doc["reused"] = {job_id: {"run_id": "earlier-run", "job_id": job_id, "result_id": held.result_id,
                              "verdict": held.verdict, "reuse_key": f"key-{job_id}"}}
    (other.path / "run.json").write_text(json.dumps(doc))
    with Store(store) as opened:
        opened.ingest_run(load_run(other.path))
    (earlier / "retired").mkdir()
    shutil.move(earlier / "jobs" / job_id, earlier / "retired" / job_id)
    (earlier / "retired" / job_id / "summary.json").unlink()
    meta["reuse_keys"] = {}
    meta["retired"] = {job_id: {"dir": f"retired/{job_id}", "reuse_key": f"key-{job_id}"}}
    (earlier / "run.json").write_text(json.dumps(meta))
    with Store(store) as opened:
        assert opened.retire_job(earlier, job_id) == []
