"""YAML merge keys (`<<: *anchor`) in recipe files: standard YAML 1.1, used by InferenceX-style recipes.

A recipe may take another's fields through an anchor and override some of them; the override is not a duplicate
key. A key written twice in one mapping still is, with its file:line, merge key or not.
"""

from __future__ import annotations

from pathlib import Path

from llmsweep.spec import SingleNodeRecipe, load_recipes

BASE = """\
base-recipe: &base
  image: lmsysorg/sglang:v0.5.16
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  precision: fp8
  framework: sglang
  runner: mi300x
  multinode: false
  scenarios: &scenarios
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - { tp: 8, conc-list: [4] }
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "recipes.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _line(path: Path, text: str, nth: int = 0) -> int:
    """1-based line of the `nth` line of the file that reads exactly `text`."""
    return [i for i, line in enumerate(path.read_text().splitlines(), 1) if line == text][nth]


def test_a_recipe_merges_an_anchor_and_its_own_keys_override_the_merged_ones(tmp_path: Path) -> None:
    path = _write(tmp_path, BASE + """\
fp4-recipe:
  <<: *base
  precision: fp4
  image: lmsysorg/sglang:v0.5.17
""")
    result = load_recipes([path])
    assert result.ok, [f.render() for f in result.findings]
    base, fp4 = result.recipes["base-recipe"], result.recipes["fp4-recipe"]
    assert isinstance(fp4, SingleNodeRecipe)
    assert (base.precision, fp4.precision) == ("fp8", "fp4")
    assert (base.image, fp4.image) == ("lmsysorg/sglang:v0.5.16", "lmsysorg/sglang:v0.5.17")
    assert fp4.model == base.model and fp4.scenarios == base.scenarios
    lines = path.read_text().splitlines()
    # an overriding key points at its own line; a merged one at the line the anchor wrote it on
    precision, model = fp4.line_of(("precision",)), fp4.line_of(("model",))
    assert precision is not None and model is not None
    assert lines[precision - 1] == "  precision: fp4"
    assert lines[model - 1] == "  model: Qwen/Qwen3.5-397B-A17B-FP8"


def test_an_earlier_mapping_of_a_merge_list_wins_over_a_later_one(tmp_path: Path) -> None:
    path = _write(tmp_path, BASE + """\
fp4-defaults: &fp4
  precision: fp4
  image: lmsysorg/sglang:v0.5.17
listed-recipe:
  <<: [*fp4, *base]
  runner: mi325x
""")
    result = load_recipes([path])
    recipe = result.recipes["listed-recipe"]
    # YAML's merge key: `*fp4` comes first, so its precision and image win over `*base`'s; own keys win over both
    assert (recipe.precision, recipe.image, recipe.runner) == ("fp4", "lmsysorg/sglang:v0.5.17", "mi325x")
    assert recipe.model == "Qwen/Qwen3.5-397B-A17B-FP8"
    assert not [f for f in result.errors if f.rule == "schema.duplicate-key"]


def test_a_key_written_twice_beside_a_merge_is_still_a_duplicate_at_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, BASE + """\
fp4-recipe:
  <<: *base
  precision: fp4
  precision: fp8
""")
    result = load_recipes([path])
    (dup,) = [f for f in result.errors if f.rule == "schema.duplicate-key"]
    assert (dup.file, dup.line, dup.path) == (str(path), _line(path, "  precision: fp8", 1), "fp4-recipe.precision")
    assert f"first at line {_line(path, '  precision: fp4')}" in dup.message
    assert dup.fix is not None and "`<<: *anchor`" in dup.fix


def test_two_merge_keys_in_one_mapping_are_a_duplicate_with_the_list_spelling_as_fix(tmp_path: Path) -> None:
    path = _write(tmp_path, BASE + """\
other: &other
  runner: mi325x
twice:
  <<: *base
  <<: *other
""")
    result = load_recipes([path])
    (dup,) = [f for f in result.errors if f.rule == "schema.duplicate-key"]
    assert (dup.line, dup.path) == (_line(path, "  <<: *other"), "twice.<<")
    assert f"first at line {_line(path, '  <<: *base')}" in dup.message
    assert dup.fix is not None and "<<: [*first, *second]" in dup.fix


def test_merging_something_that_is_not_a_mapping_is_a_syntax_error_at_its_line(tmp_path: Path) -> None:
    path = _write(tmp_path, BASE + """\
broken:
  <<: [*base, 3]
""")
    (err,) = load_recipes([path]).errors
    assert err.rule == "schema.yaml-syntax" and err.line == _line(path, "  <<: [*base, 3]") and "merge" in err.message
