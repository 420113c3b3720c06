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


@pytest.mark.parametrize(("raw", "named", "fix"), [
    ("\x1b", "ESC (U+001B, shown as ^[ by `cat -v`)",
     'delete the ESC at that line, or, where the value needs it, write it as an escape in a double-quoted string '
     '(`"\\x1b"`)'),
    ("\x07", "BEL (U+0007, shown as ^G by `cat -v`)", 'string (`"\\x07"`)'),
    ("\x7f", "DEL (U+007F, shown as ^? by `cat -v`)", 'string (`"\\x7f"`)'),
    ("\x00", "NUL (U+0000, shown as ^@ by `cat -v`)",
     'delete the NUL at that line: no command line, environment variable or file name can carry one'),
])
def test_a_raw_control_character_is_named_with_its_own_fix(raw: str, named: str, fix: str) -> None:
    """A raw ESC byte got the generic "fix the YAML at that line (indentation, a missing `:` …)" after "code point
    27": the character is named as the user can find it, and its fix is to delete it or write it as an escape (a
    NUL only deleted: a `"\\0"` escape is `schema.nul`)."""
    (finding,) = loads_recipes(RECIPE.format(value=f"qwen{raw}3.5"), "r.yaml").findings
    assert (finding.rule, finding.line) == ("schema.yaml-syntax", 3), finding.render()
    assert f"raw control character, {named}, which YAML does not allow" in finding.message, finding.render()
    assert finding.fix is not None and fix in finding.fix and "indentation" not in finding.fix, finding.render()
    if raw != "\x00":  # the fix it names loads, the character in the value
        fixed = RECIPE.format(value=f'"qwen\\x{ord(raw):02x}3.5"')
        assert not [f for f in loads_recipes(fixed, "r.yaml").findings if f.rule == "schema.yaml-syntax"]


@pytest.mark.parametrize("value", ["5e91234", "1234567"])
def test_a_version_yaml_reads_as_a_number_is_told_to_quote_it(value: str) -> None:
    """`serve.engine.version` is a release, package version or commit; an unquoted commit of digits, or of digits with
    an `e` and more digits (YAML 1.2 reads `5e91234` as a float: inf), was told "write `version` as a string", which
    it already is to the user. The fix says to quote it and why."""
    text = ("r:\n  image: vllm/vllm-openai:v0.26.0\n  model: m/x\n  model-prefix: x\n  runner: h200\n"
            "  precision: bf16\n  framework: vllm\n  multinode: false\n  scenarios:\n    fixed-seq-len:\n"
            "    - isl: 8\n      osl: 8\n      search-space:\n      - { tp: 1, conc-list: [1] }\n"
            f"  serve:\n    engine: {{ name: vllm, version: {value} }}\n")
    (finding,) = [f for f in loads_recipes(text, "r.yaml").findings if f.rule == "schema.type"]
    assert finding.line == 16 and "YAML read the unquoted value as a number" in finding.message, finding.render()
    assert finding.fix is not None and finding.fix.startswith('write it in quotes (`version: "…"`)'), finding.fix
    quoted = text.replace(f"version: {value}", f'version: "{value}"')
    assert not [f for f in loads_recipes(quoted, "r.yaml").findings if f.rule == "schema.type"]
