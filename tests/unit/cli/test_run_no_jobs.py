"""`run` on files that plan no job names the files and says why before refusing (exit 2): an empty file is a warning
to `validate`, and `run` said only 'the recipes expand to no job'."""

from __future__ import annotations

import subprocess
import sys
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


def test_validate_refuses_an_empty_file_alone_as_run_does_and_warns_beside_recipes(tmp_path: Path) -> None:
    """`validate empty.yaml` exited 0 with a warning while `run empty.yaml` refused it (exit 2): alone it is the
    error run stops on; beside files that plan jobs, a warning (run runs those)."""
    empty = tmp_path / "empty.yaml"
    empty.write_text("# nothing yet\n")
    def validate(*files: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "llmsweep.cli.main", "validate", *map(str, files)],
                              capture_output=True, text=True, timeout=120)

    alone = validate(empty)
    assert alone.returncode == 2 and "[plan.no-jobs]" in alone.stderr + alone.stdout, alone.stderr
    beside = validate(empty, Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml")
    said = beside.stderr + beside.stdout
    assert beside.returncode == 0 and "[schema.empty-file]" in said and "no-jobs" not in said, said
