"""`resources.hbm-fit` sees a KV pool pinned in vLLM's terms (`--num-gpu-blocks-override`, `--kv-cache-memory-bytes`).

vLLM allocates such a pool on each GPU whatever its memory fraction; one larger than what the weights leave fails at
start-up (CUDA out of memory). The simulator refused the job at `predict`/`run --simulate` time, but `validate` said
nothing: the memory-fraction check costs one request's KV, not the pinned pool. Both now read one check
(`EngineConfig.pinned_pool_refusal`), in the same words and with the same fix.

Figures: Llama 3.1 8B at bf16 on one H200 (150.76 GB): 16.06 GB of weights and 131,072 KV bytes a token; the weights
and the simulator's 1 GiB reserve leave room for 1,019,487 tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.recipes import one_job

from llmsweep import engines
from llmsweep.cli.sim import engine_config_from_argv
from llmsweep.errors import ConfigError
from llmsweep.policy import validate_files

VLLM = "vllm/vllm-openai:v0.26.0"


def _hits(tmp_path: Path, args: str, *, simulate: bool = False) -> list[str]:
    one_job(tmp_path, framework="vllm", image=VLLM, osl=256, concs="[16]", args=args)
    return [f"{f.message} | {f.fix}" for f in validate_files([tmp_path / "r.yaml"], simulate=simulate).findings
            if f.rule == "resources.hbm-fit"]


@pytest.mark.parametrize(("args", "said"), [
    ("--num-gpu-blocks-override: 100000000", "a pinned KV pool of 1600000000 tokens needs 209715.2 GB"),
    ("--kv-cache-memory-bytes: 200000000000", "a pinned KV pool of 200000000000 bytes a GPU needs 200.0 GB"),
    # the block override counts blocks of the recipe's --block-size, as the simulator's pool does
    ("--num-gpu-blocks-override: 40000, --block-size: 32", "a pinned KV pool of 1280000 tokens needs 167.8 GB"),
])
@pytest.mark.parametrize("simulate", [False, True], ids=["validate", "validate --simulate"])
def test_a_pinned_pool_larger_than_the_gpu_is_warned_of_at_validate_in_the_simulators_words(
        tmp_path: Path, args: str, said: str, simulate: bool) -> None:
    (hit,) = _hits(tmp_path, args, simulate=simulate)
    message, fix = hit.split(" | ")
    assert message.startswith(said), message
    assert "CUDA out of memory" in message, message
    assert "the engine allocates a pinned pool whatever its memory fraction" in message, message
    assert fix.startswith("pin at most 1019487 tokens"), fix
    # the same words the simulator refuses the job with at predict / run time
    spec = engines.render(one_job(tmp_path, framework="vllm", image=VLLM, osl=256, concs="[16]", args=args),
                          simulate=True)
    with pytest.raises(ConfigError) as raised:
        engine_config_from_argv(spec.argv).kv_pool_tokens()
    assert raised.value.message == f"simulator: {message}" and raised.value.fix == fix


@pytest.mark.parametrize("args", [
    "--num-gpu-blocks-override: 900",
    "--kv-cache-memory-bytes: 130000000000",  # beyond vLLM's 0.92 beside the weights, within the GPU: it starts
    "--num-gpu-blocks-override: 63000, --block-size: 16",  # 1,008,000 tokens: just fits
])
def test_a_pinned_pool_that_fits_the_gpu_is_not_warned_of(tmp_path: Path, args: str) -> None:
    assert _hits(tmp_path, args) == []


def test_a_fraction_vllm_ignores_under_pinned_bytes_is_not_checked(tmp_path: Path) -> None:
    """vLLM takes `--kv-cache-memory-bytes` as the memory for KV without profiling ("This does not respect the
    gpu_memory_utilization config"): at `--gpu-memory-utilization 0.1` (15 GB of the H200, under the 16 GB of weights)
    the job starts and serves its 20 GB pool. The rule still ran its memory-fraction check and warned of a job that
    runs. Under the block override alone vLLM does profile at the fraction (and refuses to start where the profiled
    memory holds no request), so there the fraction is still checked."""
    assert _hits(tmp_path, "--gpu-memory-utilization: 0.1, --kv-cache-memory-bytes: 20000000000") == []
    (hit,) = _hits(tmp_path, "--gpu-memory-utilization: 0.1, --num-gpu-blocks-override: 900")
    assert "exceeds 15 GB (memory fraction 0.1 from the recipe's --gpu-memory-utilization" in hit, hit
    (hit,) = _hits(tmp_path, "--gpu-memory-utilization: 0.1")
    assert "exceeds 15 GB" in hit, hit
