"""`llmsweep changelog --base REV` with an append-only entry: only the concurrencies the selected configs add to the
curves the base already has are selected (a multi-node list sliced to them); everything else an append-only change
might carry is refused with what, where and the fix, as InferenceX's append-only mode does (core spec §3.4)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from changes_scratch import commit, git, write_multinode, write_recipe
from click.testing import CliRunner, Result

from llmsweep.cli.main import cli
from llmsweep.errors import ConfigError

if shutil.which("git") is None:  # pragma: no cover - git is part of the dev environment
    pytest.skip("git is not installed", allow_module_level=True)

LINK = "https://github.com/SemiAnalysisAI/InferenceX/pull/12"


def entry(keys: str, extra: str = "  append-only: true\n") -> str:
    return f"- config-keys: {keys}\n  description:\n  - more points\n  pr-link: {LINK}\n{extra}"


HISTORY = entry("[chg-sim, mn-sim]", extra="")


def repo_at_base(tmp_path: Path) -> tuple[Path, str]:
    """The single-node recipe (tp4 at [2, 4], tp8 at [2, 4]) and the multi-node arm at [2, 4], with a changelog."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    write_recipe(repo)
    write_multinode(repo)
    (repo / "perf-changelog.yaml").write_text(HISTORY)
    return repo, commit(repo, "base")


def changelog(repo: Path, base: str, added: str, *args: str) -> Result:
    (repo / "perf-changelog.yaml").write_text(HISTORY + "\n" + added)
    return CliRunner().invoke(cli, ["changelog", "--base", base, "--json", *args])


def test_append_only_selects_only_the_added_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, base = repo_at_base(tmp_path)
    monkeypatch.chdir(repo)
    write_recipe(repo, tp4_concs="[2, 4, 16, 8]")
    write_multinode(repo, concs="[2, 4, 32, 8]")
    res = changelog(repo, base, entry("[chg-sim, mn-sim]"))
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["jobs"]
    assert [(r["recipe_key"], r["kind"], r["conc"]) for r in rows] == [
        ("chg-sim", "throughput", 16), ("chg-sim", "throughput", 8), ("mn-sim", "throughput", [32, 8])]
    assert "_conc32x8_" in rows[2]["job"]  # a slice of the multi-node job, named as `run --job` resolves it
    trimmed = changelog(repo, base, entry("[chg-sim, mn-sim]"), "--trim-conc")
    assert trimmed.exit_code == 0, trimmed.output
    assert [r["conc"] for r in json.loads(trimmed.stdout)["jobs"]] == [8, [8]]  # the lowest *added* point


def _refusal(res: Result) -> str:
    assert isinstance(res.exception, ConfigError), res.output
    return f"{res.exception.message} | fix: {res.exception.fix}"


def test_append_only_refuses_what_is_not_only_added_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, base = repo_at_base(tmp_path)
    monkeypatch.chdir(repo)
    write_multinode(repo, concs="[2, 4, 8]")
    added = entry("[mn-sim]")

    (tmp_path / "base-changelog.yaml").write_text(HISTORY)
    (repo / "perf-changelog.yaml").write_text(HISTORY + "\n" + added)
    as_file = CliRunner().invoke(cli, ["changelog", "--base", str(tmp_path / "base-changelog.yaml"), "--json"])
    assert "changelog file" in _refusal(as_file) and "git revision" in _refusal(as_file)

    write_recipe(repo, arm_var="b")  # the unselected config changed beside the added point
    assert "config 'chg-sim' changed outside the entries' scope" in _refusal(changelog(repo, base, added))
    write_recipe(repo)

    write_multinode(repo, concs="[2, 8]")  # a published point dropped
    assert "concurrency 4 of the curve of" in _refusal(changelog(repo, base, added))

    write_multinode(repo, concs="[2, 4]")  # nothing added
    assert "add no concurrency" in _refusal(changelog(repo, base, added))

    write_multinode(repo, concs="[2, 4, 8]", mn_var="b")  # the curve itself changed
    assert "is gone or changed" in _refusal(changelog(repo, base, added))

    write_multinode(repo, concs="[2, 4, 8]")
    new = (repo / "recipes" / "chg.yaml").read_text().replace("chg-sim:", "chg-new:")
    (repo / "recipes" / "new.yaml").write_text(new)  # a config the base does not have
    assert "'chg-new' is not in the recipes at" in _refusal(changelog(repo, base, entry("[chg-new]")))
    (repo / "recipes" / "new.yaml").unlink()

    mixed = changelog(repo, base, added + "\n" + entry("[chg-sim]", extra=""))
    assert "cannot share a sweep" in _refusal(mixed)
    assert "evals-only" in _refusal(changelog(repo, base, added, "--evals-only"))


def test_append_only_refuses_a_point_in_a_series_of_mixed_images(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Two configs draw one dashboard series (same model, framework, runner, ...) from two images: a point added
    to either would sit beside points of another image."""
    repo, _ = repo_at_base(tmp_path)
    text = (repo / "recipes" / "chg.yaml").read_text()
    (repo / "recipes" / "old.yaml").write_text(text.replace("chg-sim:", "chg-old:").replace("20260730", "20260601"))
    base = commit(repo, "a second config on an older image")
    monkeypatch.chdir(repo)
    write_recipe(repo, tp4_concs="[2, 4, 8]")
    res = changelog(repo, base, entry("[chg-sim, chg-old]"))
    message = _refusal(res)
    assert "used 2 images" in message and "20260601" in message and "one image" in message
