"""Eval marking: default, --evals-only, --all-evals (spec §2.5, §2.7)."""

from __future__ import annotations

import pytest

from llmsweep.errors import ConfigError
from llmsweep.plan import EvalOptions, full_sweep
from llmsweep.spec.scope import Matrix

RECIPES = """
sn:
  image: img:1
  model: org/model
  model-prefix: m
  precision: fp8
  framework: sglang
  runner: h200
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - { tp: 4, conc-list: [4, 16, 32, 64] }
      - { tp: 8, conc-list: [8, 16, 32, 64, 128] }
    - isl: 1024
      osl: 1024
      search-space:
      - { tp: 8, conc-list: [64, 128] }
mn:
  image: img:1
  model: org/model
  model-prefix: m
  precision: fp8
  framework: sglang-disagg
  runner: mi355x-disagg
  multinode: true
  disagg: true
  kv-p2p-transfer: mori
  scenarios:
    fixed-seq-len:
    - isl: 8192
      osl: 1024
      search-space:
      - conc-list: [8, 16, 32]
        prefill: { num-worker: 1, tp: 8, ep: 1, dp-attn: false }
        decode: { num-worker: 1, tp: 8, ep: 1, dp-attn: false }
      - conc-list: [64, 32, 4]
        prefill: { num-worker: 1, tp: 8, ep: 1, dp-attn: false }
        decode: { num-worker: 1, tp: 8, ep: 1, dp-attn: false }
      - conc-list: [4, 8]
        prefill: { num-worker: 2, tp: 8, ep: 1, dp-attn: false }
        decode: { num-worker: 1, tp: 8, ep: 1, dp-attn: false }
ag:
  image: img:1
  model: org/model
  model-prefix: m
  precision: fp8
  framework: vllm
  runner: cluster:b300-nv
  multinode: false
  scenarios:
    agentic-coding:
    - search-space:
      - { tp: 8, kv-offloading: none, conc-list: [4, 32, 8] }
"""


@pytest.fixture
def recipes(recipes_from):
    return recipes_from(RECIPES)


def marked(jobs, key):
    return sorted((j.tp, j.conc) for j in jobs if j.recipe_key == key and j.run_eval)


def test_default_marks_highest_and_upper_median_conc_of_8k1k_single_node(recipes, fleet) -> None:
    jobs = full_sweep(recipes, fleet)
    # eligible concs (>= 16) across both TPs: 16 32 64 128 -> highest 128, upper median 64; all TPs at those concs
    assert marked(jobs, "sn") == [(4, 64), (8, 64), (8, 128)]
    assert not any(j.run_eval for j in jobs if j.exp_name == "m_1k1k"), "1k1k is never an eval"
    sn = [j for j in jobs if j.recipe_key == "sn"]
    assert not all(j.run_eval for j in sn), "default never marks every entry"
    assert all(j.eval_only is None for j in jobs)


def test_default_marks_one_multinode_row_per_topology_with_eval_conc(recipes, fleet) -> None:
    jobs = [j for j in full_sweep(recipes, fleet) if j.recipe_key == "mn"]
    assert [(j.concs, j.run_eval, j.eval_conc) for j in jobs] == [
        ([8, 16, 32], False, None),
        ([64, 32, 4], True, 64),
        ([4, 8], False, None),  # no conc >= 16: not eligible; worker counts are part of the identity
    ]


def test_default_leaves_agentic_rows_unmarked(recipes, fleet) -> None:
    jobs = [j for j in full_sweep(recipes, fleet) if j.recipe_key == "ag"]
    assert [j.run_eval for j in jobs] == [False, False, False]


def test_evals_only_keeps_eval_rows_and_adds_the_agentic_highest_conc(recipes, fleet) -> None:
    jobs = full_sweep(recipes, fleet, EvalOptions(evals_only=True))
    assert all(j.eval_only and j.run_eval for j in jobs)
    assert marked(jobs, "ag") == [(8, 32)]
    assert len(jobs) == 3 + 1 + 1
    assert all(j.acceptance is None for j in jobs)
    assert all(j.id.split("_")[-2] == "eval" for j in jobs)


def test_all_evals_marks_every_8k1k_row_and_merges_multinode_topologies(recipes, fleet) -> None:
    jobs = full_sweep(recipes, fleet, EvalOptions(all_evals=True))
    assert len([j for j in jobs if j.recipe_key == "sn"]) == 9, "every 8k1k row, no 1k1k row"
    mn = [j for j in jobs if j.recipe_key == "mn"]
    assert [(j.concs, j.eval_all_concs, j.eval_conc) for j in mn] == [([4, 8, 16, 32, 64], True, None),
                                                                      ([4, 8], True, None)]
    assert len([j for j in jobs if j.recipe_key == "ag"]) == 3
    assert all(j.eval_only for j in jobs)


def test_no_evals_cannot_be_combined_with_all_evals(recipes, fleet) -> None:
    with pytest.raises(ConfigError, match="--all-evals cannot be combined with --no-evals"):
        full_sweep(recipes, fleet, EvalOptions(no_evals=True, all_evals=True))


def test_no_evals_leaves_agentic_rows_without_run_eval(recipes, fleet) -> None:
    jobs = full_sweep(recipes, fleet, EvalOptions(no_evals=True))
    assert {j.run_eval for j in jobs if j.scenario == "agentic-coding"} == {None}
    assert {j.run_eval for j in jobs if j.scenario == "fixed-seq-len"} == {False}


MN_AGENTIC = """
mna:
  image: img:1
  model: org/model
  model-prefix: dsv4
  precision: fp4
  framework: dynamo-sglang
  runner: cluster:gb200-nv
  multinode: true
  disagg: true
  kv-p2p-transfer: nixl
  scenarios:
    agentic-coding:
    - search-space:
      - spec-decoding: mtp
        conc-list: [4, 32, 16]
        prefill: { num-worker: 1, tp: 4, ep: 4, dp-attn: true }
        decode: { num-worker: 1, tp: 8, ep: 8, dp-attn: true }
      - spec-decoding: mtp
        conc-list: [8]
        prefill: { num-worker: 2, tp: 4, ep: 4, dp-attn: true }
        decode: { num-worker: 1, tp: 8, ep: 8, dp-attn: true }
"""


def test_multinode_agentic_evals_pick_the_highest_eligible_conc_per_topology(recipes_from, fleet) -> None:
    recipes = recipes_from(MN_AGENTIC)
    default = full_sweep(recipes, fleet)
    assert [(j.concs, j.run_eval) for j in default] == [([4], False), ([32], False), ([16], False), ([8], False)]
    (only,) = full_sweep(recipes, fleet, EvalOptions(evals_only=True))
    assert (only.concs, only.eval_conc, only.eval_only) == ([32], 32, True)


def test_all_evals_recombines_multinode_agentic_chunks(recipes_from, fleet) -> None:
    jobs = full_sweep(recipes_from(MN_AGENTIC), fleet, EvalOptions(all_evals=True))
    assert [(j.concs, j.eval_conc) for j in jobs] == [([4, 16, 32], 32), ([8], 8)]
    assert jobs[0].exp_name == "dsv4_p1x4ep4dpa_d1x8ep8dpa_conc4", "the first chunk's name is kept"


AGENTIC_PAIR = """
ag1:
  image: img:1
  model: org/model
  model-prefix: m
  precision: fp8
  framework: vllm
  runner: cluster:b300-nv
  multinode: false
  scenarios:
    agentic-coding:
    - search-space:
      - { tp: 8, kv-offloading: none, conc-list: [4, {top}] }
ag2:
  image: img:2
  model: org/model
  model-prefix: m
  precision: fp8
  framework: vllm
  runner: cluster:b300-nv
  multinode: false
  scenarios:
    agentic-coding:
    - search-space:
      - { tp: 4, kv-offloading: none, conc-list: [32, 8] }
"""


def test_a_plan_of_part_of_a_matrix_marks_the_evals_the_whole_matrix_marks(recipes_from, fleet) -> None:
    """`matrix`: one configuration's agentic eval is its single highest concurrency among every recipe of the matrix,
    the first in the matrix's order on a tie, whichever of its recipes is planned; a recipe planned as handed (an edit
    of the matrix's) replaces the matrix's own."""
    evals = EvalOptions(evals_only=True)
    pair = recipes_from(AGENTIC_PAIR.replace("{top}", "32"))
    matrix = Matrix(pair, [])
    whole = full_sweep(pair, fleet, evals)
    assert [(j.recipe_key, j.conc) for j in whole] == [("ag1", 32)]
    assert full_sweep({"ag2": pair["ag2"]}, fleet, evals, matrix=matrix) == []
    assert full_sweep({"ag1": pair["ag1"]}, fleet, evals, matrix=matrix) == whole
    assert [j.conc for j in full_sweep({"ag2": pair["ag2"]}, fleet, evals)] == [32]  # alone, it holds the eval
    edited = recipes_from(AGENTIC_PAIR.replace("{top}", "16"))["ag1"]
    assert full_sweep({"ag1": edited}, fleet, evals, matrix=matrix) == []
    assert [(j.recipe_key, j.conc) for j in full_sweep({"ag2": pair["ag2"], "ag1": edited}, fleet, evals,
                                                        matrix=matrix)] == [("ag2", 32)]
