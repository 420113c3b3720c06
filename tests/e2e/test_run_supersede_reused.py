"""A run that measures a job again (`--resume` after a recipe edit, `--force`) moves its earlier attempt to
`jobs/<id>/attempts/N` and stores the new result under the job's result id. When another run had stood a job on the
earlier result (`run --reuse`), the store dropped it all the same: the reusing run's dashboard and `results frontier`
then said the point was gone (`REUSED_GONE`), or drew the new measurement as what it had stood on, although the
measurement it stood on was kept on disk and is still the one its configuration earned. The store keeps a superseded
result for the runs that stood on it — drawn as none of its own run's — and the superseding run names them.

Real runs on the simulator in virtual time, into a private store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_run_support import RECIPES, cli_here, run_here, stood_on_runs

from llmsweep.results.point import result_id_for
from llmsweep.results.rundir import load_run
from llmsweep.results.sides import REUSED_GONE
from llmsweep.results.store import Store


def _frontier(ref: str, store: Path, env: dict[str, str]) -> tuple[dict[str, dict[str, Any]], str]:
    proc = cli_here(["results", "frontier", ref, "--x", "conc", "--json", "--store", store], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc: dict[str, list[dict[str, Any]]] = json.loads(proc.stdout)
    return {p["job_id"]: p for points in doc.values() for p in points}, proc.stderr


def _summary_of(job_dir: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((job_dir / "summary.json").read_text())
    return doc


def _prompts(job: Any) -> Any:
    return job["workload"]["num-prompts-per-conc"]


def _runs(tmp_path: Path) -> tuple[Path, Path, Path, Path, dict[str, str]]:
    return stood_on_runs(tmp_path)


def test_a_result_measured_again_under_an_edit_stays_the_runs_that_stood_on_it(tmp_path: Path) -> None:
    recipe, source, reusing, store, env = _runs(tmp_path)
    source_id, reusing_id = (json.loads((d / "run.json").read_text())["run_id"] for d in (source, reusing))
    jobs = sorted(p.name for p in (source / "jobs").iterdir())
    stood_on = {j: _summary_of(source / "jobs" / j) for j in jobs}

    # the source run's recipe edited (another client workload: another reuse key, the same job ids) and resumed:
    # every job runs again, its earlier attempt kept in attempts/1
    recipe.write_text(recipe.read_text().replace("num-prompts-per-conc: 4", "num-prompts-per-conc: 6"))
    again = run_here([recipe, "--out", source, "--resume", "--no-report"], env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert sorted(p.name for p in (source / "jobs").iterdir()) == jobs  # the same job ids, measured again
    for job in jobs:
        assert (f"job {job}: its earlier result is no longer this run's; run {reusing_id} stands on it, `run "
                f"--reuse`: the store keeps it for that run") in again.stderr, again.stderr[-3000:]

    def check() -> None:
        with Store(store, readonly=True) as opened:  # the source run's own results: the new measurements only
            own = {p.job_id: p for p in opened.results(source_id)}
            assert sorted(own) == jobs
            assert all(_prompts(p.job) == 6 for p in own.values())
            assert [r.results for r in opened.runs() if r.run_id == source_id] == [len(jobs)]
            reused = opened.reused_points(load_run(reusing).reused, by=reusing_id)
        # every point the reusing run stood on, as it was measured: the earlier attempt, not the new one
        assert sorted(reused) == jobs, reused
        for job in jobs:
            point = reused[job]
            assert point.artifact_dir == (source / "jobs" / job / "attempts" / "1").resolve()
            assert point.result_id != result_id_for(source_id, job)
            assert _prompts(point.job) == 4
            assert point.summary is not None and point.summary.dump()["throughput"] == stood_on[job]["throughput"]
        drawn, said = _frontier(reusing_id, store, env)
        assert sorted(drawn) == jobs and REUSED_GONE not in said, said
        own_drawn, _ = _frontier(source_id, store, env)  # the source run draws its own new measurements only
        assert {p["result_id"] for p in own_drawn.values()} == {result_id_for(source_id, j) for j in jobs}
        listed = cli_here(["results", "list", "--run", source_id, "--json", "--store", store], env)
        assert listed.returncode == 0 and len(json.loads(listed.stdout)) == len(jobs), listed.stdout

    check()
    # the source run stored anew from its folder, as `results ingest --force` does: the kept results stay kept
    assert cli_here(["results", "ingest", source, "--force", "--store", store], env).returncode == 0
    check()
    with sqlite3.connect(store) as db:  # one row per measurement: the run's own and the ones kept beside them
        assert db.execute("SELECT COUNT(*) FROM results WHERE run_id = ?", (source_id,)).fetchone()[0] == 2 * len(jobs)
    # kept for the runs that stood on it, not offered anew: a --reuse of the recipe as it was finds no result under
    # its key, and runs the jobs again
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text())
    third = run_here([recipe, "--out", tmp_path / "third", "--no-report", "--reuse", "--json"], env)
    assert third.returncode == 0, third.stderr[-3000:]
    assert not any(r["reused"] for r in json.loads(third.stdout)["jobs"]), third.stdout


def test_a_forced_rerun_under_the_same_configuration_keeps_what_another_run_stood_on(tmp_path: Path) -> None:
    """`--force` measures the jobs again under the same key: the reusing run had drawn the new measurement as the one
    it stood on (another verdict, other numbers), in silence."""
    recipe, source, reusing, store, env = _runs(tmp_path)
    reusing_id = json.loads((reusing / "run.json").read_text())["run_id"]
    jobs = sorted(p.name for p in (source / "jobs").iterdir())
    forced = run_here([recipe, "--out", source, "--force", "--no-report"], env)
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert forced.stderr.count(f"run {reusing_id} stands on it") == len(jobs), forced.stderr[-3000:]
    with Store(store, readonly=True) as opened:
        reused = opened.reused_points(load_run(reusing).reused, by=reusing_id)
    assert sorted(reused) == jobs
    assert all(reused[j].artifact_dir == (source / "jobs" / j / "attempts" / "1").resolve() for j in jobs)
    # a third run's --reuse stands on the newest measurement under the key: the forced rerun's own
    third = run_here([recipe, "--out", tmp_path / "third", "--no-report", "--reuse", "--json"], env)
    assert third.returncode == 0, third.stderr[-3000:]
    third_reused = load_run(tmp_path / "third").reused
    source_id = json.loads((source / "run.json").read_text())["run_id"]
    assert {src["result_id"] for src in third_reused.values()} == {result_id_for(source_id, j) for j in jobs}


def test_an_attempt_kept_for_another_run_is_still_found_once_its_job_is_retired(tmp_path: Path) -> None:
    """The kept attempt lies inside its job's folder (`jobs/<id>/attempts/N`): retiring the job moves it with the
    folder, and the run's record follows it, so a later ingest of the run still keeps it for the run that stood on
    it."""
    recipe, source, reusing, store, env = _runs(tmp_path)
    reusing_id = json.loads((reusing / "run.json").read_text())["run_id"]
    dropped = next(p.name for p in (source / "jobs").iterdir() if "_conc2_" in p.name)
    assert run_here([recipe, "--out", source, "--force", "--no-report"], env).returncode == 0
    recipe.write_text(recipe.read_text().replace("conc-list: [2, 4]", "conc-list: [4]"))
    again = run_here([recipe, "--out", source, "--resume", "--no-report"], env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert cli_here(["results", "ingest", source, "--force", "--store", store], env).returncode == 0
    with Store(store, readonly=True) as opened:
        reused = opened.reused_points(load_run(reusing).reused, by=reusing_id)
    assert reused[dropped].artifact_dir == (source / "retired" / dropped / "attempts" / "1").resolve()
    drawn, said = _frontier(reusing_id, store, env)
    assert dropped in drawn and REUSED_GONE not in said, said


def test_compare_lists_as_reused_the_earlier_attempt_a_run_stood_on_not_the_jobs_new_result(tmp_path: Path) -> None:
    """`compare A R` where R stood its jobs on A's results and A was measured again since (`--force`, which keeps
    the attempts R stood on): R's record names each job's result id, which A's new measurement holds now, and
    `compare` listed A's new measurements as "reused by B from A, not measured again" — points R never stood on,
    while the measurements it stands on (its frontier draws them) went unnamed."""
    recipe, source, reusing, store, env = _runs(tmp_path)
    source_id = json.loads((source / "run.json").read_text())["run_id"]
    jobs = sorted(p.name for p in (source / "jobs").iterdir())
    assert run_here([recipe, "--out", source, "--force", "--no-report"], env).returncode == 0
    with Store(store, readonly=True) as opened:
        stood_on = {j: p.result_id for j, p in opened.reused_points(
            load_run(reusing).reused, by=json.loads((reusing / "run.json").read_text())["run_id"]).items()}
    new = {result_id_for(source_id, j) for j in jobs}
    assert sorted(stood_on) == jobs and not new & set(stood_on.values())

    for args in (["--json"], ["--baseline", source, "--format", "json"]):
        sides = [source, reusing] if args == ["--json"] else [reusing]
        proc = cli_here(["compare", *sides, *args, "--store", store], env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        doc = json.loads(proc.stdout)
        # the results R stands on, under A's run and job, and none of A's new measurements
        assert {p["job_id"]: p["result_id"] for p in doc["reused"]} == stood_on, doc["reused"]
        assert all(p["run_id"] == source_id for p in doc["reused"])
        assert doc["only_a"] == [] and doc["matched"] == []
        assert any("which A measured again since" in n and all(stood_on[j] in n for j in jobs) and
                   all(r in n for r in new) for n in doc["notes"]), doc["notes"]
        if "verdict" in doc:
            assert sorted(doc["verdict"]["reused"]) == jobs
    table = cli_here(["compare", source, reusing, "--store", store], env)
    assert table.returncode == 0 and "reused by B from A, not measured again" in table.stdout, table.stdout
    assert "only in A" not in table.stdout, table.stdout


def test_a_run_that_stands_anew_on_the_newer_measurement_reads_that_one_not_the_kept_attempt(tmp_path: Path) -> None:
    """R stood on S's results; S was measured again (`--force`), its earlier attempts kept for R; R was then run
    again with `--reuse --force` and stood on S's new measurements. R's record names each job's result id, which
    never changes between attempts, and the kept attempts list R among the runs that stood on them: R's dashboard and
    frontier read the earlier attempts, which R no longer stands on. R's record names the measurement it stood on
    (`measured_at`), and so does each kept attempt; a later `--force` of S keeps the attempt R stands on now for it."""
    recipe, source, reusing, store, env = _runs(tmp_path)
    reusing_id = json.loads((reusing / "run.json").read_text())["run_id"]
    jobs = sorted(p.name for p in (source / "jobs").iterdir())
    assert run_here([recipe, "--out", source, "--force", "--no-report"], env).returncode == 0
    again = run_here([recipe, "--out", reusing, "--no-report", "--reuse", "--force", "--json"], env)
    assert again.returncode == 0 and all(r["reused"] for r in json.loads(again.stdout)["jobs"]), again.stderr[-3000:]

    def stood_on() -> dict[str, Path | None]:
        with Store(store, readonly=True) as opened:
            return {j: p.artifact_dir for j, p in opened.reused_points(load_run(reusing).reused, by=reusing_id).items()}

    assert stood_on() == {j: (source / "jobs" / j).resolve() for j in jobs}
    drawn, said = _frontier(reusing_id, store, env)
    source_id = json.loads((source / "run.json").read_text())["run_id"]
    assert {p["result_id"] for p in drawn.values()} == {result_id_for(source_id, j) for j in jobs}, drawn
    assert REUSED_GONE not in said, said
    # S measured a third time: the second attempt, the one R stands on now, is kept for it
    third = run_here([recipe, "--out", source, "--force", "--no-report"], env)
    assert third.returncode == 0, third.stderr[-3000:]
    assert third.stderr.count(f"run {reusing_id} stands on it") == len(jobs), third.stderr[-3000:]
    assert stood_on() == {j: (source / "jobs" / j / "attempts" / "2").resolve() for j in jobs}


def test_an_attempt_measured_again_while_the_store_was_busy_is_kept_for_the_runs_that_stood_on_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking the store which runs stand on a job's result, as the job is measured again, failed (another process
    held it locked): nothing went into run.json's `kept_attempts`, the run asked the store nothing more, and its
    end-of-run ingest replaced the run — the reusing run then drew the job's new measurement as the one it stood on.
    The attempt is recorded as kept for runs not known yet, which the end-of-run ingest finds before it replaces
    anything, said and recorded in run.json."""
    recipe, source, reusing, store, env = _runs(tmp_path)
    reusing_id = json.loads((reusing / "run.json").read_text())["run_id"]
    jobs = sorted(p.name for p in (source / "jobs").iterdir())

    def busy(*_: object) -> None:
        raise sqlite3.OperationalError("database is locked")

    with monkeypatch.context() as patched:  # another process holds the store as the first job is measured again
        patched.setattr(Store, "standing_on", busy)
        forced = run_here([recipe, "--out", source, "--force", "--no-report"], env)
    assert forced.returncode == 0, forced.stderr[-3000:]
    assert "could not drop the earlier result" in forced.stderr, forced.stderr[-3000:]
    assert forced.stderr.count(f"run {reusing_id} stands on it") == len(jobs), forced.stderr[-3000:]
    kept = json.loads((source / "run.json").read_text())["kept_attempts"]
    assert sorted(kept) == [f"jobs/{j}/attempts/1" for j in jobs]
    assert all(doc["runs"] == [reusing_id] for doc in kept.values()), kept
    with Store(store, readonly=True) as opened:
        reused = opened.reused_points(load_run(reusing).reused, by=reusing_id)
    assert {j: p.artifact_dir for j, p in reused.items()} == {
        j: (source / "jobs" / j / "attempts" / "1").resolve() for j in jobs}
    # stored anew from the folder: the settled record stands
    assert cli_here(["results", "ingest", source, "--force", "--store", store], env).returncode == 0
    with Store(store, readonly=True) as opened:
        again = opened.reused_points(load_run(reusing).reused, by=reusing_id)
    assert {j: p.artifact_dir for j, p in again.items()} == {j: p.artifact_dir for j, p in reused.items()}


def test_storing_a_job_reads_only_the_kept_attempts_the_store_does_not_hold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each job stored as it ends (`Store.ingest_job`) stores the attempts run.json keeps that the store lacks: it
    read every kept folder (its summary, job and records) before asking whether the store held it, so a run that had
    kept many paid for all of them at every job."""
    import llmsweep.results.rundir as rundir

    recipe, source, reusing, store, env = _runs(tmp_path)
    reusing_id = json.loads((reusing / "run.json").read_text())["run_id"]
    jobs = sorted(p.name for p in (source / "jobs").iterdir())
    assert run_here([recipe, "--out", source, "--force", "--no-report"], env).returncode == 0
    stood = load_run(reusing).reused
    read: list[Path] = []
    real = rundir.load_job

    def counted(folder: Path, **kwargs: Any) -> Any:
        read.append(folder)
        return real(folder, **kwargs)

    monkeypatch.setattr(rundir, "load_job", counted)
    with Store(store) as opened:
        for job in jobs:
            opened.ingest_job(source, source / "jobs" / job)
    assert read == []  # every kept attempt is stored: none read again
    with sqlite3.connect(store) as db:  # one the store lost is read and stored again
        lost = (f"jobs/{jobs[0]}/attempts/1",)
        db.execute("DELETE FROM provenance WHERE result_id IN (SELECT result_id FROM results WHERE job_id = ?)", lost)
        for table in ("results", "jobs"):
            db.execute(f"DELETE FROM {table} WHERE job_id = ?", lost)
    with Store(store) as opened:
        opened.ingest_job(source, source / "jobs" / jobs[0])
        reused = opened.reused_points(stood, by=reusing_id)
    assert read == [source / f"jobs/{jobs[0]}/attempts/1"], read
    assert reused[jobs[0]].artifact_dir == (source / "jobs" / jobs[0] / "attempts" / "1").resolve()


def test_compare_without_history_reads_what_b_stood_on_from_the_store_too(tmp_path: Path) -> None:
    """`compare A R --no-history` over two run folders did not open the store: R's reused jobs were read from R's
    record alone, and after A measured them again (`--force`, keeping the attempts R stood on) A's new measurements
    were listed as "reused by B from A" — the listing the store's reading had fixed, back under --no-history. The
    store is read for what R stood on, as for what a baseline stood on; history still is not."""
    recipe, source, reusing, store, env = _runs(tmp_path)
    source_id = json.loads((source / "run.json").read_text())["run_id"]
    jobs = sorted(p.name for p in (source / "jobs").iterdir())
    assert run_here([recipe, "--out", source, "--force", "--no-report"], env).returncode == 0
    with Store(store, readonly=True) as opened:
        stood_on = {j: p.result_id for j, p in opened.reused_points(
            load_run(reusing).reused, by=json.loads((reusing / "run.json").read_text())["run_id"]).items()}
    proc = cli_here(["compare", source, reusing, "--no-history", "--json", "--store", store], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert {p["job_id"]: p["result_id"] for p in doc["reused"]} == stood_on, doc["reused"]
    assert not {result_id_for(source_id, j) for j in jobs} & {p["result_id"] for p in doc["reused"]}
    assert doc["only_a"] == [], doc["only_a"]


def test_compare_names_the_results_b_stood_on_that_a_retired_or_the_store_lost(tmp_path: Path) -> None:
    """`compare A R` where R stood a job on A's result and A's recipe no longer plans that job (retired, its result
    kept for R): the job was in no list and no note — neither compared, nor reused from A, nor only in a side. It is
    named in a note, and so is a job whose result the store no longer holds (`REUSED_GONE`)."""
    recipe, source, reusing, store, env = _runs(tmp_path)
    dropped = next(p.name for p in (source / "jobs").iterdir() if "_conc2_" in p.name)
    recipe.write_text(recipe.read_text().replace("conc-list: [2, 4]", "conc-list: [4]"))
    assert run_here([recipe, "--out", source, "--resume", "--no-report"], env).returncode == 0
    with Store(store, readonly=True) as opened:
        kept = opened.reused_points(load_run(reusing).reused,
                                    by=json.loads((reusing / "run.json").read_text())["run_id"])[dropped]
    for args in (["--json"], ["--json", "--no-history"], ["--baseline", source, "--format", "json"]):
        sides = [reusing] if "--baseline" in args else [source, reusing]
        proc = cli_here(["compare", *sides, *args, "--store", store], env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        doc = json.loads(proc.stdout)
        assert dropped not in {p["job_id"] for p in doc["reused"]}
        (note,) = [n for n in doc["notes"] if dropped in n]
        assert "A retired them since" in note and kept.result_id in note and "not compared here" in note, note
    table = cli_here(["compare", source, reusing, "--store", store], env)
    assert table.returncode == 0 and f"not compared here: {dropped}" in table.stdout, table.stdout
    # a result the store no longer holds: said, not left out in silence
    with sqlite3.connect(store) as db:
        db.execute("DELETE FROM results WHERE result_id = ?", (kept.result_id,))
    doc = json.loads(cli_here(["compare", source, reusing, "--json", "--store", store], env).stdout)
    (note,) = [n for n in doc["notes"] if dropped in n]
    assert "stood on a stored result not compared" in note and REUSED_GONE in note, note
