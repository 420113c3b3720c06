"""The CPU KV tier (`--dram-gb`: SGLang's HiCache host pools, vLLM's offload connector) holds what the engine's ranks
hold: each GPU offloads its own share of a token's KV, so where the GPUs replicate KV (an MLA latent on every rank, KV
heads fewer than TP) the DRAM holds each token as many times. The simulator divided the DRAM by one copy of a token's
KV: Qwen3.5 (2 KV heads) at TP 8 got a tier 4x the one SGLang's `--hicache-size` builds, DeepSeek-R1 (MLA) 8x."""

from __future__ import annotations

import pytest

from llmsweep.sim.perf import GB
from llmsweep.sim.serve_args import engine_config_from_argv


@pytest.mark.parametrize(("model", "precision", "tp", "copies"), [
    ("llama-3.1-8b", "bf16", 8, 1),       # 8 KV heads over 8 GPUs: each holds its own head
    ("llama-3.1-8b", "bf16", 16, 2),      # 16 GPUs, 8 heads: each head on two GPUs
    ("qwen3.5-397b-a17b", "fp8", 8, 4),   # 2 KV heads over 8 GPUs
    ("deepseek-r1", "fp8", 8, 8),         # MLA: the latent on every GPU
])
def test_the_dram_tier_holds_each_token_as_often_as_the_gpus_do(model: str, precision: str, tp: int,
                                                                  copies: int) -> None:
    per_rank_gb = 100  # SGLang's --hicache-size: GB of host pool per rank
    config = engine_config_from_argv(["serve", "--model", model, "--hardware", "h200", "--tp", str(tp),
                                      "--precision", precision, "--kv-offload", "dram",
                                      "--dram-gb", str(per_rank_gb * tp)])
    inputs = config.perf_inputs()
    one_rank = int(per_rank_gb * GB // inputs.kv_bytes_per_token_per_gpu(tp))  # what one rank's host pool holds
    assert config.sim_config().host_capacity_tokens == one_rank
    assert one_rank == int(per_rank_gb * tp * GB / copies // inputs.kv_bytes_per_token)
