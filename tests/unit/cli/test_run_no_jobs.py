"""`run` on files that plan no job names the files and says why before refusing (exit 2): an empty file is a warning
to `validate`, and `run` said only 'the recipes expand to no job'."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.errors import ConfigError


def test_run_on_an_empty_recipe_file_names_it_and_the_finding(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    res = CliRunner().invoke(cli, ["run", str(empty), "--out", str(tmp_path / "out"), "--store",
                                   str(tmp_path / "s.sqlite")])
    assert isinstance(res.exception, ConfigError)  # exit 2 through `main`
    assert "[schema.empty-file]" in res.stderr
    assert str(res.exception.message) == f"{empty}: the recipes expand to no job"
    assert not (tmp_path / "out").exists()  # nothing was touched
