"""Recipe arguments behave one way in every command: the loader judges them, never click. `validate /dev/null` and
`validate <(cat r.yaml)` said the file did not exist (an `is_file()` check), `predict nope.yaml` printed click's
message instead of the loader's `schema.file`, and `predict recipes/` refused the folder the other commands take."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from llmsweep.cli.main import cli
from llmsweep.errors import ConfigError
from llmsweep.spec import load_recipes

FIXED = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"
COMMANDS = (("validate",), ("run",), ("render",), ("predict",), ("changes",), ("changelog", "check"),
            ("ci", "github"), ("ci", "matrix"))


@pytest.mark.parametrize("words", COMMANDS, ids=" ".join)
def test_every_command_that_plans_recipes_takes_them_with_one_definition(words: tuple[str, ...]) -> None:
    command: click.Command | None = cli
    for word in words:
        assert isinstance(command, click.Group)
        command = command.get_command(click.Context(command), word)
    assert command is not None
    (files,) = [p for p in command.params if p.name == "files"]
    assert isinstance(files.type, click.Path)
    assert not files.type.exists and files.type.dir_okay and files.type.file_okay, words  # the loader checks


def test_a_pipe_or_dev_null_is_read_as_the_text_it_holds(tmp_path: Path) -> None:
    empty = load_recipes([Path(os.devnull)])
    assert [f.rule for f in empty.findings] == ["schema.empty-file"]
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: fifo.write_bytes(FIXED.read_bytes()))
    writer.start()
    try:
        piped = load_recipes([fifo])
    finally:
        writer.join(timeout=10)
    assert piped.ok and list(piped.recipes) == ["run-sim-fixed"], [f.render() for f in piped.findings]


def test_predict_says_the_loaders_finding_for_a_missing_file_and_takes_a_folder(tmp_path: Path) -> None:
    res = CliRunner().invoke(cli, ["predict", str(tmp_path / "nope.yaml")])
    assert isinstance(res.exception, ConfigError)  # exit 2 through `main`, as `run` and `validate`
    assert "[schema.file]" in res.exception.message and "does not exist" in res.exception.message
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "r.yaml").write_bytes(FIXED.read_bytes())
    res = CliRunner().invoke(cli, ["predict", str(folder), "--max-requests", "2", "--processes", "1", "--json"])
    assert res.exit_code == 0, res.output
