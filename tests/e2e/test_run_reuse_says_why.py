"""`run --reuse` says, of each job it runs again, why no stored result stood for it: a reviewer's `--reuse` re-ran
both jobs of a run it had just measured without a word (llmsweep's simulator code had changed in between, which is
part of every simulated job's reuse key). And a run that only stood on earlier results hides nothing: the next
`--reuse` stands on the result that was measured.

Real runs on the simulator in virtual time, into a private store."""

from __future__ import annotations

import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

from test_run_support import cli_here

RECIPE = Path(__file__).resolve().parents[1] / "data" / "recipes" / "run" / "fixed-sim.yaml"


def _run(tmp_path: Path, name: str, *extra: str) -> tuple[dict[str, Any], str]:
    proc: subprocess.CompletedProcess[str] = cli_here(
        ["run", RECIPE, "--out", tmp_path / name, "--store", tmp_path / "store.sqlite", "--no-report", "--json",
         *extra])
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc, proc.stderr


def _said(err: str) -> list[str]:
    return [line.split("] ", 1)[-1] for line in err.splitlines() if "not reused" in line]


def test_each_job_reuse_runs_again_is_said_with_what_differs(tmp_path: Path) -> None:
    first, _ = _run(tmp_path, "first")
    jobs = sorted(r["job"] for r in first["jobs"])
    assert len(jobs) == 2

    # a gate of the run is part of the key, which holds it only as a digest: the run recorded each part's digest
    # beside its keys (run.json's reuse_parts), so the gates are named, alone
    timed, err = _run(tmp_path, "timed", "--reuse", "--request-timeout", "123")
    assert not any(r["reused"] for r in timed["jobs"])
    said = _said(err)
    assert said == [f"not reused: job {j}: the newest stored result of the job, run {first['run_id']}'s (valid), was "
                    "recorded under another reuse key — what differs: the gates the run judges the verdict by "
                    "(`run --require-power`, `run --al-tolerance`, `run --request-timeout`); the job runs again"
                    for j in jobs], said

    # the first run's result stands (its key is this run's), and a run that only stood on it hides nothing
    for name in ("again", "once-more"):
        again, err = _run(tmp_path, name, "--reuse")
        assert [r["reused"] for r in again["jobs"]] == [True, True] and _said(err) == [], err
        assert all(f"run {first['run_id']}" in r["reason"] for r in again["jobs"])

    # jobs the store never measured: said in one line
    _, err = _run(tmp_path, "repeats", "--reuse", "--repeats", "2")
    assert _said(err) == ["not reused: the store holds no result of 2 jobs, under any reuse key; they run: "
                          + ", ".join(f"{j}-repeat2" for j in jobs)]


def test_a_run_of_an_earlier_llmsweep_that_recorded_no_parts_is_inferred(tmp_path: Path) -> None:
    """A stored run whose record holds its keys but not their parts' digests (an llmsweep before `reuse_parts`):
    what differs is inferred from the stored job, as before — a gate, which the key holds only hashed, is named among
    the parts a run records only inside the hash, and the simulator whose build the result records as this one's is
    not."""
    first, _ = _run(tmp_path, "first")
    assert first["run_id"]
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        (meta,) = db.execute("SELECT meta FROM runs WHERE run_id = ?", (first["run_id"],)).fetchone()
        doc = json.loads(meta)
        assert len(doc.pop("reuse_parts")) == 2  # each job's identity, part by part
        db.execute("UPDATE runs SET meta = ? WHERE run_id = ?", (json.dumps(doc), first["run_id"]))
    _, err = _run(tmp_path, "timed", "--reuse", "--request-timeout", "123")
    said = _said(err)
    assert len(said) == 2 and all(
        "what differs: one of what a run records only inside the key's hash: " in line
        and "the gates the run judges the verdict by" in line and "the simulator's code" not in line
        and line.endswith("; the job runs again") for line in said), said


def test_a_part_the_store_keeps_is_named(tmp_path: Path) -> None:
    """A stored run measured under other measurement definitions (an older llmsweep): that part is named."""
    first, _ = _run(tmp_path, "first")
    with sqlite3.connect(tmp_path / "store.sqlite") as db:
        (meta,) = db.execute("SELECT meta FROM runs WHERE run_id = ?", (first["run_id"],)).fetchone()
        doc = json.loads(meta)
        doc["measurement"] = "m0-0000000000000000"
        doc["reuse_keys"] = {job: "0" * 64 + key[64:] for job, key in doc["reuse_keys"].items()}
        db.execute("UPDATE runs SET meta = ? WHERE run_id = ?", (json.dumps(doc), first["run_id"]))
    _, err = _run(tmp_path, "second", "--reuse")
    said = _said(err)
    assert len(said) == 2 and all(line.endswith("what differs: llmsweep's measurement definitions (`metrics.version`)"
                                                "; the job runs again") for line in said), said


def test_a_result_another_simulator_build_served_names_the_simulator(tmp_path: Path) -> None:
    """After an upgrade that changed llmsweep's simulator, every simulated job runs again: what differs is named from
    the stored result's provenance (the build that served it), not as 'one of what a run records only inside the
    key's hash'."""
    first, _ = _run(tmp_path, "first")
    with sqlite3.connect(tmp_path / "store.sqlite") as db:  # as an earlier llmsweep's simulator stored them
        (meta,) = db.execute("SELECT meta FROM runs WHERE run_id = ?", (first["run_id"],)).fetchone()
        doc = json.loads(meta)
        doc["reuse_keys"] = {job: "0" * 64 + key[64:] for job, key in doc["reuse_keys"].items()}
        db.execute("UPDATE runs SET meta = ? WHERE run_id = ?", (json.dumps(doc), first["run_id"]))
        for result_id, prov in db.execute("SELECT result_id, doc FROM provenance").fetchall():
            prov = json.loads(prov)
            assert prov["simulator"]["digest"]
            prov["simulator"]["digest"] = "0123456789abcdef"
            db.execute("UPDATE provenance SET doc = ? WHERE result_id = ?", (json.dumps(prov), result_id))
    _, err = _run(tmp_path, "second", "--reuse")
    said = _said(err)
    assert len(said) == 2 and all(line.endswith("what differs: the simulator's code or a catalog file it reads "
                                                "(`sim.identity`); the job runs again") for line in said), said


def test_a_settings_file_the_servers_environment_names_edited_in_place_is_not_reused(tmp_path: Path) -> None:
    """A recipe's `serve.env` names a file its server reads (`LMCACHE_CONFIG_FILE: /cfg/lmcache.yaml`): the file
    edited in place kept the job's reuse key, and `--reuse` stood the jobs on results measured under the old settings,
    in silence. What the file holds is in the key: the jobs run again, saying the local files may differ; with the file
    as it was measured, they stand on the stored results."""
    settings = tmp_path / "lmcache.yaml"
    settings.write_text("chunk_size: 256\n")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.read_text().replace(
        "    engine: { name: sim }\n",
        f"    engine: {{ name: sim }}\n    env:\n      LMCACHE_CONFIG_FILE: {settings}\n"))
    assert str(settings) in recipe.read_text()

    def run(name: str) -> tuple[dict[str, Any], str]:
        proc = cli_here(["run", recipe, "--out", tmp_path / name, "--store", tmp_path / "store.sqlite",
                         "--no-report", "--json", "--reuse"])
        assert proc.returncode == 0, proc.stderr[-4000:]
        doc: dict[str, Any] = json.loads(proc.stdout)
        return doc, proc.stderr

    first, _ = run("first")
    assert not any(r["reused"] for r in first["jobs"])
    same, _ = run("same")
    assert all(r["reused"] for r in same["jobs"])  # nothing changed: it stands on the first run's results
    settings.write_text("chunk_size: 512\n")
    edited, err = run("edited")
    assert not any(r["reused"] for r in edited["jobs"]), edited
    said = _said(err)
    assert len(said) == 2 and all("server environment (serve.env, a worker's additional-settings) name, hold" in line
                                  for line in said), said


def test_a_result_recorded_before_its_settings_file_was_keyed_is_measured_again_saying_so(tmp_path: Path) -> None:
    """A stored result whose key holds nothing of the settings file its `serve.env` names (the file did not exist
    where that run was planned, or an earlier llmsweep did not key it) does not say what the file held when it was
    measured: `--reuse` measures the job again, and says that this is the one part that differs, and why — it said
    'one of what a run records only inside the key's hash: the rendered launch, the simulator's code, ...'."""
    settings = tmp_path / "lmcache.yaml"
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE.read_text().replace(
        "    engine: { name: sim }\n",
        f"    engine: {{ name: sim }}\n    env:\n      LMCACHE_CONFIG_FILE: {settings}\n"))

    def run(name: str) -> tuple[dict[str, Any], str]:
        proc = cli_here(["run", recipe, "--out", tmp_path / name, "--store", tmp_path / "store.sqlite",
                         "--no-report", "--json", "--reuse"])
        assert proc.returncode == 0, proc.stderr[-4000:]
        doc: dict[str, Any] = json.loads(proc.stdout)
        return doc, proc.stderr

    run("first")  # keyed without the file: nothing is there
    settings.write_text("chunk_size: 256\n")
    second, err = run("second")
    assert not any(r["reused"] for r in second["jobs"]), second
    said = _said(err)
    assert len(said) == 2 and all(
        "server environment (serve.env, a worker's additional-settings) name, hold, which the key it was recorded "
        "under holds none of: none of those paths existed where its run was planned, or an earlier llmsweep did not "
        "key what they hold" in line and "one of what a run records" not in line for line in said), said
    third, _ = run("third")
    assert all(r["reused"] for r in third["jobs"])  # from then on it stands on the result measured with the file
