"""Concurrency grids and the full-sweep filters, as InferenceX pins them (spec §1.5, §2.2, §2.7)."""

from __future__ import annotations

import pytest

from llmsweep.errors import ConfigError
from llmsweep.plan import full_sweep, test_config
from llmsweep.plan.conc import expand_range

FIXED = """
r:
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
      - {{ {entry} }}
"""


def concs(jobs):
    return [j.conc for j in jobs]


def test_range_doubles_and_always_includes_the_end() -> None:
    assert expand_range(4, 48) == [4, 8, 16, 32, 48]
    assert expand_range(4, 4) == [4]
    assert expand_range(1, 64) == [1, 2, 4, 8, 16, 32, 64]
    assert expand_range(4, 100, 3) == [4, 12, 36, 100]


def test_conc_list_is_emitted_verbatim_in_order_with_repeats(recipes_from, fleet) -> None:
    jobs = test_config(recipes_from(FIXED.format(entry="tp: 8, conc-list: [32, 4, 4, 16]")), ["r"], fleet)
    assert concs(jobs) == [32, 4, 4, 16]
    assert len({j.id for j in jobs}) == 4, "repeated points still get distinct job ids"


def test_step_size_changes_the_factor_and_must_exceed_one(recipes_from, fleet) -> None:
    recipes = recipes_from(FIXED.format(entry="tp: 8, conc-start: 2, conc-end: 64"))
    assert concs(full_sweep(recipes, fleet, step_size=4)) == [2, 8, 32, 64]
    with pytest.raises(ConfigError, match="--step-size must be greater than 1"):
        full_sweep(recipes, fleet, step_size=1)


def test_test_config_always_steps_by_two(recipes_from, fleet) -> None:
    recipes = recipes_from(FIXED.format(entry="tp: 8, conc-start: 2, conc-end: 16"))
    assert concs(test_config(recipes, ["r"], fleet)) == [2, 4, 8, 16]


def test_max_conc_below_every_value_synthesises_a_max_point(recipes_from, fleet) -> None:
    ranged = recipes_from(FIXED.format(entry="tp: 8, conc-start: 32, conc-end: 64"))
    assert concs(full_sweep(ranged, fleet, max_conc=10)) == [10]
    listed = recipes_from(FIXED.format(entry="tp: 8, conc-list: [32, 64]"))
    assert concs(full_sweep(listed, fleet, max_conc=10)) == [10]


def test_max_conc_clamps_the_range_end(recipes_from, fleet) -> None:
    recipes = recipes_from(FIXED.format(entry="tp: 8, conc-start: 4, conc-end: 64"))
    assert concs(full_sweep(recipes, fleet, max_conc=20)) == [4, 8, 16, 20]


def test_min_conc_moves_the_range_start_and_skips_ranges_below_it(recipes_from, fleet) -> None:
    recipes = recipes_from(FIXED.format(entry="tp: 8, conc-start: 4, conc-end: 48"))
    assert concs(full_sweep(recipes, fleet, min_conc=6)) == [6, 12, 24, 48]
    assert full_sweep(recipes, fleet, min_conc=64) == []


def test_non_positive_min_or_max_skips_the_entry(recipes_from, fleet) -> None:
    recipes = recipes_from(FIXED.format(entry="tp: 8, conc-start: 4, conc-end: 48"))
    assert full_sweep(recipes, fleet, min_conc=0) == []
    assert full_sweep(recipes, fleet, max_conc=0) == []


def test_min_greater_than_max_is_rejected(recipes_from, fleet) -> None:
    recipes = recipes_from(FIXED.format(entry="tp: 8, conc-start: 4, conc-end: 48"))
    with pytest.raises(ConfigError, match="--min-conc must be less than or equal to --max-conc"):
        full_sweep(recipes, fleet, min_conc=32, max_conc=8)


def test_conc_list_honours_min_then_max(recipes_from, fleet) -> None:
    recipes = recipes_from(FIXED.format(entry="tp: 8, conc-list: [1, 4, 16, 64]"))
    assert concs(full_sweep(recipes, fleet, min_conc=4, max_conc=16)) == [4, 16]
    assert full_sweep(recipes, fleet, min_conc=128) == []


def test_max_tp_skips_and_max_ep_clamps(recipes_from, fleet) -> None:
    recipes = recipes_from(FIXED.format(entry="tp: 8, ep: 8, conc-list: [4]"))
    assert full_sweep(recipes, fleet, max_tp=4) == []
    jobs = full_sweep(recipes, fleet, max_ep=2)
    assert [(j.tp, j.ep) for j in jobs] == [(8, 2)]


def test_test_config_conc_filter_keeps_only_listed_values(recipes_from, fleet) -> None:
    recipes = recipes_from(FIXED.format(entry="tp: 8, conc-start: 4, conc-end: 64"))
    assert concs(test_config(recipes, ["r"], fleet, conc=(8, 64, 1000))) == [8, 64]
    assert test_config(recipes, ["r"], fleet, conc=(3,)) == []
