"""DeepSeek-V4-Pro served at FP8 holds the weights InferenceX states for it, not its FP4 checkpoint's.

On gfx942 (MI300X, MI325X: no FP4 compute) InferenceX serves the FP4+FP8 checkpoint through vLLM's
`--quantization deepseek_v4_fp8`, which dequantizes the FP4 MoE to FP8: "~1.05TB", which "fits 8x192GB only at TP8"
(amd-master.yaml, dsv4-fp8-mi300x-vllm). The catalog's rule had kept the FP4 experts (900 GB, 112.5 GB a GPU at TP8),
so the simulator sized a KV pool a third larger than the GPUs leave and the HBM-fit check read 225 GB a GPU at TP4.
"""

from __future__ import annotations

from pathlib import Path

from support.recipes import Served, write_recipe

from llmsweep.catalog.models import get_model
from llmsweep.policy import validate_files
from llmsweep.sim.inputs import perf_inputs
from llmsweep.sim.perf import kv_capacity_tokens

DSV4 = "deepseek-ai/DeepSeek-V4-Pro"
VLLM_ROCM = ("vllm", "vllm/vllm-openai-rocm:nightly-09663abde0f50944a8d5ea30120666024b503faa")


def test_dsv4_pro_at_fp8_holds_inferencex_s_dequantized_weights_and_at_fp4_its_checkpoint_s() -> None:
    model = get_model(DSV4)
    assert model.served_weight_bytes("fp8", DSV4) == 1_050 * 10**9
    assert model.served_weight_bytes("fp4", DSV4) == 900 * 10**9  # 1.6T at FP4 with its block scales (0.5625)
    assert "served_weights_gb" in model.estimates  # InferenceX's figure, said to be one


def test_the_simulator_sizes_dsv4_fp8_on_mi300x_with_those_weights() -> None:
    fp8 = perf_inputs(DSV4, "mi300x", precision="fp8", kv_dtype="fp8")
    assert fp8.weight_bytes == 1.05e12
    room = fp8.hbm_bytes * 0.9 - 1024**3 - fp8.weight_bytes / 8  # per GPU, at vLLM's fraction, beside the reserve
    assert kv_capacity_tokens(fp8, tp=8, mem_fraction_static=0.9) == int(room // fp8.kv_bytes_per_token)
    fp4 = perf_inputs(DSV4, "mi355x", precision="fp4", kv_dtype="fp8")
    assert fp4.weight_bytes == 9e11


def test_hbm_fit_reads_the_served_weights_of_a_dsv4_fp8_job_at_tp4(tmp_path: Path) -> None:
    recipe = write_recipe(tmp_path / "r.yaml", framework=VLLM_ROCM[0], image=VLLM_ROCM[1], runner="mi300x",
                          served=Served(DSV4, "dsv4", "fp8"), isl=8192, osl=1024, tp=4)
    (hit,) = [f for f in validate_files([recipe]).findings if f.rule == "resources.hbm-fit"]
    assert "262 GB weights" in hit.message, hit.message  # 1.05 TB over 4 GPUs (it read 225 GB, FP4 kept)
    recipe8 = write_recipe(tmp_path / "r8.yaml", framework=VLLM_ROCM[0], image=VLLM_ROCM[1], runner="mi300x",
                           served=Served(DSV4, "dsv4", "fp8"), isl=8192, osl=1024, tp=8)
    assert [f for f in validate_files([recipe8]).findings if f.rule == "resources.hbm-fit"] == []
