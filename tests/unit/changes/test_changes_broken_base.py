"""A change whose base revision holds a recipe that does not load (the very change that fixes it): `changes` and `run
--changed` used to stop (exit 2) naming a temporary directory that no longer existed. The base recipe now counts as
planning no job — every job of the head's version is added — said in a note naming `REV:path` and its finding; a head
that does not load is still an error, its findings naming `REV:path`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from llmsweep.changes import changes_between
from llmsweep.cli.main import cli
from llmsweep.errors import ConfigError
from llmsweep.plan import jobs_from_files

if shutil.which("git") is None:  # pragma: no cover - git is part of the dev environment
    pytest.skip("git is not installed", allow_module_level=True)

from changes_scratch import commit, git, write_recipe


def _broken_then_fixed(tmp_path: Path) -> tuple[Path, str, str]:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    path = write_recipe(repo)
    path.write_text(path.read_text().replace("  runner: mi300x", "  runner mi300x"))  # line 5: no `:`
    broken = commit(repo, "broken")
    write_recipe(repo)
    fixed = commit(repo, "fixed")
    return repo, broken, fixed


def test_a_base_recipe_that_does_not_load_plans_no_job_and_its_head_jobs_are_added(tmp_path: Path) -> None:
    repo, broken, fixed = _broken_then_fixed(tmp_path)
    cs = changes_between(f"{broken}..{fixed}", repo=repo)
    planned = jobs_from_files([repo / "recipes" / "chg.yaml"])
    assert [j.id for j in cs.added] == [j.id for j in planned] and not cs.changed and not cs.removed
    (note,) = cs.notes
    assert note.startswith(f"{broken}:recipes/chg.yaml:") and "[schema.yaml-syntax]" in note, note
    assert "llmsweep-changes-" not in note


def test_the_cli_says_the_note_and_a_broken_head_names_its_revision_not_a_temporary_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo, broken, fixed = _broken_then_fixed(tmp_path)
    monkeypatch.chdir(repo)
    res = CliRunner().invoke(cli, ["changes", f"{broken}..{fixed}", "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["added"] == 4 and doc["notes"] and f"note: {broken}:recipes/chg.yaml:" in res.stderr
    with pytest.raises(ConfigError) as info:  # the other way round: the head does not load
        changes_between(f"{fixed}..{broken}", repo=repo)
    said = str(info.value)
    assert f"{broken}:recipes/chg.yaml:" in said and "llmsweep-changes-" not in said, said
    assert all(f.file == f"{broken}:recipes/chg.yaml" for f in info.value.findings)
