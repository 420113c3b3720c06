"""A YAML error whose cause PyYAML names gets that cause's fix: a tag and a tab were told "fix the YAML at that line
(indentation, a missing `:` or an unclosed bracket)", which names none of them."""

from __future__ import annotations

import pytest

from llmsweep.spec.loader import loads_recipes
from llmsweep.spec.source import ALIAS_FIX, KEY_FIX, MERGE_FIX, TAB_FIX, TAG_FIX

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


@pytest.mark.parametrize(("text", "line", "fix"), [
    ("r:\n  image: x:1\n  model-prefix: *prefix\n", 3, ALIAS_FIX),  # an alias to no anchor
    ("r:\n  image: x:1\n  ? [a, b]\n  : q\n", 3, KEY_FIX),  # a list as a key
    ("r:\n  image: x:1\n  {a: 1}: q\n", 3, KEY_FIX),  # a mapping as a key
    ("r:\n  image: &i x:1\n  serve:\n    <<: *i\n", 2, MERGE_FIX),  # a merge of a scalar: where it is written
    ("r:\n  image: x:1\n  serve:\n    <<: [5]\n", 4, MERGE_FIX),
])
def test_an_alias_a_collection_key_or_a_scalar_merge_is_told_its_own_fix(text: str, line: int, fix: str) -> None:
    """These were told "fix the YAML at that line (indentation, a missing `:` or an unclosed bracket)": none of
    which is what is wrong with an undefined `*alias`, a `? [a, b]` key or `<<: *scalar`."""
    (finding,) = loads_recipes(text, "r.yaml").findings
    assert finding.rule == "schema.yaml-syntax" and finding.fix == fix, finding.render()
    assert finding.line == line, finding.render()
    if line == 2:
        assert "(the construct started at line 4)" in finding.message, finding.render()
