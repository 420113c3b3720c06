"""Audit of the simulated engine's scheduling against vLLM V1 / SGLang (each test fails on the behaviour it fixes)."""

from __future__ import annotations

import numpy as np

from llmsweep.sim.config import SimConfig, SpecDecodeConfig
from llmsweep.sim.core import EngineCore
from llmsweep.sim.perf import ConstantTimer


def _core(capacity_tokens: int, *, block: int = 16, spec: SpecDecodeConfig | None = None) -> EngineCore:
    config = SimConfig(block_size=block, kv_capacity_tokens=capacity_tokens, max_running_requests=64,
                       max_prefill_tokens=4096, chunked_prefill_size=2048, spec=spec)
    return EngineCore(config, ConstantTimer(ttft_s=0.02, itl_s=0.01))


def test_a_step_that_preempts_admits_no_waiting_request() -> None:
    """vLLM V1 schedules WAITING requests only when the running pass preempted nobody (`if not preempted_reqs`), and
    SGLang retracts only while forming a decode batch, after the prefill batch was decided: a request preempted in
    a step is never re-admitted (nor anyone else) in that same step. Here (K=3, one token a step) the victim B held a
    block of lookahead it no longer needs once preempted and its prompt blocks stay cached, so the old scheduler took
    it straight back in, as a prefill of its outputs, in the very step that preempted it."""
    core = _core(128, spec=SpecDecodeConfig(k=3, acceptance_length=1.0))  # 8 blocks of 16
    reqs = [core.new_request(20, np.array([1, 2], np.uint64), 30),
            core.new_request(69, np.arange(10, 15, dtype=np.uint64), 30)]
    now, checked = 0.0, 0
    while core.has_work():
        before = core.counters.preemptions
        end = core.begin_step(now)
        assert end is not None
        if core.counters.preemptions > before:
            checked += 1
            assert core.waiting, "the preempted request was re-admitted in the step that preempted it"
            assert core.waiting[0] not in core.running
            assert all(r.chunk == 0 for r in core._scheduled), "a prefill was admitted in a step that preempted"
        core.end_step()
        now = end
    assert checked, "the scenario no longer preempts"
    assert [r.generated for r in reqs] == [30, 30]


def test_a_preemption_that_leaves_nothing_to_run_still_admits() -> None:
    """The rule above must not idle the engine: when the only running request preempts itself because blocks are held
    outside the batch (here taken from the pool directly, as a decode worker reserves them for KV in flight), the
    engine's next step admits at once (vLLM runs an empty step and schedules again), so `begin_step` must not return
    None while work is queued (the live server would sleep until the next request; the predictor stops)."""
    core = _core(128, spec=SpecDecodeConfig(k=3, acceptance_length=1.0))  # 8 blocks of 16
    req = core.new_request(20, np.array([1, 2], np.uint64), 30)
    now = core.begin_step(0.0) or 0.0
    core.end_step()
    held = core.pool.allocate_array(len(core.pool.free))  # every free block, held outside the batch
    assert held is not None and core.pool.available() == 0
    preempted = 0
    while core.has_work() and preempted < 3:
        before = core.counters.preemptions
        end = core.begin_step(now)
        assert end is not None, "the engine went idle with a request waiting"
        preempted += core.counters.preemptions - before
        core.end_step()
        now = end
    assert preempted and req.preemptions
