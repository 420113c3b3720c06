"""Serving settings of a recipe reach the simulated engine as the engine the job stands in for reads them, or the
result says the simulator left them out. Each case here was once ignored without a word: the prediction carried the
recipe's label (`--disable-radix-cache`, ...) while the simulator ran the engine's default."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmsweep import engines
from llmsweep.cli.sim import engine_config_from_argv
from llmsweep.plan import Job, jobs_from_files
from llmsweep.sim.engine import EngineConfig

RECIPE = """settings:
  image: IMAGE
  model: meta-llama/Llama-3.1-8B-Instruct
  model-prefix: llama3.1-8b
  runner: h200
  precision: bf16
  framework: FRAMEWORK
  multinode: false
  scenarios:
    fixed-seq-len:
    - isl: 1024
      osl: 256
      search-space:
      - { tp: 1, conc-list: [16] }
  serve:
ENGINE    args: ARGS
"""
IMAGES = {"sglang": "lmsysorg/sglang:v0.5.9-cu129", "vllm": "vllm/vllm-openai:v0.26.0",
          "atom": "rocm/atom:v0.1.0"}


def job_of(tmp_path: Path, framework: str, args: str, *, sim_engine: bool = False) -> Job:
    path = tmp_path / "r.yaml"
    text = RECIPE.replace("FRAMEWORK", framework).replace("IMAGE", IMAGES[framework]).replace("ARGS", args)
    path.write_text(text.replace("ENGINE", "    engine: { name: sim }\n" if sim_engine else ""), encoding="utf-8")
    (job,) = jobs_from_files([path])
    return job


def served(job: Job) -> EngineConfig:
    """The engine `run --simulate` / `predict` serves the job with: its rendered `sim serve` command line."""
    return engine_config_from_argv(engines.render(job, simulate=True).argv)


@pytest.mark.parametrize("sim_engine", [False, True], ids=["--simulate", "engine-sim"])
@pytest.mark.parametrize(("framework", "args", "on"), [
    ("sglang", "{ --disable-radix-cache: true }", False),
    ("sglang", "{ --disable-radix-cache: false }", True),
    ("vllm", "{ --no-enable-prefix-caching: true }", False),
    ("vllm", "{ --enable-prefix-caching: true }", True),
    ("vllm", "{}", True),
])
def test_a_recipe_that_turns_the_prefix_cache_off_is_served_without_one(
        tmp_path: Path, framework: str, args: str, on: bool, sim_engine: bool) -> None:
    """SGLang's `--disable-radix-cache` and vLLM's `--no-enable-prefix-caching` ran with the simulator's prefix
    cache on: an agentic replay of such a recipe predicted a 95 % hit rate for a server that reuses nothing."""
    config = served(job_of(tmp_path, framework, args, sim_engine=sim_engine))
    assert config.prefix_caching is on
    assert config.sim_config().prefix_caching is on


def test_an_engine_served_without_a_prefix_cache_reuses_no_prompt_block() -> None:
    """`sim serve --no-prefix-caching` (what the launch renders) serves a multi-turn conversation with no cached
    prompt tokens; the same engine with its cache reuses the earlier turns."""
    from llmsweep.sim.predict import predict
    from llmsweep.sim.synthetic import AgentWorkload

    def cached(*flags: str) -> int:
        config = engine_config_from_argv(["serve", "--model", "llama-3.1-8b", "--hardware", "h200", *flags])
        records = predict(AgentWorkload(system_tokens=600, turns=4, tool_tokens=200, osl=20), config,
                          concurrency=2, duration=20)
        return sum(int(r.get("cached_tokens") or 0) for r in records)

    assert cached("--no-prefix-caching") == 0
    assert cached() > 0


@pytest.mark.parametrize("sim_engine", [False, True], ids=["--simulate", "engine-sim"])
@pytest.mark.parametrize(("args", "budget"), [
    ("{ --max-prefill-tokens: 32768 }", 32768),
    ("{ --max-prefill-tokens: 4096, --chunked-prefill-size: 4096 }", 4096),
    ("{}", 16384),
])
def test_sglangs_prefill_budget_is_the_steps_budget(tmp_path: Path, args: str, budget: int, sim_engine: bool) -> None:
    """SGLang's `--max-prefill-tokens` (a step's prefill tokens, `PrefillAdder`'s `rem_input_tokens`; 16384 by
    default) was dropped: a recipe that raised or lowered it was served at the simulator's 16384."""
    config = served(job_of(tmp_path, "sglang", args, sim_engine=sim_engine))
    assert config.max_prefill_tokens == budget
    assert config.sim_config().max_prefill_tokens == budget
