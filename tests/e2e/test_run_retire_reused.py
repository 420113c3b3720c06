"""A whole `--resume` retires a job the recipe no longer has (`retired/<id>`): its result is no longer its run's. When
another run stood a job on that result (`run --reuse`), the store dropped it all the same, and the reusing run's
dashboard and `results frontier` then said the point was gone (`REUSED_GONE`), although its files were kept and
nothing about the measurement had changed. The store keeps a retired result for the runs that stood on it, drawn as
none of its own run's.

Real runs on the simulator in virtual time, into a private store."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from test_run_support import RECIPES, cli_here, run_here, stood_on_runs

from llmsweep.results.point import result_id_for
from llmsweep.results.rundir import load_run
from llmsweep.results.sides import REUSED_GONE
from llmsweep.results.store import Store


def _frontier(ref: str, store: Path, env: dict[str, str]) -> tuple[set[str], str]:
    proc = cli_here(["results", "frontier", ref, "--x", "conc", "--json", "--store", store], env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc: dict[str, list[dict[str, Any]]] = json.loads(proc.stdout)
    return {p["result_id"] for points in doc.values() for p in points}, proc.stderr


def test_a_retired_result_another_run_stood_on_stays_that_runs(tmp_path: Path) -> None:
    recipe, source, reusing, store, env = stood_on_runs(tmp_path)
    source_id, reusing_id = (json.loads((d / "run.json").read_text())["run_id"] for d in (source, reusing))
    dropped = next(p.name for p in (source / "jobs").iterdir() if "_conc2_" in p.name)
    kept = next(p.name for p in (source / "jobs").iterdir() if "_conc4_" in p.name)

    recipe.write_text(recipe.read_text().replace("conc-list: [2, 4]", "conc-list: [4]"))
    again = run_here([recipe, "--out", source, "--resume", "--no-report"], env)
    assert again.returncode == 0, again.stderr[-3000:]
    assert (f"job {dropped}: no job of the recipe as it is now (its concurrency or arm was taken out since); its "
            f"files are kept in {source / 'retired' / dropped} and its result is no longer this run's (run "
            f"{reusing_id} stands on it, `run --reuse`: the store keeps it for that run)") in again.stderr, \
        again.stderr[-3000:]

    def check() -> None:
        with Store(store, readonly=True) as opened:  # the source run's own results: the retired one is not
            assert [p.job_id for p in opened.results(source_id)] == [kept]
            assert [r.results for r in opened.runs() if r.run_id == source_id] == [1]
            reused = opened.reused_points(load_run(reusing).reused, by=reusing_id)
        assert sorted(reused) == sorted([dropped, kept]), reused  # both points the reusing run stood on
        assert reused[dropped].artifact_dir == (source / "retired" / dropped).resolve()
        drawn, said = _frontier(reusing_id, store, env)
        assert result_id_for(source_id, dropped) in drawn and REUSED_GONE not in said, said
        own, _ = _frontier(source_id, store, env)
        assert result_id_for(source_id, dropped) not in own
        listed = cli_here(["results", "list", "--run", source_id, "--json", "--store", store], env)
        assert listed.returncode == 0 and dropped not in listed.stdout and kept in listed.stdout, listed.stderr

    check()
    # the source run stored anew from its folder, as `results ingest --force` does: the retired result stays kept
    assert cli_here(["results", "ingest", source, "--force", "--store", store], env).returncode == 0
    check()
    with sqlite3.connect(store) as db:  # the row is one, kept beside its run's own
        assert db.execute("SELECT COUNT(*) FROM results WHERE run_id = ?", (source_id,)).fetchone()[0] == 2
    # kept for the runs that stood on it, not offered anew: a new --reuse measures the job again, as the source run
    # itself does when its recipe plans the job again
    recipe.write_text((RECIPES / "fixed-sim.yaml").read_text())
    third = run_here([recipe, "--out", tmp_path / "third", "--no-report", "--reuse", "--json"], env)
    assert third.returncode == 0, third.stderr[-3000:]
    assert {r["job"]: r["reused"] for r in json.loads(third.stdout)["jobs"]} == {dropped: False, kept: True}
