"""`resources.hbm-fit` checks weights + one request's KV against HBM × the memory fraction the job's engine launches
with, and says where that fraction comes from.

The rule had its own 0.9 wherever a recipe pinned no fraction, while vLLM 0.26.0 takes 0.92 (and the simulator, which
reads the engines catalog, serves it at 0.92) and SGLang jobs are simulated at the simulator's 0.88: a vLLM job the
engine runs was warned about, an SGLang job the simulator could not size went unwarned, and the message did not say
whose fraction it used. It now reads the one answer the simulator reads (`llmsweep.engines.launch_memory_fraction`).

Figures (catalog entries): Llama 3.1 70B at FP8 is 70.6 GB of weights at TP 1 and 327,680 bytes of bf16 KV per token;
an H100 holds 85.52 GB (0.88: 75.26, 0.9: 76.97, 0.92: 78.68 GB). At a context of 16,384 tokens the job needs
70.6 + 5.37 = 75.97 GB, at 22,000 77.81 GB, at 32,768 81.34 GB, at 65,536 92.07 GB.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.recipes import LLAMA_70B_FP8, Served, write_recipe

from llmsweep.engines import launch_memory_fraction
from llmsweep.findings import Finding
from llmsweep.plan import jobs_from_files
from llmsweep.policy import validate_files

VLLM_026 = ("vllm", "vllm/vllm-openai:v0.26.0")
VLLM_NIGHTLY = ("vllm", "vllm/vllm-openai-rocm:nightly-09663abde0f50944a8d5ea30120666024b503faa")
SGLANG = ("sglang", "lmsysorg/sglang:v0.5.12")
TRTLLM = ("trtllm", "nvcr.io/nvidia/tensorrt-llm/release:1.2.0")
ATOM_DATED = ("atom", "rocm/atom:rocm7.2.3_ubuntu24.04_py3.12_pytorch_release_2.10.0_atom20260511")  # no version


def _write(tmp_path: Path, engine: tuple[str, str], args: str) -> Path:
    return write_recipe(tmp_path / "r.yaml", framework=engine[0], image=engine[1], served=LLAMA_70B_FP8, runner="h100",
                        args=args)


def _hits(tmp_path: Path, engine: tuple[str, str], args: str) -> list[Finding]:
    return [f for f in validate_files([_write(tmp_path, engine, args)]).findings if f.rule == "resources.hbm-fit"]


def test_a_vllm_0_26_job_that_fits_vllm_s_0_92_is_not_warned_about(tmp_path: Path) -> None:
    """77.81 GB: over 0.9 of the H100 (76.97), within vLLM 0.26.0's 0.92 (78.68) — vLLM starts it."""
    assert _hits(tmp_path, VLLM_026, "--max-model-len: 22000") == []


def test_a_vllm_0_26_job_over_0_92_is_warned_about_naming_vllm_s_default(tmp_path: Path) -> None:
    (hit,) = _hits(tmp_path, VLLM_026, "--max-model-len: 32768")
    assert "exceeds 79 GB (memory fraction 0.92, vLLM 0.26.0's default, of h100's 86 GB)" in hit.message, hit.message


def test_an_sglang_job_on_cuda_is_checked_at_the_simulator_s_0_88_and_says_so(tmp_path: Path) -> None:
    """75.97 GB: within 0.9 (76.97), over the 0.88 (75.26) the simulator serves an SGLang job at — SGLang computes
    its own per launch, reproduced (`engines.sglang_memory`) only on ROCm GPUs: on this H100 it is not, and the
    message now says why (it used to say only "not established")."""
    (hit,) = _hits(tmp_path, SGLANG, "--context-length: 16384")
    assert "memory fraction 0.88, SGLang's default on h100 (CUDA" in hit.message, hit.message
    assert "is not reproduced" in hit.message and "the simulator's 0.88" in hit.message, hit.message


@pytest.mark.parametrize(("engine", "args", "named"), [
    (VLLM_026, "--gpu-memory-utilization: 0.85", "--gpu-memory-utilization"),
    (VLLM_026, "--gpu_memory_utilization: 0.85", "--gpu_memory_utilization"),
    (SGLANG, "--mem-fraction-static: 0.85", "--mem-fraction-static"),
    (SGLANG, "--mem-frac: 0.85", "--mem-frac"),  # a unique prefix SGLang's argparse expands
])
def test_the_recipe_s_own_flag_wins_and_is_named(tmp_path: Path, engine: tuple[str, str], args: str,
                                                named: str) -> None:
    context = "--max-model-len: 22000" if engine[0] == "vllm" else "--context-length: 22000"
    (hit,) = _hits(tmp_path, engine, f"{context}, {args}")  # 77.81 GB over 0.85 of 85.52 (72.69)
    assert f"exceeds 73 GB (memory fraction 0.85 from the recipe's {named}, of h100's 86 GB)" in hit.message, \
        hit.message
    assert _hits(tmp_path, engine, f"{context}, {args.replace('0.85', '0.95')}") == []  # 81.24 GB holds it


def test_a_vllm_image_that_names_no_version_falls_back_to_the_simulator_s_0_88(tmp_path: Path) -> None:
    """vLLM's default moved from 0.9 to 0.92 in a release not established: a nightly image is checked (and
    simulated) at 0.88, and the warning says why."""
    (hit,) = _hits(tmp_path, VLLM_NIGHTLY, "--max-model-len: 16384")
    assert ("memory fraction 0.88, vLLM's default for an image that names no version is not established; the "
            "simulator's 0.88") in hit.message, hit.message


def test_an_atom_image_that_names_no_version_takes_atom_s_0_9_for_every_version(tmp_path: Path) -> None:
    """ATOM's catalog rule holds for any version, an image that names none included."""
    (job,) = jobs_from_files([_write(tmp_path, ATOM_DATED, "--max-model-len: 16384")])
    fraction = launch_memory_fraction(job)
    assert fraction is not None and fraction.value == 0.9 and fraction.origin == "engine"
    assert fraction.describe() == "0.9, ATOM (ROCm)'s default (the image names no version)"


def test_tensorrt_llm_is_checked_against_its_share_of_the_memory_the_weights_leave(tmp_path: Path) -> None:
    """TensorRT-LLM's `kv_cache_free_gpu_memory_fraction` (0.9 unset) is a share of the memory the weights leave: the
    budget is 70.6 + 0.9 × (85.52 − 70.6) = 84.03 GB. At 43,000 tokens the job needs 70.6 + 14.09 = 84.69 GB: within
    the whole HBM (it passed when TensorRT-LLM was checked against all of it), over TensorRT-LLM's KV share."""
    assert _hits(tmp_path, TRTLLM, "--max_seq_len: 32768") == []  # 81.34 GB
    (hit,) = _hits(tmp_path, TRTLLM, "--max_seq_len: 43000")
    assert ("exceeds 84 GB (memory fraction 0.9 of the memory the weights leave, TensorRT-LLM 1.2.0's default, of "
            "h100's 86 GB: the weights + 0.9 × the rest; the engine's activation peak is not modelled)"
            in hit.message), hit.message
    (job,) = jobs_from_files([_write(tmp_path, TRTLLM, "--max_seq_len: 22000")])
    fraction = launch_memory_fraction(job)
    assert fraction is not None and (fraction.value, fraction.origin, fraction.share_of) == (0.9, "engine", "free")


@pytest.mark.parametrize("flag", ["--kv_cache_free_gpu_memory_fraction", "--free_gpu_memory_fraction",
                                  "--kv-cache-free-gpu-memory-fraction"])
def test_tensorrt_llm_s_pinned_free_fraction_wins_and_is_named(tmp_path: Path, flag: str) -> None:
    """0.5 of what the weights leave: 70.6 + 0.5 × 14.92 = 78.06 GB; 32,768 tokens (81.34 GB) are over it, 22,000
    (77.81 GB) within. Every spelling trtllm-serve reads as the flag (its click alias included) is the pin."""
    (hit,) = _hits(tmp_path, TRTLLM, f"--max_seq_len: 32768, {flag}: 0.5")
    assert (f"exceeds 78 GB (memory fraction 0.5 of the memory the weights leave from the recipe's {flag}, of "
            "h100's 86 GB" in hit.message), hit.message
    assert _hits(tmp_path, TRTLLM, f"--max_seq_len: 22000, {flag}: 0.5") == []


@pytest.mark.parametrize(("args", "value", "source"), [
    ("", 0.88, "the simulator's own 0.88"),
    ("--mem-fraction-static: 0.7", 0.7, "the recipe's --mem-fraction-static"),
    ("--gpu-memory-utilization: 0.7", 0.7, "the recipe's --gpu-memory-utilization"),  # the simulator takes both
])
def test_a_recipe_of_the_simulator_reads_its_own_flag_else_0_88(tmp_path: Path, args: str, value: float,
                                                                source: str) -> None:
    (job,) = jobs_from_files([_write(tmp_path, ("sim", "ghcr.io/llmsweep/sim:latest"), args)])
    fraction = launch_memory_fraction(job)
    assert fraction is not None and (fraction.value, fraction.source) == (value, source)


@pytest.mark.parametrize("image", ["vllm/vllm-openai:v0.26.0", "vllm/vllm-openai:v0.20.0"])
def test_the_simulator_serves_and_notes_the_fraction_the_policy_checks(tmp_path: Path, image: str) -> None:
    """One answer for both: the simulated launch's pool is sized at the fraction the rule checks, and its note is
    that answer's."""
    from llmsweep import engines
    from llmsweep.execute.virtual import engine_config

    (job,) = jobs_from_files([_write(tmp_path, ("vllm", image), "--max-model-len: 22000")])
    fraction = launch_memory_fraction(job)
    spec = engines.render(job, simulate=True)
    assert fraction is not None and engine_config(spec).mem_fraction_static == fraction.value
    assert [n for n in spec.notes if n.startswith("memory fraction")] == [fraction.note]


def test_a_catalog_fraction_with_no_rules_must_say_why() -> None:
    from pydantic import ValidationError

    from llmsweep.catalog.engines import MemoryFractionDefault

    with pytest.raises(ValidationError, match="must say why in `unestablished`"):
        MemoryFractionDefault(flag="--mem-fraction-static", rules=[], source="s")
    computed = MemoryFractionDefault(flag="--mem-fraction-static", source="s", unestablished="computed per launch")
    assert computed.rules == []


@pytest.mark.parametrize(("dp_attn", "warned"), [(False, False), (True, True)])
def test_with_dp_attention_one_request_s_kv_sits_whole_on_its_rank(tmp_path: Path, dp_attn: bool,
                                                                   warned: bool) -> None:
    """MiniMax-M3 (428B MoE, GQA with 4 KV heads) at FP8 over TP 8 on H100s at 0.7 of HBM (59.9 GB): one request of
    131,072 tokens holds 16.1 GB of KV, split over the eight GPUs under TP attention (53.5 GB of weights + one KV
    head's 4.0 GB per GPU fits) but whole on one DP-attention rank's single GPU (53.5 + 16.1 GB does not)."""
    path = write_recipe(tmp_path / "r.yaml", framework=VLLM_026[0], image=VLLM_026[1],
                        served=Served("MiniMaxAI/MiniMax-M3-MXFP8", "minimaxm3", "fp8"), runner="h100", tp=8,
                        arm=", ep: 8, dp-attn: true" if dp_attn else ", ep: 8",
                        args="--max-model-len: 131072, --gpu-memory-utilization: 0.7")
    hits = [f for f in validate_files([path]).findings if f.rule == "resources.hbm-fit"]
    assert bool(hits) is warned, hits
    if hits:
        assert "54 GB weights + 16.1 GB KV (131072 tokens) per GPU" in hits[0].message, hits[0].message


def test_an_fp4_native_checkpoint_served_at_fp8_is_costed_as_it_is_stored(shared_dir: Path) -> None:
    """DeepSeek-V4-Pro is an FP4-native checkpoint that InferenceX serves at "fp8" on MI300X (no FP4 compute): vLLM
    dequantizes its FP4 MoE to FP8, InferenceX's ~1.05 TB (the catalog's `served_weights_gb`, as the simulator sizes
    it), between the FP4 checkpoint and every weight at FP8. The rule costed the weights at FP8 bytes (~200 GB a GPU)
    and warned on a job InferenceX runs; at 131 GB a GPU it does not."""
    from llmsweep.catalog.models import find_model

    model = find_model("deepseek-ai/DeepSeek-V4-Pro")
    assert model is not None and model.native_precision != "fp8"
    served = model.served_weight_bytes("fp8", "deepseek-ai/DeepSeek-V4-Pro")
    assert model.weight_bytes(model.native_precision) < served == 1_050 * 10**9 < model.weight_bytes("fp8")
    master = shared_dir / "reference" / "inferencex" / "amd-master.yaml"
    hits = [f for f in validate_files([master]).findings if f.rule == "resources.hbm-fit"]
    assert not [f for f in hits if "dsv4-fp8-mi300x-vllm." in (f.path or "")], [f.render() for f in hits]


def test_an_hf_id_the_catalog_does_not_know_is_not_costed_as_its_prefixs_model(tmp_path: Path) -> None:
    """Qwen3.5-35B-A3B under the qwen3.5 prefix had been costed as the 397B model (`397 GB weights` on one H100):
    a warning about a model the recipe does not serve."""
    path = write_recipe(tmp_path / "r.yaml", framework=VLLM_026[0], image=VLLM_026[1],
                        served=Served("Qwen/Qwen3.5-35B-A3B-FP8", "qwen3.5", "fp8"), runner="h100", tp=1,
                        args="--max-model-len: 8192")
    assert [f for f in validate_files([path]).findings if f.rule == "resources.hbm-fit"] == []


def test_an_fp8_kv_cache_is_costed_at_its_own_bytes(tmp_path: Path) -> None:
    """The fit check sized KV at bf16 whatever the recipe's --kv-cache-dtype: an fp8 cache holds half of it."""
    path = write_recipe(tmp_path / "r.yaml", framework=VLLM_026[0], image=VLLM_026[1],
                        served=Served("MiniMaxAI/MiniMax-M3-MXFP8", "minimaxm3", "fp8"), runner="h100", tp=8,
                        arm=", ep: 8, dp-attn: true",
                        args="--max-model-len: 131072, --gpu-memory-utilization: 0.7, --kv-cache-dtype: fp8_e4m3")
    (hit,) = [f for f in validate_files([path]).findings if f.rule == "resources.hbm-fit"]
    assert "54 GB weights + 8.1 GB KV (131072 tokens, fp8 KV cache) per GPU" in hit.message, hit.message
