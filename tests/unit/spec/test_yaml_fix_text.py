"""A YAML error whose cause PyYAML names gets that cause's fix: a tag and a tab were told "fix the YAML at that line
(indentation, a missing `:` or an unclosed bracket)", which names none of them."""

from __future__ import annotations

import pytest

from llmsweep.spec.loader import loads_recipes
from llmsweep.spec.source import TAB_FIX, TAG_FIX

RECIPE = "r:\n  image: x:1\n  model-prefix: {value}\n  multinode: false\n"


@pytest.mark.parametrize(("text", "line", "fix"), [
    (RECIPE.format(value="!!python/object/apply:os.system ['true']"), 3, TAG_FIX),
    (RECIPE.format(value="!!python/name:os.system"), 3, TAG_FIX),
    (RECIPE.format(value="!foo qwen"), 3, TAG_FIX),
    ("r:\n  image: x:1\n\tmodel-prefix: q\n", 3, TAB_FIX),  # a tab indenting
    ("r:\n  image:\tx:1\n  model-prefix:\tq\n  x: [\n", 2, TAB_FIX),  # a tab after the colon
    ("r:\n  image: x:1\n  model-prefix q\n  multinode: false\n", 4, None),  # a missing `:`: the generic fix
])
def test_a_tag_or_a_tab_is_told_its_own_fix(text: str, line: int, fix: str | None) -> None:
    (finding,) = loads_recipes(text, "r.yaml").findings
    assert (finding.rule, finding.line) == ("schema.yaml-syntax", line), finding.render()
    assert finding.fix == (fix or "fix the YAML at that line (indentation, a missing `:` or an unclosed bracket)")
    assert TAG_FIX == "remove the tag: recipes are plain YAML (no `!` tags)"
