"""`run --changed BASE..REV` plans the files as they are here under REV's job ids: files edited since REV are refused
(an edit the change set never saw ran or was left out silently), and `--config-keys` narrows the change."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from changes_scratch import commit, scratch_repo, write_recipe

from llmsweep.changes.diff import head_differs
from llmsweep.cli.main import main


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


def test_files_edited_since_the_ranges_head_are_named(tmp_path: Path) -> None:
    repo, base, head = scratch_repo(tmp_path)
    recipe = repo / "recipes" / "chg.yaml"
    assert head_differs(f"{base}..{head}", [recipe], repo=repo) == []
    write_recipe(repo, tp4_concs="[2, 4, 8]", arm_var="edited")  # an uncommitted edit of the tp8 arm's env
    assert head_differs(f"{base}..{head}", [recipe], repo=repo) == ["recipes/chg.yaml"]
    assert head_differs(f"{base}..", [recipe], repo=repo) == []  # the working tree is HEAD: nothing to differ from


def test_run_changed_refuses_files_that_differ_from_the_revision_and_says_how_to_go_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    repo, base, head = scratch_repo(tmp_path)
    write_recipe(repo, tp4_concs="[2, 4, 8]", arm_var="edited")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    code, _, err = _main(capsys, "run", "recipes/chg.yaml", "--changed", f"{base}..{head}", "--out",
                         str(tmp_path / "out"), "--no-report")
    assert code == 2, err
    assert "the files given differ from its HEAD (recipes/chg.yaml)" in err and f"`--changed {base}..`" in err
    assert not (tmp_path / "out").exists()


def test_config_keys_narrow_the_change_to_their_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Both keys changed (a concurrency added to each): `--config-keys chg-sim` runs only its own added job, where it
    refused the whole run naming the other key's job as not in the plan."""
    repo, base, _ = scratch_repo(tmp_path)
    other = repo / "recipes" / "other.yaml"
    other.write_text((repo / "recipes" / "chg.yaml").read_text().replace("chg-sim:", "other-sim:"))
    base = commit(repo, "other key")
    other.write_text(other.read_text().replace("conc-list: [2, 4, 8]", "conc-list: [2, 4, 8, 16]"))
    write_recipe(repo, tp4_concs="[2, 4, 8, 16]", arm_var="b")
    head = commit(repo, "both keys grow")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    code, out, err = _main(capsys, "run", "recipes/chg.yaml", "recipes/other.yaml", "--config-keys", "chg-sim",
                           "--changed", f"{base}..{head}", "--out", str(tmp_path / "out"), "--no-report", "--json")
    assert code == 0, err
    assert "1 changed job of other config keys than --config-keys left out" in err
    from llmsweep.plan import jobs_from_files

    (mine,) = [j.id for j in jobs_from_files([repo / "recipes" / "chg.yaml"]) if j.conc == 16]
    assert mine not in {j.id for j in jobs_from_files([other])}  # the two keys' conc-16 jobs are two jobs
    assert [j["job"] for j in json.loads(out)["jobs"]] == [mine]


def test_a_range_that_does_not_resolve_names_the_side_that_fails(tmp_path: Path) -> None:
    from llmsweep.changes.diff import split_range
    from llmsweep.errors import ConfigError

    repo, _, head = scratch_repo(tmp_path)
    with pytest.raises(ConfigError, match=r"BASE 'nosuch' is no commit of .* nor a directory\n"):
        split_range("nosuch..HEAD", repo)
    with pytest.raises(ConfigError, match=r"BASE 'HEAD~5' and HEAD 'nope' are no commit of"):
        split_range("HEAD~5..nope", repo)
    with pytest.raises(ConfigError, match="this directory is not inside a git repository"):
        split_range(f"main..{head}", None)


def test_files_named_from_outside_the_repository_are_its_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`changes --repo R BASE..HEAD recipes/x.yaml` from another directory: the file is R's, as `--repo` says (it was
    refused as "not inside the repository")."""
    from llmsweep.changes import changes_between

    repo, base, head = scratch_repo(tmp_path)
    monkeypatch.chdir(tmp_path)  # beside the repository, not in it
    cs = changes_between(f"{base}..{head}", [Path("recipes/chg.yaml")], repo=repo)
    assert [j.conc for j in cs.added] == [8] and len(cs.changed) == 2


def test_evals_only_on_recipes_without_eval_rows_says_so_in_run_and_ci_matrix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`run --evals-only` said "the recipes expand to no job" with a fix about --config-keys; `ci matrix
    --evals-only` wrote count=0 without a word, so a pull request labelled evals-only swept nothing and looked green."""
    recipe = write_recipe(tmp_path)  # isl 256: no 8k1k row, so no eval
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    code, _, err = _main(capsys, "run", str(recipe), "--evals-only", "--out", str(tmp_path / "out"), "--no-report")
    assert code == 2 and "--evals-only keeps only eval jobs, and the recipes have no row that runs an eval" in err, err
    assert "an eval row is an 8k1k row" in err
    code, out, err = _main(capsys, "ci", "matrix", str(recipe), "--evals-only")
    assert code == 0 and json.loads(out) == {"include": []}
    assert "warning: --evals-only (the pull request's evals-only label) selects no job" in err, err
