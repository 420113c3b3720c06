"""`multinode` picks the recipe's schema: one that is not a boolean is one type error at its line. A quoted "false"
picked the multinode schema (a non-empty string is truthy) and gave `schema.enum … expected True` plus three errors
about fields of the other schema; `0` and `1` were taken as false and true although no field coerces types."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep.spec import load_recipes

FIXED = Path(__file__).resolve().parents[2] / "data" / "recipes" / "run" / "fixed-sim.yaml"


@pytest.mark.parametrize(("written", "got"), [('"false"', "a string 'false'"), ('"true"', "a string 'true'"),
                                              ("0", "an integer 0"), ("1", "an integer 1"), ("~", "null")])
def test_a_multinode_that_is_not_a_boolean_is_one_type_error(tmp_path: Path, written: str, got: str) -> None:
    text = FIXED.read_text(encoding="utf-8")
    assert "  multinode: false\n" in text
    path = tmp_path / "r.yaml"
    path.write_text(text.replace("  multinode: false\n", f"  multinode: {written}\n"), encoding="utf-8")
    result = load_recipes([path])
    (finding,) = result.findings
    assert (finding.rule, finding.line, finding.path) == ("schema.type", 10, "run-sim-fixed.multinode")
    assert finding.message == f"`multinode`: expected true or false, got {got}", finding.render()
    assert finding.fix == "write `multinode: true` or `multinode: false` (a boolean, unquoted)"
    assert not result.recipes


def test_a_boolean_multinode_still_loads_and_a_missing_one_is_reported_beside_the_rest(tmp_path: Path) -> None:
    assert load_recipes([FIXED]).ok
    path = tmp_path / "r.yaml"
    path.write_text(FIXED.read_text(encoding="utf-8").replace("  multinode: false\n", "")
                    .replace("model-prefix: qwen3.5", "model-prefix: ''"), encoding="utf-8")
    rules = sorted(f.rule for f in load_recipes([path]).errors)
    assert rules == ["schema.missing", "schema.range"], rules
