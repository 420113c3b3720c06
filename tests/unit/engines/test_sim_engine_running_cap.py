"""A job the simulator stands in for runs at its engine's own running-request cap when the recipe pins none.

The simulator served every such job at its own 256, where `vllm serve` 0.26.0 takes `--max-num-seqs` 1024 on a GPU of
70 GiB or more that is not an A100 (`EngineArgs.get_batch_defaults`) and ATOM 512 on any GPU (`Config.max_num_seqs`):
a vLLM or ATOM point above 256 concurrent requests queued requests its engine would have run (two vLLM and nine ATOM
points of InferenceX's AMD master file). The engine's default is read from the engines catalog, written into the
launch (`--max-running-requests`) and named in its notes, so the rendered command and the result's engine config say
the value used.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from support.recipes import Served, one_job

from llmsweep import engines
from llmsweep.catalog.engines import default_max_running, default_memory_fraction
from llmsweep.catalog.hardware import get_hardware
from llmsweep.catalog.sources import clear_caches
from llmsweep.execute.virtual import engine_config
from llmsweep.plan import Job
from llmsweep.spec.workload import ScenarioId

LLAMA_1B = Served("llmsweep/llama-1b", "llama-1b", "bf16")
VLLM = ("vllm", "vllm/vllm-openai:v0.26.0")
ATOM = ("atom", "rocm/atom:v0.1.0")
SGLANG = ("sglang", "lmsysorg/sglang:v0.5.12")
SIM = ("sim", "ghcr.io/llmsweep/sim:latest")

SMALL_GPUS = """hardware:
  a100:
    name: NVIDIA A100 SXM4 80GB
    vendor: nvidia
    arch: sm80
    generation: ampere
    platform: cuda
    hbm_gb: 85.9
    hbm_tbps: 2.04
    bf16_tflops: 312
    fp8_tflops: null
    fp4_tflops: null
    scaleup: nvlink3
    scaleup_gbps: 600
    gpus_per_node: 8
    source: test entry
  l40s:
    name: NVIDIA L40S
    vendor: nvidia
    arch: sm89
    generation: ada
    platform: cuda
    hbm_gb: 51.5
    hbm_tbps: 0.864
    bf16_tflops: 362
    fp8_tflops: 733
    fp4_tflops: null
    scaleup: pcie4
    scaleup_gbps: 64
    gpus_per_node: 8
    source: test entry
"""


@pytest.fixture
def small_gpus(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A user catalog adding two GPUs the packaged one lacks: an 80 GB A100 and a 48 GB L40S."""
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "hardware.yaml").write_text(SMALL_GPUS, encoding="utf-8")
    monkeypatch.setenv("LLMSWEEP_CATALOG_DIR", str(catalog))
    clear_caches()
    yield
    clear_caches()


def _job(tmp_path: Path, engine: tuple[str, str], runner: str = "h200", *, args: str = "",
         sim_engine: bool = False) -> Job:
    """A job of `engine` (framework, image) on `runner`; `sim_engine`: the recipe names the simulator as its engine
    (it still stands in for its framework's engine)."""
    return one_job(tmp_path, key="cap", framework=engine[0], image=engine[1], served=LLAMA_1B, runner=runner,
                   isl=256, osl=128, concs="[512]", engine="name: sim" if sim_engine else None, args=args or None)


def _cap(argv: Sequence[str]) -> str | None:
    return argv[list(argv).index("--max-running-requests") + 1] if "--max-running-requests" in argv else None


@pytest.mark.parametrize("runner", ["h100", "h200", "b200", "mi300x", "mi355x"])
def test_a_vllm_job_on_a_gpu_of_70_gib_or_more_runs_at_vllm_s_1024(tmp_path: Path, runner: str) -> None:
    job = _job(tmp_path, VLLM, runner)
    spec = engines.render(job, simulate=True)
    assert _cap(spec.argv) == "1024", spec.argv
    assert engine_config(spec).max_running_requests == 1024  # what the core runs and provenance's engine_config says
    (note,) = [n for n in spec.notes if n.startswith("max running requests")]
    assert "vLLM's default when --max-num-seqs is unset" in note and "EngineArgs.get_batch_defaults" in note, note


def test_a_pinned_cap_wins_over_the_engine_s_default(tmp_path: Path) -> None:
    spec = engines.render(_job(tmp_path, VLLM, args="--max-num-seqs: 64"), simulate=True)
    assert _cap(spec.argv) == "64"
    assert not [n for n in spec.notes if n.startswith("max running requests")]


@pytest.mark.parametrize("engine", [VLLM, SGLANG])
def test_an_agentic_job_keeps_twice_its_concurrency(tmp_path: Path, engine: tuple[str, str]) -> None:
    """An agentic job's cap is its scenario's (2 x conc, as InferenceX launches it), not the engine's default."""
    agentic = _job(tmp_path, engine).model_copy(update={"scenario": ScenarioId.AGENTIC_CODING, "conc": 48})
    assert _cap(engines.render(agentic, simulate=True).argv) == "96"


@pytest.mark.usefixtures("small_gpus")
@pytest.mark.parametrize("sku", ["a100", "l40s"])
def test_a_vllm_job_on_an_a100_or_a_gpu_under_70_gib_keeps_256(tmp_path: Path, sku: str) -> None:
    """vLLM's large-GPU branch leaves out the A100 by name (its 80 GB would pass the memory test) and GPUs under
    70 GiB: both take 256, which the launch names (the simulator's own default is the same number)."""
    job = _job(tmp_path, VLLM).model_copy(update={"sku": sku})
    spec = engines.render(job, simulate=True)
    assert _cap(spec.argv) == "256", spec.argv
    assert engine_config(spec).max_running_requests == 256


@pytest.mark.parametrize("runner", ["mi355x", "h200"])
def test_an_atom_job_runs_at_atom_s_512_on_any_gpu(tmp_path: Path, runner: str) -> None:
    spec = engines.render(_job(tmp_path, ATOM, runner), simulate=True)
    assert _cap(spec.argv) == "512", spec.argv
    (note,) = [n for n in spec.notes if n.startswith("max running requests")]
    assert "Config.max_num_seqs" in note, note


def test_a_sim_recipe_keeps_the_simulator_s_256(tmp_path: Path) -> None:
    """A recipe of the simulator itself (framework `sim`) stands in for no engine."""
    spec = engines.render(_job(tmp_path, SIM, sim_engine=True), simulate=True)
    assert _cap(spec.argv) is None, spec.argv
    assert engine_config(spec).max_running_requests == 256


def test_a_sim_engine_recipe_of_a_vllm_framework_stands_in_for_vllm(tmp_path: Path) -> None:
    """`serve.engine: sim` on a vLLM entry mimics vLLM (its style, its metric names): its cap too."""
    assert _cap(engines.render(_job(tmp_path, VLLM, sim_engine=True), simulate=True).argv) == "1024"


@pytest.mark.usefixtures("small_gpus")
@pytest.mark.parametrize(("engine", "sku", "value"), [
    ("vllm", "h100", 1024), ("vllm", "h200", 1024), ("vllm", "mi355x", 1024),
    ("vllm", "a100", 256), ("vllm", "l40s", 256),
    ("dynamo-vllm", "h200", 1024),
    ("atom", "mi355x", 512), ("atom", "l40s", 512),
    ("trtllm", "h200", 2048), ("trtllm", "l40s", 2048), ("dynamo-trt", "b200", 2048),
])
def test_the_catalog_rule_per_engine_and_gpu(engine: str, sku: str, value: int) -> None:
    found = default_max_running(engine, get_hardware(sku))
    assert found is not None and found.value == value


def test_an_engine_without_a_recorded_default_has_none() -> None:
    for engine in ("sglang", "sim", "no-such-engine"):
        assert default_max_running(engine, get_hardware("h200")) is None


def test_the_70_gib_threshold_is_binary_gib_of_the_driver_s_total() -> None:
    """vLLM compares the driver's total with 70 * 2^30 bytes: 75.17e9 decimal bytes pass, 75.1e9 do not."""
    h100 = get_hardware("h100")
    at, under = (h100.model_copy(update={"hbm_gb": gb}) for gb in (70 * (1 << 30) / 1e9 + 1e-6, 75.1))
    assert [default_max_running("vllm", gpu).value for gpu in (at, under)] == [1024, 256]  # type: ignore[union-attr]


# ------------------------------------------------------------------------------------------ the memory fraction
#
# The simulator sized every stood-in engine's KV pool at SGLang's 0.88 where the recipe pinned no fraction; vLLM 0.26.0
# takes `--gpu-memory-utilization` 0.92 (`CacheConfig.gpu_memory_utilization`) and ATOM 0.9 (`Config`): the engine's
# own default is read from the engines catalog by version, written into the launch (`--mem-fraction-static`) and named
# in its notes.


def _fraction(argv: Sequence[str]) -> str | None:
    return argv[list(argv).index("--mem-fraction-static") + 1] if "--mem-fraction-static" in argv else None


def test_a_vllm_0_26_job_sizes_its_kv_pool_at_vllm_s_0_92(tmp_path: Path) -> None:
    job = _job(tmp_path, VLLM)
    spec = engines.render(job, simulate=True)
    assert _fraction(spec.argv) == "0.92", spec.argv
    config = engine_config(spec)
    assert config.mem_fraction_static == 0.92  # what the pool is sized with and provenance's engine_config says
    assert config.kv_pool_tokens() > config.model_copy(update={"mem_fraction_static": 0.88}).kv_pool_tokens()
    (note,) = [n for n in spec.notes if n.startswith("memory fraction")]
    assert "vLLM's default when --gpu-memory-utilization is unset" in note, note
    assert "CacheConfig.gpu_memory_utilization" in note and "vLLM 0.26.0" in note, note


@pytest.mark.parametrize(("args", "sim_engine"), [
    ("--gpu-memory-utilization: 0.85", False), ("--gpu-memory-utilization: 0.85", True),
    # a `serve.engine: sim` recipe may write the simulator's own knob: a share of HBM, as written
    ("--mem-fraction-static: 0.85", True),
])
def test_a_pinned_fraction_wins_over_the_engine_s_default(tmp_path: Path, args: str, sim_engine: bool) -> None:
    """The launch serves the pin and `resources.hbm-fit` checks it: one answer (`launch_memory_fraction`)."""
    from llmsweep.engines import launch_memory_fraction

    job = _job(tmp_path, VLLM, args=args, sim_engine=sim_engine)
    spec = engines.render(job, simulate=True)
    assert _fraction(spec.argv) == "0.85"
    answer = launch_memory_fraction(job)
    assert answer is not None and answer.value == engine_config(spec).mem_fraction_static == 0.85
    assert not [n for n in spec.notes if n.startswith("memory fraction")]


def test_another_engine_s_fraction_flag_is_not_served_for_a_vllm_recipe(tmp_path: Path) -> None:
    """SGLang's `--mem-fraction-static` on a vLLM recipe is no vLLM flag (`serve.unsupported-arg` refuses the recipe):
    the simulated launch used to serve it while the policy checked vLLM's default; both now read vLLM's 0.92."""
    job = _job(tmp_path, VLLM, args="--mem-fraction-static: 0.85")
    assert engine_config(engines.render(job, simulate=True)).mem_fraction_static == 0.92


@pytest.mark.parametrize(("image", "shown"), [
    ("vllm/vllm-openai:v0.10.2", "version 0.10.2"),
    ("vllm/vllm-openai-rocm:nightly-09663abde0f50944a8d5ea30120666024b503faa", "an image that names no version"),
])
def test_a_vllm_version_whose_default_is_not_established_keeps_0_88(tmp_path: Path, image: str, shown: str) -> None:
    """vLLM's default was read in the sdists from 0.11.0 on; an older release, or a nightly image that may carry
    either 0.9 or 0.92, keeps the simulator's 0.88, and the launch says why."""
    spec = engines.render(_job(tmp_path, ("vllm", image)), simulate=True)
    assert _fraction(spec.argv) is None, spec.argv
    assert engine_config(spec).mem_fraction_static == 0.88
    (note,) = [n for n in spec.notes if n.startswith("memory fraction")]
    assert f"for {shown} is not established" in note and "before 0.11.0 were not read" in note, note


@pytest.mark.parametrize(("image", "value"), [
    ("vllm/vllm-openai:v0.19.1", "0.9"), ("vllm/vllm-openai:v0.20.0", "0.92"), ("vllm/vllm-openai:v0.11.0", "0.9"),
])
def test_vllm_s_default_by_release_0_92_first_in_0_20_0(tmp_path: Path, image: str, value: str) -> None:
    """vllm-project/vllm#38284 raised the default from 0.9 to 0.92; its first release is 0.20.0 (the 0.19.1 sdist
    still says 0.9): each release's launch takes its own default, named."""
    spec = engines.render(_job(tmp_path, ("vllm", image)), simulate=True)
    assert _fraction(spec.argv) == value, spec.argv
    (note,) = [n for n in spec.notes if n.startswith("memory fraction")]
    assert f"memory fraction {value}" in note and "CacheConfig.gpu_memory_utilization" in note, note


@pytest.mark.parametrize("runner", ["mi355x", "h200"])
def test_an_atom_job_sizes_its_kv_pool_at_atom_s_0_9(tmp_path: Path, runner: str) -> None:
    spec = engines.render(_job(tmp_path, ATOM, runner), simulate=True)
    assert _fraction(spec.argv) == "0.9", spec.argv
    (note,) = [n for n in spec.notes if n.startswith("memory fraction")]
    assert "Config.gpu_memory_utilization" in note, note


@pytest.mark.parametrize(("engine", "sim_engine"), [(SGLANG, False), (SIM, True)])
def test_sglang_and_a_sim_recipe_keep_the_simulator_s_0_88(tmp_path: Path, engine: tuple[str, str],
                                                          sim_engine: bool) -> None:
    """SGLang computes its fraction from the GPU, TP and more: reproduced on ROCm GPUs only (test_sim_sglang_memory_
    fraction.py), so on this H200 it keeps 0.88; a recipe of the simulator itself stands in for no engine."""
    spec = engines.render(_job(tmp_path, engine, sim_engine=sim_engine), simulate=True)
    assert _fraction(spec.argv) is None, spec.argv
    assert engine_config(spec).mem_fraction_static == 0.88
    assert not [n for n in spec.notes if n.startswith("memory fraction")]


@pytest.mark.parametrize(("engine", "version", "value"), [
    ("vllm", "0.26.0", 0.92), ("vllm", "0.27.1", 0.92), ("vllm", "0.26.0rc1", 0.92), ("dynamo-vllm", "0.26.0", 0.92),
    # 0.92 first in the 0.20.0 sdist, 0.9 in 0.19.1 and 0.11.0 (read in the PyPI sdists); older and unversioned: none
    ("vllm", "0.25.1", 0.92), ("vllm", "0.20.0", 0.92), ("vllm", "0.20.0rc1", 0.92), ("vllm", "0.19.1", 0.9),
    ("vllm", "0.11.0", 0.9), ("vllm", "0.10.2", None), ("vllm", None, None),
    ("atom", "0.1.3", 0.9), ("atom", None, 0.9),
    ("sglang", "0.5.16", None), ("no-such-engine", "1.0", None),
    # TensorRT-LLM's is a share of the memory the weights leave (`share_of: free`), for every version
    ("trtllm", "1.2.0", 0.9), ("trtllm", None, 0.9), ("dynamo-trt", "1.2.0", 0.9),
])
def test_the_catalog_memory_fraction_per_engine_and_version(engine: str, version: str | None,
                                                            value: float | None) -> None:
    found = default_memory_fraction(engine, version, "h200")
    assert (found.value if found is not None else None) == value


# ATOM forms its steps prefill-first (ROCm/ATOM `Scheduler._schedule`: a step that can prefill holds only prefills),
# with a step budget of 16384 prompt tokens one prompt may take whole; the simulator served its jobs in vLLM's unified
# shape, 8192-token chunks riding beside the decodes. The engines catalog's `scheduler` says so, and the launch
# carries it.
def _arg(argv: Sequence[str], flag: str) -> str | None:
    return argv[list(argv).index(flag) + 1] if flag in argv else None


@pytest.mark.parametrize("runner", ["mi355x", "h200"])
def test_an_atom_job_is_scheduled_prefill_first_with_atom_s_budget(tmp_path: Path, runner: str) -> None:
    spec = engines.render(_job(tmp_path, ATOM, runner), simulate=True)
    assert (_arg(spec.argv, "--scheduler"), _arg(spec.argv, "--chunked-prefill-size"),
            _arg(spec.argv, "--max-prefill-tokens")) == ("prefill-first", "16384", "16384"), spec.argv
    config = engine_config(spec)
    assert (config.scheduler, config.chunked_prefill_size, config.max_prefill_tokens) == ("prefill-first", 16384,
                                                                                           16384)
    (note,) = [n for n in spec.notes if n.startswith("scheduler")]
    assert "Scheduler._schedule" in note and "default --max-num-batched-tokens" in note, note


@pytest.mark.parametrize("args", ["--max-num-batched-tokens: 8192", "'--max-num-batched-tokens=8192': true",
                                  "--max-num-batched-tokens: '8192'", "--max_num_batched_tokens: 8192"])
def test_an_atom_recipe_s_batched_tokens_is_its_whole_step_budget(tmp_path: Path, args: str) -> None:
    """In every spelling a recipe may write it (a `=` form and a quoted number reach the launch as text)."""
    spec = engines.render(_job(tmp_path, ATOM, "mi355x", args=args), simulate=True)
    config = engine_config(spec)
    assert (config.scheduler, config.chunked_prefill_size, config.max_prefill_tokens) == ("prefill-first", 8192,
                                                                                           8192)
    (note,) = [n for n in spec.notes if n.startswith("scheduler")]
    assert "the recipe's --max-num-batched-tokens" in note, note


@pytest.mark.parametrize("engine", [VLLM, SGLANG, SIM])
def test_other_engines_keep_the_unified_shape(tmp_path: Path, engine: tuple[str, str]) -> None:
    spec = engines.render(_job(tmp_path, engine), simulate=True)
    assert "--scheduler" not in spec.argv
    assert engine_config(spec).scheduler == "unified"


# TensorRT-LLM admits requests under its default GUARANTEED_NO_EVICT capacity scheduler (a request starts only when
# its whole length fits the KV blocks the running ones have not reserved to completion); the simulator admitted its
# jobs on demand, as vLLM's, preempting under KV pressure where TensorRT-LLM never does. The engines catalog's
# `scheduler` says so, and the launch carries it; the step shape stays unified, the budget the simulator's.
TRTLLM = ("trtllm", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0")


@pytest.mark.parametrize("engine", [TRTLLM, ("dynamo-trt", "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:0.8.0")])
def test_a_trtllm_job_admits_requests_no_evict(tmp_path: Path, engine: tuple[str, str]) -> None:
    spec = engines.render(_job(tmp_path, engine), simulate=True)
    assert _arg(spec.argv, "--capacity") == "no-evict" and "--scheduler" not in spec.argv, spec.argv
    config = engine_config(spec)
    assert (config.capacity, config.scheduler, config.chunked_prefill_size) == ("no-evict", "unified", 8192)
    (note,) = [n for n in spec.notes if n.startswith("capacity no-evict")]
    assert "GuaranteedNoEvictScheduler" in note and "TensorRT-LLM's admission" in note, note


@pytest.mark.parametrize("engine", [VLLM, SGLANG, SIM, ATOM])
def test_other_engines_admit_on_demand(tmp_path: Path, engine: tuple[str, str]) -> None:
    spec = engines.render(_job(tmp_path, engine, "mi355x" if engine == ATOM else "h200"), simulate=True)
    assert "--capacity" not in spec.argv
    assert engine_config(spec).capacity == "on-demand"
