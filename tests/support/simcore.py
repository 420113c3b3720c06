"""A step-by-step simulator core at constant timing, for tests of its scheduling (the step shape, the admission):
one home for the core those tests build and the block hashes of their prompts."""

from __future__ import annotations

from typing import Any

import numpy as np

from llmsweep.sim.core import EngineCore
from llmsweep.sim.engine import EngineConfig, build_core

BS = 64
"""The simulator's KV block, in tokens."""


def core(*, kv: int = 200_000, engine_style: str = "vllm", **kw: Any) -> EngineCore:
    """Llama 1B (in vLLM's style unless `engine_style`) at 20 ms a prefill step and 10 ms a decode step, a KV pool
    of `kv` tokens, stepped one step at a time (no coalesced blocks); `kw`: further `EngineConfig` fields."""
    config = EngineConfig(model="llama-1b", timing="constant", ttft_s=0.02, itl_s=0.01, engine_style=engine_style,
                          kv_capacity_tokens=kv, **kw)
    return build_core(config, coalesce=False)


def hashes(n_tokens: int, salt: int) -> np.ndarray:
    """Block hashes of a prompt of `n_tokens` tokens that shares no block with a prompt of another `salt`."""
    return np.arange(n_tokens // BS, dtype=np.uint64) + np.uint64(salt << 32)
