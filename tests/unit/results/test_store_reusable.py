"""`Store.reusable`: a reuse key finds the newest stored result recorded under it, never an invalid one."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from llmsweep.results.store import Reusable, Store


def _keyed(run, keys: dict[str, str]) -> None:
    meta_path = run.path / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["reuse_keys"] = keys
    meta_path.write_text(json.dumps(meta))


def test_newest_done_result_is_found_and_invalid_ones_are_not(make_run, store_path: Path) -> None:
    old, new = make_run("old", concs=(1, 4)), make_run("new", concs=(1, 4), seed=3)
    jobs = sorted(j.job_id for j in old.jobs)
    _keyed(old, {jobs[0]: "k1", jobs[1]: "k2"})
    _keyed(new, {jobs[0]: "k1"})
    with Store(store_path) as store:
        store.ingest_run(old.path)
        store.ingest_run(new.path)
        found = store.reusable(["k1", "k2", "k3"], verdicts=("valid", "smoke"))
        assert found["k1"].run_id == "new" and found["k2"].run_id == "old" and "k3" not in found
        assert found["k1"].job_id == jobs[0] and found["k1"].verdict in ("valid", "smoke")
    db = sqlite3.connect(store_path)
    with db:
        db.execute("UPDATE results SET verdict = 'invalid' WHERE run_id = 'new'")
    db.close()
    said: list[str] = []
    with Store(store_path) as store:
        # the invalid newer result is passed over, and that is said
        assert store.reusable(["k1"], verdicts=("valid", "smoke"), say=said.append)["k1"].run_id == "old"
    assert said == [f"note: job {jobs[0]} stands on run old's valid result, though its newest, run new's, is invalid "
                    "(`--reuse` passes over such results)"], said
    db = sqlite3.connect(store_path)
    with db:
        db.execute("UPDATE results SET verdict = 'smoke'")
    db.close()
    with Store(store_path) as store:
        assert store.reusable(["k1", "k2"]) == {}  # by default only valid results are reused


def test_a_result_the_caller_refuses_is_passed_over_for_the_next_newest(make_run, store_path: Path) -> None:
    """The lookup returned only the newest match; where the caller could not stand on it (the run's own, which
    `--force` measures again; one without the valid power a job requires), an older result was never tried. It is
    now, said as a note; where no older one is, the caller says why the job runs again, and the lookup says nothing."""
    old, new = make_run("old", concs=(1, 4)), make_run("new", concs=(1, 4), seed=3)
    jobs = sorted(j.job_id for j in old.jobs)
    _keyed(old, {jobs[0]: "k1"})
    _keyed(new, {jobs[0]: "k1", jobs[1]: "k2"})
    asked: list[tuple[str, str]] = []

    def not_new(key: str, found: Reusable) -> str | None:
        asked.append((key, found.run_id))
        return "is this run's own" if found.run_id == "new" else None

    said: list[str] = []
    with Store(store_path) as store:
        store.ingest_run(old.path)
        store.ingest_run(new.path)
        assert store.reusable(["k1", "k2"])["k1"].run_id == "new"  # the newest, where the caller refuses none
        found = store.reusable(["k1", "k2"], say=said.append, refuse=not_new)
    assert found["k1"].run_id == "old" and found["k1"].job_id == jobs[0] and "k2" not in found, found
    assert sorted(asked) == [("k1", "new"), ("k1", "old"), ("k2", "new")], asked
    assert said == [f"note: job {jobs[0]} stands on run old's valid result, though its newest, run new's, is this "
                    "run's own"], said


def test_a_result_served_elsewhere_than_this_run_would_serve_the_job_is_not_reused(make_run, store_path: Path) -> None:
    """The local executor with `allow_image` measures the host's engine under a job that names an image: a docker or
    Slurm run (which serves the image) does not stand on it, nor the reverse, and the run says why."""
    from llmsweep.metrics.model import Launch, Summary

    run = make_run("host", concs=(1, 4), source="measured")
    served = {"host": None, "image": "lmsysorg/sglang:v0.5.16"}
    jobs = sorted(run.jobs, key=lambda a: a.job_id)
    for art, image in zip(jobs, served.values(), strict=True):
        summary = Summary.load(art.dir / "summary.json")
        summary.provenance.launch = Launch(engine="sglang", image=image)
        summary.provenance.clock = "wall"
        summary.write(art.dir / "summary.json")
    _keyed(run, {jobs[0].job_id: "k-host/measured/wall/-/host", jobs[1].job_id: "k-image/measured/wall/-/image"})
    said: list[str] = []
    with Store(store_path) as store:
        store.ingest_run(run.path)
        assert set(store.reusable(["k-host/measured/wall/-/host", "k-image/measured/wall/-/image"])) == {
            "k-host/measured/wall/-/host", "k-image/measured/wall/-/image"}  # each where this run would serve it
        assert store.reusable(["k-host/measured/wall/-/image", "k-image/measured/wall/-/host"], say=said.append) == {}
    assert sorted(said) == sorted([
        f"not reused: the valid result of run host (job {jobs[0].job_id}) ran on a host's engine (the local executor, "
        "allow_image); this run serves the job's image; the job runs again",
        f"not reused: the valid result of run host (job {jobs[1].job_id}) ran in image lmsysorg/sglang:v0.5.16; this "
        "run serves the host's engine (the local executor); the job runs again"]), said


def test_a_host_served_result_is_reused_only_while_the_host_has_the_engine_that_measured_it(
        make_run, store_path: Path) -> None:
    """No image pins a host's engine: a result measured on transformers 5.17.0 was reused after the host's engine
    became 5.99.0 (the reusing run starts no server to notice). The key carries the version the host has now, which
    must be the one the stored result read back from its server; one that cannot be read reuses nothing."""
    from llmsweep.metrics.model import Launch, Summary

    run = make_run("host", concs=(1,), source="measured")
    (job,) = run.jobs
    summary = Summary.load(job.dir / "summary.json")
    summary.provenance.launch = Launch(engine="transformers", image=None, engine_version_reported="5.17.0")
    summary.provenance.clock = "wall"
    summary.write(job.dir / "summary.json")
    _keyed(run, {job.job_id: "k/measured/wall/-/host/5.17.0"})
    said: list[str] = []
    with Store(store_path) as store:
        store.ingest_run(run.path)
        assert set(store.reusable(["k/measured/wall/-/host/5.17"])) == {"k/measured/wall/-/host/5.17"}  # one release
        assert store.reusable(["k/measured/wall/-/host/5.99.0"], say=said.append) == {}
        assert store.reusable(["k/measured/wall/-/host/?"], say=said.append) == {}
    assert said == [
        f"not reused: the valid result of run host (job {job.job_id}) ran on engine version 5.17.0; the host now has "
        "5.99.0; the job runs again",
        f"not reused: the valid result of run host (job {job.job_id}) ran on a host's engine whose version this run "
        "cannot read on this host now; the job runs again"], said


def test_a_stored_result_that_does_not_read_is_neither_reused_nor_the_end_of_its_neighbours(
        make_run, store_path: Path, tmp_path: Path) -> None:
    """One damaged summary in the store: the job it would have stood for runs again, said why (it had been reused,
    and the run's dashboard then drew none of its reused points), and the other reused points still read."""
    from support.synthetic import write_reusing_run

    old = make_run("old", concs=(1, 4))
    jobs = sorted(j.job_id for j in old.jobs)
    _keyed(old, {jobs[0]: "k1", jobs[1]: "k2"})
    with Store(store_path) as store:
        store.ingest_run(old.path)
    db = sqlite3.connect(store_path)
    with db:
        db.execute("UPDATE results SET summary = '{bad' WHERE job_id = ?", (jobs[0],))
    db.close()
    said: list[str] = []
    with Store(store_path) as store:
        found = store.reusable(["k1", "k2"], verdicts=("valid", "smoke"), say=said.append)
    assert list(found) == ["k2"], found
    assert len(said) == 1 and said[0].startswith("not reused: the ") and "does not read" in said[0], said

    other = tmp_path / "other.sqlite"
    run = write_reusing_run(tmp_path / "reusing", other)
    db = sqlite3.connect(other)
    with db:
        (damaged,) = db.execute("SELECT job_id FROM results WHERE run_id = 'earlier-run' LIMIT 1").fetchone()
        db.execute("UPDATE results SET summary = '{bad' WHERE job_id = ?", (damaged,))
    db.close()
    with Store(other, readonly=True) as store:
        points = store.reused_points(run.meta["reused"], by=run.run_id)
    assert len(points) == len(run.meta["reused"]) - 1 and damaged not in points
