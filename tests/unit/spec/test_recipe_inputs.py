"""What a recipe argument names, as every command that plans recipes reads it (`spec.loader`): a path that is not
there is said so, with the name that is there where one is close and a fix that fits (it had the fix of a recipe's
lines, `edit the named lines`, and no did-you-mean for `x.yaml` typed for `x.yml`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from llmsweep.errors import ConfigError
from llmsweep.spec import load_recipes

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
RECIPE = EXAMPLES / "quickstart.yaml"


def _only_error(paths: list[Path]) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        load_recipes(paths).raise_on_error()
    return caught.value


def test_a_yaml_typed_for_a_yml_says_the_file_is_missing_and_names_the_other(tmp_path: Path) -> None:
    shutil.copy(RECIPE, tmp_path / "qs.yml")
    (finding,) = load_recipes([tmp_path / "qs.yaml"]).errors
    assert finding.rule == "schema.file"
    typed, there = tmp_path / "qs.yaml", tmp_path / "qs.yml"
    assert finding.message == f"Input file '{typed}' does not exist; did you mean '{there}'?"
    assert finding.fix == f"pass {tmp_path / 'qs.yml'}"
    error = _only_error([tmp_path / "qs.yaml"])
    assert error.fix is None and "edit the named lines" not in str(error)  # no line to edit: the finding's fix
    assert f"fix: pass {tmp_path / 'qs.yml'}" in str(error)


def test_a_misspelt_file_or_folder_names_the_close_one(tmp_path: Path) -> None:
    (tmp_path / "examples").mkdir()
    shutil.copy(RECIPE, tmp_path / "examples" / "quickstart.yaml")
    for typed in ("examples/quickstrat.yaml", "exmaples/quickstart.yaml", "exmaples/quickstart.yml"):
        (finding,) = load_recipes([tmp_path / typed]).errors
        assert finding.message.endswith(f"did you mean '{tmp_path / 'examples' / 'quickstart.yaml'}'?"), typed


def test_a_missing_file_with_no_close_name_says_what_its_folder_holds(tmp_path: Path) -> None:
    shutil.copy(RECIPE, tmp_path / "quickstart.yaml")
    (finding,) = load_recipes([tmp_path / "nope.yaml"]).errors
    assert finding.message == f"Input file '{tmp_path / 'nope.yaml'}' does not exist"
    assert finding.fix == f"check the path: {tmp_path} holds 1 YAML file: quickstart.yaml"
    (finding,) = load_recipes([tmp_path / "nothere" / "x.yaml"]).errors
    assert finding.message.endswith(f"does not exist: there is no folder {tmp_path / 'nothere'}")
    # a line a recipe problem names keeps the fix of editing it
    (tmp_path / "bad.yaml").write_text("a:\n  image: 1\n")
    assert "edit the named lines" in str(_only_error([tmp_path / "bad.yaml", tmp_path / "nope.yaml"]))

