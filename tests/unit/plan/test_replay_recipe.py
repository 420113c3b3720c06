"""A Mooncake trace named in a recipe's workload: its agentic-coding entries plan as mooncake-replay jobs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from llmsweep.plan import jobs_from_files
from llmsweep.spec import Recipe, load_recipes
from llmsweep.spec.workload import ScenarioId

RECIPE = """\
replay:
  image: lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730
  model: Qwen/Qwen3.5-397B-A17B-FP8
  model-prefix: qwen3.5
  runner: cluster:mi300x-amds
  precision: fp8
  framework: sglang
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 1024
      search-space:
      - { tp: 8, conc-list: [4] }
    agentic-coding:
    - dram-utilization: 0.80
      search-space:
      - { tp: 8, spec-decoding: none, kv-offloading: none, conc-list: [2, 4] }
  serve:
    engine: { name: sim }
  workload:
    WORKLOAD
"""


def test_agentic_entries_replay_the_trace_and_fixed_ones_stay_fixed(
    recipes_from: Callable[[str], dict[str, Recipe]], tmp_path: Path
) -> None:
    recipes_from(RECIPE.replace("WORKLOAD", "replay: { mooncake: trace.jsonl, max-rows: 100 }"))
    (path,) = tmp_path.glob("*.yaml")
    jobs = jobs_from_files([path])
    replayed = [j for j in jobs if j.workload.scenario is ScenarioId.MOONCAKE_REPLAY]
    assert sorted(j.concs[0] for j in replayed) == [2, 4]
    assert all(j.scenario is ScenarioId.AGENTIC_CODING for j in replayed)  # the recipe block, as the matrix says
    assert {j.workload.replay.mooncake for j in replayed if j.workload.replay} == {"trace.jsonl"}
    assert all(j.workload.traces is None and j.workload.duration is None for j in replayed)
    (fixed,) = [j for j in jobs if j.scenario is ScenarioId.FIXED_SEQ_LEN]
    assert fixed.workload.scenario is ScenarioId.FIXED_SEQ_LEN
    # job.json carries the replay as the recipe spelled it
    assert replayed[0].to_json()["workload"]["replay"] == {"mooncake": "trace.jsonl", "timestamps": False,
                                                           "speedup": 1.0, "block-size": 512, "max-rows": 100}


def test_traces_and_replay_together_are_a_schema_error(tmp_path: Path) -> None:
    path = tmp_path / "both.yaml"
    path.write_text(RECIPE.replace("WORKLOAD", "{ traces: { path: x }, replay: { mooncake: y } }"))
    result = load_recipes([path])
    assert not result.ok
    assert [f.rule for f in result.errors] == ["schema.replay"]
