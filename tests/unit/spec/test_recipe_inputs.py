"""What a recipe argument names, as every command that plans recipes reads it (`spec.loader`): a path that is not
there is said so, with the name that is there where one is close and a fix that fits (it had the fix of a recipe's
lines, `edit the named lines`, and no did-you-mean for `x.yaml` typed for `x.yml`); a runner file or a golden-AL
curve, in a folder of recipes or named, is skipped and said so (`examples/` read its two fleet files as recipes:
35 errors, two of them duplicate recipes `labels` and `hardware` between the fleets) — and nothing that is a recipe,
mistaken or not, is skipped."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from llmsweep.errors import ConfigError
from llmsweep.spec import load_recipes

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"
RECIPE = EXAMPLES / "quickstart.yaml"
FLEET = EXAMPLES / "gpu" / "fleet.yaml"
CURVE = EXAMPLES / "results" / "h200-al-collect-smollm2" / "golden_al" / "smollm2_ngram.yaml"


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


def test_a_folder_of_recipes_skips_its_fleet_files_and_curves_and_says_so(tmp_path: Path) -> None:
    for sub in ("gpu", "transformers"):  # two fleets of the same labels: not duplicate recipes
        (tmp_path / sub).mkdir()
        shutil.copy(EXAMPLES / sub / "fleet.yaml", tmp_path / sub / "fleet.yaml")
    shutil.copy(CURVE, tmp_path / "smollm2_ngram.yaml")
    shutil.copy(RECIPE, tmp_path / "quickstart.yaml")
    result = load_recipes([tmp_path])
    assert result.ok, [f.render() for f in result.errors]
    assert list(result.recipes) == ["qwen3.5-fp8-mi300x-sim-agentic-mtp"]
    skipped = {Path(f.file or "").relative_to(tmp_path).as_posix(): f for f in result.findings
               if f.rule == "schema.not-recipe"}
    assert set(skipped) == {"gpu/fleet.yaml", "transformers/fleet.yaml", "smollm2_ngram.yaml"}
    assert not any(f.is_error for f in skipped.values())
    fleet = skipped["gpu/fleet.yaml"]
    assert fleet.message == "not a recipe file: a runner file (top-level `hardware:`, `labels:`); skipped"
    assert fleet.fix == "pass it with --runner-config, not as a recipe"
    assert skipped["smollm2_ngram.yaml"].message.startswith("not a recipe file: a golden acceptance-length curve")
    assert not [f for f in result.findings if (f.file or "").endswith("fleet.yaml") and f.rule != "schema.not-recipe"]


def test_the_examples_gpu_glob_with_its_fleet_loads_the_recipes_alone() -> None:
    """The fleet file's own comment runs `llmsweep run examples/gpu/*.yaml --runner-config examples/gpu/fleet.yaml`:
    the glob names the fleet file as a recipe too."""
    result = load_recipes(sorted((EXAMPLES / "gpu").glob("*.yaml")))
    schema = [f.render() for f in result.findings if f.rule.startswith("schema.") and f.rule != "schema.not-recipe"]
    assert not schema, schema
    assert [f.file for f in result.findings if f.rule == "schema.not-recipe"] == [str(FLEET)]


def test_what_is_a_recipe_is_never_skipped() -> None:
    """Recipes, mistaken ones included, are read as recipes: one written without its key, one keyed `labels`."""
    from llmsweep.spec.loader import not_recipes

    assert not_recipes({"image": "i:1", "model": "m", "scenarios": {}}) is None
    assert not_recipes({"labels": {"image": "i:1", "scenarios": {"fixed-seq-len": []}}}) is None
    assert not_recipes({"labels": {"h200": ["h200_0"]}, "runners": {}}) is None  # not the fleet's keys alone
    assert not_recipes({"a": {"thinking_on": {1: 1.5}}, "b": {"image": "i"}}) is None
    assert not_recipes({"labels": {"h200": ["h200_0"]}}) is not None
    assert not_recipes({"ckpt": {"thinking_on": {1: 1.5}, "thinking_off": {1: 1.4}}}) is not None


DISCOVERY = EXAMPLES / "results" / "h200-discover-smollm2"
DISCOVERED = EXAMPLES / "gpu" / "smollm2-135m-bf16-h200-vllm-discover.yaml"


def _schema_errors(paths: list[Path]) -> list[str]:
    return [f.render() for f in load_recipes(paths).errors if f.rule.startswith("schema.")]


def test_the_examples_folder_reads_as_recipes_without_a_duplicate() -> None:
    """`llmsweep run examples` (and `validate examples`) read the whole folder: the discovery evidence under
    `examples/results/` holds discover's proposal, under the key of the recipe in `examples/gpu/` (it replaces that
    recipe) — it had been a duplicate recipe, exit 2 before any job was planned."""
    assert not _schema_errors([EXAMPLES])
    skipped = [f.file for f in load_recipes([EXAMPLES]).findings
               if f.rule == "schema.not-recipe" and f.file and Path(f.file).is_dir()]
    assert str(DISCOVERY) in skipped


def test_a_folder_walk_leaves_out_a_discovery_below_it_and_says_so(tmp_path: Path) -> None:
    """What `llmsweep discover --out` wrote — its proposal and its stage recipes, each under keys of the recipe
    discovered — is left out of a walk of a folder above it, said once; named, the proposal and the discovery folder
    are read."""
    shutil.copy(DISCOVERED, tmp_path / DISCOVERED.name)
    disc = tmp_path / "runs" / "disc"
    (disc / "stages").mkdir(parents=True)
    for name in ("discovery.json", "proposed.yaml", "proposed.diff"):
        shutil.copy(DISCOVERY / name, disc / name)
    shutil.copy(DISCOVERY / "proposed.yaml", disc / "stages" / "ladder.yaml")
    shutil.copy(DISCOVERY / "proposed.yaml", disc / "stages" / "refine1.yaml")

    result = load_recipes([tmp_path])
    assert not [f.render() for f in result.findings if f.rule.startswith("schema.") and f.is_error]
    assert list(result.recipes) == ["smollm2-135m-bf16-h200-vllm-discover"]
    assert result.sources.keys() == {str(tmp_path / DISCOVERED.name)}
    (said,) = [f for f in result.findings if f.rule == "schema.not-recipe"]
    assert said.file == str(disc) and not said.is_error
    assert said.message.startswith("not a folder of recipes: the output of `llmsweep discover`")
    assert said.fix == (f"to validate or run the proposal, name its file ({disc / 'proposed.yaml'}), or apply "
                        f"{disc / 'proposed.diff'} to the recipe")

    # the proposal named, or its discovery folder: read (the stage recipes share keys, as discover writes them)
    named = load_recipes([disc / "proposed.yaml"])
    assert named.ok and list(named.recipes) == ["smollm2-135m-bf16-h200-vllm-discover"]
    assert str(disc / "proposed.yaml") in load_recipes([disc]).sources
    # beside the recipe it came from, the proposal is the duplicate it is (one replaces the other)
    both = load_recipes([tmp_path / DISCOVERED.name, disc / "proposed.yaml"])
    assert [f.rule for f in both.errors] == ["schema.duplicate-recipe"]


def test_a_folder_without_discovery_json_is_walked_as_ever(tmp_path: Path) -> None:
    """Only a discovery's own folder is left out: a folder that merely holds a `proposed.yaml` is recipes."""
    (tmp_path / "drafts").mkdir()
    shutil.copy(DISCOVERY / "proposed.yaml", tmp_path / "drafts" / "proposed.yaml")
    result = load_recipes([tmp_path])
    assert result.ok and list(result.recipes) == ["smollm2-135m-bf16-h200-vllm-discover"]
    assert not [f for f in result.findings if f.rule == "schema.not-recipe"]
