"""A concurrency added to a multi-node arm runs alone: the deployment runs its whole list in turn, and the points
both sides have are the same measurements. The slice it runs travels by id — `run --changed`, `ci matrix --changed`
and the workflow's `run FILES --job ID` on a runner — and every one of them resolves it."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from changes_scratch import commit, git, multinode_repo, write_multinode
from click.testing import CliRunner

from llmsweep.changes import changes_between
from llmsweep.changes.changelog import trim_concurrencies
from llmsweep.cli.main import cli
from llmsweep.errors import ConfigError
from llmsweep.execute.pipeline import _only
from llmsweep.plan import jobs_from_files
from llmsweep.plan.slices import resolve_job_ids, slice_concurrencies

if shutil.which("git") is None:  # pragma: no cover - git is part of the dev environment
    pytest.skip("git is not installed", allow_module_level=True)


def test_an_added_concurrency_is_a_slice_of_the_job_and_nothing_else_runs(tmp_path: Path) -> None:
    repo, (base, grown, shrunk, env) = multinode_repo(
        tmp_path, {"concs": "[2, 4, 8]"}, {"concs": "[2, 8]"}, {"concs": "[2, 8, 16]", "mn_var": "b"})
    cs = changes_between(f"{base}..{grown}", repo=repo)
    assert not cs.added and not cs.removed and not cs.changed
    (change,) = cs.concs
    assert (change.added, change.removed) == ((8,), ())
    run = change.to_run
    assert run is not None and run.conc == [8] and "_conc8_" in run.id
    assert cs.to_run() == [run.id]
    (head_job,) = jobs_from_files([repo / "recipes" / "mn.yaml"])  # the working tree is at the last commit
    assert run.id.rsplit("_", 1)[1] == change.head.id.rsplit("_", 1)[1]  # the job's suffix: it reads as its job
    row = cs.as_dict()["jobs"][0]
    assert (row["change"], row["added_conc"], row["job"]) == ("conc-added", [8], run.id)

    # a concurrency dropped (4) beside one kept: only the new one (8) runs
    both = changes_between(f"{grown}..{shrunk}", repo=repo)
    assert [(c.added, c.removed) for c in both.concs] == [((), (4,))] and both.to_run() == []
    dropped_and_added = changes_between(f"{base}..{shrunk}", repo=repo)
    assert [(c.added, c.removed) for c in dropped_and_added.concs] == [((8,), (4,))]
    assert [j.conc for j in dropped_and_added.jobs_to_run()] == [[8]]

    # another field changed with the list: the whole job runs, every concurrency
    whole = changes_between(f"{shrunk}..{env}", repo=repo)
    assert not whole.concs and [j.conc for j in whole.added] == [[2, 8, 16]] and whole.to_run() == [head_job.id]


def test_the_slice_is_found_by_id_wherever_ids_are_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, (base, head) = multinode_repo(tmp_path, {"concs": "[2, 4, 8]"})
    monkeypatch.chdir(repo)
    plan = jobs_from_files([Path("recipes/mn.yaml")])
    (slice_id,) = changes_between(f"{base}..{head}", repo=repo).to_run()

    (resolved,), _ = _only(plan, [], [slice_id])  # `run --changed` and `run --job` (the workflow's runner step)
    assert resolved.id == slice_id and resolved.conc == [8]
    with pytest.raises(ConfigError, match="not in the plan of the files given"):
        _only(plan, [], [slice_id.replace("_conc8_", "_conc16_")])  # 16 is not one of the job's concurrencies

    res = CliRunner().invoke(cli, ["ci", "matrix", "recipes/mn.yaml", "--changed", f"{base}..{head}"])
    assert res.exit_code == 0, res.output
    assert [e["job"] for e in json.loads(res.stdout)["include"]] == [slice_id]


def test_run_changed_runs_only_the_added_concurrency(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, (base, head) = multinode_repo(tmp_path, {"concs": "[2, 4, 8]"})
    monkeypatch.chdir(repo)
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    out = tmp_path / "out"
    res = CliRunner().invoke(cli, ["run", "recipes/mn.yaml", "--changed", f"{base}..{head}", "--out", str(out),
                                   "--no-report", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["jobs"]
    assert [(r["conc"], r["verdict"]) for r in rows] == [(8, "valid")]
    assert [o["job_id"] for o in json.loads((out / "run.json").read_text())["outcomes"]] == [rows[0]["job"]]


def test_slices_round_trip_and_trim_uses_them(tmp_path: Path) -> None:
    from changes_scratch import write_multinode

    path = write_multinode(tmp_path, concs="[64, 2, 4, 8, 16, 32, 128]")
    (job,) = jobs_from_files([path])
    assert slice_concurrencies(job, job.concs).id == job.id  # the whole list is the job itself
    five, other = slice_concurrencies(job, [2, 4, 8, 16, 128]), slice_concurrencies(job, [2, 4, 16, 32, 128])
    assert "_conc2-128n5_" in five.id and five.id != other.id  # a lossy tag still names one slice
    picked = resolve_job_ids([job], [five.id, slice_concurrencies(job, [8, 2]).id], fix="x")
    assert [j.conc for j in picked] == [[2, 4, 8, 16, 128], [2, 8]]  # source order within each, ids order between
    assert [j.conc for j in trim_concurrencies([job])] == [[2]]
    assert trim_concurrencies([job])[0].id == slice_concurrencies(job, [2]).id


def test_the_eval_follows_its_concurrency_into_the_slice_or_stays_behind(tmp_path: Path) -> None:
    """An 8k1k multi-node row is evaluated at its highest concurrency ≥ 16. Adding a higher one moves the eval there
    (the slice runs it); adding a lower one leaves the measured eval alone (the slice does not run it again)."""
    from changes_scratch import write_multinode

    old, higher, lower = tmp_path / "old", tmp_path / "higher", tmp_path / "lower"
    write_multinode(old, concs="[8, 16, 32]", isl=8192, osl=1024)
    write_multinode(higher, concs="[8, 16, 32, 64]", isl=8192, osl=1024)
    write_multinode(lower, concs="[4, 8, 16, 32]", isl=8192, osl=1024)
    (up,) = changes_between(f"{old}..{higher}").jobs_to_run()
    assert (up.conc, up.run_eval, up.eval_conc) == ([64], True, 64)
    (down,) = changes_between(f"{old}..{lower}").jobs_to_run()
    assert (down.conc, down.run_eval, down.eval_conc) == ([4], False, None)



def test_under_evals_only_a_slice_runs_only_when_the_eval_moved_to_an_added_concurrency(tmp_path: Path) -> None:
    """Under --evals-only the multi-node row is an eval-only job (no throughput): adding a concurrency below its eval
    point measures nothing new, so nothing runs (a slice without its eval would be a job with nothing to do); adding
    a higher one moves the eval there, and that slice resolves in the --evals-only plan (`run --changed`)."""
    from changes_scratch import write_multinode

    from llmsweep.plan.matrix import EvalOptions

    evals = EvalOptions(evals_only=True)
    old, higher, lower = tmp_path / "old", tmp_path / "higher", tmp_path / "lower"
    write_multinode(old, concs="[8, 16, 32]", isl=8192, osl=1024)
    recipe = write_multinode(higher, concs="[8, 16, 32, 64]", isl=8192, osl=1024)
    write_multinode(lower, concs="[4, 8, 16, 32]", isl=8192, osl=1024)
    assert changes_between(f"{old}..{lower}", evals=evals).jobs_to_run() == []
    (up,) = changes_between(f"{old}..{higher}", evals=evals).jobs_to_run()
    assert (up.conc, up.eval_only, up.run_eval, up.eval_conc) == ([64], True, True, 64)
    (resolved,) = resolve_job_ids(jobs_from_files([recipe], evals=evals), [up.id], fix="x")
    assert resolved == up
    # --all-evals evaluates every concurrency of the row: the one added below runs its eval
    (low,) = changes_between(f"{old}..{lower}", evals=EvalOptions(all_evals=True)).jobs_to_run()
    assert (low.conc, low.eval_only, low.run_eval, low.eval_all_concs) == ([4], True, True, True)


def test_a_policy_error_about_one_point_of_the_job_refuses_that_point_of_the_slice(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`grid.max-conc` names the points above the cap (`<job id>-conc16`), not the job a slice is cut from: `run
    --changed` ran the added conc 16 above the recipe's own cap (exit 0), and `ci matrix` said nothing of it, with or
    without --changed."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")

    def capped(concs: str) -> None:  # the arm with its cap: conc 16 is above it
        path = write_multinode(repo, concs=concs)
        path.write_text(path.read_text().replace("  workload:", "  policy: {max-conc: 8}\n  workload:"))

    capped("[2, 4]")
    base = commit(repo, "base")
    capped("[2, 4, 8, 16]")
    head = commit(repo, "head")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    (slice_id,) = changes_between(f"{base}..{head}", repo=repo).to_run()

    res = CliRunner().invoke(cli, ["run", "recipes/mn.yaml", "--changed", f"{base}..{head}", "--out",
                                   str(tmp_path / "out"), "--no-report", "--json"], standalone_mode=False)
    assert res.return_value == 1, res.output  # partly ran: conc 8 ran beside the refused conc 16 (2: nothing ran)
    rows = json.loads(res.stdout)["jobs"]
    assert [(r["conc"], r["verdict"]) for r in rows] == [(8, "valid"), (16, "refused")], rows
    assert "grid.max-conc" in rows[1]["reason"]

    note = "note: 1 of the {} jobs (a multi-node job's points counted apart) will be refused by `llmsweep run` on " \
           "the runner (e.g. {}-conc16): policy error [grid.max-conc]"
    changed = CliRunner().invoke(cli, ["ci", "matrix", "recipes/mn.yaml", "--changed", f"{base}..{head}"])
    assert changed.exit_code == 0 and note.format(2, slice_id) in changed.stderr, changed.output
    (job,) = jobs_from_files([Path("recipes/mn.yaml")])
    whole = CliRunner().invoke(cli, ["ci", "matrix", "recipes/mn.yaml"])
    assert whole.exit_code == 0 and note.format(4, job.id) in whole.stderr, whole.output


def test_a_reordered_list_is_said_as_reordered_by_changes_and_run_changed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`[2, 4]` → `[4, 2]` adds and removes nothing: `changes` said "1 multi-node job(s) with concurrencies added or
    removed", and `run --changed` counted the job nowhere."""
    repo, (base, head) = multinode_repo(tmp_path, {"concs": "[4, 2]"})
    monkeypatch.chdir(repo)
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    said = CliRunner().invoke(cli, ["changes", f"{base}..{head}"])
    assert said.exit_code == 0, said.output
    assert ("0 added, 0 changed, 0 removed, 1 multi-node job with its concurrencies only reordered, 0 unchanged;"
            " 0 jobs to run") in said.stderr + said.stdout
    ran = CliRunner().invoke(cli, ["run", "recipes/mn.yaml", "--changed", f"{base}..{head}", "--out",
                                   str(tmp_path / "out"), "--no-report"])
    assert "1 multi-node job with its concurrencies only reordered, 0 unchanged jobs" in ran.stderr, ran.output
