"""The simulator's KV pool and `resources.hbm-fit` size a KV cache at its dtype's bytes, block scales included.

Both had read any `--kv-cache-dtype` not starting with `fp8` as bf16: on Qwen3.5 FP8 over TP 2 on MI325X, SGLang's
mxfp8, nvfp4 and fp4_e2m1 caches were each costed at the bf16 cache's 2.0 GB for one 131,072-token request (fp8_e4m3
at 1.0 GB), and the simulator served them with a bf16 pool (`--kv-dtype bf16`): half to a quarter of the tokens they
hold. Bytes per element: mxfp8 1.03125 (one E8M0 scale per 32 values), nvfp4 and SGLang's fp4_e2m1 0.5625 (one byte
of scale per 16)."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.recipes import engine_recipe

from llmsweep import engines
from llmsweep.catalog.models import find_model
from llmsweep.errors import ConfigError
from llmsweep.plan import full_sweep
from llmsweep.policy import validate_files
from llmsweep.sim.inputs import perf_inputs
from llmsweep.spec import loads_recipes

BYTES = {"mxfp8": 1.03125, "nvfp4": 0.5625, "fp4_e2m1": 0.5625}


@pytest.mark.parametrize("spelling", ["mxfp8", "nvfp4", "fp4_e2m1"])
def test_the_simulator_and_the_catalog_size_a_block_scaled_kv_cache_alike(spelling: str) -> None:
    bf16 = perf_inputs("qwen3.5", "mi325x").kv_bytes_per_token
    assert perf_inputs("qwen3.5", "mi325x", kv_dtype=spelling).kv_bytes_per_token == pytest.approx(
        bf16 * BYTES[spelling] / 2)
    model = find_model("qwen3.5")
    assert model is not None
    assert model.kv_bytes_per_token(spelling) == pytest.approx(model.kv_bytes_per_token("bf16") * BYTES[spelling] / 2,
                                                              abs=1)


def test_the_simulator_refuses_a_kv_dtype_of_no_known_size_rather_than_serve_it_as_bf16() -> None:
    with pytest.raises(ConfigError, match="turboquant_k8v4"):
        perf_inputs("llama-3.1-8b", "h200", kv_dtype="turboquant_k8v4")


SGLANG_ROCM = "lmsysorg/sglang-rocm:v0.5.16-rocm720-mi30x-20260730"


def recipe(dtype: str, framework: str = "sglang", image: str = SGLANG_ROCM) -> str:
    """Qwen3.5 FP8 at TP 2 on MI325X, its KV cache at `dtype`."""
    return engine_recipe(framework, image, arm="{ tp: 2, spec-decoding: none, kv-offloading: none, conc-list: [4] }",
                         serve=f"    args:\n      --mem-fraction-static: 0.75\n      --kv-cache-dtype: {dtype}\n",
                         runner="cluster:mi325x-amds", model="Qwen/Qwen3.5-397B-A17B-FP8", prefix="qwen3.5")


@pytest.mark.parametrize(("spelling", "gb", "label"), [
    ("bf16", "2.0", ""), ("fp8_e4m3", "1.0", ", fp8 KV cache"), ("mxfp8", "1.0", ", mxfp8 KV cache"),
    ("nvfp4", "0.6", ", nvfp4 KV cache"), ("fp4_e2m1", "0.6", ", fp4 KV cache"),
])
def test_the_hbm_fit_check_costs_one_requests_kv_at_its_dtypes_bytes(tmp_path: Path, spelling: str, gb: str,
                                                                     label: str) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(recipe(spelling), encoding="utf-8")
    (hit,) = [f for f in validate_files([path]).findings if f.rule == "resources.hbm-fit"]
    assert f"198 GB weights + {gb} GB KV (131072 tokens{label}) per GPU" in hit.message, hit.message


@pytest.mark.parametrize(("spelling", "served"), [("mxfp8", "mxfp8"), ("nvfp4", "nvfp4"), ("fp4_e2m1", "fp4"),
                                                  ("fp8_e4m3", "fp8"), ("auto", "bf16")])
def test_the_simulated_launch_serves_the_kv_dtype_the_recipe_asks_for(spelling: str, served: str) -> None:
    (job,) = full_sweep(loads_recipes(recipe(spelling), "t.yaml")
                        .raise_on_error().recipes)
    argv = list(engines.render(job, simulate=True, port=0).argv)
    assert argv[argv.index("--kv-dtype") + 1] == served


def test_a_sim_recipe_with_a_kv_dtype_of_no_known_size_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.yaml"
    path.write_text(recipe("turboquant_k8v4", "sim", "ghcr.io/llmsweep/sim:latest"), encoding="utf-8")
    (hit,) = [f for f in validate_files([path]).findings if f.rule == "serve.render-failed"]
    assert hit.is_error and "unknown KV-cache dtype 'turboquant_k8v4'" in hit.message


def test_weights_over_hbm_are_still_said_when_the_kv_dtype_has_no_known_size(tmp_path: Path) -> None:
    """Its KV is not costed (neither as bf16 nor skipped with the weights): 198 GB of weights alone exceed 175 GB."""
    path = tmp_path / "r.yaml"
    path.write_text(recipe("turboquant_k8v4"), encoding="utf-8")
    (hit,) = [f for f in validate_files([path]).findings if f.rule == "resources.hbm-fit"]
    assert "198 GB weights + its KV (not costed: its --kv-cache-dtype has no known size) per GPU" in hit.message, \
        hit.message
