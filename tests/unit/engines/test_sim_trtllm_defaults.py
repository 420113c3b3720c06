"""A TensorRT-LLM job the simulator stands in for runs at trtllm-serve's own defaults when the recipe pins none.

The simulator served every TensorRT-LLM job at its own 256 running requests and 0.88 of HBM. `trtllm-serve` (PyTorch
backend) takes `--max_batch_size` 2048 (its click default, BuildConfig's field) and sizes its KV cache as
`--kv_cache_free_gpu_memory_fraction` 0.9 of the memory its weights (and profiled activations) leave — a share of the
free memory, not of HBM. The launch now carries the cap and the share of HBM that sizes the same pool (weights + the
simulator's 1 GiB reserve + 0.9 × the rest), each with a note naming its source; a recipe's pin of either (in any
spelling trtllm-serve reads) wins, and its `--max_num_tokens` is read as the simulator's chunk.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from support.recipes import one_job, write_recipe

from llmsweep import engines
from llmsweep.engines import launch_memory_fraction
from llmsweep.engines.memory import MemoryFraction
from llmsweep.execute.virtual import engine_config
from llmsweep.plan import Job, jobs_from_files
from llmsweep.sim.inputs import perf_inputs
from llmsweep.sim.perf import GIB
from llmsweep.spec.workload import ScenarioId

TRTLLM_IMAGE = "nvcr.io/nvidia/tensorrt-llm/release:1.2.0"


def _job(tmp_path: Path, runner: str = "h200", *, args: str = "", sim_engine: bool = False) -> Job:
    """Llama 3.1 8B BF16, 1k/1k at TP 1 and concurrency 512, on TensorRT-LLM (or the simulator's recipe of it)."""
    return one_job(tmp_path, key="trt", framework="trt", image=TRTLLM_IMAGE, runner=runner, concs="[512]",
                   engine="name: sim" if sim_engine else None, args=args or None)


def _arg(argv: Sequence[str], flag: str) -> str | None:
    return argv[list(argv).index(flag) + 1] if flag in argv else None


def _notes(notes: Sequence[str], start: str) -> list[str]:
    return [n for n in notes if n.startswith(start)]


def _free_pool(runner: str, fraction: float) -> float:
    """Tokens of KV that `fraction` of the memory Llama 3.1 8B's bf16 weights and the 1 GiB reserve leave on one
    `runner` GPU hold: what the simulated pool should be, computed from the catalog figures directly."""
    inputs = perf_inputs("meta-llama/Llama-3.1-8B-Instruct", runner, precision="bf16")
    return fraction * (inputs.hbm_bytes - inputs.weight_bytes - GIB) / inputs.kv_bytes_per_token_per_gpu(1)


# ------------------------------------------------------------------------------------------------ the running cap

@pytest.mark.parametrize("runner", ["h100", "h200", "b200"])
def test_a_tensorrt_llm_job_runs_at_trtllm_serve_s_2048(tmp_path: Path, runner: str) -> None:
    spec = engines.render(_job(tmp_path, runner), simulate=True)
    assert _arg(spec.argv, "--max-running-requests") == "2048", spec.argv
    assert engine_config(spec).max_running_requests == 2048
    (note,) = _notes(spec.notes, "max running requests")
    assert "TensorRT-LLM's default when --max_batch_size is unset" in note, note
    assert "tensorrt_llm/commands/serve.py" in note and "BuildConfig" in note, note


@pytest.mark.parametrize(("args", "sim_engine"), [("--max_batch_size: 64", False), ("--max-batch-size: 64", False),
                                                  ("--max_batch_size: 64", True)])
def test_a_pinned_max_batch_size_wins(tmp_path: Path, args: str, sim_engine: bool) -> None:
    spec = engines.render(_job(tmp_path, args=args, sim_engine=sim_engine), simulate=True)
    assert _arg(spec.argv, "--max-running-requests") == "64", spec.argv
    assert not _notes(spec.notes, "max running requests")


def test_an_agentic_tensorrt_llm_job_keeps_twice_its_concurrency(tmp_path: Path) -> None:
    agentic = _job(tmp_path).model_copy(update={"scenario": ScenarioId.AGENTIC_CODING, "conc": 48})
    assert _arg(engines.render(agentic, simulate=True).argv, "--max-running-requests") == "96"


def test_a_pinned_max_num_tokens_is_the_simulator_s_chunk(tmp_path: Path) -> None:
    """trtllm-serve's default 8192 is the simulator's own chunk (no flag); a pin replaces it, as vLLM's
    `--max-num-batched-tokens` does."""
    assert _arg(engines.render(_job(tmp_path), simulate=True).argv, "--chunked-prefill-size") is None
    spec = engines.render(_job(tmp_path, args="--max_num_tokens: 4096"), simulate=True)
    assert _arg(spec.argv, "--chunked-prefill-size") == "4096", spec.argv
    assert engine_config(spec).chunked_prefill_size == 4096


# ---------------------------------------------------------------------------------------------- the memory fraction

@pytest.mark.parametrize("runner", ["h100", "h200"])
def test_a_tensorrt_llm_job_s_pool_is_0_9_of_the_memory_the_weights_leave(tmp_path: Path, runner: str) -> None:
    spec = engines.render(_job(tmp_path, runner), simulate=True)
    config = engine_config(spec)
    assert config.mem_fraction_static > 0.9  # 16 GB of weights + 1 GiB + 0.9 of the rest: more than 0.9 of HBM
    assert config.kv_pool_tokens() == pytest.approx(_free_pool(runner, 0.9), rel=1e-3)
    assert _arg(spec.argv, "--mem-fraction-static") == f"{config.mem_fraction_static:g}"
    (note,) = _notes(spec.notes, "memory fraction")
    assert f"memory fraction {config.mem_fraction_static:g} of HBM: 0.9 of the memory the weights leave, " \
           "TensorRT-LLM 1.2.0's default" in note, note
    assert "+ the simulator's 1 GiB reserve + 0.9 x the" in note and "not modelled: the activation peak" in note, note
    assert "KvCacheCreator" in note and "--kv_cache_free_gpu_memory_fraction is unset" in note, note


@pytest.mark.parametrize(("args", "sim_engine", "named"), [
    ("--kv_cache_free_gpu_memory_fraction: 0.5", False, "--kv_cache_free_gpu_memory_fraction"),
    ("--free_gpu_memory_fraction: 0.5", False, "--free_gpu_memory_fraction"),  # trtllm-serve's click alias
    ("--free_gpu_memory_fraction: 0.5", True, "--free_gpu_memory_fraction"),  # serve.engine: sim reads it as trtllm
])
def test_a_pinned_free_fraction_wins_and_is_converted(tmp_path: Path, args: str, sim_engine: bool,
                                                      named: str) -> None:
    spec = engines.render(_job(tmp_path, args=args, sim_engine=sim_engine), simulate=True)
    assert engine_config(spec).kv_pool_tokens() == pytest.approx(_free_pool("h200", 0.5), rel=1e-3)
    (note,) = _notes(spec.notes, "memory fraction")
    assert f"0.5 of the memory the weights leave from the recipe's {named}" in note, note


def test_the_launch_and_the_policy_read_one_answer(tmp_path: Path) -> None:
    job = _job(tmp_path)
    fraction = launch_memory_fraction(job)
    assert fraction is not None and (fraction.value, fraction.origin, fraction.share_of) == (0.9, "engine", "free")
    inputs = perf_inputs(job.model, "h200", precision="bf16")
    share = fraction.budget_bytes(inputs.hbm_bytes, inputs.weight_bytes, GIB) / inputs.hbm_bytes
    assert engine_config(engines.render(job, simulate=True)).mem_fraction_static == round(share, 4)


def test_budget_bytes_by_what_the_fraction_is_a_share_of() -> None:
    of_hbm = MemoryFraction(0.9, "engine", "s")
    of_free = MemoryFraction(0.9, "engine", "s", share_of="free")
    assert of_hbm.budget_bytes(100.0, 40.0) == pytest.approx(90.0)
    assert of_free.budget_bytes(100.0, 40.0) == pytest.approx(40.0 + 0.9 * 60.0)
    assert of_free.budget_bytes(100.0, 40.0, 10.0) == pytest.approx(50.0 + 0.9 * 50.0)
    assert of_free.budget_bytes(100.0, 120.0) == pytest.approx(120.0)  # weights over HBM: nothing left for KV
    assert of_free.describe() == "0.9 of the memory the weights leave, s"


@pytest.mark.parametrize("args", ["--kv_cache_free_gpu_memory_fraction: 0.5", "--free_gpu_memory_fraction: 0.5"])
def test_a_sim_recipe_s_free_fraction_is_not_called_unmodelled(tmp_path: Path, args: str) -> None:
    """`serve.sim-ignored` said the simulator does not model TensorRT-LLM's fraction while the launch sized its pool
    from it: the flag the engines catalog records for the stood-in engine is modelled (in any spelling it reads)."""
    from llmsweep.policy import validate_files

    path = write_recipe(tmp_path / "r.yaml", key="trt", framework="trt", image=TRTLLM_IMAGE, concs="[512]",
                        engine="name: sim", args=args)
    assert not [f for f in validate_files([path]).findings if f.rule == "serve.sim-ignored"]
    spec = engines.render(jobs_from_files([path])[0], simulate=True)
    assert engine_config(spec).kv_pool_tokens() == pytest.approx(_free_pool("h200", 0.5), rel=1e-3)


def test_a_sim_recipe_s_own_fraction_knob_is_a_share_of_hbm_for_launch_and_policy(tmp_path: Path) -> None:
    """A `serve.engine: sim` recipe standing in for TensorRT-LLM that writes the simulator's `--mem-fraction-static`
    was served at 0.5 of HBM while `resources.hbm-fit` checked TensorRT-LLM's 0.9 of the free memory: one answer now,
    the simulator's knob as written."""
    job = _job(tmp_path, args="--mem-fraction-static: 0.5", sim_engine=True)
    answer = launch_memory_fraction(job)
    assert answer is not None and (answer.value, answer.share_of, answer.origin) == (0.5, "hbm", "recipe")
    assert engine_config(engines.render(job, simulate=True)).mem_fraction_static == 0.5
