"""Change control end to end on the simulator, in a scratch git repository: `run --changed BASE..HEAD` runs exactly
the added job and the changed arm's jobs; `run --reuse` runs nothing whose identity a stored result already has, and
points at the run that measured it."""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import pytest
from test_run_support import cli_env, cli_here, read_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit" / "changes"))
from changes_scratch import git, scratch_repo

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


def _run(repo: Path, env: dict[str, str], *args: str | Path, report: bool = False) -> dict[str, object]:
    proc = cli_here(["run", "recipes/chg.yaml", *(() if report else ("--no-report",)), "--json", *args], env,
                    cwd=repo)
    assert proc.returncode == 0, proc.stderr[-4000:]
    doc: dict[str, object] = json.loads(proc.stdout)
    return doc


def test_changed_runs_exactly_the_changed_jobs_and_reuse_runs_nothing_known(tmp_path: Path) -> None:
    repo, base, head = scratch_repo(tmp_path)
    env = cli_env(tmp_path)
    git(repo, "checkout", "-q", base)
    first = _run(repo, env, "--out", tmp_path / "base")
    assert len(first["jobs"]) == 4  # type: ignore[arg-type]

    git(repo, "checkout", "-q", head)
    changed = _run(repo, env, "--out", tmp_path / "changed", "--changed", f"{base}..{head}")
    rows = changed["jobs"]
    assert isinstance(rows, list)
    ran = sorted((r["job"].split("_")[5].split("-")[0], r["conc"]) for r in rows)
    assert ran == [("tp4", 8), ("tp8", 2), ("tp8", 4)]  # the added concurrency, and the arm whose env changed
    assert all(r["verdict"] in ("valid", "smoke") for r in rows)

    # Every job of HEAD now has a stored result of the same identity: nothing runs, each points at its source.
    again = _run(repo, env, "--out", tmp_path / "again", "--reuse")
    rows = again["jobs"]
    assert isinstance(rows, list) and len(rows) == 5
    # each row says it was reused and shows the verdict of the result it stands on (it said `skipped`)
    assert all(r["reused"] and not r["resumed"] and r["reason"].startswith("reused:") for r in rows)
    assert all(r["reason"].startswith(f"reused: {r['verdict']} result of run ") for r in rows)
    assert all(r["verdict"] in ("valid", "smoke") for r in rows)
    sources = {r["job"]: read_json(tmp_path / "again" / "jobs" / r["job"] / "reused.json")["run_id"] for r in rows}
    tp4_old = [j for j in sources if "_tp4-" in j and "_conc8_" not in j]
    assert {sources[j] for j in tp4_old} == {first["run_id"]}
    assert {sources[j] for j in sources if j not in tp4_old} == {changed["run_id"]}
    assert read_json(tmp_path / "again" / "run.json")["reused"].keys() == sources.keys()
    # each reused row shows the figures of the result it stands on (a walkthrough found every figure "-")
    measured = {(run_id, r["job"]): r["tput_per_gpu"] for run_id, doc in ((first["run_id"], first),
                (changed["run_id"], changed)) for r in doc["jobs"]}  # type: ignore[attr-defined]
    assert all(r["tput_per_gpu"] == measured[(sources[r["job"]], r["job"])] for r in rows)


def test_changed_with_nothing_changed_runs_nothing(tmp_path: Path) -> None:
    repo, _, head = scratch_repo(tmp_path)
    proc = cli_here(["run", "recipes/chg.yaml", "--changed", f"{head}..", "--out", tmp_path / "out"],
                    cli_env(tmp_path), cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "nothing to run" in proc.stderr and not (tmp_path / "out").exists()
    # with --json, stdout is still the end table as JSON (it was empty: a `run --json | jq` step failed on it)
    proc = cli_here(["run", "recipes/chg.yaml", "--changed", f"{head}..", "--out", tmp_path / "out", "--json"],
                    cli_env(tmp_path), cwd=repo)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["jobs"] == [] and doc["ok"] is True and doc["run_id"] is None and doc["counts"]["expected"] == 0
    assert not (tmp_path / "out").exists()


def test_changed_with_nothing_changed_still_refuses_recipes_the_runner_file_now_makes_invalid(tmp_path: Path) -> None:
    """A runner file that no longer holds the recipe's label changes no job (a job's identity does not hold the
    fleet), but the run must not say "nothing to run" and exit 0: the recipe's error is printed and the run exits 2."""
    repo, _, head = scratch_repo(tmp_path)
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("labels:\n  h100:\n    - h100_0\n", encoding="utf-8")
    proc = cli_here(["run", "recipes/chg.yaml", "--changed", f"{head}..", "--runner-config", fleet, "--out",
                     tmp_path / "out"], cli_env(tmp_path), cwd=repo)
    assert proc.returncode == 2, proc.stderr
    assert "[fleet.unknown-label]" in proc.stderr
    assert re.search(r"the recipes have \d+ errors?: nothing run", proc.stderr), proc.stderr
    assert not (tmp_path / "out").exists()


def test_reuse_after_a_change_runs_the_changed_jobs_and_reuses_the_rest(tmp_path: Path) -> None:
    repo, base, head = scratch_repo(tmp_path)
    env = cli_env(tmp_path)
    git(repo, "checkout", "-q", base)
    first = _run(repo, env, "--out", tmp_path / "base")
    git(repo, "checkout", "-q", head)
    doc = _run(repo, env, "--out", tmp_path / "head", "--reuse")
    rows = doc["jobs"]
    assert isinstance(rows, list)
    reused = sorted((r["job"].split("_")[5].split("-")[0], r["conc"]) for r in rows if r["reused"])
    ran = sorted((r["job"].split("_")[5].split("-")[0], r["conc"]) for r in rows if not r["reused"])
    assert reused == [("tp4", 2), ("tp4", 4)]  # unchanged: the stored results stand
    assert ran == [("tp4", 8), ("tp8", 2), ("tp8", 4)]  # added, and the arm whose env changed
    assert all(f"run {first['run_id']}" in r["reason"] for r in rows if r["reused"])


def test_the_reusing_runs_dashboard_draws_the_reused_points_as_their_run_stored_them(tmp_path: Path) -> None:
    """`run --reuse` listed the jobs it reused as "not run" on its dashboard and drew only the three it measured:
    the page must show the whole sweep the run stands for, each reused point with the id, verdict and figures of the
    run that measured it (read from the store, as that run's own dashboard shows them), marked as reused."""
    repo, base, head = scratch_repo(tmp_path)
    env = cli_env(tmp_path)
    git(repo, "checkout", "-q", base)
    first = _run(repo, env, "--out", tmp_path / "base", report=True)
    git(repo, "checkout", "-q", head)
    doc = _run(repo, env, "--out", tmp_path / "head", "--reuse", report=True)
    rows = doc["jobs"]
    assert isinstance(rows, list)
    skipped = {r["job"] for r in rows if r["reused"]}
    assert len(skipped) == 2

    data = read_json(tmp_path / "head" / "report" / "data.json")
    points = {p["job_id"]: p for p in data["points"]}
    assert points.keys() == {r["job"] for r in rows} and data["missing"] == []  # every job of the sweep is drawn
    earlier = {p["job_id"]: p for p in read_json(tmp_path / "base" / "report" / "data.json")["points"]}
    for job in skipped:
        p, stored = points[job], earlier[job]
        assert p["reused"] == {"run_id": first["run_id"], "job_id": job, "result_id": stored["id"],
                               "verdict": "valid"}
        # the earlier run's result as it was stored: its id, run, verdict and figures, none recomputed or relabelled
        assert (p["id"], p["run_id"], p["verdict"], p["reasons"], p["requests"]) == \
            (stored["id"], first["run_id"], stored["verdict"], stored["reasons"], stored["requests"])
        assert p["metrics"] == stored["metrics"]
    measured = [p for p in data["points"] if p["job_id"] not in skipped]
    assert len(measured) == 3 and all(p["reused"] is None and p["run_id"] == doc["run_id"] for p in measured)
    # reused points share the sweep's series (and its frontiers) with the points measured now, not an overlay's
    assert len(data["series"]) == 1 and not data["series"][0]["overlay"] and data["overlays"] == []
    assert {p["series"] for p in data["points"]} == {data["series"][0]["key"]}
    banner = data["verdicts"]["reused"]
    assert banner["count"] == 2 and all(first["run_id"] in g["reason"] for g in banner["reasons"])
    assert {i for g in banner["reasons"] for i in g["ids"]} == {points[j]["id"] for j in skipped}

    page = (tmp_path / "head" / "report" / "index.html").read_text()
    assert "Reused from" in page and "diamonds are points" in page
    summary = (tmp_path / "head" / "report" / "summary.md").read_text()
    assert "2 reused (2 drawn)" in summary
    assert all(f"`{j}`: reused the valid result of run {first['run_id']} (job {j}), drawn" in summary
               for j in skipped)


def test_changed_with_evals_only_runs_the_evals_of_what_changed(tmp_path: Path) -> None:
    """`run --changed BASE..HEAD --evals-only` failed with "3 job id(s) are not in the plan of the files given": the
    change set named throughput ids, and under --evals-only the run plans `…_eval_…` jobs. At 8k1k the tp4 arm's
    eval follows its grid (adding 64 evaluates 64); the tp8 arm has no point ≥ 16 to evaluate, so its env change
    runs no eval. Without lm-eval at hand the eval job is refused for that reason, by its eval id."""
    from changes_scratch import commit, write_recipe

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    revs = []
    for concs, arm in (("[2, 4, 16, 32]", "a"), ("[2, 4, 16, 32, 64]", "b")):
        path = write_recipe(repo, tp4_concs=concs, arm_var=arm)
        path.write_text(path.read_text().replace("isl: 256", "isl: 8192").replace("osl: 64", "osl: 1024"))
        revs.append(commit(repo, arm))
    env = {k: v for k, v in cli_env(tmp_path).items() if k != "LLMSWEEP_LM_EVAL"}
    proc = cli_here(["run", "recipes/chg.yaml", "--no-report", "--json", "--changed", f"{revs[0]}..{revs[1]}",
                     "--evals-only", "--out", tmp_path / "out"], env, cwd=repo)
    assert "not in the plan" not in proc.stderr, proc.stderr
    assert proc.returncode == 1, proc.stderr  # the one job is refused (no lm-eval here), not a bad input
    (row,) = json.loads(proc.stdout)["jobs"]
    assert "_tp4-" in row["job"] and "_conc64_" in row["job"] and "_eval_" in row["job"]
    assert row["verdict"] == "refused" and "lm-eval" in row["reason"]
    assert "1 added, 0 changed, 0 removed, 1 unchanged eval job" in proc.stderr
