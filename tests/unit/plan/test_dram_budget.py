"""Agentic KV-offload DRAM budgets (`total-cpu-dram-gb`), pinned to InferenceX's values (spec §2.4, §2.7)."""

from __future__ import annotations

import pytest

from llmsweep.errors import ConfigError
from llmsweep.plan import test_config
from llmsweep.plan.dram import total_cpu_dram_gb

SINGLE = """
r:
  image: img:1
  model: org/model
  model-prefix: m
  precision: fp4
  framework: vllm
  runner: {runner}
  multinode: false
  scenarios:
    agentic-coding:
    - dram-utilization: {util}
      search-space:
      - {{ {entry}, kv-offloading: dram, kv-offload-backend: {{ name: vllm-simple }}, conc-list: [4] }}
"""

MULTI = """
r:
  image: img:1
  model: org/model
  model-prefix: dsv4
  precision: fp4
  framework: sglang-disagg
  runner: cluster:b300-nv
  multinode: true
  disagg: true
  kv-p2p-transfer: nixl
  scenarios:
    agentic-coding:
    - dram-utilization: 0.80
      search-space:
      - spec-decoding: mtp
        kv-offloading: dram
        kv-offload-backend: {{ name: hicache }}
        conc-list: [1, 16]
        prefill: {{ num-worker: 1, tp: {ptp}, ep: 1, dp-attn: false }}
        decode: {{ num-worker: 2, tp: {dtp}, ep: 8, dp-attn: true }}
"""


@pytest.mark.parametrize(
    ("runner", "util", "entry", "expected"),
    [
        ("cluster:b300-nv", 0.80, "tp: 4", 1199),
        ("cluster:b300-nv", 0.80, "tp: 4, pcp-size: 2", 2399),
        ("cluster:b300-nv", 0.80, "tp: 4, pp: 2", 2399),
        ("cluster:b300-nv", 0.80, "tp: 8", 2399),
        ("cluster:b300-nv", 0.80, "tp: 8, dcp-size: 4", 2399),
        ("cluster:b200-dgxc", 0.95, "tp: 8", 2849),
        ("cluster:mi300x-amds", 0.80, "tp: 8", 1947),
    ],
)
def test_single_node_budget(recipes_from, fleet, runner, util, entry, expected) -> None:
    recipes = recipes_from(SINGLE.format(runner=runner, util=util, entry=entry))
    (job,) = test_config(recipes, ["r"], fleet)
    assert job.total_cpu_dram_gb == expected


def test_gpu_resident_arms_get_zero(fleet) -> None:
    assert total_cpu_dram_gb(fleet, "cluster:b300-nv", 0.8, "none", single_node_gpus=(8, 1, 1)) == 0


def test_topology_larger_than_a_node_is_rejected(recipes_from, fleet) -> None:
    recipes = recipes_from(SINGLE.format(runner="cluster:b300-nv", util=0.8, entry="tp: 8, pp: 2"))
    with pytest.raises(ConfigError, match="requires 16 GPUs and exceeds gpus-per-node=8"):
        test_config(recipes, ["r"], fleet)


def test_runner_without_hardware_facts_names_the_missing_field(recipes_from, fleet) -> None:
    recipes = recipes_from(SINGLE.format(runner="cluster:h100-nowhere", util=0.8, entry="tp: 8"))
    with pytest.raises(ConfigError, match="requires 'available-cpu-dram-mib' in runner hardware metadata"):
        test_config(recipes, ["r"], fleet)


def test_multinode_budget_follows_prefill_and_ignores_decode(recipes_from, fleet) -> None:
    small = test_config(recipes_from(MULTI.format(ptp=4, dtp=8)), ["r"], fleet)
    other_decode = test_config(recipes_from(MULTI.format(ptp=4, dtp=16)), ["r"], fleet)
    assert {j.total_cpu_dram_gb for j in small} == {1199}
    assert {j.total_cpu_dram_gb for j in other_decode} == {1199}
    whole_nodes = test_config(recipes_from(MULTI.format(ptp=16, dtp=8)), ["r"], fleet)
    assert {j.total_cpu_dram_gb for j in whole_nodes} == {2399}


@pytest.mark.parametrize(("ptp", "message"), [(12, "not a multiple of gpus-per-node=8"), (3, "does not divide")])
def test_misaligned_prefill_is_rejected(recipes_from, fleet, ptp, message) -> None:
    with pytest.raises(ConfigError, match=message):
        test_config(recipes_from(MULTI.format(ptp=ptp, dtp=8)), ["r"], fleet)
