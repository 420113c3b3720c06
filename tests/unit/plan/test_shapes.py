"""Job shapes, exp-names and the fields every downstream room reads (spec §2.3, §2.7)."""

from __future__ import annotations

import re

import pytest

from llmsweep.errors import ConfigError
from llmsweep.plan import full_sweep, test_config

BASE = """
{key}:
  image: img:1
  model: org/model
  model-prefix: {prefix}
  precision: fp8
  framework: {framework}
  runner: {runner}
  multinode: {multinode}
{extra}  scenarios:
{scenarios}
"""


def recipe(key="r", prefix="m", framework="sglang", runner="h200", multinode="false", extra="", scenarios=""):
    return BASE.format(key=key, prefix=prefix, framework=framework, runner=runner, multinode=multinode, extra=extra,
                       scenarios=scenarios)


FIXED_SN = """    fixed-seq-len:
    - isl: {isl}
      osl: {osl}
      search-space:
      - {{ tp: 4, pp: 2, pcp-size: 2, dcp-size: 2, conc-list: [4] }}
"""

MN_WORKERS = """        prefill: {num-worker: 2, tp: 8, ep: 8, dp-attn: true, additional-settings: ["PREFILL_NODES=2"]}
        decode: {num-worker: 1, tp: 8, ep: 1, dp-attn: false}
"""


def test_single_node_fixed_entry_has_every_key_with_defaults(recipes_from, fleet) -> None:
    (job,) = test_config(recipes_from(recipe(scenarios=FIXED_SN.format(isl=8192, osl=1024))), ["r"], fleet)
    entry = job.matrix_entry()
    assert entry == {
        "image": "img:1", "model": "org/model", "model-prefix": "m", "precision": "fp8", "framework": "sglang",
        "runner": "h200", "isl": 8192, "osl": 1024, "tp": 4, "pp": 2, "dcp-size": 2, "pcp-size": 2, "conc": 4,
        "max-model-len": 8192 + 1024 + 256, "ep": 1, "dp-attn": False, "spec-decoding": "none",
        "exp-name": "m_8k1k", "disagg": False, "run-eval": False,
    }
    assert job.gpus == 4 * 2 * 2, "DCP reuses TP GPUs; PP and PCP multiply"


@pytest.mark.parametrize(("isl", "osl", "name"), [(1024, 1024, "m_1k1k"), (8192, 1024, "m_8k1k"),
                                                   (1024, 8192, "m_1024_8192")])
def test_fixed_exp_name_uses_short_seq_len_names_or_isl_osl(recipes_from, fleet, isl, osl, name) -> None:
    (job,) = test_config(recipes_from(recipe(scenarios=FIXED_SN.format(isl=isl, osl=osl))), ["r"], fleet)
    assert job.exp_name == name
    assert job.max_model_len == isl + osl + 256


def test_multinode_fixed_keeps_the_conc_list_and_explicit_worker_defaults(recipes_from, fleet) -> None:
    scen = ("    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - conc-start: 4\n        conc-end: 48\n" + MN_WORKERS)
    text = recipe(runner="mi355x-disagg", multinode="true", framework="sglang-disagg",
                  extra="  disagg: true\n  kv-p2p-transfer: mori\n", scenarios=scen)
    (job,) = test_config(recipes_from(text), ["r"], fleet, evals=None)
    entry = job.matrix_entry()
    assert entry["conc"] == [4, 8, 16, 32, 48]
    assert entry["prefill"] == {"num-worker": 2, "tp": 8, "ep": 8, "dp-attn": True,
                                "additional-settings": ["PREFILL_NODES=2"], "pp": 1, "dcp-size": 1, "pcp-size": 1}
    assert "additional-settings" not in entry["decode"], "an unwritten key stays absent, as InferenceX emits it"
    assert entry["spec-decoding"] == "none" and entry["disagg"] is True and entry["kv-p2p-transfer"] == "mori"
    assert job.gpus == 2 * 8 + 1 * 8


def test_disagg_defaults_to_false(recipes_from, fleet) -> None:
    scen = ("    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - conc-list: [4]\n" + MN_WORKERS)
    (job,) = test_config(recipes_from(recipe(runner="mi355x", multinode="true", scenarios=scen)), ["r"], fleet)
    assert job.disagg is False


def test_single_node_agentic_exp_name_encodes_tp_conc_offload_and_spec(recipes_from, fleet) -> None:
    scen = ("    agentic-coding:\n    - dram-utilization: 0.5\n      search-space:\n"
            "      - { tp: 8, spec-decoding: mtp, kv-offloading: dram, kv-offload-backend: { name: vllm-simple },"
            " conc-list: [1] }\n"
            "      - { tp: 4, kv-offloading: none, conc-list: [2] }\n")
    jobs = test_config(recipes_from(recipe(prefix="dsv4", runner="cluster:b300-nv", scenarios=scen)), ["r"], fleet)
    assert [j.exp_name for j in jobs] == ["dsv4_tp8_conc1_kvdram-vllm-simple_spec-mtp", "dsv4_tp4_conc2_kvnone"]
    entry = jobs[0].matrix_entry()
    assert entry["scenario-type"] == "agentic-coding" and entry["duration"] == 3600
    assert entry["kv-offload-backend"] == {"name": "vllm-simple"}
    assert not {"isl", "osl", "max-model-len", "disagg"} & set(entry)


def test_multinode_agentic_runs_one_conc_per_job_with_topology_names(recipes_from, fleet) -> None:
    scen = ("    agentic-coding:\n    - dram-utilization: 0.8\n      search-space:\n"
            "      - spec-decoding: mtp\n        kv-offloading: dram\n        kv-offload-backend: { name: hicache }\n"
            "        conc-list: [1, 16, 32]\n" + MN_WORKERS +
            "      - spec-decoding: mtp\n        conc-list: [8]\n" + MN_WORKERS)
    text = recipe(prefix="dsv4", runner="cluster:mi355x-amds", multinode="true", framework="sglang-disagg",
                  extra="  disagg: true\n  kv-p2p-transfer: mori\n", scenarios=scen)
    jobs = test_config(recipes_from(text), ["r"], fleet)
    assert [j.conc for j in jobs] == [[1], [16], [32], [8]]
    assert jobs[0].exp_name == "dsv4_p2x8ep8dpa_d1x8_conc1_kvdram-hicache"
    assert jobs[3].exp_name == "dsv4_p2x8ep8dpa_d1x8_conc8", "no offload suffix when offload is off"
    assert jobs[3].kv_offloading == "none" and jobs[3].total_cpu_dram_gb == 0


def test_component_metadata_resolves_entry_first_then_recipe(recipes_from, fleet) -> None:
    scen = ("    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, conc-list: [4] }\n")
    text = recipe(extra="  router: { name: sglang-router, version: 0.3.2 }\n", scenarios=scen)
    (job,) = test_config(recipes_from(text), ["r"], fleet)
    assert job.matrix_entry()["router"] == {"name": "sglang-router", "version": "0.3.2"}


def test_runner_node_filter_makes_one_job_per_matching_node(recipes_from, fleet) -> None:
    scen = ("    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, conc-list: [4, 8] }\n")
    recipes = recipes_from(recipe(runner="h200", scenarios=scen))
    jobs = full_sweep(recipes, fleet, runner_node_filter="dgxc-slurm_1")
    assert sorted({j.runner for j in jobs}) == ["h200-dgxc-slurm_1", "h200-dgxc-slurm_10", "h200-dgxc-slurm_11",
                                                "h200-dgxc-slurm_12", "h200-dgxc-slurm_13"]
    assert len(jobs) == 10
    assert full_sweep(recipes, fleet, runner_node_filter="nowhere") == []
    assert {j.runner for j in test_config(recipes, ["r"], fleet, runner_node_filter="h200")} >= {"h200"}


def test_unknown_runner_labels_expand_unchanged(recipes_from, fleet) -> None:
    scen = ("    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, conc-list: [4] }\n")
    (job,) = full_sweep(recipes_from(recipe(runner="gb300-nv", scenarios=scen)), fleet)
    assert job.runner == "gb300-nv"


def test_invalid_runner_type_filter_is_rejected(recipes_from, fleet) -> None:
    scen = ("    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, conc-list: [4] }\n")
    with pytest.raises(ConfigError, match="Invalid runner type"):
        full_sweep(recipes_from(recipe(scenarios=scen)), fleet, runner_types=("h201",))


def test_node_type_flags_apply_to_agentic_recipes(recipes_from, fleet) -> None:
    scen = ("    agentic-coding:\n    - search-space:\n      - { tp: 8, kv-offloading: none, conc-list: [4] }\n")
    recipes = recipes_from(recipe(runner="cluster:b300-nv", scenarios=scen))
    assert full_sweep(recipes, fleet, single_node=False, multi_node=True) == []
    assert len(full_sweep(recipes, fleet, single_node=True, multi_node=False)) == 1


def test_scenario_type_and_seq_len_filters(recipes_from, fleet) -> None:
    scen = ("    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, conc-list: [4] }\n    - isl: 1024\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, conc-list: [4] }\n"
            "    agentic-coding:\n    - search-space:\n      - { tp: 8, kv-offloading: none, conc-list: [4] }\n")
    recipes = recipes_from(recipe(runner="cluster:b300-nv", scenarios=scen))
    assert [j.scenario for j in full_sweep(recipes, fleet, scenario_types=("agentic-coding",))] == ["agentic-coding"]
    assert [j.exp_name for j in full_sweep(recipes, fleet, seq_lens=("1k1k",),
                                           scenario_types=("fixed-seq-len",))] == ["m_1k1k"]


def test_model_prefix_filter_matches_the_recipe_key(recipes_from, fleet) -> None:
    scen = ("    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, conc-list: [4] }\n")
    recipes = recipes_from(recipe(key="qwen3.5-fp8-x", prefix="zzz", scenarios=scen))
    assert len(full_sweep(recipes, fleet, model_prefixes=("qwen3.5",))) == 1
    assert full_sweep(recipes, fleet, model_prefixes=("zzz",)) == []


@pytest.mark.parametrize("pattern", ["qwen*", "qwen3.5-fp?-a", "qwen3.5-fp8-a"])
def test_config_key_globs(recipes_from, fleet, pattern) -> None:
    scen = ("    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, conc-list: [4] }\n")
    recipes = recipes_from(recipe(key="qwen3.5-fp8-a", scenarios=scen) + recipe(key="dsr1-fp8-a", scenarios=scen))
    jobs = test_config(recipes, [pattern, "qwen3.5-fp8-a"], fleet)
    assert [j.recipe_key for j in jobs] == ["qwen3.5-fp8-a"], "matches are deduplicated in order"


@pytest.mark.parametrize(("keys", "message"), [(["nope*"], "Pattern 'nope\\*' matched no config keys"),
                                               (["nope"], "Config key not found: nope")])
def test_config_key_errors_list_available_keys(recipes_from, fleet, keys, message) -> None:
    scen = ("    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, conc-list: [4] }\n")
    with pytest.raises(ConfigError, match=message) as info:
        test_config(recipes_from(recipe(key="only-key", scenarios=scen)), keys, fleet)
    assert "Available keys: only-key" in str(info.value)


def test_a_misspelt_config_key_names_the_key_meant(recipes_from, fleet) -> None:
    """A master file lists hundreds of keys: `--config-keys qwen3.5-fp8-mi300x-sglang-mpt` said 'not found' and the
    whole list; the fix now names the key a slip of the keyboard meant (and nothing for a key like no other)."""
    scen = ("    fixed-seq-len:\n    - isl: 8192\n      osl: 1024\n      search-space:\n"
            "      - { tp: 8, conc-list: [4] }\n")
    recipes = recipes_from(recipe(key="qwen3.5-fp8-mi300x-sglang-mtp", scenarios=scen)
                           + recipe(key="dsr1-fp8-mi300x-sglang", scenarios=scen))
    with pytest.raises(ConfigError, match=r"Config key not found: qwen3\.5-fp8-mi300x-sglang-mpt") as info:
        test_config(recipes, ["qwen3.5-fp8-mi300x-sglang-mpt"], fleet)
    assert (info.value.fix or "").startswith("did you mean `qwen3.5-fp8-mi300x-sglang-mtp`? "), info.value.fix
    with pytest.raises(ConfigError) as unlike:
        test_config(recipes, ["llama"], fleet)
    assert "did you mean" not in (unlike.value.fix or "")


def test_job_ids_are_unique_and_filesystem_safe(recipes_from, fleet) -> None:
    scen = ("    agentic-coding:\n    - search-space:\n      - { tp: 8, kv-offloading: none, conc-list: [1, 2, 4] }\n"
            "      - { tp: 8, ep: 8, kv-offloading: none, conc-list: [1, 2, 4] }\n")
    jobs = full_sweep(recipes_from(recipe(runner="cluster:mi300x-amds", scenarios=scen)), fleet)
    assert len({j.id for j in jobs}) == len(jobs) == 6
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", j.id) for j in jobs)
    assert all("cluster-mi300x-amds" in j.id for j in jobs)
