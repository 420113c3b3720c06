"""`--config-keys` naming a recipe that does not load reports that recipe's findings, not "Config key not found".

`validate FILE --config-keys K` (and `run`, which plans the same way) matched K against the recipes that loaded only:
a recipe with a schema error at line 22 was answered `error: Config key(s) not found: K. Available keys: <the
others>`, the finding that says what to fix never printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.errors import ConfigError
from llmsweep.policy import validate_files

REPO = Path(__file__).resolve().parents[3]
MULTINODE = REPO / "tests" / "data" / "recipes" / "disagg" / "multinode.yaml"
GOOD = '"PREFILL_NODES=1"'


def _broken(tmp_path: Path) -> Path:
    text = MULTINODE.read_text(encoding="utf-8")
    assert GOOD in text
    path = tmp_path / "multinode.yaml"
    path.write_text(text.replace(GOOD, '"PREFILL_NODES"'), encoding="utf-8")
    return path


@pytest.mark.parametrize("keys", [["sglang-pd"], ["sglang-*"], ["atom-pd", "sglang-pd"]])
def test_a_selected_recipe_that_does_not_load_is_reported_by_its_findings(keys: list[str], tmp_path: Path) -> None:
    path = _broken(tmp_path)
    validation = validate_files([path], config_keys=keys)
    errors = [f for f in validation.findings if f.is_error]
    assert [(f.rule, f.line) for f in errors] == [("schema.env-name", 22)], [f.render() for f in errors]
    assert errors[0].path is not None and errors[0].path.startswith("sglang-pd.")
    assert not validation.ok


def test_a_key_that_names_no_recipe_is_still_not_found(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="Config key not found: nope"):
        validate_files([MULTINODE], config_keys=["nope"])
    assert validate_files([MULTINODE], config_keys=["sglang-pd"]).ok
