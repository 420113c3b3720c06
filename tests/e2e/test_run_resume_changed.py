"""`--resume` keeps a finished job only when its result stands for the job as planned now.

A job id holds the recipe's InferenceX fingerprint only, so engine args, env and the workload change under the same
id: a resume after such an edit kept the finished jobs' old results and ran the rest under the new recipe, one run and
one series mixing two configurations, with nothing said. A finished job whose `job.json` no longer read was kept too,
and the run then failed to store (exit 1, the whole run not stored)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from test_run_support import RECIPES, cli_env, job_dirs, run_here


def _sweep(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    recipe = tmp_path / "fixed.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text())
    out, env = tmp_path / "out", cli_env(tmp_path)
    first = run_here([recipe, "--out", out, "--no-report"], env)
    assert first.returncode == 0, first.stderr[-4000:]
    return recipe, out, env


def _launch_args(job_dir: Path) -> list[str]:
    return list(json.loads((job_dir / "job.json").read_text())["serve"]["args"])


def test_a_resume_after_a_recipe_edit_runs_the_finished_jobs_again_under_it(tmp_path: Path) -> None:
    recipe, out, env = _sweep(tmp_path)
    dirs = list(job_dirs(out).values())
    (dirs[1] / "summary.json").unlink()  # the second job did not finish
    recipe.write_text(recipe.read_text().replace("engine: { name: sim }",
                                                 "engine: { name: sim }\n    args: { --max-running-requests: 3 }"))
    resumed = run_here([recipe, "--out", out, "--no-report", "--resume", "--json"], env)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    said = [line for line in resumed.stderr.splitlines() if "not resumed" in line]
    assert len(said) == 1 and dirs[0].name in said[0], resumed.stderr[-4000:]
    assert "another configuration (serve.args.--max-running-requests changed since); it runs again" in said[0]
    rows = json.loads(resumed.stdout)["jobs"]
    assert [r["resumed"] for r in rows] == [False, False]  # both measured under the recipe as it is now
    for d in dirs:
        assert "--max-running-requests" in _launch_args(d)
    assert "--max-running-requests" not in _launch_args(dirs[0] / "attempts" / "1")  # the earlier result is kept

    again = run_here([recipe, "--out", out, "--no-report", "--resume", "--json"], env)  # nothing changed: both done
    assert again.returncode == 0 and "not resumed" not in again.stderr, again.stderr[-4000:]
    assert [r["resumed"] for r in json.loads(again.stdout)["jobs"]] == [True, True]


def test_a_finished_job_whose_job_json_does_not_read_runs_again_and_the_run_is_stored(tmp_path: Path) -> None:
    recipe, out, env = _sweep(tmp_path)
    broken = next(iter(job_dirs(out).values()))
    (broken / "job.json").write_text((broken / "job.json").read_text()[:50])  # cut short (a full disk, a bad copy)
    resumed = run_here([recipe, "--out", out, "--no-report", "--resume"], env)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert f"job {broken.name}: not resumed — its job.json does not read; it runs again" in resumed.stderr
    assert "could not store" not in resumed.stderr
    assert json.loads((broken / "job.json").read_text())["id"] == broken.name


def test_a_resume_that_forgets_the_runs_repeats_is_refused(tmp_path: Path) -> None:
    """A `--repeats 2` run resumed without `--repeats` planned only the first repeats: the missing second repeat
    never ran, the resume said every expected job was done (exit 0) and rewrote run.json's `repeats` to 1."""
    out, env = tmp_path / "out", cli_env(tmp_path)
    first = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", "--repeats", "2"], env)
    assert first.returncode == 0, first.stderr[-4000:]
    unfinished = next(d for name, d in job_dirs(out).items() if name.endswith("-repeat2"))
    (unfinished / "summary.json").unlink()
    meta = (out / "run.json").read_text()
    refused = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", "--resume"], env)
    assert refused.returncode == 2, refused.stderr[-4000:]
    assert "planned with --repeats 2: repeat 2 of its jobs would never run" in refused.stderr
    assert "fix: resume with --repeats 2" in refused.stderr
    assert (out / "run.json").read_text() == meta and not (unfinished / "attempts").exists()  # nothing touched
    resumed = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", "--resume", "--repeats", "2"], env)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert (unfinished / "summary.json").is_file()


def test_a_force_with_fewer_repeats_than_the_run_is_refused(tmp_path: Path) -> None:
    """`--force` without `--repeats` over a `--repeats 2` run ran the first repeats again and left the second ones'
    results in their folders: stored as the run's (4 results, 2 expected), each point the mean of a repeat run now
    and one the earlier invocation measured ("mean of 2 repeats")."""
    out, env = tmp_path / "out", cli_env(tmp_path)
    first = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", "--repeats", "2"], env)
    assert first.returncode == 0, first.stderr[-4000:]
    meta = (out / "run.json").read_text()
    refused = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", "--force"], env)
    assert refused.returncode == 2, refused.stderr[-4000:]
    assert "--force with --repeats 1, but the run in" in refused.stderr
    assert "repeat 2 of its jobs would keep their earlier results" in refused.stderr
    assert "fix: pass --repeats 2 to run every repeat again" in refused.stderr
    assert (out / "run.json").read_text() == meta and not list(out.glob("jobs/*/attempts"))  # nothing touched
    again = run_here([RECIPES / "fixed-sim.yaml", "--out", out, "--no-report", "--force", "--repeats", "2"], env)
    assert again.returncode == 0, again.stderr[-4000:]
    assert len(list(out.glob("jobs/*/attempts/1"))) == 4  # every repeat ran again


def test_a_job_whose_id_an_edit_changed_supersedes_its_earlier_folder(tmp_path: Path) -> None:
    """An image edit changes every job id (its fingerprint hash): `--resume` (and `--force`) ran the jobs under their
    new ids and kept the old folders in the run, so the store held both and one series drew each concurrency twice,
    under two images."""
    import sqlite3

    recipe, out, env = _sweep(tmp_path)
    before = set(job_dirs(out))
    images = ("v0.5.16-rocm720-mi30x-20260730", "v0.5.17-rocm720-mi30x-20260801", "v0.5.18-rocm720-mi30x-20260901")
    for flag, (old, new) in zip(("--resume", "--force"), itertools.pairwise(images), strict=True):
        recipe.write_text(recipe.read_text().replace(old, new))
        again = run_here([recipe, "--out", out, "--no-report", flag], env)
        assert again.returncode == 0, again.stderr[-4000:]
        now = set(job_dirs(out))
        assert len(now) == 2 and not now & before, (flag, now)
        said = [line for line in again.stderr.splitlines() if ": superseded by job " in line]
        assert len(said) == 2 and all("(image changed since); its files are kept in" in s for s in said), said
        for d in job_dirs(out).values():
            (kept,) = [p for p in (d / "attempts").iterdir() if (p / "job.json").is_file()
                       and new not in (p / "job.json").read_text()]
            assert old in (kept / "job.json").read_text() and (kept / "summary.json").is_file()
        with sqlite3.connect(tmp_path / "store.sqlite") as db:
            stored = {row[0] for row in db.execute("SELECT job_id FROM results")}
        assert stored == now, stored
        before = now


def test_a_resume_over_a_run_json_that_does_not_read_goes_on_with_the_stored_run(tmp_path: Path) -> None:
    """A resume over a cut-short run.json took a new run id: the store then held every finished job twice, as two
    runs of one configuration (`compare` counts the copy as an earlier run)."""
    import sqlite3

    recipe, out, env = _sweep(tmp_path)
    run_id = json.loads((out / "run.json").read_text())["run_id"]
    (out / "run.json").write_text((out / "run.json").read_text()[:200])
    resumed = run_here([recipe, "--out", out, "--no-report", "--resume"], env)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert f"run.json does not read: this resume goes on with run {run_id}, the store's run of this folder" \
        in resumed.stderr
    assert json.loads((out / "run.json").read_text())["run_id"] == run_id
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        runs = [row[0] for row in db.execute("SELECT run_id FROM runs")]
    assert runs == [run_id]


def test_a_resume_stopped_while_it_stops_a_stale_server_still_reruns_a_job_measured_otherwise(tmp_path: Path) -> None:
    """A finished job whose recorded reuse key differs from the plan's now (llmsweep's measurement changed under it)
    runs again under `--resume`. A resume interrupted while it stopped a server the killed run had left (SIGINT after
    "stopping server pid …", held until that teardown ended) had already rewritten run.json's reuse keys to the
    plan's: the next `--resume` found them equal and kept the job measured the old way, as resumed."""
    import os
    import platform
    import signal
    import subprocess
    import sys

    from support.procs import wait_for
    from test_run_support import run_argv

    from llmsweep.execute.process import read_proc

    recipe, out, env = _sweep(tmp_path)
    meta = json.loads((out / "run.json").read_text())
    changed = meta["expected_job_ids"][0]
    meta["reuse_keys"][changed] = "measured-under-an-older-llmsweep"
    (out / "run.json").write_text(json.dumps(meta))
    # a server the killed run left: it takes its 5-s grace to stop (it ignores SIGTERM)
    stale = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                              "signal.SIG_IGN); print('up', flush=True); time.sleep(120)"],
                             stdout=subprocess.PIPE, start_new_session=True)
    log = tmp_path / "resume.log"
    try:
        assert stale.stdout is not None and stale.stdout.readline() == b"up\n"
        info = read_proc(stale.pid)
        assert info is not None
        (out / "servers" / "g").mkdir(parents=True)
        (out / "servers" / "g" / "server.pid").write_text(json.dumps({
            "pid": stale.pid, "host": platform.node(), "argv0": os.path.basename(sys.executable),
            "start_ticks": info.start_ticks, "cleanup": []}))
        with open(log, "wb") as fh:
            proc = subprocess.Popen(run_argv(recipe, "--out", out, "--no-report", "--resume"), env=env, stdout=fh,
                                    stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: "stopping server pid" in log.read_text(), timeout=60, what="the stale server's stop",
                     proc=proc, log=log)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=60) == 130, log.read_text()[-4000:]
        finally:
            if proc.poll() is None:
                proc.kill()
    finally:
        if stale.poll() is None:
            stale.kill()
        stale.wait()
    again = run_here([recipe, "--out", out, "--no-report", "--resume", "--json"], env)
    assert again.returncode == 0, again.stderr[-4000:]
    assert f"job {changed}: not resumed — its result was recorded under another reuse key — what differs:" \
        in again.stderr, again.stderr[-4000:]
    rows = {r["job"]: r["resumed"] for r in json.loads(again.stdout)["jobs"]}
    assert rows[changed] is False and all(v for j, v in rows.items() if j != changed), rows


def _stop_after_first_stored(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next `llmsweep run` in this process is stopped (a Ctrl-C) right after its first job finished and was
    stored: the moment an interrupted run leaves the store and its folder in."""
    from llmsweep.execute import pipeline

    store_job = pipeline._JobStore.__call__

    def stored_then_stopped(self: pipeline._JobStore, job_dir: Path, outcome: pipeline.JobOutcome) -> None:
        store_job(self, job_dir, outcome)
        monkeypatch.setattr(pipeline._JobStore, "__call__", store_job)
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline._JobStore, "__call__", stored_then_stopped)


def _stored_results(tmp_path: Path) -> set[str]:
    import sqlite3

    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        return {row[0] for row in db.execute("SELECT job_id FROM results")}


def test_a_resume_after_an_edit_stopped_halfway_files_its_result_under_the_key_it_was_measured_with(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `--resume` after an env edit, stopped after its first job: the store kept the run's old reuse keys (the
    per-job ingest wrote run.json's keys only with the run's first row), so the new measurement stood under the old
    configuration's key, and a `--reuse` of the old recipe reused it. The jobs the resume moved aside kept their old
    results in the store, beside folders that no longer held them."""
    recipe, out, env = _sweep(tmp_path)
    first, _ = job_dirs(out)
    edited = tmp_path / "edited.yaml"
    edited.write_text(recipe.read_text().replace("engine: { name: sim }",
                                                 "engine: { name: sim }\n    env: { NEWVAR: x }"))
    _stop_after_first_stored(monkeypatch)
    stopped = run_here([edited, "--out", out, "--no-report", "--resume"], env)
    assert stopped.returncode == 130, stopped.stderr[-4000:]
    assert "interrupted: 1 job finished" in stopped.stderr, stopped.stderr[-4000:]
    assert _stored_results(tmp_path) == {first}  # the second's folder holds no result: nor does the store

    old = run_here([recipe, "--out", tmp_path / "old", "--no-report", "--reuse", "--json"], env)
    assert old.returncode == 0, old.stderr[-4000:]
    assert "reused from the store" not in old.stderr, old.stderr[-4000:]  # nothing of the old recipe is stored
    # the store kept the part digests of the key it filed the new result under (run.json's reuse_parts), with it:
    # what differs is the launch alone, not 'one of what a run records only inside the key's hash'
    assert f"job {first}: the newest stored result of the job, run " in old.stderr and (
        "was recorded under another reuse key — what differs: the rendered launch (engine args, env, files); the job "
        "runs again") in old.stderr, old.stderr[-4000:]
    assert not list((tmp_path / "old").glob("jobs/*/reused.json"))
    new = run_here([edited, "--out", tmp_path / "new", "--no-report", "--reuse", "--json"], env)
    assert new.returncode == 0, new.stderr[-4000:]
    (reused,) = (tmp_path / "new").glob("jobs/*/reused.json")
    assert reused.parent.name == first and json.loads(reused.read_text())["job_id"] == first


def test_a_force_stopped_halfway_keeps_the_earlier_key_of_the_results_it_did_not_reach(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `--force` under other gates (here `--request-timeout`), stopped after its first job, rewrote run.json's reuse
    keys to its plan's at its start, over the second job's result that the earlier gates judged: the next `--resume`
    kept that result as done, and the store filed it under the new key, where `--reuse` stood on it."""
    recipe, out, env = _sweep(tmp_path)
    first, second = job_dirs(out)
    keys = json.loads((out / "run.json").read_text())["reuse_keys"]
    _stop_after_first_stored(monkeypatch)
    stopped = run_here([recipe, "--out", out, "--no-report", "--force", "--request-timeout", "999"], env)
    assert stopped.returncode == 130, stopped.stderr[-4000:]
    recorded = json.loads((out / "run.json").read_text())["reuse_keys"]
    assert recorded[first] != keys[first] and recorded[second] == keys[second], (keys, recorded)

    resumed = run_here([recipe, "--out", out, "--no-report", "--resume", "--request-timeout", "999", "--json"], env)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    said = next(line for line in resumed.stderr.splitlines() if f"job {second}: not resumed" in line)
    # the stopped run.json kept the digests of the earlier key's parts beside it (reuse_parts): the gates, alone
    assert said.endswith("recorded under another reuse key — what differs: the gates the run judges the verdict by "
                         "(`run --require-power`, `run --al-tolerance`, `run --request-timeout`); it runs again"), said
    assert {r["job"]: r["resumed"] for r in json.loads(resumed.stdout)["jobs"]} == {first: True, second: False}


def test_a_requoted_value_that_renders_the_same_launch_is_resumed_as_it_is_reused(tmp_path: Path) -> None:
    """`--mem-fraction-static: 0.75` → `"0.75"` renders the same server command, so the same reuse key: `--reuse`
    stood on the stored result, but `--resume` decided on job.json's typed fields and measured the job again."""
    recipe = tmp_path / "fixed.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text().replace(
        "engine: { name: sim }", "engine: { name: sim }\n    args: { --mem-fraction-static: 0.75 }"))
    out, env = tmp_path / "out", cli_env(tmp_path)
    first = run_here([recipe, "--out", out, "--no-report"], env)
    assert first.returncode == 0, first.stderr[-4000:]
    (next(iter(job_dirs(out).values())) / "summary.json").unlink()  # one job to run: the resume is not a no-op
    recipe.write_text(recipe.read_text().replace("0.75", '"0.75"'))
    reused = run_here([recipe, "--out", tmp_path / "reused", "--no-report", "--reuse"], env)
    assert reused.returncode == 0 and "(2 reused from the store)" in reused.stderr, reused.stderr[-4000:]
    resumed = run_here([recipe, "--out", out, "--no-report", "--resume", "--json"], env)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "not resumed" not in resumed.stderr, resumed.stderr[-4000:]
    assert [r["resumed"] for r in json.loads(resumed.stdout)["jobs"]] == [False, True]


def test_a_run_json_that_records_the_plans_keys_over_results_measured_otherwise_does_not_resume_them(
        tmp_path: Path) -> None:
    """Keys decide `--resume` as they decide `--reuse`; where run.json records the plan's keys over results of
    another launch (an earlier llmsweep's `--force` stopped halfway wrote them at its start), the job.json that
    renders another launch than the plan's still runs the job again."""
    recipe, out, env = _sweep(tmp_path)
    recipe.write_text(recipe.read_text().replace("engine: { name: sim }",
                                                 "engine: { name: sim }\n    env: { NEWVAR: x }"))
    elsewhere = run_here([recipe, "--out", tmp_path / "elsewhere", "--no-report"], env)
    assert elsewhere.returncode == 0, elsewhere.stderr[-4000:]
    meta = json.loads((out / "run.json").read_text())
    meta["reuse_keys"] = json.loads((tmp_path / "elsewhere" / "run.json").read_text())["reuse_keys"]
    (out / "run.json").write_text(json.dumps(meta))
    resumed = run_here([recipe, "--out", out, "--no-report", "--resume", "--json"], env)
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    said = [line for line in resumed.stderr.splitlines() if "not resumed" in line]
    assert len(said) == 2 and all("(serve.env.NEWVAR changed since)" in s for s in said), resumed.stderr[-4000:]
    assert [r["resumed"] for r in json.loads(resumed.stdout)["jobs"]] == [False, False]


def test_a_resume_says_what_differs_when_only_the_sample_a_repeat_draws_does(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeat whose finished result drew another sample than the plan's now (a release whose repeats drew by
    another rule) is measured again, and `--resume` said it was measured under 'another launch, simulator,
    measurement definition or gates' — none of which differed. The reason names the key's parts as `run --reuse`
    names them (`changes.reuse.KEY_PARTS`): the sample is among them."""
    import llmsweep.changes.reuse as reuse

    recipe = tmp_path / "fixed.yaml"
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text())
    out, env = tmp_path / "out", cli_env(tmp_path)
    with monkeypatch.context() as patched:
        patched.setattr(reuse, "repeat_sample", lambda _w, _c, k, _copy=None: f"another-rule-{k}")
        first = run_here([recipe, "--out", out, "--no-report", "--repeats", "2"], env)
    assert first.returncode == 0, first.stderr[-4000:]
    again = run_here([recipe, "--out", out, "--no-report", "--repeats", "2", "--resume"], env)
    assert again.returncode == 0, again.stderr[-4000:]
    said = [line for line in again.stderr.splitlines() if "not resumed" in line]
    assert len(said) == 2 and all("-repeat2: not resumed" in line for line in said), said  # the repeats only
    assert all(reuse.KEY_PARTS["sample"] in line and "what differs" in line for line in said), said
