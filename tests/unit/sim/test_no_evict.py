"""TensorRT-LLM's admission (`SimConfig.capacity="no-evict"`), against the on-demand admission of vLLM and SGLang.

TensorRT-LLM's default capacity scheduler, GUARANTEED_NO_EVICT (`cpp/tensorrt_llm/batch_manager/capacityScheduler.cpp`,
`NoEvictScheduledBlocksManager`), starts from the KV cache's free blocks, takes off what every running request still
needs to reach prompt + max_tokens (`getRemainingBlocksToCompletion`), and admits a waiting request only when its own
whole length fits what is left, stopping at the first that does not; nothing it admitted is ever evicted. The
simulator admitted every TensorRT-LLM job on demand: under KV pressure it admitted more requests and preempted them.
"""

from __future__ import annotations

from typing import Any

import pytest
from support.simcore import BS, core
from support.simcore import hashes as _hashes

from llmsweep.sim.core import EngineCore


def _core(capacity: str, **kw: Any) -> EngineCore:
    return core(capacity=capacity, **kw)


def _blocks(tokens: int) -> int:
    return -(-tokens // BS)


def test_a_request_waits_until_its_whole_length_fits_what_the_running_ones_have_not_reserved() -> None:
    """Pool of 40 blocks. a (prompt 640 + 1,280 output = 30 blocks) is admitted; b (the same length) would fit the
    28 blocks free now, on demand, but not the 10 left once a's completion is reserved: it waits until a finishes."""
    core = _core("no-evict", kv=40 * BS)
    a = core.new_request(640, _hashes(640, 1), 1280)
    b = core.new_request(640, _hashes(640, 2), 1280)
    end = core.begin_step(0.0)
    assert end is not None and a.chunk == 640 and b.chunk == 0 and list(core.waiting) == [b]
    assert len(a.blocks) == _blocks(640)  # its prompt's KV taken at admission, its output's reserved, not taken
    core.end_step()
    now = end
    while not a.done:
        end = core.begin_step(now)
        assert end is not None
        assert list(core.waiting) == [b], "b is admitted only once a's reservation is gone"
        core.end_step()
        now = end
    end = core.begin_step(now)
    assert end is not None and b.chunk == 640
    core.end_step()
    assert core.counters.preemptions == 0


def test_on_demand_the_same_two_are_admitted_at_once_and_one_is_preempted() -> None:
    """The unreserved admission the simulator gave TensorRT-LLM jobs: both start, the pool runs out while they
    decode, and one is preempted (recomputed) — which TensorRT-LLM never does."""
    core = _core("on-demand", kv=40 * BS)
    a = core.new_request(640, _hashes(640, 1), 1280)
    b = core.new_request(640, _hashes(640, 2), 1280)
    now = 0.0
    end = core.begin_step(now)
    assert end is not None and (a.chunk, b.chunk) == (640, 640)
    core.end_step()
    now = end
    while not (a.done and b.done):
        end = core.begin_step(now)
        assert end is not None
        core.end_step()
        now = end
    assert core.counters.preemptions >= 1


@pytest.mark.parametrize("spec_k", [0, 3])
def test_no_evict_never_preempts_under_kv_pressure(spec_k: int) -> None:
    """Twelve requests whose lengths together are several pools: every one is served, none preempted, and the KV in
    use plus what the running requests still need never exceeds the pool (with a verify step's drafts reserved)."""
    from llmsweep.sim.config import SpecDecodeConfig

    spec = SpecDecodeConfig(method="mtp", k=spec_k, acceptance_length=2.0) if spec_k else None
    core = _core("no-evict", kv=80 * BS, spec=spec)
    reqs = [core.new_request(700 + 40 * i, _hashes(700 + 40 * i, 10 + i), 600 + 50 * i) for i in range(12)]
    now = 0.0
    while core.has_work():
        end = core.begin_step(now)
        assert end is not None
        reserved = sum(max(0, _blocks(r.prompt_len + r.max_tokens + spec_k) - len(r.blocks)) for r in core.running)
        assert core.pool.used_blocks() + reserved <= core.num_blocks
        core.end_step()
        now = end
    assert all(r.done and r.generated >= r.max_tokens for r in reqs)
    assert core.counters.preemptions == 0
