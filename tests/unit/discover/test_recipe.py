"""The proposed recipe: the original file with each arm's grid and the recipe's policy rewritten, comments kept, and
loaded back to say exactly what was proposed; stage recipes run each arm and repeat under a key of its own."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from llmsweep.discover.recipe import load_arms, propose, simulated_note, stage_document, unified_diff
from llmsweep.errors import ConfigError
from llmsweep.spec.loader import load_recipes

DATA = Path(__file__).resolve().parents[2] / "data" / "recipes"
SEED = Path(__file__).resolve().parents[3] / "recipes" / "qwen3.5-fp8-mi300x-sglang-agentic-mtp.yaml"


def test_the_seed_recipe_has_two_arms_with_their_grids() -> None:
    _, arms = load_arms(SEED)
    assert [a.concs for a in arms] == [(1, 4, 8, 12, 16), (4, 8, 12, 16)]
    assert [a.start for a in arms] == [1, 4]
    assert "kv-offloading=dram" in arms[1].label and arms[0].id.endswith("search-space[0]")


def test_a_disaggregated_arm_is_labelled_by_its_pools_fields_not_a_python_dict() -> None:
    """A pool block in an arm's label read `prefill={'num-worker': 2, ...}` (a Python dict's repr) in discover's
    table; it reads as the recipe's fields."""
    _, arms = load_arms(DATA / "run" / "disagg-sim.yaml")
    (arm,) = arms
    assert "prefill=(num-worker=2 tp=8 ep=8 dp-attn=true)" in arm.label, arm.label
    assert "decode=(num-worker=1 tp=8 ep=1 dp-attn=false)" in arm.label and "{" not in arm.label, arm.label


def test_the_proposal_rewrites_the_grid_in_place_keeps_comments_and_declares_the_policy(tmp_path: Path) -> None:
    _, arms = load_arms(SEED)
    grids = {arms[0].id: [1, 3, 6, 10, 24], arms[1].id: [4, 8, 20]}
    out = tmp_path / "proposed.yaml"
    proposal = propose(SEED, out, grids, arms, {arms[0].recipe_key: (2, 24)})
    assert proposal.in_place
    text = out.read_text()
    original = SEED.read_text()
    # Every comment of the original survives; only the grid lines change and one policy line is added.
    assert [ln for ln in text.splitlines() if ln.lstrip().startswith("#")] == \
        [ln for ln in original.splitlines() if ln.lstrip().startswith("#")]
    diff = unified_diff(SEED, text, str(out))
    changed = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert len(changed) == 5, diff
    recipe = load_recipes([out]).raise_on_error().recipes[arms[0].recipe_key]
    assert recipe.policy is not None and (recipe.policy.min_conc_step, recipe.policy.max_conc) == (2, 24)
    assert [a.concs for a in load_arms(out)[1]] == [(1, 3, 6, 10, 24), (4, 8, 20)]


def test_a_grid_chosen_on_the_simulator_says_so_and_a_later_discovery_says_only_what_it_stands_on(
        tmp_path: Path) -> None:
    """proposed.yaml of `discover --simulate` heads with a note that its grid was predicted, not measured (the file a
    user commits had looked like a measured discovery). Discovered again — on the hardware, or on the simulator — the
    proposed file kept that note under a grid measured on the hardware, and put a second note above it."""

    def comments(path: Path) -> list[str]:
        return [ln for ln in path.read_text().splitlines() if ln.lstrip().startswith("#")]

    original = comments(SEED)
    _, arms = load_arms(SEED)
    simulated = tmp_path / "simulated.yaml"
    note = simulated_note(["simulated"] * 4)
    assert note is not None and simulated_note(["measured"] * 4) is None
    propose(SEED, simulated, {arms[0].id: [1, 3, 6, 10, 24], arms[1].id: [4, 8, 20]}, arms, {}, note=note)
    said = comments(simulated)
    assert said[0].startswith("# llmsweep discover proposed this grid from every point predicted by the simulator, "
                              "not measured on the hardware"), said
    assert said[len(said) - len(original):] == original and len(said) > len(original)
    assert [a.concs for a in load_arms(simulated)[1]] == [(1, 3, 6, 10, 24), (4, 8, 20)]
    # measured on the hardware from the simulated proposal: no note of the simulator's is left
    _, again = load_arms(simulated)
    measured = tmp_path / "measured.yaml"
    propose(simulated, measured, {again[0].id: [1, 2, 4]}, again, {})
    assert comments(measured) == original
    assert [a.concs for a in load_arms(measured)[1]] == [(1, 2, 4), (4, 8, 20)]
    # simulated again, in some of its runs: one note, this discovery's
    twice = tmp_path / "twice.yaml"
    propose(simulated, twice, {again[0].id: [1, 2, 4]}, again, {}, note=simulated_note(["simulated", "measured"]))
    said = comments(twice)
    assert said[len(said) - len(original):] == original
    head = " ".join(ln.removeprefix("# ") for ln in said[:len(said) - len(original)])
    assert head == simulated_note(["simulated", "measured"]), head


def test_an_existing_policy_is_updated_and_a_range_arm_is_re_dumped(tmp_path: Path) -> None:
    doc = yaml.safe_load(SEED.read_text())
    (recipe,) = doc.values()
    recipe["policy"] = {"min-conc-step": 2, "max-conc": 16}
    arm = recipe["scenarios"]["agentic-coding"][0]["search-space"][0]
    del arm["conc-list"]
    arm.update({"conc-start": 1, "conc-end": 16})
    src = tmp_path / "range.yaml"
    src.write_text(yaml.safe_dump(doc, sort_keys=False))
    _, arms = load_arms(src)
    assert arms[0].concs == (1, 2, 4, 8, 16)
    out = tmp_path / "proposed.yaml"
    proposal = propose(src, out, {arms[0].id: [1, 5, 9]}, arms, {arms[0].recipe_key: (4, 9)})
    assert not proposal.in_place and out.read_text().startswith("# written by `llmsweep discover` (re-dumped")
    back = load_recipes([out]).raise_on_error().recipes[arms[0].recipe_key]
    assert back.policy is not None and (back.policy.min_conc_step, back.policy.max_conc) == (4, 9)
    assert [a.concs for a in load_arms(out)[1]] == [(1, 5, 9), (4, 8, 12, 16)]


def test_a_range_arm_written_as_a_flow_map_takes_its_grid_in_place_comments_kept(tmp_path: Path) -> None:
    """InferenceX writes most arms as `{ tp: 8, conc-start: 4, conc-end: 64 }` (48 of the AMD master's): their
    proposal was re-dumped, every comment of the recipe lost, where one line could say the grid."""
    original = SEED.read_text()
    assert "conc-list: [1, 4, 8, 12, 16]" in original
    src = tmp_path / "range.yaml"
    src.write_text(original.replace("conc-list: [1, 4, 8, 12, 16]", "conc-start: 1, conc-end: 16", 1))
    _, arms = load_arms(src)
    assert arms[0].concs == (1, 2, 4, 8, 16)
    out = tmp_path / "proposed.yaml"
    proposal = propose(src, out, {arms[0].id: [1, 5, 9]}, arms, {arms[0].recipe_key: (4, 9)})
    assert proposal.in_place
    text = out.read_text()
    assert [ln for ln in text.splitlines() if ln.lstrip().startswith("#")] == \
        [ln for ln in original.splitlines() if ln.lstrip().startswith("#")]
    assert "conc-start" not in text and "conc-end" not in text
    assert [a.concs for a in load_arms(out)[1]] == [(1, 5, 9), (4, 8, 12, 16)]


@pytest.mark.parametrize("written", ["  policy: { max-conc: 16 }  # our cap\n",
                                     "  policy:\n    max-conc: 16  # our cap\n"], ids=["flow", "block"])
def test_a_policy_field_the_recipe_lacks_is_added_where_its_policy_is_written_comments_kept(
        tmp_path: Path, written: str) -> None:
    """The recipe's policy names only max-conc: min-conc-step joins it in place, in its own style; the proposal was
    re-dumped (every comment and flow mapping of the file rewritten) for want of the field."""
    original = SEED.read_text()
    key_line = next(ln for ln in original.splitlines() if ln and not ln.startswith(("#", " ")))
    src = tmp_path / "policy.yaml"
    src.write_text(original.replace(key_line + "\n", key_line + "\n" + written, 1))
    _, arms = load_arms(src)
    out = tmp_path / "proposed.yaml"
    proposal = propose(src, out, {arms[0].id: [1, 3, 6]}, arms, {arms[0].recipe_key: (2, 24)})
    assert proposal.in_place
    text = out.read_text()
    assert [ln for ln in text.splitlines() if "#" in ln and ln.lstrip().startswith("#")] == \
        [ln for ln in src.read_text().splitlines() if "#" in ln and ln.lstrip().startswith("#")]
    assert "# our cap" in text
    back = load_recipes([out]).raise_on_error().recipes[arms[0].recipe_key]
    assert back.policy is not None and (back.policy.min_conc_step, back.policy.max_conc) == (2, 24)


def test_a_stage_runs_each_arm_and_repeat_under_its_own_key_and_seed_without_the_cap() -> None:
    recipe = DATA / "discover" / "cliff-sim.yaml"
    _, arms = load_arms(recipe)
    doc, keys = stage_document(recipe, arms, {arms[0].id: [1, 2, 64]}, 3, duration=60)
    assert sorted(k.seed for k in keys.values()) == [42, 43, 44]
    for key, stage in keys.items():
        entry = doc[key]["scenarios"]["agentic-coding"][0]["search-space"][0]
        assert entry["conc-list"] == [1, 2, 64] and stage.arm == arms[0]
        assert doc[key]["workload"]["seed"] == stage.seed and doc[key]["workload"]["duration"] == 60
        assert "policy" not in doc[key]


def test_a_missing_recipe_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no recipe file"):
        load_arms(tmp_path / "nope.yaml")


def test_arms_that_share_one_yaml_node_cannot_take_two_grids_and_nothing_is_left_behind(tmp_path: Path) -> None:
    """Two keys whose search space is one anchored node: their proposed grids differ, and no rewrite can say both.
    The refusal names why, and no candidate recipe is left under the proposed name (one had been, saying neither)."""
    import pytest

    from llmsweep.discover.recipe import load_arms, propose
    from llmsweep.errors import ConfigError

    path = tmp_path / "shared.yaml"
    path.write_text(
        "a:\n  image: lmsysorg/sglang:v0.5.17-cu130\n  model: Qwen/Qwen3.5-397B-A17B-FP8\n  model-prefix: qwen3.5\n"
        "  runner: mi300x\n  precision: fp8\n  framework: sglang\n  multinode: false\n  scenarios: &shared\n"
        "    fixed-seq-len:\n    - isl: 256\n      osl: 64\n      search-space:\n      - { tp: 8, conc-list: [1, 8] }\n"
        "  serve:\n    engine: { name: sim }\n"
        "b:\n  image: lmsysorg/sglang:v0.5.17-cu130\n  model: Qwen/Qwen3.5-397B-A17B-FP8\n  model-prefix: qwen3.5\n"
        "  runner: mi300x\n  precision: fp8\n  framework: sglang\n  multinode: false\n  scenarios: *shared\n"
        "  serve:\n    engine: { name: sim }\n", encoding="utf-8")
    _, arms = load_arms(path)
    assert len(arms) == 2
    out = tmp_path / "proposed.yaml"
    with pytest.raises(ConfigError, match="share"):
        propose(path, out, {arms[0].id: [1, 2, 4], arms[1].id: [1, 8, 16]}, arms, {})
    assert not out.exists() and not list(tmp_path.glob(".proposed*"))
