"""Job ids: unique, and the same job keeps its id whatever files are given and in whichever order (what
`llmsweep run --resume` matches result folders by)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from llmsweep.plan import full_sweep, jobs_from_files, test_config
from llmsweep.spec import load_recipes

RECIPE = """
{key}:
  image: img:1
  model: org/model
  model-prefix: qwen3.5
  precision: fp8
  framework: sglang
  runner: h200
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 128
      search-space:
      - {{ tp: 8, conc-list: [4, 8, 4] }}
"""


def _write(tmp_path: Path, name: str, key: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(RECIPE.format(key=key)))
    return path


def test_same_recipes_in_either_order_get_the_same_ids(tmp_path: Path) -> None:
    a, b = _write(tmp_path, "a.yaml", "alpha"), _write(tmp_path, "b.yaml", "beta")
    forward = {(j.recipe_key, j.id) for j in jobs_from_files([a, b])}
    backward = {(j.recipe_key, j.id) for j in jobs_from_files([b, a])}
    assert forward == backward
    assert len(forward) == 6 and len({i for _, i in forward}) == 6
    # Planned alone (one file, or `--config-keys`), a recipe's jobs keep the ids they had in the sweep.
    alone = {(j.recipe_key, j.id) for j in jobs_from_files([b])}
    assert alone <= forward
    both = load_recipes([a, b]).recipes
    assert {(j.recipe_key, j.id) for j in test_config(both, ["beta"])} == alone


def test_recipes_with_equal_entries_get_different_ids_but_equal_matrix_entries(tmp_path: Path) -> None:
    recipes = load_recipes([_write(tmp_path, "a.yaml", "alpha"), _write(tmp_path, "b.yaml", "beta")]).recipes
    jobs = full_sweep(recipes)
    alpha = [j for j in jobs if j.recipe_key == "alpha"]
    beta = [j for j in jobs if j.recipe_key == "beta"]
    assert [j.matrix_entry() for j in alpha] == [j.matrix_entry() for j in beta]
    assert [j.recipe_fingerprint for j in alpha] == [j.recipe_fingerprint for j in beta]
    assert not {j.id for j in alpha} & {j.id for j in beta}


def test_a_repeated_list_concurrency_keeps_its_id_by_position(tmp_path: Path) -> None:
    recipes = load_recipes([_write(tmp_path, "a.yaml", "alpha")]).recipes
    first, second = full_sweep(recipes), full_sweep(recipes)
    assert [j.conc for j in first] == [4, 8, 4]
    assert len({j.id for j in first}) == 3
    assert [j.id for j in first] == [j.id for j in second]


def test_each_runner_node_of_an_agentic_arm_has_its_own_fingerprint(tmp_path: Path) -> None:
    """InferenceX hashes a row with its runner in it; under --runner-node-filter every node's agentic job had carried
    the last node's fingerprint (one dict shared by the arm's cells), so its id's hash was the same on every node."""
    from llmsweep.plan.fingerprint import recipe_fingerprint, throughput_entry

    path = tmp_path / "nodes.yaml"
    path.write_text(textwrap.dedent("""\
        k:
          image: lmsysorg/sglang:v0.5.17-cu130
          model: Qwen/Qwen3.5-397B-A17B-FP8
          model-prefix: qwen3.5
          runner: cluster:b300-nv
          precision: fp8
          framework: sglang
          multinode: false
          scenarios:
            agentic-coding:
            - dram-utilization: 0.80
              search-space:
              - { tp: 4, kv-offloading: dram, kv-offload-backend: { name: hicache }, conc-list: [1, 8] }
        """))
    jobs = full_sweep(load_recipes([path]).recipes, runner_node_filter="b300-nv_0")
    runners = {j.runner for j in jobs}
    assert len(runners) > 1
    by_runner = {j.runner: j.recipe_fingerprint for j in jobs}
    assert len(set(by_runner.values())) == len(runners)  # one per node
    for job in jobs:  # the fingerprint of the job's own row
        assert job.recipe_fingerprint == recipe_fingerprint(throughput_entry(job.matrix_entry())), job.runner


def test_a_glob_that_matches_nothing_names_the_key_it_was_meant_for() -> None:
    """The README promises a did-you-mean for a --config-keys pattern matching nothing; only exact keys had one."""
    import pytest

    from llmsweep.errors import ConfigError
    from llmsweep.plan.expand import expand_config_keys

    keys = ["qwen3.5-fp8-mi300x-sglang-agentic-mtp", "dsr1-fp8-mi300x-sglang"]
    with pytest.raises(ConfigError) as caught:
        expand_config_keys(("qwen3.5-fp8-mi300x-sglang-agentic-mtq*",), keys)
    assert (caught.value.fix or "").startswith("did you mean `qwen3.5-fp8-mi300x-sglang-agentic-mtp`?")
    with pytest.raises(ConfigError) as caught:
        expand_config_keys(("zzz*",), keys)
    assert "did you mean" not in (caught.value.fix or "")


def test_an_entry_that_does_not_plan_is_named_at_its_file_line_and_field(tmp_path: Path) -> None:
    """`matrix`, `ci matrix` and `changelog check` printed a planning error (an arm wider than the runner's node)
    without file, line, key or field; `validate`'s plan.failed pointed at the recipe's first line."""
    import pytest

    from llmsweep.plan.expand import PlanError
    from llmsweep.policy import validate_files

    path = tmp_path / "wide.yaml"
    path.write_text(textwrap.dedent("""\
        k:
          image: lmsysorg/sglang:v0.5.17-cu130
          model: Qwen/Qwen3.5-397B-A17B-FP8
          model-prefix: qwen3.5
          runner: cluster:b300-nv
          precision: fp8
          framework: sglang
          multinode: false
          scenarios:
            agentic-coding:
            - dram-utilization: 0.80
              search-space:
              - { tp: 16, kv-offloading: dram, kv-offload-backend: { name: hicache }, conc-list: [1] }
        """))
    with pytest.raises(PlanError) as caught:
        full_sweep(load_recipes([path]).recipes)
    assert str(caught.value).startswith(f"{path}:13: k.scenarios.agentic-coding[0].search-space[0]: tp=16")
    (failed,) = [f for f in validate_files([path]).findings if f.rule == "plan.failed"]
    assert (failed.line, failed.path) == (13, "k.scenarios.agentic-coding[0].search-space[0]")
