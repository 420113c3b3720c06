"""Change control against real git repositories at their edges: paths git would quote, shallow clones (what
actions/checkout gives by default), and a base revision the clone does not hold."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from changes_scratch import commit, git, scratch_repo, write_recipe

from llmsweep.changes.diff import head_differs
from llmsweep.cli.main import main


def _main(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as done:
        main(list(args))
    out = capsys.readouterr()
    return int(done.value.code or 0), out.out, out.err


def test_files_that_differ_from_head_are_named_as_they_are_even_non_ascii_or_with_spaces(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """git quotes a non-ASCII path (`"recipes/r\\303\\251.yaml"`) and `--name-only` output split on whitespace cut a
    path with a space in two: `run --changed` named files that do not exist."""
    repo, base, _ = scratch_repo(tmp_path)
    edited = repo / "recipes" / "ré cipe.yaml"
    edited.write_text((repo / "recipes" / "chg.yaml").read_text().replace("chg-sim:", "chg-two:"))
    head = commit(repo, "a second recipe")
    edited.write_text(edited.read_text() + "\n")  # an edit since HEAD
    (repo / "recipes" / "nouveau é.yaml").write_text("{}\n")  # untracked
    assert head_differs(f"{base}..{head}", (), repo=repo) == ["recipes/nouveau é.yaml", "recipes/ré cipe.yaml"]
    monkeypatch.chdir(repo)
    monkeypatch.setenv("LLMSWEEP_STORE", str(tmp_path / "store.sqlite"))
    code, _, err = _main(capsys, "run", "recipes/ré cipe.yaml", "--changed", f"{base}..{head}", "--out",
                         str(tmp_path / "out"), "--no-report")
    assert code == 2, err
    assert "differ from its HEAD (recipes/ré cipe.yaml)" in err, err


def _shallow(tmp_path: Path) -> tuple[Path, str, str]:
    """A one-commit clone of a scratch repository (actions/checkout's default depth) and the two revisions."""
    repo, base, head = scratch_repo(tmp_path)
    (repo / "perf-changelog.yaml").write_text("- config-keys:\n  - chg-sim\n  description:\n  - x\n  pr-link: XXX\n")
    head = commit(repo, "a changelog")
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--depth", "1", f"file://{repo}", str(clone)], check=True)
    return clone, base, head


def test_a_base_beyond_a_shallow_clone_says_the_clone_is_shallow_and_how_to_fetch(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """In CI at 2 a.m. "BASE 'abc' is no commit" sent people looking for a typo: the clone is shallow."""
    clone, base, _ = _shallow(tmp_path)
    monkeypatch.chdir(clone)
    code, _, err = _main(capsys, "changes", f"{base}..HEAD")
    assert code == 2, err
    assert f"BASE {base!r} is no commit of" in err and "is a shallow clone" in err and "fetch-depth: 0" in err, err


def test_changelog_base_a_shallow_clone_lacks_is_refused_not_read_as_a_new_changelog(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`git show SHA:perf-changelog.yaml` of a full SHA the clone lacks says the path "exists on disk, but not in" it,
    which `changelog --base SHA` took for a changelog the change adds: every entry of history selected its jobs, a
    sweep of the whole history, exit 0."""
    clone, base, _ = _shallow(tmp_path)
    monkeypatch.chdir(clone)
    for command in (("perf-changelog.yaml", "recipes/chg.yaml", "--base", base, "--json"),
                    ("canonicalize", "perf-changelog.yaml", "--base", base, "--pr-number", "7")):
        code, out, err = _main(capsys, "changelog", *command)
        assert code == 2, (out, err)
        assert f"--base {base}: no such file, and no commit of" in err and "is a shallow clone" in err, err
        assert "git fetch --unshallow" in err and '"jobs"' not in out, (out, err)
    assert "XXX" in (clone / "perf-changelog.yaml").read_text()  # canonicalize wrote nothing


def test_a_remote_branch_the_clone_lacks_says_which_fetch_brings_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    repo, _, _ = scratch_repo(tmp_path)
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--single-branch", f"file://{repo}", str(clone)], check=True)
    monkeypatch.chdir(clone)
    code, _, err = _main(capsys, "changes", "origin/release..HEAD")
    assert code == 2, err
    assert "BASE 'origin/release' is no commit" in err and "`git fetch origin release`" in err, err
    code, _, err = _main(capsys, "changes", "..HEAD")  # no side to fetch: said as before
    assert code == 2 and "BASE is empty" in err, err


def test_a_base_that_moved_on_since_the_branch_forked_is_said_with_the_merge_base_to_compare_from(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`changes main..HEAD` on a branch behind main compares the two trees: main's own later change (the tp8 arm's env
    var) showed as this branch changing it back, and `run --changed` ran those jobs on the branch's old recipe, with
    no word that the range was not the branch's change."""
    repo, fork, _ = scratch_repo(tmp_path)
    git(repo, "branch", "-q", "-f", "main", fork)
    git(repo, "checkout", "-q", "-b", "pr", fork)
    write_recipe(repo, tp4_concs="[2, 4, 8]")  # the branch adds conc 8 to the tp4 arm
    commit(repo, "the branch's change")
    git(repo, "checkout", "-q", "main")
    write_recipe(repo, arm_var="main")  # main, meanwhile, changes the tp8 arm's env var
    commit(repo, "main moves on")
    git(repo, "checkout", "-q", "pr")
    monkeypatch.chdir(repo)
    code, out, err = _main(capsys, "changes", "main..pr", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert (doc["added"], doc["changed"]) == (1, 2)  # main's env change, shown reversed: hence the note
    assert len(doc["notes"]) == 1 and "main is not an ancestor of pr" in doc["notes"][0], doc["notes"]
    assert f"`llmsweep changes {fork[:12]}..pr`, from their merge base" in doc["notes"][0]
    assert doc["notes"][0] in err
    code, out, err = _main(capsys, "changes", f"{fork}..pr", "--json")  # from the merge base: the branch's own change
    assert code == 0 and json.loads(out)["notes"] == [] and json.loads(out)["added"] == 1, (out, err)
    assert json.loads(out)["changed"] == 0
    code, out, err = _main(capsys, "changes", f"{fork}..", "--json")  # the working tree as HEAD: forked from there
    assert code == 0 and json.loads(out)["notes"] == [], (out, err)


def test_a_recipe_file_renamed_since_the_base_is_compared_with_its_old_self_not_added_whole(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`changes BASE..HEAD recipes/moved.yaml` after `git mv recipes/chg.yaml recipes/moved.yaml`: the base had no such
    file, so every job of it was added, and `run --changed` / `ci matrix --changed` re-ran the whole recipe."""
    repo, _, head = scratch_repo(tmp_path)
    git(repo, "mv", "recipes/chg.yaml", "recipes/moved.yaml")
    moved = commit(repo, "rename the recipe")
    write_recipe(repo, tp4_concs="[2, 4, 8, 16]", arm_var="b")  # and, in the working tree, a concurrency added
    (repo / "recipes" / "chg.yaml").rename(repo / "recipes" / "moved.yaml")
    monkeypatch.chdir(repo)
    for spec, added in ((f"{head}..{moved}", 0), (f"{head}..", 1)):
        code, out, err = _main(capsys, "changes", spec, "recipes/moved.yaml", "--json")
        assert code == 0, err
        doc = json.loads(out)
        assert (doc["added"], doc["removed"], doc["changed"], doc["unchanged"]) == (added, 0, 0, 5), doc
        assert doc["notes"] == [f"recipes/moved.yaml is recipes/chg.yaml at {head} (renamed since): its jobs are "
                                "compared with that file's"]


def test_an_append_only_entry_reads_a_renamed_recipe_file_at_the_base_under_its_old_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`changelog --base REV recipes/moved.yaml` with an append-only entry: the base has the file under its old name,
    where it was read as missing ("the recipes of REV do not load")."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_recipe(repo)
    history = "- config-keys: [chg-sim]\n  description:\n  - x\n  pr-link: https://github.com/SemiAnalysisAI/InferenceX/pull/1\n"
    (repo / "perf-changelog.yaml").write_text(history)
    base = commit(repo, "base")
    git(repo, "mv", "recipes/chg.yaml", "recipes/moved.yaml")
    (repo / "recipes" / "moved.yaml").write_text((repo / "recipes" / "moved.yaml").read_text().replace(
        "conc-list: [2, 4]", "conc-list: [2, 4, 8]", 1))
    (repo / "perf-changelog.yaml").write_text(history + "\n" + history.replace("pull/1", "pull/2")
                                              + "  append-only: true\n")
    monkeypatch.chdir(repo)
    code, out, err = _main(capsys, "changelog", "perf-changelog.yaml", "recipes/moved.yaml", "--base", base, "--json")
    assert code == 0, err
    assert [(j["recipe_key"], j["conc"]) for j in json.loads(out)["jobs"]] == [("chg-sim", 8)]
